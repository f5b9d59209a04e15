// The MCP server against an organization's guardrails, through the official MCP client over stdio:
// idle_timeout_s in create_sandbox, and the refusals a model cannot fix by retrying — the sandbox
// quota, the image policy, the runtime policy, the kill switch — as tool errors that say what to
// do. The suite's key (tests/integration/with_daemon.py) is the superadmin's: it makes a fresh
// organization with small limits, and the server runs with that organization's admin key. A
// rate-limited answer comes from a small local HTTP server, since the live daemon's rate limit
// cannot be made small from here.
//
//   /usr/bin/python3 tests/integration/with_daemon.py -- node --test mcp_server/tests/
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import http from 'node:http';
import path from 'node:path';
import { randomBytes } from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const server = path.resolve(here, '..', 'sandfort_mcp.py');
const BASE_URL = process.env.SANDFORT_BASE_URL;
const API_KEY = process.env.SANDFORT_API_KEY;

let org;
let mcp;
const made = [];

async function api(method, p, body, key = API_KEY) {
  const res = await fetch(BASE_URL + p, {
    method,
    headers: { Authorization: `Bearer ${key}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

async function connect(baseUrl, apiKey) {
  const transport = new StdioClientTransport({
    command: '/usr/bin/python3',
    args: [server],
    env: { SANDFORT_BASE_URL: baseUrl, SANDFORT_API_KEY: apiKey },
    stderr: 'pipe',
  });
  const c = new Client({ name: 'sandfort-mcp-guardrails-test', version: '1.0.0' });
  await c.connect(transport);
  return c;
}

const textOf = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function create(args = {}) {
  const r = await mcp.callTool({ name: 'create_sandbox', arguments: args });
  if (!r.isError) made.push(r.structuredContent.id);
  return r;
}

before(async () => {
  assert.ok(BASE_URL && API_KEY, 'SANDFORT_BASE_URL and SANDFORT_API_KEY must be set (run via with_daemon.py)');
  const o = await api('POST', '/v1/orgs', { name: `mcp-gr-${randomBytes(4).toString('hex')}` });
  assert.equal(o.status, 201);
  org = o.body;
  const key = await api('POST', `/v1/orgs/${org.id}/api-keys`, { name: 'agent', role: 'admin' });
  assert.equal(key.status, 201);
  org.key = key.body.key;
  const set = await api('PUT', `/v1/orgs/${org.id}/limits`, { max_sandboxes: 1, allowed_images: ['sandfort/*'] });
  assert.equal(set.status, 200);
  mcp = await connect(BASE_URL, org.key);
});

after(async () => {
  if (mcp) await mcp.close();
  for (const id of made) await api('DELETE', `/v1/sandboxes/${id}`, undefined, org.key).catch(() => {});
});

test('create_sandbox takes idle_timeout_s and reports it with ttl_s', async () => {
  const { tools } = await mcp.listTools();
  const schema = tools.find((t) => t.name === 'create_sandbox').inputSchema;
  const { type, minimum, maximum } = schema.properties.idle_timeout_s;
  assert.deepEqual({ type, minimum, maximum }, { type: 'integer', minimum: 0, maximum: 2592000 });
  assert.match(schema.properties.idle_timeout_s.description, /0: never/);
  const r = await create({ idle_timeout_s: 0, ttl_s: 3600 });
  assert.ok(!r.isError, textOf(r));
  assert.equal(r.structuredContent.idle_timeout_s, 0);
  assert.equal(r.structuredContent.ttl_s, 3600);
  const got = await api('GET', `/v1/sandboxes/${r.structuredContent.id}`, undefined, org.key);
  assert.equal(got.body.idle_timeout_s, 0);
  const bad = await mcp.callTool({ name: 'create_sandbox', arguments: { idle_timeout_s: -1 } });
  assert.equal(bad.isError, true);
  assert.match(textOf(bad), /idle_timeout_s/);
});

test('the sandbox quota: a tool error naming quota_exceeded and what to do', async () => {
  // The first test's sandbox fills the quota of one.
  assert.equal(made.length, 1);
  const r = await create();
  assert.equal(r.isError, true);
  const text = textOf(r);
  assert.match(text, /Sandfort API error 429 quota_exceeded: quota exceeded: sandboxes/);
  assert.match(text, /1 of 1/);
  assert.match(text, /request_id req-/);
  assert.match(text, /delete_sandbox/);
});

test('an image outside the policy: a tool error naming image_not_allowed and what to do', async () => {
  const r = await create({ image: 'python:3.12-slim' });
  assert.equal(r.isError, true);
  const text = textOf(r);
  assert.match(text, /Sandfort API error 403 image_not_allowed: image python:3\.12-slim is not allowed/);
  assert.match(text, /Omit image to use the default/);
});

test('a runtime outside the policy: a tool error naming runtime_not_allowed and what to do', async () => {
  // gVisor required of the organization: the runc create is refused before any container.
  const set = await api('PUT', `/v1/orgs/${org.id}/limits`, { allowed_runtimes: ['gvisor'] });
  assert.equal(set.status, 200);
  try {
    const r = await create({ runtime: 'runc' });
    assert.equal(r.isError, true);
    const text = textOf(r);
    assert.match(text, /Sandfort API error 403 runtime_not_allowed: runtime runc is not allowed/);
    assert.match(text, /\["gvisor"\]/);
    assert.match(text, /policy requires another runtime/);
    assert.match(text, /Create the sandbox without runtime/);
  } finally {
    assert.equal((await api('PUT', `/v1/orgs/${org.id}/limits`, { allowed_runtimes: null })).status, 200);
  }
});

test('the kill switch: a tool error that says not to retry; lifted, creating works again', async () => {
  const stop = await api('POST', `/v1/orgs/${org.id}/stop-all`, undefined, org.key);
  assert.equal(stop.status, 200);
  assert.deepEqual(stop.body.stopped, made);
  await api('PUT', `/v1/orgs/${org.id}/limits`, { max_sandboxes: 5 });
  let r = await create();
  assert.equal(r.isError, true);
  assert.match(textOf(r), /Sandfort API error 409 conflict: .*kill switch/);
  assert.match(textOf(r), /Do not retry; tell the user/);
  assert.equal((await api('DELETE', `/v1/orgs/${org.id}/stop-all`, undefined, org.key)).status, 204);
  r = await create({ idle_timeout_s: 60 });
  assert.ok(!r.isError, textOf(r));
  assert.equal(r.structuredContent.idle_timeout_s, 60);
});

test('rate_limited: a tool error with the Retry-After wait', async () => {
  const fake = http.createServer((req, res) => {
    res.writeHead(429, { 'Content-Type': 'application/json', 'Retry-After': '7', 'X-Request-Id': 'req-00000000000000aa' });
    res.end(JSON.stringify({ error: { code: 'rate_limited', message: 'rate limit of this API key exceeded', request_id: 'req-00000000000000aa' } }));
  });
  await new Promise((r) => fake.listen(0, '127.0.0.1', r));
  const c = await connect(`http://127.0.0.1:${fake.address().port}`, 'sfk_test');
  try {
    const r = await c.callTool({ name: 'list_sandboxes', arguments: {} });
    assert.equal(r.isError, true);
    assert.equal(textOf(r), 'Sandfort API error 429 rate_limited: rate limit of this API key exceeded ' +
      '(request_id req-00000000000000aa)\nToo many requests: wait 7 s before calling again.');
  } finally {
    await c.close();
    fake.close();
  }
});

test('host_full: a tool error that says the host is full and what to do', async () => {
  const fake = http.createServer((req, res) => {
    res.writeHead(503, { 'Content-Type': 'application/json', 'X-Request-Id': 'req-00000000000000ab' });
    res.end(JSON.stringify({ error: { code: 'host_full', message: 'host full: this host cannot hold 1024 MiB more', request_id: 'req-00000000000000ab' } }));
  });
  await new Promise((r) => fake.listen(0, '127.0.0.1', r));
  const c = await connect(`http://127.0.0.1:${fake.address().port}`, 'sfk_test');
  try {
    const r = await c.callTool({ name: 'create_sandbox', arguments: {} });
    assert.equal(r.isError, true);
    const text = textOf(r);
    assert.ok(text.startsWith('Sandfort API error 503 host_full: host full: this host cannot hold 1024 MiB more'), text);
    assert.match(text, /no memory left for another sandbox/);
  } finally {
    await c.close();
    fake.close();
  }
});
