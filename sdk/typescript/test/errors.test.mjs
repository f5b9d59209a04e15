// API errors are typed SandfortErrors; a command's exit status is a value.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { SandfortClient, SandfortError } from "../dist/esm/index.js";
import { BASE_URL, client, sandbox } from "../testlib/live.mjs";

let sbx;
before(async () => {
  sbx = await sandbox();
});

test("unknown sandbox: 404 not_found with a request id", async () => {
  const err = await client.getSandbox("sbx-0000000000000000").catch((e) => e);
  assert.ok(err instanceof SandfortError);
  assert.ok(err instanceof Error);
  assert.equal(err.name, "SandfortError");
  assert.equal(err.status, 404);
  assert.equal(err.code, "not_found");
  assert.match(err.requestId, /^req-[0-9a-f]{16}$/);
  assert.equal(err.body.error.request_id, err.requestId);
});

test("invalid argument: 400 naming the field", async () => {
  const err = await client.createSandbox({ name: "sbx-not-allowed" }).catch((e) => e);
  assert.ok(err instanceof SandfortError);
  assert.equal(err.status, 400);
  assert.equal(err.code, "invalid_argument");
  assert.match(err.message, /name/);
});

test("a bad key: 401 unauthenticated", async () => {
  const bad = new SandfortClient({ baseUrl: BASE_URL, apiKey: "sfk_0000000000000000000000000000dead" });
  const err = await bad.listSandboxes().catch((e) => e);
  assert.ok(err instanceof SandfortError);
  assert.equal(err.status, 401);
  assert.equal(err.code, "unauthenticated");
});

test("an unreachable daemon: connection_error, status 0", async () => {
  const nowhere = new SandfortClient({ baseUrl: "http://127.0.0.1:1", apiKey: "sfk_x" });
  const err = await nowhere.whoami().catch((e) => e);
  assert.ok(err instanceof SandfortError);
  assert.equal(err.code, "connection_error");
  assert.equal(err.status, 0);
  assert.equal(err.requestId, null);
});

test("file errors: missing path 404, relative path 400, directory download 400", async () => {
  await assert.rejects(sbx.files.read("/nope/missing.txt"), { name: "SandfortError", status: 404, code: "not_found" });
  await assert.rejects(sbx.files.read("relative.txt"), { status: 400 });
  await assert.rejects(sbx.files.read("/etc"), { status: 400 });
  assert.equal(await sbx.files.exists("/nope/missing.txt"), false);
  assert.equal(await sbx.files.exists("/etc/passwd"), true);
});

test("exit codes are values, not exceptions", async () => {
  const r = await sbx.commands.run("echo build; exit 7");
  assert.equal(r.exitCode, 7);
  assert.equal(r.stdout, "build\n");
  assert.equal(r.timedOut, false);
  assert.equal((await sbx.commands.run("no-such-binary-xyz")).exitCode, 127);
  assert.equal((await sbx.commands.run(["sh", "-c", "kill -TERM $$"])).exitCode, 128 + 15);
  const c = await sbx.codeRun("python", "import sys; sys.exit(3)");
  assert.equal(c.exitCode, 3);
});

test("timeout: exit code 124 and timedOut", async () => {
  const r = await sbx.commands.run("echo before; sleep 30", { timeoutS: 1 });
  assert.equal(r.exitCode, 124);
  assert.equal(r.timedOut, true);
  assert.equal(r.stdout, "before\n");
});

test("stdin, env, cwd and binary output of one-shot commands", async () => {
  const r = await sbx.commands.run("cat; echo $GREETING; pwd", { stdin: "in\n", env: { GREETING: "hi" }, cwd: "/tmp" });
  assert.equal(r.stdout, "in\nhi\n/tmp\n");
  const b = await sbx.commands.run(["printf", "\\377\\000A"], { binary: true });
  assert.deepEqual([...b.stdoutBytes], [0xff, 0x00, 0x41]);
  assert.equal(b.stdout, "\ufffd\u0000A");
});

test("host_full: a 503 the caller can tell from Docker being down", async () => {
  const http = await import("node:http");
  const fake = http.createServer((req, res) => {
    res.writeHead(503, { "Content-Type": "application/json", "X-Request-Id": "req-00000000000000ab" });
    res.end(JSON.stringify({ error: { code: "host_full", message: "host full: this host cannot hold 1024 MiB more", request_id: "req-00000000000000ab" } }));
  });
  await new Promise((r) => fake.listen(0, "127.0.0.1", r));
  try {
    const c = new SandfortClient({ baseUrl: `http://127.0.0.1:${fake.address().port}`, apiKey: "sfk_x" });
    const err = await c.createSandbox({}).catch((e) => e);
    assert.ok(err instanceof SandfortError);
    assert.equal(err.status, 503);
    assert.equal(err.code, "host_full");
    assert.equal(err.isHostFull, true);
    assert.equal(err.requestId, "req-00000000000000ab");
  } finally {
    fake.close();
  }
});
