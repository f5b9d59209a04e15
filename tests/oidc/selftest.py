"""Self-test of the OpenID provider fixture, on its own (no sandfortd):
    /usr/bin/python3 -m pytest tests/oidc/selftest.py
Needs `npm ci` in tests/oidc."""

import json
import os
import subprocess
import sys
import time
import urllib.request

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "integration"))
import oidc_fixture  # noqa: E402
from oidc_fixture import OidcError, OidcProvider, decode_jwt, generate_keys  # noqa: E402

MACHINE_CLIENTS = {
    "sandfort-admin": ("acme", ["sandfort-admins"]),
    "sandfort-member": ("acme", ["sandfort-developers"]),
    "sandfort-viewer": ("acme", ["sandfort-viewers"]),
    "sandfort-nogroups": ("acme", []),
    "sandfort-otherorg-admin": ("other-org", ["sandfort-admins"]),
}


@pytest.fixture(scope="module")
def oidc():
    p = OidcProvider().start()
    yield p
    rc = p.stop()
    log = p.log()
    p.cleanup()
    assert rc == 0, f"the provider did not exit cleanly on SIGTERM ({rc}):\n{log}"


def verify(provider, tokens, audience=None):
    return provider.verify_tokens(tokens, audience)


def kids(provider):
    return [k["kid"] for k in provider.jwks()["keys"]]


def test_discovery(oidc):
    doc = oidc.discovery()
    assert doc["issuer"] == oidc.issuer
    assert oidc.issuer.startswith("http://127.0.0.1:")
    assert doc["jwks_uri"] == oidc.jwks_uri
    assert doc["token_endpoint"] == oidc.token_endpoint
    assert doc["device_authorization_endpoint"] == oidc.device_authorization_endpoint
    for grant in ("client_credentials", oidc_fixture.DEVICE_GRANT, "refresh_token"):
        assert grant in doc["grant_types_supported"]
    jwks = oidc.jwks()
    assert {(k["kty"], k["alg"]) for k in jwks["keys"]} == {("RSA", "RS256"), ("EC", "ES256"), ("OKP", "EdDSA")}
    assert all("d" not in k for k in jwks["keys"]), "private key material in the public JWKS"


@pytest.mark.parametrize("client_id", sorted(MACHINE_CLIENTS))
def test_client_credentials_token(oidc, client_id):
    before = int(time.time())
    token = oidc.client_credentials_token(client_id)
    header, claims = decode_jwt(token)
    assert header["alg"] == "RS256"
    assert header["typ"] == "at+jwt"
    assert header["kid"] in kids(oidc)
    org, groups = MACHINE_CLIENTS[client_id]
    assert claims["iss"] == oidc.issuer
    assert claims["aud"] == "sandfort"
    assert claims["sub"] == client_id
    assert claims["client_id"] == client_id
    assert claims["org"] == org
    assert claims["groups"] == groups
    assert before - 5 <= claims["iat"] <= time.time() + 5
    assert claims["exp"] == claims["iat"] + 600
    result = verify(oidc, {"t": token})["t"]
    assert result["ok"] and result["signature_ok"], result


def test_client_without_org_has_no_org_claim(oidc):
    _, claims = decode_jwt(oidc.client_credentials_token("sandfort-noorg-admin"))
    assert "org" not in claims
    assert claims["groups"] == ["sandfort-admins"]


def test_client_authentication_is_enforced(oidc):
    with pytest.raises(OidcError, match="invalid_client"):
        oidc.client_credentials_token("sandfort-admin", secret="not-the-secret")
    with pytest.raises(OidcError, match="invalid_client"):
        oidc.client_credentials_token("sandfort-admin", secret="not-the-secret", auth="post")
    with pytest.raises(OidcError, match="invalid_client"):
        oidc.client_credentials_token("sandfort-unknown", secret="sandfort-admin-secret")
    # client_secret_post works as well as basic
    assert decode_jwt(oidc.client_credentials_token("sandfort-admin", auth="post"))[1]["sub"] == "sandfort-admin"
    with pytest.raises(OidcError, match="grant type is not allowed"):
        oidc.client_credentials_token("sandfort-cli")


