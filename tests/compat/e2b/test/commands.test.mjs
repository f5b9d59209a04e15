// process.Process/Start through commands.run: output streamed as produced, the exit code, and
// CommandExitError on a non-zero exit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CommandExitError } from "e2b";
import { sandbox } from "../lib/live.mjs";

test("commands.run: stdout, stderr, exit code, envs and cwd", async () => {
  const sbx = await sandbox({ envs: { FROM_CREATE: "made" } });
  const r = await sbx.commands.run("echo out; echo err >&2; echo $FROM_CREATE $EXTRA; pwd", {
    envs: { EXTRA: "given" },
    cwd: "/tmp",
  });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "out\nmade given\n/tmp\n");
  assert.equal(r.stderr, "err\n");
});

test("commands.run: a non-zero exit is CommandExitError with its output", async () => {
  const sbx = await sandbox();
  const err = await sbx.commands.run("echo partial; exit 3").catch((e) => e);
  assert.ok(err instanceof CommandExitError, String(err));
  assert.equal(err.exitCode, 3);
  assert.equal(err.stdout, "partial\n");
});

test("commands.run: onStdout sees output before the command ends", async () => {
  const sbx = await sandbox();
  const seen = [];
  const started = Date.now();
  const r = await sbx.commands.run("echo first; sleep 2; echo second", {
    onStdout: (line) => seen.push([line, Date.now() - started]),
  });
  assert.equal(r.stdout, "first\nsecond\n");
  assert.equal(seen.length, 2, JSON.stringify(seen));
  assert.ok(seen[1][1] - seen[0][1] >= 1500, `streamed as produced: ${JSON.stringify(seen)}`);
});

test("background: list, sendStdin, wait; connect from elsewhere; kill", async () => {
  const sbx = await sandbox();
  const cat = await sbx.commands.run("cat", { background: true, stdin: true });
  assert.ok(cat.pid > 0);
  const listed = await sbx.commands.list();
  assert.ok(listed.some((p) => p.pid === cat.pid), JSON.stringify(listed));
  await sbx.commands.sendStdin(cat.pid, "fed in\n");
  await sbx.commands.closeStdin(cat.pid);
  const done = await cat.wait();
  assert.equal(done.exitCode, 0);
  assert.equal(done.stdout, "fed in\n");

  const sleeper = await sbx.commands.run("sleep 30", { background: true });
  await sleeper.disconnect();
  const again = await sbx.commands.connect(sleeper.pid);
  assert.equal(again.pid, sleeper.pid);
  assert.equal(await sbx.commands.kill(sleeper.pid), true);
  const ended = await again.wait().catch((e) => e);
  assert.ok(ended instanceof CommandExitError, String(ended));
  assert.equal((await sbx.commands.list()).some((p) => p.pid === sleeper.pid), false);
  assert.equal(await sbx.commands.kill(sleeper.pid), false, "gone: not found");
});
