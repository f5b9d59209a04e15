// The unmodified @e2b/code-interpreter SDK through the sandbox plane's port-49999 door: /execute
// and /contexts translated onto the agent's code contexts (docs/e2b.md, "Code interpreter").
// Sandboxes are made with the SDK's default template, code-interpreter-v1, which is the image
// scripts/build-code-interpreter-image makes (scripts/test builds it for this suite when missing).
import { before, test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { Sandbox, NotFoundError, SandboxError, TimeoutError } from "@e2b/code-interpreter";
import { sandbox, sandboxPlane } from "../lib/live.mjs";

const CODE_IMAGE = "sandfort/code-interpreter:bookworm";

function imagePresent() {
  try {
    execFileSync("docker", ["image", "inspect", CODE_IMAGE], { stdio: "ignore" });
    return true;
  } catch {
    return false;
  }
}
// Under CI a missing image fails every test here; elsewhere they are skipped with the reason.
const missing = imagePresent() ? false : `${CODE_IMAGE} is missing: run scripts/build-code-interpreter-image`;
const skip = missing && process.env.CI !== "true" ? missing : false;
if (missing && !skip) throw new Error(missing);

let sbx;
before(async () => {
  if (!skip) sbx = await sandbox({}, Sandbox);
});

const PNG_SIGNATURE = Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);

test("state carries over between runs: x = 1, then x + 1 is 2", { skip }, async () => {
  const first = await sbx.runCode("x = 1");
  assert.equal(first.error, undefined);
  assert.deepEqual(first.results, []);
  const second = await sbx.runCode("x + 1");
  assert.equal(second.text, "2");
  assert.equal(second.results.length, 1);
  assert.equal(second.results[0].isMainResult, true);
  assert.ok(second.executionCount > first.executionCount, `${first.executionCount} then ${second.executionCount}`);
});

test("onStdout, onStderr and onResult stream as the code runs", { skip }, async () => {
  const seen = [];
  const started = Date.now();
  const at = (what) => (x) => seen.push([what, x, Date.now() - started]);
  const execution = await sbx.runCode(
    'import sys, time\nprint("early")\nprint("oops", file=sys.stderr)\ntime.sleep(1.5)\nprint("late")\n40 + 2',
    { onStdout: at("stdout"), onStderr: at("stderr"), onResult: at("result") },
  );
  assert.deepEqual(execution.logs.stdout.join(""), "early\nlate\n");
  assert.deepEqual(execution.logs.stderr.join(""), "oops\n");
  assert.equal(execution.text, "42");
  const early = seen.find(([w, x]) => w === "stdout" && x.line.includes("early"));
  const late = seen.find(([w, x]) => w === "stdout" && x.line.includes("late"));
  assert.ok(early && late, JSON.stringify(seen));
  assert.equal(early[1].error, false);
  assert.ok(late[2] - early[2] >= 1000, `streamed as produced: ${JSON.stringify(seen)}`);
  const err = seen.find(([w]) => w === "stderr");
  assert.equal(err[1].error, true);
  const result = seen.find(([w]) => w === "result");
  assert.equal(result[1].text, "42");
});

test("an exception is execution.error (name, value, traceback), not a thrown request error", { skip }, async () => {
  const execution = await sbx.runCode("def f():\n    return 1 / 0\nf()");
  assert.ok(execution.error, "an error");
  assert.equal(execution.error.name, "ZeroDivisionError");
  assert.equal(execution.error.value, "division by zero");
  assert.match(execution.error.traceback, /ZeroDivisionError/);
  assert.match(execution.error.traceback, /return 1 \/ 0/);
  assert.deepEqual(execution.results, []);
});

test("envs reach the run", { skip }, async () => {
  const execution = await sbx.runCode('import os\nos.environ.get("E2B_TEST_VALUE")', { envs: { E2B_TEST_VALUE: "given" } });
  assert.equal(execution.text, "'given'");
});

