// The Sandfort MCP server (mcp_server/sandfort_mcp.py) driven by the official MCP TypeScript
// SDK client over stdio, against a live sandfortd. Run through tests/integration/with_daemon.py,
// which exports SANDFORT_BASE_URL and SANDFORT_API_KEY:
//
//   cd mcp_server/tests && npm ci
//   /usr/bin/python3 tests/integration/with_daemon.py -- node --test mcp_server/tests/
//
// The server is spawned exactly as docs/mcp.md configures it: command ".venv/bin/python",
// args ["mcp_server/sandfort_mcp.py"], from a directory holding a venv made by
// `/usr/bin/python3 -m venv .venv` (works offline) and a link to this repository's mcp_server/.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { EmptyResultSchema, McpError, ErrorCode } from '@modelcontextprotocol/sdk/types.js';

const here = path.dirname(fileURLToPath(import.meta.url));
const mcpDir = path.resolve(here, '..');
const BASE_URL = process.env.SANDFORT_BASE_URL;
const API_KEY = process.env.SANDFORT_API_KEY;
const EXPECTED_TOOLS = [
  'create_sandbox', 'create_snapshot', 'delete_sandbox', 'delete_snapshot', 'download_text_file',
  'get_preview_link', 'list_sandboxes', 'list_snapshots', 'read_command_log', 'run_code', 'run_command',
  'start_command', 'upload_text_file',
];

let workDir;
let client;
let transport;
let stderrText = '';
let sandboxId;
const transportErrors = [];

async function api(method, p, body) {
  const res = await fetch(BASE_URL + p, {
    method,
    headers: { Authorization: `Bearer ${API_KEY}`, 'Content-Type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : null };
}

function textOf(result) {
  return result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');
}

before(async () => {
  assert.ok(BASE_URL && API_KEY, 'SANDFORT_BASE_URL and SANDFORT_API_KEY must be set (run via with_daemon.py)');
  workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'sandfort-mcp-test-'));
  execFileSync('/usr/bin/python3', ['-m', 'venv', '.venv'], { cwd: workDir, stdio: 'inherit' });
  fs.symlinkSync(mcpDir, path.join(workDir, 'mcp_server'));
  transport = new StdioClientTransport({
    command: '.venv/bin/python',
    args: ['mcp_server/sandfort_mcp.py'],
    cwd: workDir,
    env: { SANDFORT_BASE_URL: BASE_URL, SANDFORT_API_KEY: API_KEY },
    stderr: 'pipe',
  });
  transport.stderr.on('data', (chunk) => { stderrText += chunk.toString(); });
  client = new Client({ name: 'sandfort-mcp-test', version: '1.0.0' });
  client.onerror = (e) => transportErrors.push(String(e));
  await client.connect(transport); // initialize + notifications/initialized
});

after(async () => {
  if (client) await client.close();
  if (sandboxId) await api('DELETE', `/v1/sandboxes/${sandboxId}`).catch(() => {});
  if (workDir) fs.rmSync(workDir, { recursive: true, force: true });
  if (process.env.SANDFORT_MCP_TEST_VERBOSE) process.stderr.write(stderrText);
});

test('initialize: server info, tools capability, logs only on stderr', async () => {
  const info = client.getServerVersion();
  assert.equal(info.name, 'sandfort');
  assert.ok(info.version);
  assert.deepEqual(client.getServerCapabilities().tools, { listChanged: false });
  assert.match(client.getInstructions(), /create_sandbox/);
  // stderr is another pipe: its line may arrive after the answer on stdout that ended connect().
  const logged = /sandfort-mcp: initialize from sandfort-mcp-test/;
  for (const deadline = Date.now() + 5000; !logged.test(stderrText) && Date.now() < deadline;)
    await new Promise((resolve) => setTimeout(resolve, 20));
  assert.match(stderrText, logged);
});

test('tools/list: exactly the thirteen tools, each with an object inputSchema', async () => {
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), EXPECTED_TOOLS);
  for (const t of tools) {
    assert.equal(t.inputSchema.type, 'object', t.name);
    assert.ok(t.description && t.description.length > 40, `${t.name} has a description`);
    assert.equal(t.outputSchema?.type, 'object', `${t.name} has an outputSchema`);
  }
  const byName = Object.fromEntries(tools.map((t) => [t.name, t]));
  assert.deepEqual(byName.run_command.inputSchema.required, ['sandbox_id', 'command']);
  assert.deepEqual(byName.run_code.inputSchema.required, ['sandbox_id', 'code']);
  assert.deepEqual(byName.run_code.inputSchema.properties.language.enum, ['python', 'node', 'bash', 'sh']);
  assert.deepEqual(byName.upload_text_file.inputSchema.required, ['sandbox_id', 'path', 'content']);
  assert.deepEqual(byName.download_text_file.inputSchema.required, ['sandbox_id', 'path']);
  assert.deepEqual(byName.delete_sandbox.inputSchema.required, ['sandbox_id']);
  assert.deepEqual(byName.create_snapshot.inputSchema.required, ['sandbox_id', 'name']);
  assert.deepEqual(Object.keys(byName.create_snapshot.inputSchema.properties).sort(), ['name', 'sandbox_id']);
  assert.equal(byName.create_snapshot.inputSchema.additionalProperties, false);
  assert.equal(byName.create_sandbox.inputSchema.properties.snapshot.type, 'string');
  assert.deepEqual(byName.delete_snapshot.inputSchema.required, ['name']);
  assert.deepEqual(byName.list_snapshots.inputSchema.properties, {});
  assert.deepEqual(byName.get_preview_link.inputSchema.required, ['sandbox_id', 'port']);
  assert.deepEqual(byName.start_command.inputSchema.required, ['sandbox_id', 'command']);
  assert.deepEqual(byName.read_command_log.inputSchema.required, ['sandbox_id', 'command_id']);
  for (const name of ['list_snapshots', 'get_preview_link', 'read_command_log']) {
    assert.equal(byName[name].annotations.readOnlyHint, true, name);
  }
  assert.equal(byName.delete_snapshot.annotations.destructiveHint, true);
});

