// sbx.code against the live daemon: stateful contexts in the default image (python3, node, bash).
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { SandfortError } from "../dist/esm/index.js";
import { sandbox } from "../testlib/live.mjs";

let sbx;
before(async () => {
  sbx = await sandbox();
});

test("a python run keeps state; the last expression is the main result; output streams to the handlers", async () => {
  const first = await sbx.code.run("x = 1");
  assert.equal(first.results.length, 0);
  assert.equal(first.error, undefined);
  const seen = [];
  const second = await sbx.code.run("print('hello')\nx + 1", { onStdout: (t) => seen.push(t) });
  assert.equal(second.text, "2");
  assert.equal(second.logs.stdout.join(""), "hello\n");
  assert.equal(seen.join(""), "hello\n");
  assert.equal(second.executionCount, first.executionCount + 1);
  assert.equal(second.contextId, first.contextId);
});

test("display() gives several results, an exception is execution.error, a timeout interrupts", async () => {
  const shown = await sbx.code.run("display(1, 'a')");
  assert.deepEqual(shown.results.map((r) => [r.text, r.isMainResult]), [["1", false], ["'a'", false]]);
  const failed = await sbx.code.run("raise ValueError('bad')");
  assert.equal(failed.error.name, "ValueError");
  assert.equal(failed.error.value, "bad");
  assert.match(failed.error.traceback, /ValueError: bad/);
  const slow = await sbx.code.run("import time\ntime.sleep(30)", { timeoutS: 1 });
  assert.equal(slow.error.name, "TimeoutError");
  assert.equal(slow.timedOut, true);
  assert.equal((await sbx.code.run("x")).text, "1");
});

test("contexts: js and bash with their own cwd, iteration, restart and delete", async () => {
  const js = await sbx.code.createContext({ language: "js", cwd: "/tmp" });
  assert.equal(js.language, "js");
  assert.equal(js.cwd, "/tmp");
  await sbx.code.run("var n = 40", { context: js });
  const types = [];
  for await (const ev of sbx.code.runStream("console.log(process.cwd()); n + 2", { context: js })) types.push(ev.type);
  assert.deepEqual(types, ["stdout", "result", "end"]);
  assert.equal((await sbx.code.run("n + 2", { context: js.id })).text, "42");

  await sbx.code.run("cd /tmp && V=7", { language: "bash" });
  assert.equal((await sbx.code.run("echo $PWD $V", { language: "bash" })).logs.stdout.join(""), "/tmp 7\n");

  const ids = (await sbx.code.listContexts()).map((c) => c.id);
  assert.ok(ids.includes(js.id));
  const fresh = await sbx.code.restartContext(js);
  assert.equal(fresh.executionCount, 0);
  assert.equal((await sbx.code.run("typeof n", { context: js })).text, "'undefined'");
  await sbx.code.deleteContext(js);
  await assert.rejects(sbx.code.getContext(js), (e) => e instanceof SandfortError && e.status === 404);
  await assert.rejects(sbx.code.run("1", { context: js }), (e) => e instanceof SandfortError && e.status === 404);
});
