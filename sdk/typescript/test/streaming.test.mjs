// Server-sent events: output as it is produced, then exactly one exit event.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { SandfortError } from "../dist/esm/index.js";
import { sandbox } from "../testlib/live.mjs";

let sbx;
before(async () => {
  sbx = await sandbox();
});

test("commands.stream yields output before the command ends, keeps \\r, ends with exit", async () => {
  const t0 = Date.now();
  const events = [];
  let firstAt = 0;
  for await (const e of sbx.commands.stream("echo first; sleep 1; printf 'a\\rb'; echo err >&2; exit 3")) {
    if (!firstAt) firstAt = Date.now();
    events.push(e);
  }
  const end = Date.now();
  assert.deepEqual(events[0], { type: "stdout", data: "first\n" });
  assert.ok(end - firstAt > 500, "the first event must arrive before the command ends");
  assert.ok(firstAt - t0 < 900);
  const stdout = events.filter((e) => e.type === "stdout").map((e) => e.data).join("");
  assert.equal(stdout, "first\na\rb");
  assert.ok(events.some((e) => e.type === "stderr" && e.data === "err\n"));
  const last = events.at(-1);
  assert.equal(last.type, "exit");
  assert.equal(last.exitCode, 3);
  assert.equal(last.timedOut, false);
  assert.equal(events.filter((e) => e.type === "exit").length, 1);
});

test("run with onStdout/onStderr streams and still returns the whole result", async () => {
  const out = [];
  const err = [];
  const r = await sbx.commands.run("for i in 1 2 3; do echo $i; sleep 0.2; done; echo bad >&2; exit 5", {
    onStdout: (c) => out.push(c),
    onStderr: (c) => err.push(c),
  });
  assert.equal(r.exitCode, 5);
  assert.equal(r.stdout, "1\n2\n3\n");
  assert.equal(out.join(""), "1\n2\n3\n");
  assert.ok(out.length >= 2);
  assert.equal(err.join(""), "bad\n");
});

test("codeRun streams too", async () => {
  const seen = [];
  const r = await sbx.codeRun("python", "import time\nprint(21 * 2, flush=True)\ntime.sleep(0.2)\nprint('done')", {
    onStdout: (c) => seen.push(c),
  });
  assert.equal(r.exitCode, 0);
  assert.equal(r.stdout, "42\ndone\n");
  const events = [];
  for await (const e of sbx.codeStream("bash", "echo $1", { argv: ["x"] })) events.push(e);
  assert.deepEqual(events[0], { type: "stdout", data: "x\n" });
  assert.equal(events.at(-1).exitCode, 0);
});

test("an error before any output is a SandfortError, not an event", async () => {
  const gen = sbx.commands.stream("true", { cwd: "/does/not/exist" });
  await assert.rejects(gen.next(), (e) => e instanceof SandfortError && e.status === 400);
});

test("breaking out of a stream ends the command", async () => {
  for await (const e of sbx.commands.stream("echo $$ > /tmp/streamed.pid; echo go; exec sleep 300")) {
    if (e.type === "stdout" && e.data.includes("go")) break;
  }
  const pid = (await sbx.commands.run("cat /tmp/streamed.pid")).stdout.trim();
  const deadline = Date.now() + 10000;
  let state = "";
  while (Date.now() < deadline) {
    state = (await sbx.commands.run(`kill -0 ${pid} 2>/dev/null && echo alive || echo gone`)).stdout.trim();
    if (state === "gone") break;
    await new Promise((r) => setTimeout(r, 200));
  }
  assert.equal(state, "gone");
});

test("a streamed command that cannot start says why on stderr, as the whole answer does", async () => {
  const err = [];
  const r = await sbx.commands.run(["sfa-no-such-program"], { onStderr: (c) => err.push(c) });
  assert.equal(r.exitCode, 127);
  assert.equal(err.join(""), "sandfort-agent: sfa-no-such-program: command not found\n");
  assert.equal(r.stderr, err.join(""));
  const whole = await sbx.commands.run(["sfa-no-such-program"]);
  assert.equal(whole.stderr, r.stderr);
  const events = [];
  for await (const e of sbx.commands.stream(["sfa-no-such-program"])) events.push(e);
  assert.deepEqual(events.map((e) => e.type), ["stderr", "exit"]);
});