test('create_sandbox: a started sandbox of the default image', async () => {
  const r = await client.callTool({ name: 'create_sandbox', arguments: { labels: { suite: 'mcp' } } });
  assert.ok(!r.isError, textOf(r));
  assert.match(r.structuredContent.id, /^sbx-[0-9a-f]{16}$/);
  assert.equal(r.structuredContent.state, 'started');
  assert.equal(r.structuredContent.snapshot, 'sandfort/base:bookworm');
  assert.match(textOf(r), new RegExp(r.structuredContent.id));
  sandboxId = r.structuredContent.id;
});

test('run_command: a failing command is a normal result with its exit code', async () => {
  const r = await client.callTool({
    name: 'run_command',
    arguments: { sandbox_id: sandboxId, command: 'echo out; echo err >&2; exit 3' },
  });
  assert.ok(!r.isError, textOf(r));
  assert.equal(r.structuredContent.exit_code, 3);
  assert.equal(r.structuredContent.stdout, 'out\n');
  assert.equal(r.structuredContent.stderr, 'err\n');
  assert.equal(r.structuredContent.timed_out, false);
  assert.match(textOf(r), /exit_code: 3/);
  assert.match(textOf(r), /out/);
});

test('run_command: cwd, env and stdin are passed', async () => {
  const r = await client.callTool({
    name: 'run_command',
    arguments: { sandbox_id: sandboxId, command: 'pwd; echo "$GREETING"; cat', cwd: '/tmp',
      env: { GREETING: 'hi' }, stdin: 'from stdin' },
  });
  assert.ok(!r.isError, textOf(r));
  assert.equal(r.structuredContent.exit_code, 0);
  assert.equal(r.structuredContent.stdout, '/tmp\nhi\nfrom stdin');
});

test('run_code: python prints 42; node and bash run too', async () => {
  let r = await client.callTool({ name: 'run_code', arguments: { sandbox_id: sandboxId, language: 'python', code: 'print(6 * 7)' } });
  assert.ok(!r.isError, textOf(r));
  assert.equal(r.structuredContent.exit_code, 0);
  assert.equal(r.structuredContent.stdout, '42\n');
  r = await client.callTool({ name: 'run_code', arguments: { sandbox_id: sandboxId, language: 'node', code: 'console.log(process.argv[1])', argv: ['arg1'] } });
  assert.equal(r.structuredContent.stdout, 'arg1\n');
  r = await client.callTool({ name: 'run_code', arguments: { sandbox_id: sandboxId, language: 'bash', code: 'echo $((40+2)); exit 5' } });
  assert.equal(r.structuredContent.stdout, '42\n');
  assert.equal(r.structuredContent.exit_code, 5);
  r = await client.callTool({ name: 'run_code', arguments: { sandbox_id: sandboxId, code: 'raise SystemExit("boom")' } });
  assert.ok(!r.isError, 'a Python exception is a normal result');
  assert.equal(r.structuredContent.exit_code, 1);
  assert.match(r.structuredContent.stderr, /boom/);
});

