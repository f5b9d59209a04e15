// Persistent shells: cwd, exported variables and functions persist; exit restarts the shell.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { SandfortError } from "../dist/esm/index.js";
import { sandbox } from "../testlib/live.mjs";

let sbx;
before(async () => {
  sbx = await sandbox();
});

test("the default session keeps cwd, env and functions", async () => {
  const sh = sbx.sessions.get(); // "default"
  assert.equal((await sh.run("mkdir -p /tmp/w && cd /tmp/w")).exitCode, 0);
  assert.equal((await sh.run("pwd")).stdout, "/tmp/w\n");
  await sh.run("export T=abc; greet() { echo hello $1; }");
  assert.equal((await sh.run("echo $T")).stdout, "abc\n");
  assert.equal((await sbx.sessions.run("greet bob")).stdout, "hello bob\n");
});

test("exit ends the shell: exit code as a value, sessionRestarted, a fresh shell next", async () => {
  const sh = await sbx.sessions.create("restarts");
  await sh.run("cd /tmp && export X=1");
  const r = await sh.run("exit 3");
  assert.equal(r.exitCode, 3);
  assert.equal(r.sessionRestarted, true);
  const after = await sh.run("pwd; echo x${X}x");
  assert.equal(after.sessionRestarted, false);
  assert.equal(after.stdout.split("\n")[1], "xx");
});

test("named sessions are separate, listed and deletable", async () => {
  const a = await sbx.sessions.create("a");
  const b = await sbx.sessions.create("b");
  await a.run("cd /etc");
  await b.run("cd /usr");
  assert.equal((await a.run("pwd")).stdout, "/etc\n");
  assert.equal((await b.run("pwd")).stdout, "/usr\n");
  const names = (await sbx.sessions.list()).map((s) => s.name);
  assert.ok(names.includes("a") && names.includes("b"), names.join(","));
  const info = (await sbx.sessions.list()).find((s) => s.name === "a");
  assert.equal(typeof info.pid, "number");
  assert.equal(info.busy, false);
  await assert.rejects(sbx.sessions.create("a"), (e) => e instanceof SandfortError && e.status === 409 && e.code === "conflict");
  await b.delete();
  assert.ok(!(await sbx.sessions.list()).some((s) => s.name === "b"));
  await assert.rejects(sbx.sessions.delete("b"), { status: 404 });
});

test("a timed-out session command is killed and the shell keeps its state", async () => {
  const sh = await sbx.sessions.create("slow");
  await sh.run("cd /var");
  const r = await sh.run("sleep 30", { timeoutS: 1 });
  assert.equal(r.exitCode, 124);
  assert.equal(r.timedOut, true);
  assert.equal((await sh.run("pwd")).stdout, "/var\n");
});

test("session output can stream", async () => {
  const chunks = [];
  const r = await sbx.sessions.get("default").run("echo one; sleep 0.3; echo two", { onStdout: (c) => chunks.push(c) });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "one\ntwo\n");
  assert.ok(chunks.length >= 2, JSON.stringify(chunks));
});

test("a restarted shell is told: a process warning, and sessionRestarted on every path", async () => {
  const warnings = [];
  const onWarning = (w) => warnings.push(w);
  process.on("warning", onWarning);
  // 'warning' is emitted on the next tick: let it arrive before counting.
  const settle = () => new Promise((r) => setImmediate(r));
  try {
    const sh = await sbx.sessions.create("told");
    await sh.run("cd /tmp && export KEPT=1");
    assert.equal((await sh.run("exit 7")).sessionRestarted, true);
    await settle();
    assert.equal(warnings.length, 1);
    assert.equal(warnings[0].name, "SessionRestartedWarning");
    assert.equal(warnings[0].code, "SANDFORT_SESSION_RESTARTED");
    assert.match(warnings[0].message, new RegExp(`session "told" in ${sbx.id} was restarted`));
    // Streamed: with handlers (the result) and as events (the exit event).
    const streamed = await sh.run("exit 3", { onStdout: () => {} });
    assert.equal(streamed.exitCode, 3);
    assert.equal(streamed.sessionRestarted, true);
    const events = [];
    for await (const e of sh.stream("exit 4")) events.push(e);
    assert.equal(events.at(-1).sessionRestarted, true);
    await settle();
    assert.equal(warnings.length, 3);
    // A command that keeps the shell says nothing.
    const after = await sh.run("echo ${KEPT:-gone}", { onStdout: () => {} });
    assert.equal(after.sessionRestarted, false);
    assert.equal(after.stdout, "gone\n");
    await settle();
    assert.equal(warnings.length, 3);
  } finally {
    process.off("warning", onWarning);
  }
});
