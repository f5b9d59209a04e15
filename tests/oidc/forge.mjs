#!/usr/bin/env node
// A corpus of forged and malformed access tokens, built from one real token of the test provider.
//
//   node forge.mjs --token JWT --keys FILE [--jwks-url URL] [--other-keys FILE]
//                  [--attacker-url URL]
//
// Prints one JSON object {name: token}. Every entry except "valid" must be refused by a correct
// resource server. Because the test owns the provider's keys file, many entries carry a VALID
// signature of a real provider key over wrong claims or headers: they fail only if the claims and
// headers are checked, not just the signature. "valid" is signed and claimed correctly (fresh
// iat/exp, the real token's iss/aud/sub/org/groups), to show that the forge itself is right.
//
// --jwks-url: the public keys as the provider serves them (what a real attacker sees); used as
//             the HMAC secrets of the key-confusion entries. Default: the public half of --keys.
// --other-keys: the keys file of another issuer, for a kid that is valid elsewhere. Default: a
//             fresh key set.
// --attacker-url: base URL for the jku/x5u headers (a test may serve it and count fetches).
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import { parseArgs } from 'node:util';

import { generateJwk, generateKeySet, publicJwk, readKeySet } from './keys.mjs';

const b64 = (data) => Buffer.from(data).toString('base64url');
const b64json = (value) => b64(JSON.stringify(value));

function decodeSegment(segment, what) {
  try {
    return JSON.parse(Buffer.from(segment, 'base64url').toString('utf8'));
  } catch (err) {
    throw new Error(`the real token's ${what} is not base64url JSON: ${err.message}`);
  }
}

function signature(alg, key, input, { der = false } = {}) {
  switch (alg) {
    case 'RS256': return crypto.sign('sha256', input, key);
    case 'ES256': return crypto.sign('sha256', input, { key, dsaEncoding: der ? 'der' : 'ieee-p1363' });
    case 'EdDSA': return crypto.sign(null, input, key);
    default: throw new Error(`cannot sign ${alg}`);
  }
}

// payloadSegment is already encoded, so that payloads which are not JSON objects can be signed too.
function signSegments(alg, jwk, header, payloadSegment, options) {
  const input = `${b64json(header)}.${payloadSegment}`;
  const key = crypto.createPrivateKey({ key: jwk, format: 'jwk' });
  return `${input}.${b64(signature(alg, key, Buffer.from(input), options))}`;
}

function signWith(alg, jwk, header, payload, options) {
  return signSegments(alg, jwk, header, b64json(payload), options);
}

function hmac(secret, header, payload) {
  const input = `${b64json(header)}.${b64json(payload)}`;
  return `${input}.${crypto.createHmac('sha256', secret).update(input).digest('base64url')}`;
}

function unsigned(header, payload, sig = '') {
  return `${b64json(header)}.${b64json(payload)}.${sig}`;
}

function algOf(jwk) {
  if (jwk.alg) return jwk.alg;
  if (jwk.kty === 'RSA') return 'RS256';
  if (jwk.kty === 'EC') return 'ES256';
  return 'EdDSA';
}

function findKey(set, predicate, what) {
  const key = set.keys.find(predicate);
  if (!key) throw new Error(`no ${what} in the key set`);
  return key;
}

async function publicKeysFrom(url, keysFile) {
  if (!url) return { keys: keysFile.keys.map(publicJwk) };
  const res = await fetch(url);
  if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
  return res.json();
}

function without(object, ...names) {
  const copy = { ...object };
  for (const name of names) delete copy[name];
  return copy;
}

function pemOf(publicJwkValue) {
  return crypto.createPublicKey({ key: publicJwkValue, format: 'jwk' }).export({ type: 'spki', format: 'pem' });
}

function derOf(publicJwkValue) {
  return crypto.createPublicKey({ key: publicJwkValue, format: 'jwk' }).export({ type: 'spki', format: 'der' });
}

