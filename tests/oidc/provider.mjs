#!/usr/bin/env node
// A real OpenID provider (panva's oidc-provider) for Sandfort's tests, on 127.0.0.1.
//
//   node provider.mjs --keys FILE [--port 0] [--alg RS256|ES256|EdDSA] [--audience sandfort]
//                     [--resource urn:sandfort] [--clients FILE] [--token-ttl 600]
//                     [--jwks-max-age SECONDS] [--device-interval 1] [--rotate [--drop-old]]
//
// Every option can also come from the environment: --token-ttl is OIDC_TOKEN_TTL, and so on.
// When it listens it prints one JSON line on stdout: {"issuer", "port", "alg", "audience",
// "resource", "keys", "kids", "clients", "accounts"}; the log goes to stderr. --rotate puts a new
// key per algorithm first in the keys file before starting (see keys.mjs).
//
// Access tokens are RFC 9068 JWTs (typ at+jwt) for the resource --resource, whose `aud` is
// --audience and which carry `org` and `groups`: from the client's metadata for client-credentials
// tokens, from the account table below for device-flow users. A resource indicator of the form
// urn:sandfort-test?aud=X&alg=ES256 gets a real token with another audience or algorithm.
//
// The user's part of the device flow is plain HTML forms (no scripts), so a test can drive it with
// an HTTP client and a cookie jar: /device (user code) -> /interaction/:uid (login=<username>)
// -> /interaction/:uid (consent) -> success page. The consent is granted through provider.Grant.
// The authorization code flow (clients sandfort-console and sandfort-console-public, the console's
// sign-in) uses the same login and consent pages: /auth -> /interaction/:uid ... -> redirect_uri.
//
// Test hooks: GET /_test/stats counts requests per endpoint; POST /_test/fail?jwks=1&discovery=1
// makes those endpoints answer 503 until POSTed again with 0.
import * as crypto from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { parseArgs } from 'node:util';

import Provider, { errors } from 'oidc-provider';

import { ALGORITHMS, loadOrCreateKeySet, rotateKeySet, writeKeySet } from './keys.mjs';

const ACCOUNTS = {
  alice: { name: 'Alice Admin', org: 'acme', groups: ['sandfort-admins'] },
  bob: { name: 'Bob Builder', org: 'acme', groups: ['sandfort-developers'] },
  carol: { name: 'Carol Viewer', org: 'acme', groups: ['sandfort-viewers'] },
  dave: { name: 'Dave Nogroups', org: 'acme', groups: [] },
  mallory: { name: 'Mallory Outsider', org: 'other-org', groups: [] },
  erin: { name: 'Erin Elsewhere', org: 'other-org', groups: ['sandfort-developers'] },
};

const DEVICE_GRANT = 'urn:ietf:params:oauth:grant-type:device_code';

// The console's sign-in (docs/console.md): the authorization code flow with PKCE. Native clients,
// so that oidc-provider takes a loopback redirect URI on any port (RFC 8252 7.3): each test
// daemon listens on a port of its own. One confidential (its secret sent with Basic), one public.
const CONSOLE_CALLBACKS = ['http://127.0.0.1/v1/console/oidc/callback', 'http://localhost/v1/console/oidc/callback'];
function consoleClient(clientId, secret) {
  return {
    client_id: clientId,
    ...(secret ? { client_secret: secret, token_endpoint_auth_method: 'client_secret_basic' }
      : { token_endpoint_auth_method: 'none' }),
    application_type: 'native',
    grant_types: ['authorization_code'],
    response_types: ['code'],
    redirect_uris: CONSOLE_CALLBACKS,
  };
}

// oidc-provider accepts client_secret_basic and client_secret_post alike for such a client.
function machineClient(clientId, org, groups) {
  const client = {
    client_id: clientId,
    client_secret: `${clientId}-secret`,
    grant_types: ['client_credentials'],
    response_types: [],
    redirect_uris: [],
    token_endpoint_auth_method: 'client_secret_basic',
    groups,
  };
  if (org !== undefined) client.org = org;
  return client;
}