test("contexts per language, each with its own cwd and state", { skip }, async () => {
  const py = await sbx.createCodeContext({ language: "python", cwd: "/tmp" });
  const js = await sbx.createCodeContext({ language: "js", cwd: "/usr" });
  const sh = await sbx.createCodeContext({ language: "bash", cwd: "/etc" });
  assert.deepEqual([py.language, py.cwd], ["python", "/tmp"]);
  assert.deepEqual([js.language, js.cwd], ["js", "/usr"]);
  assert.deepEqual([sh.language, sh.cwd], ["bash", "/etc"]);
  assert.equal(new Set([py.id, js.id, sh.id]).size, 3);

  assert.equal((await sbx.runCode("import os\nos.getcwd()", { context: py })).text, "'/tmp'");
  await sbx.runCode("y = 10", { context: py });
  assert.equal((await sbx.runCode("y * 2", { context: py })).text, "20");
  // The default Python context does not see this context's y.
  assert.equal((await sbx.runCode("y")).error?.name, "NameError");

  assert.equal((await sbx.runCode("console.log(process.cwd())", { context: js })).logs.stdout.join(""), "/usr\n");
  await sbx.runCode("var n = 5", { context: js });
  assert.equal((await sbx.runCode("console.log(n + 1)", { context: js })).logs.stdout.join(""), "6\n");
  // Without a context, language js runs in the default JavaScript context.
  assert.equal((await sbx.runCode("console.log(typeof n)", { language: "js" })).logs.stdout.join(""), "undefined\n");

  assert.equal((await sbx.runCode("pwd", { context: sh })).logs.stdout.join(""), "/etc\n");
  await sbx.runCode("cd /var; V=kept", { context: sh });
  assert.equal((await sbx.runCode("echo $PWD $V", { context: sh })).logs.stdout.join(""), "/var kept\n");
});

test("restartCodeContext loses the context's state", { skip }, async () => {
  const ctx = await sbx.createCodeContext({ language: "python" });
  await sbx.runCode("z = 7", { context: ctx });
  assert.equal((await sbx.runCode("z", { context: ctx })).text, "7");
  await sbx.restartCodeContext(ctx);
  const after = await sbx.runCode("z", { context: ctx });
  assert.equal(after.error?.name, "NameError");
  await sbx.restartCodeContext(ctx.id); // by id too
});

test("listCodeContexts and removeCodeContext", { skip }, async () => {
  const ctx = await sbx.createCodeContext({ language: "python", cwd: "/tmp" });
  const listed = await sbx.listCodeContexts();
  assert.ok(Array.isArray(listed));
  const mine = listed.find((c) => c.id === ctx.id);
  assert.deepEqual(mine, { id: ctx.id, language: "python", cwd: "/tmp" });
  await sbx.removeCodeContext(ctx);
  assert.equal((await sbx.listCodeContexts()).find((c) => c.id === ctx.id), undefined);
  await assert.rejects(sbx.runCode("1", { context: ctx }), NotFoundError);
  await assert.rejects(sbx.removeCodeContext(ctx.id), NotFoundError);
  await assert.rejects(sbx.restartCodeContext("no-such-context"), NotFoundError);
});

test("a matplotlib figure shown comes back as a PNG", { skip }, async () => {
  const execution = await sbx.runCode(
    "import matplotlib.pyplot as plt\nplt.plot([1, 2, 3], [1, 4, 9])\nplt.title('squares')\nplt.show()",
  );
  assert.equal(execution.error, undefined, JSON.stringify(execution.error));
  const figures = execution.results.filter((r) => r.png);
  assert.equal(figures.length, 1, JSON.stringify(execution.results.map((r) => r.formats())));
  const png = Buffer.from(figures[0].png, "base64");
  assert.ok(png.subarray(0, 8).equals(PNG_SIGNATURE), "the PNG signature");
  assert.ok(png.length > 1000);
  const chart = figures[0].chart;
  assert.ok(chart, "the figure's chart data");
  assert.equal(chart.type, "line");
  assert.equal(chart.title, "squares");
  assert.deepEqual(chart.elements.map((e) => e.points), [[[1, 1], [2, 4], [3, 9]]]);
  assert.equal(chart.x_scale, "linear");
  assert.equal(chart.x_ticks.length, chart.x_tick_labels.length);
  assert.deepEqual(figures[0].formats(), ["png"], "the SDK's formats() does not list chart, as with E2B");
});

