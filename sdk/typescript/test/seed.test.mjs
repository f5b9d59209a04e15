// The two shapes from the issue, on the default image (python:3.12-slim cannot be pulled here).
import { test } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { SandfortClient, Sandbox, SandfortError } from "../dist/esm/index.js";
import { BASE_URL, API_KEY } from "../testlib/live.mjs";

test("client shape: createSandbox + codeRun python", async () => {
  const client = new SandfortClient({ baseUrl: BASE_URL, apiKey: API_KEY });
  const sbx = await client.createSandbox();
  try {
    assert.match(sbx.id, /^sbx-[0-9a-f]{16}$/);
    assert.equal(sbx.state, "started");
    const r = await sbx.codeRun("python", "print(21 * 2)");
    assert.equal(r.exitCode, 0);
    assert.equal(r.stdout.trim(), "42");
    assert.equal(r.stdout, "42\n"); // output is returned as produced, newline included
    const n = await sbx.codeRun("node", "console.log(process.argv[1])", { argv: ["arg1"] });
    assert.equal(n.stdout, "arg1\n");
  } finally {
    assert.equal(await sbx.kill(), true);
  }
  assert.equal(await sbx.kill(), false, "killing twice is not an error");
});

test("short shape: Sandbox.create() from the environment, files.write, commands.run, kill", async () => {
  // The seed's lines as written; train.py lands in the sandbox's working directory.
  const s = await Sandbox.create({ workdir: "/app" });
  try {
    const src = "import sys\nprint('trained', sum(range(10)))\nprint('warn', file=sys.stderr)\n";
    const w = await s.files.write("/app/train.py", src);
    assert.equal(w.path, "/app/train.py");
    assert.equal(w.size, Buffer.byteLength(src));
    const { stdout, stderr, exitCode } = await s.commands.run("python train.py");
    assert.equal(exitCode, 0);
    assert.equal(stdout, "trained 45\n");
    assert.equal(stderr, "warn\n");
  } finally {
    await s.kill();
  }
  await assert.rejects(s.refresh(), (e) => e instanceof SandfortError && e.status === 404);
});

test("Sandbox.connect by id and by name", async () => {
  const name = `seed-${Date.now().toString(36)}`;
  const s = await Sandbox.create({ name, labels: { suite: "ts-sdk" } });
  try {
    assert.equal(s.name, name);
    assert.deepEqual(s.info.labels, { suite: "ts-sdk" });
    const byName = await Sandbox.connect(name);
    assert.equal(byName.id, s.id);
    const listed = await new SandfortClient().listSandboxes({ labels: { suite: "ts-sdk" } });
    assert.ok(listed.items.some((i) => i.id === s.id));
  } finally {
    await s.kill();
  }
});

test("without configuration the client fails with a config error", () => {
  const env = { ...process.env };
  delete env.SANDFORT_BASE_URL;
  delete env.SANDFORT_API_KEY;
  const code = `
    import("${new URL("../dist/esm/index.js", import.meta.url).href}").then(async ({ Sandbox, SandfortError }) => {
      try { await Sandbox.create(); console.log("created?!"); }
      catch (e) { console.log(e instanceof SandfortError, e.code); }
    });`;
  const out = spawnSync(process.execPath, ["-e", code], { env, encoding: "utf8" });
  assert.equal(out.stdout.trim(), "true config");
});
