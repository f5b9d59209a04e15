#!/usr/bin/env node
// Signing keys of the test OpenID provider: one JSON Web Key Set holding private keys.
//
//   node keys.mjs generate FILE            a fresh set (RS256, ES256, EdDSA), replacing FILE
//   node keys.mjs rotate FILE [--drop-old] new keys first, the old ones after them (or dropped)
//   node keys.mjs public FILE              the public JWKS, as the provider serves it
//
// Each run of `generate`/`rotate` makes one key per algorithm. oidc-provider signs with the first
// key that fits the algorithm, so after `rotate` new tokens carry the new kid while tokens signed
// before still verify against the published set, unless --drop-old removed their key.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ALGORITHMS = ['RS256', 'ES256', 'EdDSA'];

const PRIVATE_MEMBERS = ['d', 'p', 'q', 'dp', 'dq', 'qi', 'oth', 'k'];

// RFC 7638: the thumbprint covers only the required public members, in lexicographic order.
export function thumbprint(jwk) {
  const required = {
    RSA: ['e', 'kty', 'n'],
    EC: ['crv', 'kty', 'x', 'y'],
    OKP: ['crv', 'kty', 'x'],
  }[jwk.kty];
  if (!required) throw new Error(`no thumbprint for kty ${jwk.kty}`);
  const canonical = JSON.stringify(Object.fromEntries(required.map((k) => [k, jwk[k]])));
  return crypto.createHash('sha256').update(canonical).digest('base64url');
}

export function keyPairFor(alg, { rsaBits = 2048 } = {}) {
  switch (alg) {
    case 'RS256': return crypto.generateKeyPairSync('rsa', { modulusLength: rsaBits });
    case 'ES256': return crypto.generateKeyPairSync('ec', { namedCurve: 'P-256' });
    case 'EdDSA': return crypto.generateKeyPairSync('ed25519');
    default: throw new Error(`unsupported algorithm ${alg}`);
  }
}

// A private JWK with kid (its thumbprint), alg and use set, so the provider never picks it for
// another algorithm and verifiers can match it by kid alone.
export function generateJwk(alg, options) {
  const { privateKey } = keyPairFor(alg, options);
  const jwk = privateKey.export({ format: 'jwk' });
  return { ...jwk, kid: thumbprint(jwk), alg, use: 'sig' };
}

export function generateKeySet() {
  return { keys: ALGORITHMS.map((alg) => generateJwk(alg)) };
}

export function rotateKeySet(old, { dropOld = false } = {}) {
  const fresh = generateKeySet();
  return { keys: dropOld ? fresh.keys : [...fresh.keys, ...old.keys] };
}

export function publicJwk(jwk) {
  const pub = { ...jwk };
  for (const member of PRIVATE_MEMBERS) delete pub[member];
  return pub;
}

export function publicKeySet(set) {
  return { keys: set.keys.map(publicJwk) };
}

export function readKeySet(file) {
  const set = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (!Array.isArray(set?.keys) || set.keys.length === 0) {
    throw new Error(`${file}: not a JSON Web Key Set with keys`);
  }
  return set;
}

// Written to a temporary name and renamed, so a provider starting meanwhile never reads half a file.
export function writeKeySet(file, set) {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  fs.writeFileSync(tmp, `${JSON.stringify(set, null, 2)}\n`, { mode: 0o600 });
  fs.renameSync(tmp, file);
}

export function loadOrCreateKeySet(file) {
  if (fs.existsSync(file)) return readKeySet(file);
  const set = generateKeySet();
  writeKeySet(file, set);
  return set;
}

function main(argv) {
  const [command, file, ...rest] = argv;
  if (!command || !file) {
    process.stderr.write('usage: keys.mjs generate|rotate|public FILE [--drop-old]\n');
    return 2;
  }
  switch (command) {
    case 'generate':
      writeKeySet(file, generateKeySet());
      break;
    case 'rotate':
      writeKeySet(file, rotateKeySet(readKeySet(file), { dropOld: rest.includes('--drop-old') }));
      break;
    case 'public':
      process.stdout.write(`${JSON.stringify(publicKeySet(readKeySet(file)))}\n`);
      break;
    default:
      process.stderr.write(`keys.mjs: unknown command ${command}\n`);
      return 2;
  }
  return 0;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.exitCode = main(process.argv.slice(2));
}