export async function forge({ token, keys, jwksUrl, otherKeys, attackerUrl }) {
  const parts = token.split('.');
  if (parts.length !== 3) throw new Error('the real token is not a compact JWS');
  const realHeader = decodeSegment(parts[0], 'header');
  const realPayload = decodeSegment(parts[1], 'payload');

  const realKey = findKey(keys, (k) => k.kid === realHeader.kid, `key with the token's kid ${realHeader.kid}`);
  const alg = realHeader.alg;
  const rsaKey = findKey(keys, (k) => k.kty === 'RSA', 'RSA key');
  const ecKey = findKey(keys, (k) => k.kty === 'EC' && k.crv === 'P-256', 'P-256 key');
  const served = await publicKeysFrom(jwksUrl, keys);
  const servedKey = findKey(served, (k) => k.kid === realHeader.kid, `served key with kid ${realHeader.kid}`);
  const servedRsa = findKey(served, (k) => k.kid === rsaKey.kid, `served key with kid ${rsaKey.kid}`);
  const otherKey = findKey(otherKeys, (k) => algOf(k) === alg, `${alg} key of the other issuer`);
  const attacker = generateJwk(alg);
  const attacker1024 = generateJwk('RS256', { rsaBits: 1024 });
  const attackerUrlBase = (attackerUrl ?? 'http://127.0.0.1:9/attacker').replace(/\/$/, '');

  const now = Math.floor(Date.now() / 1000);
  const claims = {
    ...realPayload,
    jti: crypto.randomBytes(12).toString('base64url'),
    iat: now,
    exp: now + 600,
  };
  delete claims.nbf;
  const header = { alg, typ: realHeader.typ ?? 'at+jwt', kid: realHeader.kid };
  const real = (h, p, options) => signWith(alg, realKey, h, p, options);

  const valid = real(header, claims);
  const [validHeader, validPayload, validSig] = valid.split('.');
  const tampered = b64json({ ...claims, sub: 'someone-else', groups: ['sandfort-admins'], org: 'acme' });

  return {
    valid,

    // The algorithm: none in any spelling, HMAC keyed with the public key (key confusion).
    alg_none: unsigned({ ...header, alg: 'none' }, claims),
    alg_None: unsigned({ ...header, alg: 'None' }, claims),
    alg_NONE_with_real_signature: unsigned({ ...header, alg: 'NONE' }, claims, validSig),
    hs256_public_key_pem: hmac(pemOf(servedKey), { ...header, alg: 'HS256' }, claims),
    hs256_public_key_jwk_json: hmac(JSON.stringify(servedKey), { ...header, alg: 'HS256' }, claims),
    hs256_rsa_public_key_der: hmac(derOf(servedRsa), { ...header, alg: 'HS256', kid: rsaKey.kid }, claims),
    es256_der_signature: signWith('ES256', ecKey, { ...header, alg: 'ES256', kid: ecKey.kid }, claims, { der: true }),

    // Real signature, wrong claims.
    wrong_iss: real(header, { ...claims, iss: 'https://idp.attacker.example' }),
    iss_with_trailing_slash: real(header, { ...claims, iss: `${claims.iss}/` }),
    missing_iss: real(header, without(claims, 'iss')),
    wrong_aud: real(header, { ...claims, aud: 'not-sandfort' }),
    aud_list_without_ours: real(header, { ...claims, aud: ['not-sandfort', 'another-api'] }),
    missing_aud: real(header, without(claims, 'aud')),
    expired: real(header, { ...claims, iat: now - 7200, exp: now - 3600 }),
    nbf_in_future: real(header, { ...claims, nbf: now + 3600, exp: now + 7200 }),
    iat_in_future: real(header, { ...claims, iat: now + 3600, exp: now + 7200 }),
    missing_exp: real(header, without(claims, 'exp')),
    exp_as_string: real(header, { ...claims, exp: String(now + 600) }),
    missing_sub: real(header, without(claims, 'sub')),
    payload_not_json: signSegments(alg, realKey, header, b64('not json at all')),
    payload_json_array: signSegments(alg, realKey, header, b64json([claims])),
    crit_header: real({ ...header, crit: ['urn:sandfort:unknown'], 'urn:sandfort:unknown': true }, claims),
    huge_100kb: real(header, { ...claims, padding: 'A'.repeat(76 * 1024) }),

    // Keys the issuer never published.
    unknown_kid: signWith(alg, attacker, { ...header, kid: attacker.kid }, claims),
    real_kid_attacker_signature: signWith(alg, attacker, header, claims),
    kid_of_other_issuer: signWith(alg, otherKey, { ...header, kid: otherKey.kid }, claims),
    kid_injection: signWith(alg, attacker, { ...header, kid: "../../../etc/passwd' OR '1'='1" }, claims),
    rs256_1024_bit_unknown_key: signWith('RS256', attacker1024,
      { ...header, alg: 'RS256', kid: attacker1024.kid }, claims),
    jku_header: signWith(alg, attacker,
      { ...header, kid: attacker.kid, jku: `${attackerUrlBase}/jwks.json` }, claims),
    jwk_header: signWith(alg, attacker,
      { ...header, kid: attacker.kid, jwk: publicJwk(attacker) }, claims),
    jwk_header_real_kid: signWith(alg, attacker, { ...header, jwk: publicJwk(attacker) }, claims),
    x5u_header: signWith(alg, attacker,
      { ...header, kid: attacker.kid, x5u: `${attackerUrlBase}/cert.pem` }, claims),

    // Broken structure around a valid token.
    tampered_payload: `${validHeader}.${tampered}.${validSig}`,
    truncated_signature: `${validHeader}.${validPayload}.${validSig.slice(0, Math.floor(validSig.length / 2))}`,
    empty_signature: `${validHeader}.${validPayload}.`,
    two_segments: `${validHeader}.${validPayload}`,
    five_segments: `${validHeader}.${validPayload}.${validSig}.AAAA.BBBB`,
    bad_base64_in_payload: `${validHeader}.${validPayload.slice(0, -4)}!!!!.${validSig}`,
    non_json_header: `${b64('{"alg":"RS256",')}.${validPayload}.${validSig}`,
    header_json_array: `${b64json([header])}.${validPayload}.${validSig}`,
  };
}

async function main() {
  const { values } = parseArgs({
    options: {
      token: { type: 'string' },
      keys: { type: 'string' },
      'jwks-url': { type: 'string' },
      'other-keys': { type: 'string' },
      'attacker-url': { type: 'string' },
    },
  });
  const token = (values.token ?? fs.readFileSync(0, 'utf8')).trim();
  if (!values.keys) throw new Error('--keys FILE is required');
  const tokens = await forge({
    token,
    keys: readKeySet(values.keys),
    jwksUrl: values['jwks-url'],
    otherKeys: values['other-keys'] ? readKeySet(values['other-keys']) : generateKeySet(),
    attackerUrl: values['attacker-url'],
  });
  process.stdout.write(`${JSON.stringify(tokens)}\n`);
}

main().catch((err) => {
  process.stderr.write(`forge.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});
