// Background commands: start, list, logs, follow, stdin, kill.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { SandfortError } from "../dist/esm/index.js";
import { sandbox, until } from "../testlib/live.mjs";

let sbx;
before(async () => {
  sbx = await sandbox();
});

test("start, wait with output, exit code as a value", async () => {
  const h = await sbx.commands.run("echo hi; sleep 0.5; echo bye >&2; exit 4", { background: true });
  assert.match(h.id, /^cmd-/);
  assert.equal(typeof h.pid, "number");
  assert.equal(h.info.state, "running");
  const seen = [];
  const r = await h.wait({ onStdout: (c) => seen.push(c) });
  assert.equal(r.exitCode, 4);
  assert.equal(r.stdout, "hi\n");
  assert.equal(r.stderr, "bye\n");
  assert.deepEqual(seen, ["hi\n"]);
  const info = await h.refresh();
  assert.equal(info.state, "exited");
  assert.equal(info.exitCode, 4);
  assert.ok(info.endedAt);
  assert.deepEqual(await h.logs(), { stdout: "hi\n", stderr: "bye\n", droppedBytes: 0 });
});

test("logs while running, list, kill", async () => {
  const h = await sbx.commands.start("i=0; while :; do echo tick $i; i=$((i+1)); sleep 0.1; done", { cwd: "/tmp" });
  await until(async () => (await h.logs()).stdout.includes("tick 2"), "three ticks");
  const listed = await sbx.commands.list();
  const mine = listed.find((c) => c.id === h.id);
  assert.equal(mine.state, "running");
  assert.match(mine.command, /tick/);
  await h.kill("TERM");
  const info = await until(async () => {
    const i = await h.refresh();
    return i.state === "exited" ? i : null;
  }, "the command to exit");
  assert.equal(info.exitCode, 128 + 15);
  await assert.rejects(h.kill(), (e) => e instanceof SandfortError && e.status === 409);
});

test("stdin reaches the command; eof closes it", async () => {
  const h = await sbx.commands.start("read line; echo got:$line; cat; echo end");
  await h.sendStdin("hello\n");
  await h.sendStdin(new TextEncoder().encode("bytes\n"));
  await h.closeStdin();
  const r = await h.wait();
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "got:hello\nbytes\nend\n");
});

test("connect to a command by id and follow its logs as events", async () => {
  const started = await sbx.commands.start("echo a; sleep 0.3; echo b; exit 2", { env: { X: "1" } });
  const h = await sbx.commands.connect(started.id);
  assert.equal(h.id, started.id);
  const events = [];
  for await (const e of h.streamLogs()) events.push(e);
  assert.equal(events.filter((e) => e.type === "stdout").map((e) => e.data).join(""), "a\nb\n");
  assert.deepEqual(events.at(-1).type, "exit");
  assert.equal(events.at(-1).exitCode, 2);
  await assert.rejects(sbx.commands.get("cmd-0000000000000000"), { status: 404 });
});
