// A command's output through process.Process/Start: every line once and in order, as produced;
// and what the SDK throws once a sandbox is killed or its timeout has passed.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Sandbox } from "e2b";
import { sandbox } from "../lib/live.mjs";

test("1,000 lines of output: each once, in order, in onStdout and in the result", async () => {
  const sbx = await sandbox();
  const chunks = [];
  const r = await sbx.commands.run("for i in $(seq 1 1000); do echo line $i; done", {
    onStdout: (data) => chunks.push(data),
  });
  const expected = Array.from({ length: 1000 }, (_, i) => `line ${i + 1}\n`).join("");
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, expected);
  assert.equal(chunks.join(""), expected);
  const lines = chunks.join("").split("\n").filter(Boolean);
  assert.equal(lines.length, 1000);
  lines.forEach((line, i) => assert.equal(line, `line ${i + 1}`));
});

test("a slow command's first line arrives before it exits", async () => {
  const sbx = await sandbox();
  let firstAt;
  const started = Date.now();
  const r = await sbx.commands.run("echo ready; sleep 3; echo done", {
    onStdout: () => {
      firstAt ??= Date.now() - started;
    },
  });
  const endedAt = Date.now() - started;
  assert.equal(r.stdout, "ready\ndone\n");
  assert.ok(firstAt !== undefined && endedAt - firstAt >= 2000, `first output at ${firstAt} ms, end at ${endedAt} ms`);
});

test("a killed sandbox: its calls fail, isRunning is false", async () => {
  const sbx = await Sandbox.create({ timeoutMs: 120_000 });
  await sbx.files.write("/tmp/x.txt", "x");
  await sbx.kill();
  assert.equal(await sbx.isRunning(), false);
  await assert.rejects(sbx.commands.run("true"));
  await assert.rejects(sbx.files.read("/tmp/x.txt"));
  await assert.rejects(sbx.files.write("/tmp/y.txt", "y"));
});

test("past its timeout a sandbox stops: isRunning false, commands fail", async () => {
  const sbx = await Sandbox.create({ timeoutMs: 2_000 });
  try {
    let running = true;
    for (let i = 0; i < 40 && running; i++) {
      await new Promise((r) => setTimeout(r, 500));
      running = await sbx.isRunning();
    }
    assert.equal(running, false, "stopped within ~5 s of its end");
    await assert.rejects(sbx.commands.run("true"));
    assert.notEqual((await Sandbox.getInfo(sbx.sandboxId)).state, "running");
  } finally {
    await sbx.kill().catch(() => {});
  }
});
