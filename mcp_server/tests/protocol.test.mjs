// The JSON-RPC / MCP layer of mcp_server/sandfort_mcp.py spoken raw over stdio (no SDK), for what
// the SDK client cannot ask: older protocol versions, malformed input, batches. Needs no daemon
// (tool calls here fail before or at the network, on a closed port).
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const here = path.dirname(fileURLToPath(import.meta.url));
const server = path.resolve(here, '..', 'sandfort_mcp.py');

// Sends the lines, closes stdin, and returns {responses (parsed stdout lines), stdout, stderr}.
function converse(lines, env = { SANDFORT_BASE_URL: 'http://127.0.0.1:9', SANDFORT_API_KEY: 'sfk_test' }) {
  return new Promise((resolve, reject) => {
    const child = spawn('/usr/bin/python3', [server], { env: { PATH: process.env.PATH, ...env } });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (c) => { stdout += c; });
    child.stderr.on('data', (c) => { stderr += c; });
    child.on('error', reject);
    child.on('close', () => {
      const responses = stdout.split('\n').filter((l) => l.length).map((l) => JSON.parse(l));
      resolve({ responses, stdout, stderr });
    });
    for (const l of lines) child.stdin.write((typeof l === 'string' ? l : JSON.stringify(l)) + '\n');
    child.stdin.end();
  });
}

const init = (id, protocolVersion) => ({
  jsonrpc: '2.0', id, method: 'initialize',
  params: { protocolVersion, capabilities: {}, clientInfo: { name: 'raw', version: '0' } },
});
const byId = (responses) => Object.fromEntries(responses.filter((r) => !Array.isArray(r)).map((r) => [r.id, r]));

test('version negotiation: a supported version is echoed, an unknown one gets the newest', async () => {
  for (const v of ['2025-11-25', '2025-06-18', '2025-03-26', '2024-11-05']) {
    const { responses } = await converse([init(1, v)]);
    assert.equal(responses[0].result.protocolVersion, v);
    assert.deepEqual(responses[0].result.capabilities, { tools: { listChanged: false } });
    assert.equal(responses[0].result.serverInfo.name, 'sandfort');
  }
  const { responses } = await converse([init(1, '1999-01-01')]);
  assert.equal(responses[0].result.protocolVersion, '2025-11-25');
});

test('2024-11-05: tools carry no outputSchema and results no structuredContent', async () => {
  const { responses } = await converse([
    init(1, '2024-11-05'),
    { jsonrpc: '2.0', method: 'notifications/initialized' },
    { jsonrpc: '2.0', id: 2, method: 'tools/list' },
    { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'list_sandboxes', arguments: {} } },
  ]);
  const r = byId(responses);
  assert.equal(responses.length, 3, 'the notification is not answered');
  assert.equal(r[2].result.tools.length, 13);
  for (const t of r[2].result.tools) assert.equal(t.outputSchema, undefined);
  assert.equal(r[3].result.isError, true);
  assert.equal(r[3].result.structuredContent, undefined);
});

test('2025-06-18: arguments that fail the schema are JSON-RPC -32602', async () => {
  const { responses } = await converse([
    init(1, '2025-06-18'),
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_command', arguments: { sandbox_id: 'x' } } },
    { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'run_code', arguments: { sandbox_id: 'x', code: '1', language: 'ruby' } } },
    { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'upload_text_file', arguments: { sandbox_id: 'x', path: 'rel.txt', content: '' } } },
    { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'delete_sandbox', arguments: { sandbox_id: 'x', force: true } } },
    { jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'run_command', arguments: { sandbox_id: 'x', command: 'true', timeout_s: 'soon' } } },
  ]);
  const r = byId(responses);
  assert.equal(r[2].error.code, -32602);
  assert.match(r[2].error.message, /missing required argument 'command'/);
  assert.match(r[3].error.message, /'language' must be one of python, node, bash, sh/);
  assert.match(r[4].error.message, /'path' must match/);
  assert.match(r[5].error.message, /unknown argument 'force'/);
  assert.match(r[6].error.message, /'timeout_s' must be of type integer/);
});

test('create_sandbox takes snapshot (not together with image); create_snapshot needs sandbox_id and name', async () => {
  const { responses } = await converse([
    init(1, '2025-06-18'),
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'create_sandbox', arguments: { snapshot: 'base' } } },
    { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'create_sandbox', arguments: { snapshot: 'base', image: 'python:3.12' } } },
    { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'create_snapshot', arguments: { sandbox_id: 'x' } } },
    { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { name: 'create_snapshot', arguments: { sandbox_id: 'x', name: '-bad' } } },
    { jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'create_snapshot', arguments: { sandbox_id: 'x', name: 'ok', keep: true } } },
    { jsonrpc: '2.0', id: 7, method: 'tools/call', params: { name: 'create_snapshot', arguments: { sandbox_id: 'x', name: 'ok' } } },
  ]);
  const r = byId(responses);
  // Accepted: the call reaches the (closed) network port.
  assert.equal(r[2].result.isError, true);
  assert.match(r[2].result.content[0].text, /cannot reach sandfortd/);
  assert.equal(r[3].result.isError, true);
  assert.match(r[3].result.content[0].text, /image or snapshot, not both/);
  assert.equal(r[4].error.code, -32602);
  assert.match(r[4].error.message, /missing required argument 'name'/);
  assert.match(r[5].error.message, /'name' must match/);
  assert.match(r[6].error.message, /unknown argument 'keep'/);
  assert.equal(r[7].result.isError, true);
  assert.match(r[7].result.content[0].text, /cannot reach sandfortd/);
});