test('upload_text_file / download_text_file: a UTF-8 round trip', async () => {
  const content = 'line one\nünïcödé ✓ 日本\n\ttabbed\n';
  let r = await client.callTool({
    name: 'upload_text_file',
    arguments: { sandbox_id: sandboxId, path: '/tmp/mcp/dir/hello.txt', content, mode: '0600' },
  });
  assert.ok(!r.isError, textOf(r));
  assert.equal(r.structuredContent.path, '/tmp/mcp/dir/hello.txt');
  assert.equal(r.structuredContent.size, Buffer.byteLength(content));
  r = await client.callTool({ name: 'download_text_file', arguments: { sandbox_id: sandboxId, path: '/tmp/mcp/dir/hello.txt' } });
  assert.ok(!r.isError, textOf(r));
  assert.equal(r.structuredContent.content, content);
  assert.equal(r.structuredContent.truncated, false);
  assert.equal(textOf(r), content);
  // The file is really there, with its mode.
  r = await client.callTool({ name: 'run_command', arguments: { sandbox_id: sandboxId, command: 'stat -c %a /tmp/mcp/dir/hello.txt; wc -l < /tmp/mcp/dir/hello.txt' } });
  assert.equal(r.structuredContent.stdout, '600\n3\n');
  // max_bytes cuts the text.
  r = await client.callTool({ name: 'download_text_file', arguments: { sandbox_id: sandboxId, path: '/tmp/mcp/dir/hello.txt', max_bytes: 4 } });
  assert.equal(r.structuredContent.content, 'line');
  assert.equal(r.structuredContent.truncated, true);
  // A missing file is a platform error carrying the API's message.
  r = await client.callTool({ name: 'download_text_file', arguments: { sandbox_id: sandboxId, path: '/tmp/nope.txt' } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /404 not_found/);
});

test('list_sandboxes: the new sandbox is listed', async () => {
  const r = await client.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.ok(!r.isError, textOf(r));
  const found = r.structuredContent.sandboxes.find((s) => s.id === sandboxId);
  assert.ok(found, textOf(r));
  assert.equal(found.state, 'started');
  assert.match(textOf(r), new RegExp(sandboxId));
  const filtered = await client.callTool({ name: 'list_sandboxes', arguments: { label: 'suite:mcp', state: 'started' } });
  assert.deepEqual(filtered.structuredContent.sandboxes.map((s) => s.id), [sandboxId]);
});

test('platform error: run_command on an unknown sandbox is isError with the API message, code and request id', async () => {
  const unknown = 'sbx-0000000000000000';
  const direct = await api('POST', `/v1/sandboxes/${unknown}/process/exec`, { command: 'true' });
  assert.equal(direct.status, 404);
  const r = await client.callTool({ name: 'run_command', arguments: { sandbox_id: unknown, command: 'true' } });
  assert.equal(r.isError, true);
  const text = textOf(r);
  assert.ok(text.includes(direct.body.error.message), `${text} includes the API's message "${direct.body.error.message}"`);
  assert.match(text, /Sandfort API error 404 not_found: /);
  assert.match(text, /\(request_id req-[0-9a-f]{16}\)/);
  assert.equal(r.structuredContent, undefined);
});

test('JSON-RPC errors: unknown method, unknown tool; bad arguments are a tool error', async () => {
  await assert.rejects(client.request({ method: 'no/such/method', params: {} }, EmptyResultSchema),
    (e) => e instanceof McpError && e.code === ErrorCode.MethodNotFound);
  await assert.rejects(client.callTool({ name: 'no_such_tool', arguments: { sandbox_id: sandboxId } }),
    (e) => e instanceof McpError && e.code === ErrorCode.InvalidParams && /Unknown tool/.test(e.message));
  // The SDK negotiates 2025-11-25, where input validation errors are tool execution errors.
  const r = await client.callTool({ name: 'run_command', arguments: { sandbox_id: sandboxId } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /missing required argument 'command'/);
  const pong = await client.ping();
  assert.deepEqual(pong, {});
});

test('delete_sandbox: deletes; a second delete is a platform error', async () => {
  let r = await client.callTool({ name: 'delete_sandbox', arguments: { sandbox_id: sandboxId } });
  assert.ok(!r.isError, textOf(r));
  assert.equal(r.structuredContent.deleted, sandboxId);
  const gone = await api('GET', `/v1/sandboxes/${sandboxId}`);
  assert.equal(gone.status, 404);
  r = await client.callTool({ name: 'list_sandboxes', arguments: {} });
  assert.ok(!r.structuredContent.sandboxes.some((s) => s.id === sandboxId));
  r = await client.callTool({ name: 'delete_sandbox', arguments: { sandbox_id: sandboxId } });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /404 not_found/);
  sandboxId = undefined;
});

test('create_sandbox: volumes are mounted and listed; a volume outlives the sandbox', async () => {
  const schema = (await client.listTools()).tools.find((t) => t.name === 'create_sandbox').inputSchema;
  assert.deepEqual(schema.properties.volumes.items.required, ['name', 'mount_path']);
  const name = `mcp-vol-${Date.now().toString(16)}`;
  assert.equal((await api('POST', '/v1/volumes', { name })).status, 201);
  const ids = [];
  try {
    for (const [mount, command] of [[{ name, mount_path: '/data' }, 'echo kept > /data/note'],
                                    [{ name, mount_path: '/data', read_only: true }, 'cat /data/note']]) {
      let r = await client.callTool({ name: 'create_sandbox', arguments: { volumes: [mount] } });
      assert.ok(!r.isError, textOf(r));
      ids.push(r.structuredContent.id);
      assert.deepEqual(r.structuredContent.volumes, [{ read_only: false, ...mount }]);
      r = await client.callTool({ name: 'run_command', arguments: { sandbox_id: ids.at(-1), command } });
      assert.equal(r.structuredContent.exit_code, 0, textOf(r));
      if (mount.read_only) assert.equal(r.structuredContent.stdout, 'kept\n');
      await client.callTool({ name: 'delete_sandbox', arguments: { sandbox_id: ids.at(-1) } });
    }
    const bad = await client.callTool({ name: 'create_sandbox', arguments: { volumes: [{ name }] } });
    assert.equal(bad.isError, true);
    assert.match(textOf(bad), /mount_path/);
  } finally {
    for (const id of ids) await api('DELETE', `/v1/sandboxes/${id}`).catch(() => {});
    assert.equal((await api('DELETE', `/v1/volumes/${name}`)).status, 204);
  }
});

test('create_snapshot: a sandbox created from the snapshot has the file; in use it cannot be deleted', async () => {
  const name = `mcp-snap-${Date.now().toString(16)}`;
  const ids = [];
  try {
    let r = await client.callTool({ name: 'create_sandbox', arguments: {} });
    assert.ok(!r.isError, textOf(r));
    const src = r.structuredContent.id;
    ids.push(src);
    r = await client.callTool({ name: 'upload_text_file', arguments: { sandbox_id: src, path: '/root/note.txt', content: 'kept\n' } });
    assert.ok(!r.isError, textOf(r));

    r = await client.callTool({ name: 'create_snapshot', arguments: { sandbox_id: src, name } });
    assert.ok(!r.isError, textOf(r));
    assert.match(r.structuredContent.id, /^snap-/);
    assert.equal(r.structuredContent.name, name);
    assert.equal(r.structuredContent.state, 'ready');
    assert.equal(r.structuredContent.source_sandbox_id, src);
    assert.ok(r.structuredContent.size_bytes > 0);
    assert.match(textOf(r), new RegExp(`snapshot=${name}`));
    assert.equal((await api('GET', `/v1/snapshots/${name}`)).body.id, r.structuredContent.id);
    r = await client.callTool({ name: 'create_snapshot', arguments: { sandbox_id: src, name } });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /409 conflict/);
    await client.callTool({ name: 'delete_sandbox', arguments: { sandbox_id: src } });

    r = await client.callTool({ name: 'create_sandbox', arguments: { snapshot: name } });
    assert.ok(!r.isError, textOf(r));
    assert.equal(r.structuredContent.snapshot, name);
    const copy = r.structuredContent.id;
    ids.push(copy);
    r = await client.callTool({ name: 'download_text_file', arguments: { sandbox_id: copy, path: '/root/note.txt' } });
    assert.ok(!r.isError, textOf(r));
    assert.equal(r.structuredContent.content, 'kept\n');
    assert.equal((await api('DELETE', `/v1/snapshots/${name}`)).status, 409);

    r = await client.callTool({ name: 'create_snapshot', arguments: { sandbox_id: 'sbx-0000000000000000', name: `${name}-x` } });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /404 not_found/);
  } finally {
    for (const id of ids) await api('DELETE', `/v1/sandboxes/${id}`).catch(() => {});
  }
  assert.equal((await api('DELETE', `/v1/snapshots/${name}`)).status, 204);
  assert.equal((await api('GET', `/v1/snapshots/${name}`)).status, 404);
});