def test_tokens_for_other_audience_and_algorithm(oidc):
    token = oidc.client_credentials_token("sandfort-admin", audience="not-sandfort", alg="EdDSA")
    header, claims = decode_jwt(token)
    assert claims["aud"] == "not-sandfort"
    assert header["alg"] == "EdDSA"
    results = verify(oidc, {"t": token})
    assert results["t"]["signature_ok"] and results["t"]["reason"] == "wrong_aud"
    assert verify(oidc, {"t": token}, audience="not-sandfort")["t"]["ok"]
    with pytest.raises(OidcError, match="invalid_target"):
        oidc.client_credentials_token("sandfort-admin", resource="https://elsewhere.example/")


@pytest.mark.parametrize("alg,kty", [("RS256", "RSA"), ("ES256", "EC"), ("EdDSA", "OKP")])
def test_signing_algorithm_per_start(alg, kty):
    with OidcProvider() as p:
        p.start(alg=alg, audience="sandfort-alt")
        token = p.client_credentials_token("sandfort-viewer")
        header, claims = decode_jwt(token)
        assert header["alg"] == alg
        key = next(k for k in p.jwks()["keys"] if k["kid"] == header["kid"])
        assert key["kty"] == kty
        assert claims["aud"] == "sandfort-alt"
        assert verify(p, {"t": token})["t"]["ok"]


def test_device_flow_with_refresh(oidc):
    grant = oidc.device_authorization()
    assert grant["verification_uri"] == oidc.issuer + "/device"
    assert grant["interval"] == 1
    status, body = oidc.device_token(grant["device_code"])
    assert (status, body["error"]) == (400, "authorization_pending")

    oidc.device_flow_approve(grant["user_code"], "alice", verification_uri=grant["verification_uri"])
    status, tokens = oidc.device_token(grant["device_code"])
    assert status == 200, tokens
    assert tokens["refresh_token"]
    header, claims = decode_jwt(tokens["access_token"])
    assert header["typ"] == "at+jwt" and header["kid"] in kids(oidc)
    assert claims["iss"] == oidc.issuer
    assert claims["aud"] == "sandfort"
    assert claims["sub"] == "alice"
    assert claims["client_id"] == "sandfort-cli"
    assert (claims["org"], claims["groups"]) == ("acme", ["sandfort-admins"])
    assert claims["preferred_username"] == "alice"
    assert verify(oidc, {"t": tokens["access_token"]})["t"]["ok"]

    refreshed = oidc.refresh(tokens["refresh_token"])
    _, again = decode_jwt(refreshed["access_token"])
    assert again["sub"] == "alice" and again["groups"] == ["sandfort-admins"]
    assert again["jti"] != claims["jti"]
    assert verify(oidc, {"t": refreshed["access_token"]})["t"]["ok"]
    # a public client's refresh token rotates, and the new one works
    assert refreshed["refresh_token"] != tokens["refresh_token"]
    assert decode_jwt(oidc.refresh(refreshed["refresh_token"])["access_token"])[1]["sub"] == "alice"

    # the device code is single use
    status, body = oidc.device_token(grant["device_code"])
    assert status == 400 and body["error"] == "invalid_grant"


def test_spent_refresh_token_is_refused(oidc):
    tokens = oidc.device_flow_login("carol")
    oidc.refresh(tokens["refresh_token"])
    with pytest.raises(OidcError, match="invalid_grant"):
        oidc.refresh(tokens["refresh_token"])


@pytest.mark.parametrize("username,org,groups", [
    ("bob", "acme", ["sandfort-developers"]),
    ("carol", "acme", ["sandfort-viewers"]),
    ("dave", "acme", []),
    ("mallory", "other-org", []),
])
def test_device_flow_accounts(oidc, username, org, groups):
    _, claims = decode_jwt(oidc.device_flow_login(username)["access_token"])
    assert (claims["sub"], claims["org"], claims["groups"]) == (username, org, groups)
    assert oidc.accounts[username]["groups"] == groups


def test_device_flow_refusals(oidc):
    with pytest.raises(OidcError, match="NotFoundError"):
        oidc.device_flow_approve("BCDF-GHJK", "alice")
    grant = oidc.device_authorization()
    with pytest.raises(OidcError, match="login_failed"):
        oidc.device_flow_approve(grant["user_code"], "nobody")
    status, body = oidc.device_token(grant["device_code"])
    assert status == 400 and body["error"] == "authorization_pending"

    grant = oidc.device_authorization()
    oidc.device_flow_approve(grant["user_code"], "bob", approve=False)
    status, body = oidc.device_token(grant["device_code"])
    assert status == 400 and body["error"] == "access_denied"