test("charts: bars, a pie, a box plot, scatter with dates and units, several axes as a superchart", { skip }, async () => {
  const execution = await sbx.runCode(`
import matplotlib.pyplot as plt, numpy as np, pandas as pd
fig, ax = plt.subplots()
x = np.arange(2)
ax.bar(x - 0.2, [3, 5], 0.4, label="2023")
ax.bar(x + 0.2, [4, 6], 0.4, label="2024")
ax.set_xticks(x, ["north", "south"])
ax.set_title("sales")
plt.show()
fig, ax = plt.subplots()
ax.pie([1, 3], labels=["cats", "dogs"])
plt.show()
fig, ax = plt.subplots()
ax.boxplot([[1, 2, 3, 4, 5, 50]], patch_artist=True, labels=["latency"])
plt.show()
fig, ax = plt.subplots()
ax.scatter(pd.to_datetime(["2024-01-01", "2024-01-02"]), [1.5, float("nan")], label="temperature")
ax.set_ylabel("Temperature (°C)")
plt.show()
fig, (left, right) = plt.subplots(1, 2)
left.plot(["mon", "tue"], [1, 2])
right.plot([0, 1], [0, 1])
fig.suptitle("week")
plt.show()
`);
  assert.equal(execution.error, undefined, JSON.stringify(execution.error));
  assert.equal(execution.logs.stderr.join(""), "", "no warnings of the extractor in the user's output");
  const charts = execution.results.map((r) => r.chart);
  assert.deepEqual(charts.map((c) => c && c.type), ["bar", "pie", "box_and_whisker", "scatter", "superchart"]);
  const [bars, pie, box, scatter, both] = charts;
  assert.equal(bars.title, "sales");
  assert.deepEqual(bars.elements, [
    { label: "north", group: "2023", value: 3 }, { label: "south", group: "2023", value: 5 },
    { label: "north", group: "2024", value: 4 }, { label: "south", group: "2024", value: 6 },
  ]);
  assert.deepEqual(pie.elements.map((w) => [w.label, Math.round(w.angle), w.radius]), [["cats", 90, 1], ["dogs", 270, 1]]);
  assert.deepEqual(box.elements, [{ label: "latency", min: 1, first_quartile: 2.25, median: 3.5,
                                    third_quartile: 4.75, max: 5, outliers: [50] }]);
  assert.equal(scatter.x_scale, "datetime");
  assert.equal(scatter.y_unit, "°C");
  assert.deepEqual(scatter.elements, [{ label: "temperature",
                                        points: [["2024-01-01T00:00:00", 1.5], [null, null]] }]);
  assert.equal(both.title, "week");
  assert.deepEqual(both.elements.map((c) => [c.type, c.x_scale, c.elements[0].points]),
                   [["line", "categorical", [["mon", 1], ["tue", 2]]], ["line", "linear", [[0, 0], [1, 1]]]]);
});

test("a figure of too many points has its png and no chart", { skip }, async () => {
  const execution = await sbx.runCode("import matplotlib.pyplot as plt\nplt.plot(range(200000))\nplt.show()");
  assert.equal(execution.error, undefined, JSON.stringify(execution.error));
  assert.equal(execution.results.length, 1);
  assert.ok(execution.results[0].png);
  assert.equal(execution.results[0].chart, undefined);
});

test("a pandas DataFrame comes back as html and text", { skip }, async () => {
  const execution = await sbx.runCode("import pandas as pd\npd.DataFrame({'a': [1, 2], 'b': [3, 4]})");
  assert.equal(execution.error, undefined, JSON.stringify(execution.error));
  const [table] = execution.results;
  assert.equal(table.isMainResult, true);
  assert.match(table.html, /<table/);
  assert.match(table.text, /a\s+b/);
  assert.ok(table.formats().includes("html"), JSON.stringify(table.formats()));
});

test("display() of two objects is two results", { skip }, async () => {
  const execution = await sbx.runCode("display(1)\ndisplay('two')");
  assert.deepEqual(execution.results.map((r) => [r.text, r.isMainResult]), [["1", false], ["'two'", false]]);
  assert.equal(execution.text, undefined, "no main result");
});

test("a language Sandfort does not serve (r) is the SDK's SandboxError", { skip }, async () => {
  const err = await sbx.runCode("1 + 1", { language: "r" }).catch((e) => e);
  assert.ok(err instanceof SandboxError, String(err));
  assert.match(err.message, /^400/);
  await assert.rejects(sbx.createCodeContext({ language: "r" }), SandboxError);
});