export const DEFAULT_CLIENTS = [
  machineClient('sandfort-admin', 'acme', ['sandfort-admins']),
  machineClient('sandfort-member', 'acme', ['sandfort-developers']),
  machineClient('sandfort-viewer', 'acme', ['sandfort-viewers']),
  machineClient('sandfort-nogroups', 'acme', []),
  machineClient('sandfort-otherorg-admin', 'other-org', ['sandfort-admins']),
  machineClient('sandfort-noorg-admin', undefined, ['sandfort-admins']),
  {
    client_id: 'sandfort-cli',
    client_name: 'Sandfort CLI',
    token_endpoint_auth_method: 'none',
    grant_types: [DEVICE_GRANT, 'refresh_token'],
    response_types: [],
    redirect_uris: [],
    scope: 'openid offline_access profile email',
  },
  consoleClient('sandfort-console', 'sandfort-console-secret'),
  consoleClient('sandfort-console-public'),
];

function log(...parts) {
  process.stderr.write(`oidc-provider: ${parts.join(' ')}\n`);
}

function options(argv) {
  const env = process.env;
  const { values } = parseArgs({
    args: argv,
    options: {
      port: { type: 'string', default: env.OIDC_PORT ?? '0' },
      host: { type: 'string', default: env.OIDC_HOST ?? '127.0.0.1' },
      keys: { type: 'string', default: env.OIDC_KEYS },
      alg: { type: 'string', default: env.OIDC_ALG ?? 'RS256' },
      audience: { type: 'string', default: env.OIDC_AUDIENCE ?? 'sandfort' },
      resource: { type: 'string', default: env.OIDC_RESOURCE ?? 'urn:sandfort' },
      clients: { type: 'string', default: env.OIDC_CLIENTS },
      'token-ttl': { type: 'string', default: env.OIDC_TOKEN_TTL ?? '600' },
      'jwks-max-age': { type: 'string', default: env.OIDC_JWKS_MAX_AGE },
      'device-interval': { type: 'string', default: env.OIDC_DEVICE_INTERVAL ?? '1' },
      rotate: { type: 'boolean', default: false },
      'drop-old': { type: 'boolean', default: false },
    },
  });
  if (!values.keys) throw new Error('--keys FILE (or OIDC_KEYS) is required');
  if (!ALGORITHMS.includes(values.alg)) throw new Error(`--alg must be one of ${ALGORITHMS.join(', ')}`);
  const integer = (name, text) => {
    if (!/^\d+$/.test(text)) throw new Error(`--${name} must be a non-negative integer`);
    return Number(text);
  };
  return {
    ...values,
    port: integer('port', values.port),
    tokenTtl: integer('token-ttl', values['token-ttl']),
    deviceInterval: integer('device-interval', values['device-interval']),
    jwksMaxAge: values['jwks-max-age'] === undefined
      ? undefined : integer('jwks-max-age', values['jwks-max-age']),
  };
}

function loadKeys(opts) {
  let set = loadOrCreateKeySet(opts.keys);
  if (opts.rotate) {
    set = rotateKeySet(set, { dropOld: opts['drop-old'] });
    writeKeySet(opts.keys, set);
  }
  return set;
}

function loadClients(file) {
  if (!file) return DEFAULT_CLIENTS;
  const clients = JSON.parse(fs.readFileSync(file, 'utf8'));
  if (!Array.isArray(clients)) throw new Error(`${file}: expected a JSON array of client metadata`);
  return clients;
}

// The resource server behind a resource indicator: the configured one, or a test variant
// (urn:sandfort-test?aud=X&alg=Y) so that tests can obtain real tokens with other claims.
function resourceServerInfo(opts, indicator) {
  let audience = opts.audience;
  let alg = opts.alg;
  if (indicator !== opts.resource) {
    const url = URL.parse(indicator);
    if (url?.protocol !== 'urn:' || url.pathname !== 'sandfort-test') {
      throw new errors.InvalidTarget(`unknown resource indicator ${indicator}`);
    }
    audience = url.searchParams.get('aud') ?? audience;
    alg = url.searchParams.get('alg') ?? alg;
    if (!ALGORITHMS.includes(alg)) throw new errors.InvalidTarget(`unsupported alg ${alg}`);
  }
  return {
    scope: 'api',
    audience,
    accessTokenFormat: 'jwt',
    accessTokenTTL: opts.tokenTtl,
    jwt: { sign: { alg } },
  };
}

function claimsOf(org, groups) {
  const claims = {};
  if (org !== undefined) claims.org = org;
  if (groups !== undefined) claims.groups = groups;
  return claims;
}

async function extraTokenClaims(ctx, token) {
  if (token.kind === 'ClientCredentials') {
    const client = await ctx.oidc.provider.Client.find(token.clientId);
    return claimsOf(client?.org, client?.groups);
  }
  const account = ACCOUNTS[token.accountId];
  if (!account) return undefined;
  return { ...claimsOf(account.org, account.groups), preferred_username: token.accountId };
}

