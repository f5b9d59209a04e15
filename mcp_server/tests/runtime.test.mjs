// create_sandbox's `runtime` (docs/gvisor.md) through the official MCP client over stdio, against
// a live sandfortd, real Docker and Debian's runsc: the tool offers it as an enum an agent can
// choose from, a gVisor sandbox says so and runs commands on gVisor's kernel, and a daemon that
// does not offer gVisor is a tool error that tells the model what to do. One gVisor sandbox for
// the file: each costs about a second and 50 MiB.
//
//   /usr/bin/python3 tests/integration/with_daemon.py -- node --test mcp_server/tests/
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import http from 'node:http';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const server = path.resolve(here, '..', 'sandfort_mcp.py');
const BASE_URL = process.env.SANDFORT_BASE_URL;
const API_KEY = process.env.SANDFORT_API_KEY;

let mcp;
const made = [];

async function api(method, p) {
  const res = await fetch(BASE_URL + p, { method, headers: { Authorization: `Bearer ${API_KEY}` } });
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
  const c = new Client({ name: 'sandfort-mcp-runtime-test', version: '1.0.0' });
  await c.connect(transport);
  return c;
}

const textOf = (r) => r.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

async function create(args) {
  const r = await mcp.callTool({ name: 'create_sandbox', arguments: args });
  if (!r.isError) made.push(r.structuredContent.id);
  return r;
}

async function run(sandboxId, command) {
  const r = await mcp.callTool({ name: 'run_command', arguments: { sandbox_id: sandboxId, command } });
  assert.ok(!r.isError, textOf(r));
  return r.structuredContent;
}

function runscRegistered() {
  try {
    const runtimes = JSON.parse(execFileSync('docker', ['info', '--format', '{{json .Runtimes}}'], { encoding: 'utf8', timeout: 60000 }) || '{}');
    return 'runsc' in runtimes;
  } catch {
    return false;
  }
}

// This file exists to test gVisor: under CI a missing runsc is a failure, never a skip.
const noRunsc = runscRegistered() ? false : 'runsc is not registered with the Docker Engine (scripts/setup registers it)';
if (noRunsc && process.env.CI === 'true') throw new Error(noRunsc);

before(async () => {
  assert.ok(BASE_URL && API_KEY, 'SANDFORT_BASE_URL and SANDFORT_API_KEY must be set (run via with_daemon.py)');
  mcp = await connect(BASE_URL, API_KEY);
});

after(async () => {
  if (mcp) await mcp.close();
  for (const id of made) await api('DELETE', `/v1/sandboxes/${id}`).catch(() => {});
});

test('create_sandbox offers runtime as an enum whose description says what gvisor costs and gives', async () => {
  const { tools } = await mcp.listTools();
  const tool = tools.find((t) => t.name === 'create_sandbox');
  const runtime = tool.inputSchema.properties.runtime;
  assert.equal(runtime.type, 'string');
  assert.deepEqual(runtime.enum, ['runc', 'gvisor']);
  for (const said of [/separate kernel \(gVisor\)/, /stronger isolation/, /slower syscalls/, /no network interface/,
    /egress through the proxy only/, /ls and stat fail/]) assert.match(runtime.description, said);
  assert.match(tool.description, /gvisor/);
  assert.equal(tool.outputSchema.properties.runtime.type, 'string');
});

test('a gVisor sandbox says so and runs on a kernel that is not the host\'s', { skip: noRunsc }, async () => {
  const [runc, gvisor] = await Promise.all([create({}), create({ runtime: 'gvisor' })]);
  assert.ok(!runc.isError, textOf(runc));
  assert.ok(!gvisor.isError, textOf(gvisor));
  assert.equal(gvisor.structuredContent.runtime, 'gvisor');
  assert.match(textOf(gvisor), /runtime gvisor/);
  assert.equal(runc.structuredContent.runtime, 'runc', "a create that names none gets the daemon's default_runtime");
  const id = gvisor.structuredContent.id;
  assert.equal((await api('GET', `/v1/sandboxes/${id}`)).body.runtime, 'gvisor');
  const listed = await mcp.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.equal(listed.structuredContent.sandboxes.find((s) => s.id === id).runtime, 'gvisor');
  assert.match(textOf(listed), new RegExp(`${id} .*runtime=gvisor`));

  const r = await run(id, 'uname -r; exit 3');
  assert.equal(r.exit_code, 3);
  const runcKernel = (await run(runc.structuredContent.id, 'uname -r')).stdout.trim();
  assert.ok(r.stdout.trim() && r.stdout.trim() !== runcKernel, `gVisor's Sentry, not the host's kernel: ${r.stdout}`);
});

test('an unknown runtime is a tool error naming the choices', async () => {
  const r = await mcp.callTool({ name: 'create_sandbox', arguments: { runtime: 'kata' } });
  assert.equal(r.isError, true);
  assert.equal(textOf(r), "Invalid arguments for create_sandbox: 'runtime' must be one of runc, gvisor");
});

test('a daemon without gVisor: a tool error with the API\'s 503 and what to do instead', async () => {
  // sandfortd with an empty gvisor_runtime answers this; a stand-in, so the suite's daemon keeps gVisor.
  let sent;
  const fake = http.createServer((req, res) => {
    let body = '';
    req.on('data', (c) => { body += c; });
    req.on('end', () => {
      sent = JSON.parse(body || '{}');
      res.writeHead(503, { 'Content-Type': 'application/json', 'X-Request-Id': 'req-00000000000000ac' });
      res.end(JSON.stringify({ error: { code: 'unavailable', message: 'gVisor sandboxes are not offered by this daemon (gvisor_runtime is empty)', request_id: 'req-00000000000000ac' } }));
    });
  });
  await new Promise((r) => fake.listen(0, '127.0.0.1', r));
  const c = await connect(`http://127.0.0.1:${fake.address().port}`, 'sfk_test');
  try {
    const r = await c.callTool({ name: 'create_sandbox', arguments: { runtime: 'gvisor' } });
    assert.equal(sent.runtime, 'gvisor');
    assert.equal(r.isError, true);
    const text = textOf(r);
    assert.ok(text.startsWith('Sandfort API error 503 unavailable: gVisor sandboxes are not offered by this daemon'), text);
    assert.match(text, /without runtime \(runc/);
  } finally {
    await c.close();
    fake.close();
  }
});