def test_restart_with_rotated_keys(tmp_path):
    with OidcProvider(workdir=str(tmp_path)) as p:
        p.start()
        issuer, old_kids = p.issuer, kids(p)
        old_token = p.client_credentials_token("sandfort-admin")
        old_kid = decode_jwt(old_token)[0]["kid"]

        p.rotate_keys()
        p.restart()
        assert p.issuer == issuer and p.discovery()["issuer"] == issuer
        new_kids = kids(p)
        assert len(new_kids) == 6 and new_kids[3:] == old_kids, "new keys first, the old ones kept"
        new_token = p.client_credentials_token("sandfort-admin")
        new_kid = decode_jwt(new_token)[0]["kid"]
        assert new_kid != old_kid and new_kid in new_kids[:3]
        results = verify(p, {"old": old_token, "new": new_token})
        assert results["old"]["ok"] and results["new"]["ok"]

        p.rotate_keys(drop_old=True)
        p.restart()
        assert p.issuer == issuer
        assert not set(kids(p)) & set(new_kids)
        newest = p.client_credentials_token("sandfort-admin")
        results = verify(p, {"old": old_token, "new": new_token, "newest": newest})
        assert results["old"]["reason"] == results["new"]["reason"] == "unknown_kid"
        assert results["newest"]["ok"]


# Proves, with node's crypto, that the key-confusion and embedded-key forgeries are the real
# attacks (they verify under the key the attacker meant) rather than garbage.
FORGE_CHECK = r"""
const crypto = require('node:crypto');
const fs = require('node:fs');
const { tokens, jwks, other } = JSON.parse(fs.readFileSync(0, 'utf8'));
const parts = (t) => t.split('.');
const json = (s) => JSON.parse(Buffer.from(s, 'base64url').toString());
const input = (t) => Buffer.from(parts(t).slice(0, 2).join('.'));
const sig = (t) => Buffer.from(parts(t)[2], 'base64url');
const pub = (jwk) => crypto.createPublicKey({ key: jwk, format: 'jwk' });
const byKid = (set, kid) => set.keys.find((k) => k.kid === kid);
const hmacOk = (t, secret) => crypto.createHmac('sha256', secret).update(input(t)).digest().equals(sig(t));
const out = {};
{
  const t = tokens.hs256_public_key_pem; const k = byKid(jwks, json(parts(t)[0]).kid);
  out.hs256_pem = hmacOk(t, pub(k).export({ type: 'spki', format: 'pem' }));
  const j = tokens.hs256_public_key_jwk_json;
  out.hs256_jwk = hmacOk(j, JSON.stringify(byKid(jwks, json(parts(j)[0]).kid)));
  const d = tokens.hs256_rsa_public_key_der;
  out.hs256_der = hmacOk(d, pub(byKid(jwks, json(parts(d)[0]).kid)).export({ type: 'spki', format: 'der' }));
}
{
  const t = tokens.es256_der_signature; const k = byKid(jwks, json(parts(t)[0]).kid);
  out.es256_der = crypto.verify('sha256', input(t), { key: pub(k), dsaEncoding: 'der' }, sig(t));
}
const verifyWith = (t, jwk) => {
  const alg = json(parts(t)[0]).alg;
  const key = pub(jwk);
  if (alg === 'EdDSA') return crypto.verify(null, input(t), key, sig(t));
  if (alg === 'ES256') return crypto.verify('sha256', input(t), { key, dsaEncoding: 'ieee-p1363' }, sig(t));
  return crypto.verify('sha256', input(t), key, sig(t));
};
out.jwk_header = verifyWith(tokens.jwk_header, json(parts(tokens.jwk_header)[0]).jwk);
out.jwk_header_real_kid = verifyWith(tokens.jwk_header_real_kid, json(parts(tokens.jwk_header_real_kid)[0]).jwk);
const otherKid = json(parts(tokens.kid_of_other_issuer)[0]).kid;
out.other_issuer = verifyWith(tokens.kid_of_other_issuer, byKid(other, otherKid));
console.log(JSON.stringify(out));
"""


def public_keys(path):
    return json.loads(oidc_fixture.run_node(oidc_fixture.KEYS, "public", path))