test("timeoutMs: the SDK's TimeoutError; the run is interrupted, the context keeps its state", { skip }, async () => {
  const ctx = await sbx.createCodeContext({ language: "python" });
  await sbx.runCode("kept = 1", { context: ctx });
  // Output first: the answer's head (and with it the SDK's body timer) comes with the first line.
  const code = "import time\nprint('started', flush=True)\ntime.sleep(6)\nopen('/tmp/finished', 'w').write('1')";
  const err = await sbx.runCode(code, { context: ctx, timeoutMs: 1000 }).catch((e) => e);
  assert.ok(err instanceof TimeoutError, String(err));
  // The SDK closed its connection: sandfortd dropped the run's, and the agent interrupted the run
  // (the next run in the context waits for the one before it to end).
  const started = Date.now();
  const after = await sbx.runCode("import os\n(os.path.exists('/tmp/finished'), kept)", { context: ctx });
  assert.equal(after.text, "(False, 1)");
  assert.ok(Date.now() - started < 5000, "the interrupted run ended at once");
});

test("a run silent for longer than requestTimeoutMs is not a request timeout", { skip }, async () => {
  // The agent's head comes with the run's first line; sandfortd writes the client's after 5 s.
  const execution = await sbx.runCode("import time\ntime.sleep(7)\n'quiet'", { requestTimeoutMs: 6000, timeoutMs: 30_000 });
  assert.equal(execution.text, "'quiet'");
});

test("the audit chain records runs and context calls as the native routes do, under the token", { skip }, async () => {
  const ctx = await sbx.createCodeContext({ language: "bash" });
  await sbx.runCode("true", { context: ctx });
  await sbx.restartCodeContext(ctx);
  await sbx.removeCodeContext(ctx);
  const res = await fetch(`${process.env.SANDFORT_BASE_URL}/v1/audit?target=${sbx.sandboxId}&limit=1000`, {
    headers: { Authorization: `Bearer ${process.env.SANDFORT_ORG_ADMIN_KEY}` },
  });
  assert.equal(res.status, 200);
  const events = (await res.json()).items;
  for (const must of ["sandbox.code.run", "sandbox.code.contexts", "sandbox.code.contexts.restart", "sandbox.code.contexts.delete"]) {
    const e = events.find((x) => x.action === must);
    assert.ok(e, `${must} in ${events.map((x) => x.action)}`);
    assert.equal(e.actor, `e2b-token:${sbx.sandboxId}`, must);
    assert.equal(e.details.via, "e2b", must);
  }
});

test("port 49999: another sandbox's token, a forged one or none is refused", { skip }, async () => {
  const other = await sandbox({}, Sandbox);
  const id = sbx.sandboxId;
  const forged = "sfe2b_" + "0".repeat(64);
  const body = JSON.stringify({ code: "open('/tmp/pwned', 'w').write('x')" });
  for (const [what, headers] of [
    ["another sandbox's token", { token: other.envdAccessToken }],
    ["another sandbox's traffic token", { trafficToken: other.trafficAccessToken }],
    ["a forged token", { token: forged }],
    ["a forged traffic token", { trafficToken: forged }],
    ["none", {}],
    ["an API key", { token: process.env.E2B_API_KEY }],
  ]) {
    const opts = { sandboxId: id, port: "49999", ...headers };
    const run = await sandboxPlane("/execute", { ...opts, method: "POST", body });
    assert.equal(run.status, 401, `${what}: /execute`);
    assert.equal((await run.json()).code, 401, what); // the REST shape: this port is not Connect
    for (const [path, method] of [["/contexts", "GET"], ["/contexts", "POST"], ["/contexts/x", "DELETE"], ["/contexts/x/restart", "POST"]]) {
      const r = await sandboxPlane(path, { ...opts, method, body: method === "POST" ? "{}" : undefined });
      assert.equal(r.status, 401, `${what}: ${method} ${path}`);
      await r.arrayBuffer();
    }
  }
  // The other sandbox's own SDK object works on its own sandbox, not on this one.
  assert.equal((await other.runCode("1 + 1")).text, "2");
  const exists = await sbx.runCode("import os\nos.path.exists('/tmp/pwned')");
  assert.equal(exists.text, "False", "nothing ran in this sandbox");
  const health = await sandboxPlane("/health", { sandboxId: id, trafficToken: sbx.trafficAccessToken, port: "49999" });
  assert.equal(health.status, 204, "port 49999's /health with its own token");
  // envd's port has no /execute; port 49999 has no envd paths.
  const wrong = await sandboxPlane("/execute", { sandboxId: id, token: sbx.envdAccessToken, method: "POST", body });
  assert.equal(wrong.status, 404);
  await wrong.arrayBuffer();
  const envd = await sandboxPlane("/process.Process/List", {
    sandboxId: id, token: sbx.envdAccessToken, port: "49999", method: "POST", body: "{}",
  });
  assert.equal(envd.status, 404);
  await envd.arrayBuffer();
});

