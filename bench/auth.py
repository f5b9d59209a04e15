#!/usr/bin/python3
"""What authenticating a request costs: GET /v1/whoami with an API key vs with an OIDC access
token (JWKS cached), each algorithm, interleaved in one run against one daemon.

  /usr/bin/python3 bench/auth.py [--rounds 10] [--per-round 200]

Starts the test OpenID provider (tests/oidc, needs `npm ci` there: ./scripts/setup does it) three
times (RS256, ES256, EdDSA) and one sandfortd that trusts all three; removes everything after.
"""

import argparse
import http.client
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "integration"))
from oidc_fixture import OidcProvider, daemon_trusting, issuer_config  # noqa: E402


def pct(samples, p):
    s = sorted(samples)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def timed_round(conn, token, n, into):
    for _ in range(n):
        t = time.perf_counter()
        conn.request("GET", "/v1/whoami", headers={"Authorization": "Bearer " + token})
        r = conn.getresponse()
        r.read()
        into.append((time.perf_counter() - t) * 1000)
        assert r.status == 200, r.status


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--per-round", type=int, default=200)
    args = ap.parse_args()
    providers = {alg: OidcProvider().start(alg=alg) for alg in ("RS256", "ES256", "EdDSA")}
    daemon = None
    try:
        daemon = daemon_trusting(*(issuer_config(p) for p in providers.values()))
        admin = daemon.admin()
        key = admin.post("/v1/orgs/acme/api-keys", {"name": "bench", "role": "member"}).json()["key"]
        tokens = {"API key": key}
        for alg, p in providers.items():
            tokens[f"OIDC token {alg}"] = p.client_credentials_token("sandfort-member")
        conn = http.client.HTTPConnection("127.0.0.1", daemon.port, timeout=60)
        samples = {name: [] for name in tokens}
        for name, token in tokens.items():
            timed_round(conn, token, 50, [])  # warm-up: the first token of an issuer fetches its keys
        for i in range(args.rounds):
            order = list(tokens.items())
            for name, token in (order if i % 2 == 0 else reversed(order)):
                timed_round(conn, token, args.per_round, samples[name])
        base = pct(samples["API key"], 50)
        print(f"GET /v1/whoami, kept-alive connection, {args.rounds} interleaved rounds of {args.per_round}")
        for name, s in samples.items():
            p50 = pct(s, 50)
            print(f"  {name:<18} p50 {p50:6.3f} ms   p95 {pct(s, 95):6.3f} ms   (+{p50 - base:.3f} ms, {p50 / base:.2f}x)")
    finally:
        if daemon:
            daemon.stop()
            daemon.cleanup()
        for p in providers.values():
            p.cleanup()


if __name__ == "__main__":
    main()