// Polls a tool until check(result) holds: a deadline for something that happens in the sandbox,
// not an assertion about how long it takes.
async function callUntil(name, args, check, what) {
  const deadline = Date.now() + 60000;
  for (;;) {
    const r = await client.callTool({ name, arguments: args });
    assert.ok(!r.isError, textOf(r));
    if (check(r.structuredContent)) return r;
    assert.ok(Date.now() < deadline, `${what}: ${textOf(r)}`);
    await new Promise((resolve) => setTimeout(resolve, 200));
  }
}

test('list_snapshots / delete_snapshot: a snapshot is listed, deleted, then gone', async () => {
  const name = `mcp-ls-${Date.now().toString(16)}`;
  let r = await client.callTool({ name: 'create_sandbox', arguments: {} });
  assert.ok(!r.isError, textOf(r));
  const src = r.structuredContent.id;
  try {
    r = await client.callTool({ name: 'create_snapshot', arguments: { sandbox_id: src, name } });
    assert.ok(!r.isError, textOf(r));
    const id = r.structuredContent.id;
    r = await client.callTool({ name: 'list_snapshots', arguments: {} });
    assert.ok(!r.isError, textOf(r));
    const listed = r.structuredContent.snapshots.find((s) => s.name === name);
    assert.equal(listed?.id, id);
    assert.equal(listed.source_sandbox_id, src);
    assert.match(textOf(r), new RegExp(`- ${name}  id=${id}`));
    r = await client.callTool({ name: 'delete_snapshot', arguments: { name } });
    assert.ok(!r.isError, textOf(r));
    assert.deepEqual(r.structuredContent, { deleted: name });
    assert.equal((await api('GET', `/v1/snapshots/${name}`)).status, 404);
    r = await client.callTool({ name: 'list_snapshots', arguments: {} });
    assert.ok(!r.structuredContent.snapshots.some((s) => s.name === name));
    r = await client.callTool({ name: 'delete_snapshot', arguments: { name } });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /404 not_found/);
  } finally {
    await api('DELETE', `/v1/sandboxes/${src}`).catch(() => {});
    await api('DELETE', `/v1/snapshots/${name}`).catch(() => {});
  }
});