async function findAccount(_ctx, sub) {
  const account = ACCOUNTS[sub];
  if (!account) return undefined;
  return {
    accountId: sub,
    async claims() {
      return {
        sub, name: account.name, preferred_username: sub, email: `${sub}@example.test`, ...claimsOf(account.org, account.groups),
      };
    },
  };
}

function validateClientMetadata(_ctx, key, value) {
  if (value === undefined) return;
  if (key === 'org' && typeof value !== 'string') {
    throw new errors.InvalidClientMetadata('org must be a string');
  }
  if (key === 'groups' && !(Array.isArray(value) && value.every((g) => typeof g === 'string'))) {
    throw new errors.InvalidClientMetadata('groups must be an array of strings');
  }
}

const escapeHtml = (text) => String(text).replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

function page(title, body) {
  return `<!DOCTYPE html>\n<html><head><meta charset="utf-8"><title>${escapeHtml(title)}</title></head>`
    + `<body><h1>${escapeHtml(title)}</h1>\n${body}\n</body></html>\n`;
}

function errorParagraph(code, message) {
  return `<p id="error" data-error="${escapeHtml(code)}">${escapeHtml(message)}</p>`;
}

function deviceFlowPages() {
  return {
    async userCodeInputSource(ctx, form, _out, err) {
      const error = err ? errorParagraph(err.name ?? 'error', err.message ?? 'error') : '';
      ctx.body = page('Enter the code shown on your device',
        `${error}\n${form}\n<button type="submit" form="op.deviceInputForm">Continue</button>`);
    },
    async userCodeConfirmSource(ctx, form, client, _deviceInfo, userCode) {
      const name = client.clientName ?? client.clientId;
      ctx.body = page('Confirm the device',
        `<p>${escapeHtml(name)} shows the code <code id="user_code">${escapeHtml(userCode)}</code></p>\n${form}\n`
        + '<button type="submit" form="op.deviceConfirmForm">Continue</button>');
    },
    async successSource(ctx) {
      ctx.body = page('Signed in', `<p id="success" data-client="${escapeHtml(ctx.oidc.client.clientId)}">`
        + 'The device is signed in; you can close this page.</p>');
    },
  };
}

function configuration(opts, keys, clients) {
  return {
    clients,
    jwks: keys,
    findAccount,
    extraTokenClaims,
    extraClientMetadata: { properties: ['org', 'groups'], validator: validateClientMetadata },
    scopes: ['openid', 'offline_access', 'profile', 'email'],
    claims: {
      openid: ['sub'],
      profile: ['name', 'preferred_username', 'org', 'groups'],
      email: ['email'],
    },
    cookies: { keys: [crypto.randomBytes(32).toString('base64url')] },
    ttl: {
      AccessToken: opts.tokenTtl,
      ClientCredentials: opts.tokenTtl,
      DeviceCode: 600,
      Grant: 14 * 24 * 3600,
      IdToken: 3600,
      Interaction: 3600,
      RefreshToken: 14 * 24 * 3600,
      Session: 14 * 24 * 3600,
    },
    features: {
      devInteractions: { enabled: false },
      clientCredentials: { enabled: true },
      deviceFlow: { enabled: true, ...deviceFlowPages() },
      introspection: { enabled: true },
      revocation: { enabled: true },
      resourceIndicators: {
        enabled: true,
        async defaultResource(_ctx, _client, oneOf) {
          if (!oneOf) return opts.resource;
          return oneOf.includes(opts.resource) ? opts.resource : oneOf;
        },
        // Device-flow tokens are for Sandfort even though the grant holds `openid` too.
        async useGrantedResource() {
          return true;
        },
        async getResourceServerInfo(_ctx, indicator) {
          return resourceServerInfo(opts, indicator);
        },
      },
    },
    async issueRefreshToken(_ctx, client, code) {
      return client.grantTypeAllowed('refresh_token') && code.scopes.has('offline_access');
    },
    async renderError(ctx, out, error) {
      log('render error:', out.error, out.error_description ?? '', error?.stack ?? '');
      ctx.type = 'html';
      ctx.body = page('Error', errorParagraph(out.error, out.error_description ?? out.error));
    },
  };
}

async function readForm(req) {
  const chunks = [];
  let size = 0;
  for await (const chunk of req) {
    size += chunk.length;
    if (size > 64 * 1024) throw new Error('form too large');
    chunks.push(chunk);
  }
  return new URLSearchParams(Buffer.concat(chunks).toString('utf8'));
}

