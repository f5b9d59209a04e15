#!/usr/bin/env node
// A strict reference verifier of access tokens, with node's crypto only. It shows that the
// provider's tokens verify against its JWKS and that each forged token is wrong for the reason
// forge.mjs meant (its signature is checked even when a claim already fails).
//
//   node verify.mjs --jwks-url URL | --jwks FILE  --issuer ISS --audience AUD  [TOKEN... | < tokens.json]
//
// With tokens as arguments it checks those; otherwise it reads a JSON object {name: token} on stdin.
// Prints {name: {ok, reason, signature_ok, header, payload}} (header/payload when they decode).
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import { parseArgs } from 'node:util';

const ALLOWED_ALGS = new Set(['RS256', 'ES256', 'EdDSA']);
const FORBIDDEN_HEADERS = ['jku', 'x5u', 'jwk', 'x5c'];
const MAX_TOKEN_BYTES = 16 * 1024;
const LEEWAY_SECONDS = 30;

const B64URL = /^[A-Za-z0-9_-]*$/;

function decodeJsonSegment(segment) {
  if (!B64URL.test(segment)) return { error: 'bad_base64url' };
  try {
    return { value: JSON.parse(Buffer.from(segment, 'base64url').toString('utf8')) };
  } catch {
    return { error: 'not_json' };
  }
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function checkSignature(header, jwk, input, sig) {
  if (jwk.alg && jwk.alg !== header.alg) return 'alg_does_not_match_key';
  const key = crypto.createPublicKey({ key: jwk, format: 'jwk' });
  switch (header.alg) {
    case 'RS256':
      if (jwk.kty !== 'RSA') return 'alg_does_not_match_key';
      if (key.asymmetricKeyDetails.modulusLength < 2048) return 'rsa_key_too_small';
      return crypto.verify('sha256', input, key, sig) ? null : 'bad_signature';
    case 'ES256':
      if (jwk.kty !== 'EC' || jwk.crv !== 'P-256') return 'alg_does_not_match_key';
      if (sig.length !== 64) return 'bad_signature';
      return crypto.verify('sha256', input, { key, dsaEncoding: 'ieee-p1363' }, sig) ? null : 'bad_signature';
    case 'EdDSA':
      if (jwk.kty !== 'OKP' || jwk.crv !== 'Ed25519') return 'alg_does_not_match_key';
      return crypto.verify(null, input, key, sig) ? null : 'bad_signature';
    default:
      return 'alg_not_allowed';
  }
}

function checkClaims(payload, { issuer, audience, now }) {
  if (!isObject(payload)) return 'payload_not_object';
  if (payload.iss !== issuer) return 'wrong_iss';
  const aud = Array.isArray(payload.aud) ? payload.aud : [payload.aud];
  if (!aud.includes(audience)) return 'wrong_aud';
  if (typeof payload.exp !== 'number') return 'missing_exp';
  if (payload.exp <= now - LEEWAY_SECONDS) return 'expired';
  if (payload.nbf !== undefined && (typeof payload.nbf !== 'number' || payload.nbf > now + LEEWAY_SECONDS)) return 'not_yet_valid';
  if (payload.iat !== undefined && (typeof payload.iat !== 'number' || payload.iat > now + LEEWAY_SECONDS)) return 'iat_in_future';
  if (typeof payload.sub !== 'string' || payload.sub === '') return 'missing_sub';
  return null;
}

export function verify(token, jwks, options) {
  const result = { ok: false, reason: null, signature_ok: false };
  const fail = (reason) => {
    result.reason ??= reason;
    return result;
  };
  if (Buffer.byteLength(token) > MAX_TOKEN_BYTES) fail('too_large');
  const parts = token.split('.');
  if (parts.length !== 3) return fail('not_three_segments');
  const header = decodeJsonSegment(parts[0]);
  if (header.error) return fail(`header_${header.error}`);
  if (!isObject(header.value)) return fail('header_not_object');
  result.header = header.value;
  const payload = decodeJsonSegment(parts[1]);
  if (payload.value !== undefined) result.payload = payload.value;
  if (!B64URL.test(parts[2]) || parts[2] === '') return fail('no_signature');

  const { alg, kid } = header.value;
  if (!ALLOWED_ALGS.has(alg)) return fail('alg_not_allowed');
  const forbidden = FORBIDDEN_HEADERS.find((h) => h in header.value);
  const jwk = jwks.keys.find((k) => k.kid === kid);
  if (!jwk) return fail(forbidden ? `forbidden_header_${forbidden}` : 'unknown_kid');
  const sigError = checkSignature(header.value, jwk, Buffer.from(`${parts[0]}.${parts[1]}`), Buffer.from(parts[2], 'base64url'));
  result.signature_ok = sigError === null;
  if (forbidden) fail(`forbidden_header_${forbidden}`);
  if ('crit' in header.value) fail('crit_header');
  if (sigError) return fail(sigError);
  if (payload.error) return fail(`payload_${payload.error}`);
  const claimError = checkClaims(payload.value, options);
  if (claimError) return fail(claimError);
  if (result.reason === null) result.ok = true;
  return result;
}

async function loadJwks({ 'jwks-url': url, jwks }) {
  if (url) {
    const res = await fetch(url);
    if (!res.ok) throw new Error(`GET ${url}: HTTP ${res.status}`);
    return res.json();
  }
  if (jwks) return JSON.parse(fs.readFileSync(jwks, 'utf8'));
  throw new Error('--jwks-url or --jwks is required');
}

async function main() {
  const { values, positionals } = parseArgs({
    allowPositionals: true,
    options: {
      'jwks-url': { type: 'string' },
      jwks: { type: 'string' },
      issuer: { type: 'string' },
      audience: { type: 'string', default: 'sandfort' },
    },
  });
  if (!values.issuer) throw new Error('--issuer is required');
  const jwks = await loadJwks(values);
  const tokens = positionals.length
    ? Object.fromEntries(positionals.map((t, i) => [String(i), t]))
    : JSON.parse(fs.readFileSync(0, 'utf8'));
  const now = Math.floor(Date.now() / 1000);
  const out = {};
  for (const [name, token] of Object.entries(tokens)) {
    out[name] = verify(token, jwks, { issuer: values.issuer, audience: values.audience, now });
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
}

main().catch((err) => {
  process.stderr.write(`verify.mjs: ${err?.stack ?? err}\n`);
  process.exit(1);
});