test('start_command / read_command_log: a background command runs on; its output and exit code are read', async () => {
  let r = await client.callTool({ name: 'create_sandbox', arguments: {} });
  assert.ok(!r.isError, textOf(r));
  const sbx = r.structuredContent.id;
  try {
    r = await client.callTool({
      name: 'start_command',
      arguments: { sandbox_id: sbx, command: 'echo "out-$((6*7)) $GREETING"; echo err >&2; pwd; read line; exit 3',
                   cwd: '/tmp', env: { GREETING: 'hi' } },
    });
    assert.ok(!r.isError, textOf(r));
    const cmd = r.structuredContent.id;
    assert.match(cmd, /^cmd-/);
    assert.equal(r.structuredContent.state, 'running');
    assert.match(textOf(r), /read_command_log/);
    // Still running (it waits for stdin) after the output is there.
    r = await callUntil('read_command_log', { sandbox_id: sbx, command_id: cmd },
                        (s) => s.stdout.includes('/tmp'), 'its output');
    assert.equal(r.structuredContent.state, 'running');
    assert.equal(r.structuredContent.stdout, 'out-42 hi\n/tmp\n');
    assert.equal(r.structuredContent.stderr, 'err\n');
    assert.match(textOf(r), /running \(call again later/);
    assert.equal((await api('POST', `/v1/sandboxes/${sbx}/commands/${cmd}/stdin?eof=true`)).status, 204);
    r = await callUntil('read_command_log', { sandbox_id: sbx, command_id: cmd }, (s) => s.state === 'exited', 'its exit');
    assert.equal(r.structuredContent.exit_code, 3);
    assert.equal(r.structuredContent.truncated, false);
    assert.match(textOf(r), /exited with exit_code 3/);

    r = await client.callTool({ name: 'start_command', arguments: { sandbox_id: sbx, command: 'seq 1000' } });
    const long = r.structuredContent.id;
    r = await callUntil('read_command_log', { sandbox_id: sbx, command_id: long, max_chars: 9 },
                        (s) => s.state === 'exited', 'seq');
    assert.equal(r.structuredContent.stdout, '999\n1000\n'); // the newest part
    assert.equal(r.structuredContent.truncated, true);

    r = await client.callTool({ name: 'read_command_log', arguments: { sandbox_id: sbx, command_id: 'cmd-nosuch' } });
    assert.equal(r.isError, true);
    assert.match(textOf(r), /404 not_found/);
  } finally {
    await api('DELETE', `/v1/sandboxes/${sbx}`).catch(() => {});
  }
});

test('get_preview_link: says nothing listens yet, then gives a link that reaches the server', async () => {
  let r = await client.callTool({ name: 'create_sandbox', arguments: {} });
  assert.ok(!r.isError, textOf(r));
  const sbx = r.structuredContent.id;
  try {
    r = await client.callTool({ name: 'get_preview_link', arguments: { sandbox_id: sbx, port: 8080 } });
    assert.ok(!r.isError, textOf(r));
    assert.equal(r.structuredContent.listening, false);
    assert.match(textOf(r), /Nothing listens on port 8080/);
    const served = await api('GET', `/v1/sandboxes/${sbx}/preview/8080`);
    assert.equal(r.structuredContent.url, served.body.url);
    assert.ok(r.structuredContent.token);
    assert.ok(r.structuredContent.link.startsWith(served.body.url) && r.structuredContent.link.includes(r.structuredContent.token));

    r = await client.callTool({ name: 'start_command', arguments: { sandbox_id: sbx, command: 'mkdir -p /tmp/site && cd /tmp/site && echo preview-ok > index.html && exec python3 -m http.server 8080' } });
    assert.ok(!r.isError, textOf(r));
    r = await callUntil('get_preview_link', { sandbox_id: sbx, port: 8080 }, (s) => s.listening, 'the server');
    assert.equal(r.structuredContent.previewable, true);
    assert.match(textOf(r), /X-Sandfort-Preview-Token/);
    // The link's host routes to the sandbox's port on the preview listener, with the token.
    const url = new URL(r.structuredContent.url);
    // (fetch refuses to set Host; node:http does.)
    const viaHttp = await new Promise((resolve, reject) => {
      const req = http.request({ host: '127.0.0.1', port: Number(process.env.SANDFORT_PREVIEW_PORT), path: '/index.html',
                                 headers: { Host: url.host, 'X-Sandfort-Preview-Token': r.structuredContent.token } },
      (resp) => {
        let text = '';
        resp.on('data', (c) => { text += c; });
        resp.on('end', () => resolve({ status: resp.statusCode, text }));
      });
      req.on('error', reject);
      req.end();
    });
    assert.equal(viaHttp.status, 200, viaHttp.text);
    assert.equal(viaHttp.text, 'preview-ok\n');
  } finally {
    await api('DELETE', `/v1/sandboxes/${sbx}`).catch(() => {});
  }
});

test('stdout carried only protocol: nothing but JSON-RPC reached the client', () => {
  // The SDK's ReadBuffer rejects any non-JSON line on stdout with a transport error; none came.
  assert.equal(transportErrors.length, 0, transportErrors.join('\n'));
});