function sendHtml(res, status, html) {
  res.writeHead(status, { 'content-type': 'text/html; charset=utf-8', 'cache-control': 'no-store' });
  res.end(html);
}

function loginPage(uid, error) {
  return page('Sign in',
    `${error ? errorParagraph('login_failed', error) : ''}\n`
    + `<form id="login" method="post" action="/interaction/${uid}/login">\n`
    + '<input type="text" name="login" autofocus>\n<button type="submit">Sign in</button>\n</form>\n'
    + `<form id="abort" method="post" action="/interaction/${uid}/abort"><button type="submit">Cancel</button></form>`);
}

function consentPage(uid, details) {
  return page('Authorize',
    `<p>${escapeHtml(details.params.client_id)} asks for <code id="scope">${escapeHtml(details.params.scope ?? '')}</code>`
    + ` on behalf of <code id="account">${escapeHtml(details.session?.accountId ?? '')}</code></p>\n`
    + `<form id="consent" method="post" action="/interaction/${uid}/confirm"><button type="submit">Allow</button></form>\n`
    + `<form id="abort" method="post" action="/interaction/${uid}/abort"><button type="submit">Deny</button></form>`);
}

// The consent, as oidc-provider's own dev interactions grant it: everything that is missing.
async function grantConsent(provider, details) {
  const { prompt: { details: missing }, params, session } = details;
  const grant = details.grantId
    ? await provider.Grant.find(details.grantId)
    : new provider.Grant({ accountId: session.accountId, clientId: params.client_id });
  if (missing.missingOIDCScope) grant.addOIDCScope(missing.missingOIDCScope.join(' '));
  if (missing.missingOIDCClaims) grant.addOIDCClaims(missing.missingOIDCClaims);
  for (const [indicator, scopes] of Object.entries(missing.missingResourceScopes ?? {})) {
    grant.addResourceScope(indicator, scopes.join(' '));
  }
  return grant.save();
}

async function handleInteraction(provider, req, res, uid, action) {
  const details = await provider.interactionDetails(req, res);
  if (details.uid !== uid) {
    sendHtml(res, 400, page('Error', errorParagraph('invalid_request', 'interaction does not match the cookie')));
    return;
  }
  const prompt = details.prompt.name;
  if (req.method === 'GET' && !action) {
    sendHtml(res, 200, prompt === 'login' ? loginPage(uid) : consentPage(uid, details));
    return;
  }
  if (req.method !== 'POST') {
    sendHtml(res, 405, page('Error', errorParagraph('invalid_request', 'method not allowed')));
    return;
  }
  const form = await readForm(req);
  if (action === 'abort') {
    log('interaction', uid, 'aborted by the user');
    await provider.interactionFinished(req, res, {
      error: 'access_denied', error_description: 'End-User aborted interaction',
    }, { mergeWithLastSubmission: false });
  } else if (action === 'login' && prompt === 'login') {
    const username = form.get('login') ?? '';
    if (!Object.hasOwn(ACCOUNTS, username)) {
      log('interaction', uid, 'unknown user', JSON.stringify(username));
      sendHtml(res, 401, loginPage(uid, `unknown user ${username}`));
      return;
    }
    log('interaction', uid, 'login', username);
    await provider.interactionFinished(req, res, { login: { accountId: username } },
      { mergeWithLastSubmission: false });
  } else if (action === 'confirm' && prompt === 'consent') {
    const grantId = await grantConsent(provider, details);
    log('interaction', uid, 'consent granted to', details.params.client_id, 'for', details.session.accountId);
    await provider.interactionFinished(req, res, { consent: { grantId } },
      { mergeWithLastSubmission: true });
  } else {
    sendHtml(res, 400, page('Error', errorParagraph('invalid_request', `${action} does not answer prompt ${prompt}`)));
  }
}

function testHooks(state, req, res, url) {
  if (url.pathname === '/_test/stats' && req.method === 'GET') {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(state.stats));
    return;
  }
  if (url.pathname === '/_test/fail' && req.method === 'POST') {
    for (const name of ['jwks', 'discovery']) {
      if (url.searchParams.has(name)) state.failing[name] = url.searchParams.get(name) === '1';
    }
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(state.failing));
    return;
  }
  res.writeHead(404).end();
}