test('JSON-RPC errors: parse error, invalid request, unknown method, unknown tool, bad params', async () => {
  const { responses } = await converse([
    init(1, '2025-06-18'),
    'this is not json',
    { id: 2, method: 'ping' },
    { jsonrpc: '2.0', id: 3, method: 'resources/list' },
    { jsonrpc: '2.0', id: 4, method: 'tools/call', params: { name: 'no_such_tool', arguments: {} } },
    { jsonrpc: '2.0', id: 5, method: 'tools/call', params: { arguments: {} } },
    { jsonrpc: '2.0', id: 6, method: 'tools/call', params: { name: 'run_command', arguments: 'ls' } },
    { jsonrpc: '2.0', id: 7, method: 'ping' },
    { jsonrpc: '2.0', method: 'notifications/unknown' },
  ]);
  const parse = responses.find((r) => r.error && r.error.code === -32700);
  assert.ok(parse && parse.id === null);
  const r = byId(responses);
  assert.equal(r[2].error.code, -32600);
  assert.equal(r[3].error.code, -32601);
  assert.equal(r[4].error.code, -32602);
  assert.match(r[4].error.message, /Unknown tool: no_such_tool/);
  assert.equal(r[5].error.code, -32602);
  assert.equal(r[6].error.code, -32602);
  assert.deepEqual(r[7].result, {});
});

test('a batch is answered as a batch', async () => {
  const { responses } = await converse([
    [init(1, '2025-03-26'), { jsonrpc: '2.0', id: 2, method: 'ping' }, { jsonrpc: '2.0', method: 'notifications/initialized' }],
  ]);
  assert.equal(responses.length, 1);
  assert.ok(Array.isArray(responses[0]));
  assert.deepEqual(responses[0].map((r) => r.id), [1, 2]);
});

test('unreachable daemon and missing configuration are tool errors that say so; logs go to stderr', async () => {
  let out = await converse([
    init(1, '2025-06-18'),
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_sandboxes', arguments: {} } },
  ]);
  let r = byId(out.responses)[2].result;
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /cannot reach sandfortd at http:\/\/127\.0\.0\.1:9/);
  assert.match(out.stderr, /sandfort-mcp: /);
  // Every stdout line was JSON (converse parsed them all) and nothing else was written there.
  assert.ok(!out.stdout.includes('sandfort-mcp:'));

  out = await converse([
    init(1, '2025-06-18'),
    { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_sandboxes', arguments: {} } },
  ], {});
  r = byId(out.responses)[2].result;
  assert.equal(r.isError, true);
  assert.match(r.content[0].text, /SANDFORT_BASE_URL is not set/);
});

test('tool calls run beside the reader: ping is answered first; a cancelled call is not answered', async () => {
  const http = await import('node:http');
  const seen = [];
  const fake = http.createServer((req, res) => {
    seen.push({ method: req.method, url: req.url, auth: req.headers.authorization });
    setTimeout(() => {
      res.writeHead(200, { 'Content-Type': 'application/json' });
      res.end(JSON.stringify({ items: [], next_cursor: null }));
    }, 400);
  });
  await new Promise((r) => fake.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${fake.address().port}`;
  try {
    const { responses } = await converse([
      init(1, '2025-06-18'),
      { jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'list_sandboxes', arguments: { state: 'started', limit: 5 } } },
      { jsonrpc: '2.0', id: 3, method: 'tools/call', params: { name: 'list_sandboxes', arguments: {} } },
      { jsonrpc: '2.0', method: 'notifications/cancelled', params: { requestId: 3, reason: 'test' } },
      { jsonrpc: '2.0', id: 4, method: 'ping' },
    ], { SANDFORT_BASE_URL: url, SANDFORT_API_KEY: 'sfk_fake' });
    assert.deepEqual(responses.map((r) => r.id), [1, 4, 2]);
    assert.equal(responses[2].result.isError, false);
    assert.deepEqual(responses[2].result.structuredContent, { sandboxes: [], next_cursor: null });
    assert.equal(seen.length, 2);
    assert.ok(seen.some((s) => s.url === '/v1/sandboxes?state=started&limit=5'));
    assert.ok(seen.every((s) => s.method === 'GET' && s.auth === 'Bearer sfk_fake'));
  } finally {
    fake.close();
  }
});