def test_forged_tokens(oidc, tmp_path):
    other_keys = generate_keys(str(tmp_path / "other-issuer.json"))
    real = oidc.client_credentials_token("sandfort-member")
    tokens = oidc.forged_tokens(real, other_keys_path=other_keys)
    assert len(tokens) - 1 >= 20
    for name in ("alg_none", "alg_None", "hs256_public_key_pem", "hs256_public_key_jwk_json", "wrong_iss",
                 "wrong_aud", "expired", "nbf_in_future", "iat_in_future", "missing_exp", "missing_sub",
                 "unknown_kid", "kid_of_other_issuer", "jku_header", "jwk_header", "x5u_header", "crit_header",
                 "tampered_payload", "truncated_signature", "empty_signature", "huge_100kb", "non_json_header",
                 "header_json_array", "es256_der_signature", "rs256_1024_bit_unknown_key"):
        assert name in tokens, name
    assert len(tokens["huge_100kb"]) >= 100 * 1024

    results = verify(oidc, tokens)
    assert results["valid"]["ok"], results["valid"]
    _, valid_claims = decode_jwt(tokens["valid"])
    _, real_claims = decode_jwt(real)
    for claim in ("iss", "aud", "sub", "client_id", "org", "groups"):
        assert valid_claims[claim] == real_claims[claim]
    accepted = [name for name, r in results.items() if name != "valid" and r["ok"]]
    assert not accepted, f"forged tokens accepted by the reference verifier: {accepted}"

    # Signed by the provider's real key: only the claims or headers are wrong.
    for name in ("wrong_iss", "iss_with_trailing_slash", "missing_iss", "wrong_aud", "aud_list_without_ours",
                 "missing_aud", "expired", "nbf_in_future", "iat_in_future", "missing_exp", "exp_as_string",
                 "missing_sub", "payload_not_json", "payload_json_array", "crit_header", "huge_100kb"):
        assert results[name]["signature_ok"], (name, results[name])
    expected = {"wrong_iss": "wrong_iss", "wrong_aud": "wrong_aud", "expired": "expired",
                "nbf_in_future": "not_yet_valid", "iat_in_future": "iat_in_future", "missing_exp": "missing_exp",
                "missing_sub": "missing_sub", "crit_header": "crit_header", "huge_100kb": "too_large",
                "unknown_kid": "unknown_kid", "kid_of_other_issuer": "unknown_kid",
                "rs256_1024_bit_unknown_key": "unknown_kid", "tampered_payload": "bad_signature",
                "truncated_signature": "bad_signature", "es256_der_signature": "bad_signature",
                "jku_header": "forbidden_header_jku", "jwk_header": "forbidden_header_jwk",
                "x5u_header": "forbidden_header_x5u", "non_json_header": "header_not_json",
                "header_json_array": "header_not_object", "alg_none": "no_signature",
                "hs256_public_key_pem": "alg_not_allowed"}
    assert {n: results[n]["reason"] for n in expected} == expected

    proc = subprocess.run(["node", "-e", FORGE_CHECK], capture_output=True, text=True, timeout=60,
                          input=json.dumps({"tokens": tokens, "jwks": oidc.jwks(), "other": public_keys(other_keys)}))
    assert proc.returncode == 0, proc.stderr
    checks = json.loads(proc.stdout)
    assert checks == {k: True for k in checks} and len(checks) == 7, checks

    header, _ = decode_jwt(tokens["rs256_1024_bit_unknown_key"])
    assert header["kid"] not in kids(oidc) and header["kid"] not in kids_of(public_keys(other_keys))


def kids_of(jwks):
    return [k["kid"] for k in jwks["keys"]]


def test_jwks_cache_header_stats_and_failure_injection():
    with OidcProvider() as p:
        p.start(jwks_max_age=120)
        with urllib.request.urlopen(p.jwks_uri, timeout=10) as r:
            assert r.headers["Cache-Control"] == "public, max-age=120"
        p.discovery()
        assert p.stats()["jwks"] == 1 and p.stats()["discovery"] == 1
        p.fail(jwks=True)
        with pytest.raises(OidcError, match="HTTP 503"):
            p.jwks()
        p.fail(jwks=False)
        assert p.jwks()["keys"]
        assert p.stats()["jwks"] == 3


def test_missing_node_modules_is_reported(monkeypatch, tmp_path):
    monkeypatch.setattr(oidc_fixture, "OIDC_DIR", str(tmp_path))
    with pytest.raises(oidc_fixture.OidcSetupError, match="npm ci"):
        OidcProvider(workdir=str(tmp_path)).start()