function endpointName(pathname) {
  if (pathname === '/jwks') return 'jwks';
  if (pathname === '/.well-known/openid-configuration') return 'discovery';
  if (pathname === '/token') return 'token';
  if (pathname.startsWith('/device')) return 'device';
  if (pathname.startsWith('/interaction/')) return 'interaction';
  return 'other';
}

function requestHandler(state) {
  return async (req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    const started = process.hrtime.bigint();
    res.on('finish', () => {
      const ms = Number(process.hrtime.bigint() - started) / 1e6;
      log(req.method, url.pathname, res.statusCode, `${ms.toFixed(1)}ms`);
    });
    try {
      if (!state.callback) { // listening, but the issuer (which needs the port) is not set up yet
        res.writeHead(503, { 'content-type': 'text/plain' }).end('starting\n');
        return;
      }
      if (url.pathname.startsWith('/_test/')) {
        testHooks(state, req, res, url);
        return;
      }
      const endpoint = endpointName(url.pathname);
      state.stats[endpoint] = (state.stats[endpoint] ?? 0) + 1;
      if (state.failing[endpoint]) {
        res.writeHead(503, { 'content-type': 'text/plain' }).end('failure injected by the test\n');
        return;
      }
      const interaction = /^\/interaction\/([\w-]+)(?:\/(login|confirm|abort))?$/.exec(url.pathname);
      if (interaction) {
        await handleInteraction(state.provider, req, res, interaction[1], interaction[2]);
        return;
      }
      if (endpoint === 'jwks' && state.jwksMaxAge !== undefined) {
        res.setHeader('cache-control', `public, max-age=${state.jwksMaxAge}`);
      }
      state.callback(req, res);
    } catch (err) {
      log('request failed:', req.method, url.pathname, err?.stack ?? err);
      if (!res.headersSent) sendHtml(res, 400, page('Error', errorParagraph(err?.name ?? 'error', err?.message ?? 'error')));
      else res.end();
    }
  };
}

// oidc-provider leaves `interval` out of the device authorization response, which tells a
// client to poll every 5 s (RFC 8628); a short one keeps the CLI tests quick.
function advertiseDeviceInterval(provider, seconds) {
  provider.use(async (ctx, next) => {
    await next();
    if (ctx.oidc?.route === 'device_authorization' && ctx.status === 200 && ctx.body) {
      ctx.body = { ...ctx.body, interval: seconds };
    }
  });
}

function logProviderEvents(provider) {
  for (const event of ['server_error', 'grant.error', 'device_authorization.error', 'code_verification.error',
    'device_resume.error', 'introspection.error', 'revocation.error', 'jwks.error', 'discovery.error']) {
    provider.on(event, (ctx, err) => log(event, err?.name ?? '', err?.message ?? '', err?.error_description ?? ''));
  }
  provider.on('grant.success', (ctx) => log('grant.success', ctx.oidc.params.grant_type, ctx.oidc.client?.clientId ?? ''));
}

async function main() {
  const opts = options(process.argv.slice(2));
  const keys = loadKeys(opts);
  const clients = loadClients(opts.clients);
  const state = {
    stats: {}, failing: {}, jwksMaxAge: opts.jwksMaxAge, provider: undefined, callback: undefined,
  };
  const server = http.createServer(requestHandler(state));
  await new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, resolve);
  });
  const { port } = server.address();
  const issuer = `http://${opts.host}:${port}`;
  const provider = new Provider(issuer, configuration(opts, keys, clients));
  logProviderEvents(provider);
  advertiseDeviceInterval(provider, opts.deviceInterval);
  state.provider = provider;
  state.callback = provider.callback();

  const stop = (signal) => {
    log('stopping on', signal);
    server.close(() => process.exit(0));
    server.closeAllConnections();
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));

  log(`listening on ${issuer} (alg ${opts.alg}, audience ${opts.audience}, keys ${opts.keys})`);
  const publicClients = clients.map(({
    client_id: clientId, client_secret: secret, grant_types: grants, token_endpoint_auth_method: auth, org, groups,
  }) => ({
    client_id: clientId, client_secret: secret, grant_types: grants, token_endpoint_auth_method: auth, org, groups,
  }));
  process.stdout.write(`${JSON.stringify({
    issuer,
    port,
    alg: opts.alg,
    audience: opts.audience,
    resource: opts.resource,
    keys: opts.keys,
    kids: keys.keys.map((k) => k.kid),
    clients: publicClients,
    accounts: ACCOUNTS,
  })}\n`);
}

main().catch((err) => {
  log('fatal:', err?.stack ?? err);
  process.exit(1);
});
