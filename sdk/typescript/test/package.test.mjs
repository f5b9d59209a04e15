// The package as published: `npm pack`, install the tarball into a fresh folder, then load it
// with `import` and with `require`, and type-check a consumer against its declarations.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync, writeFileSync, existsSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import "../testlib/live.mjs";

const pkgDir = join(dirname(fileURLToPath(import.meta.url)), "..");
const npm = process.platform === "win32" ? "npm.cmd" : "npm";
let tmp;
let app;

before(() => {
  assert.ok(existsSync(join(pkgDir, "dist/esm/index.js")), "run `npm run build` first");
  tmp = mkdtempSync(join(tmpdir(), "sandfort-sdk-pack-"));
  // --ignore-scripts: dist is already built; prepack would rebuild it under the other test files.
  const out = execFileSync(npm, ["pack", "--ignore-scripts", "--json", "--pack-destination", tmp], {
    cwd: pkgDir,
    encoding: "utf8",
  });
  const [info] = JSON.parse(out);
  const files = info.files.map((f) => f.path);
  assert.ok(files.includes("dist/esm/index.js") && files.includes("dist/cjs/index.js"));
  assert.ok(files.includes("dist/types/index.d.ts") && files.includes("dist/cjs/package.json"));
  assert.ok(!files.some((f) => f.startsWith("src/") || f.startsWith("test/") || f.includes("node_modules")));
  app = join(tmp, "app");
  execFileSync("mkdir", ["-p", app]);
  writeFileSync(join(app, "package.json"), JSON.stringify({ name: "consumer", version: "1.0.0", private: true }));
  execFileSync(npm, ["install", "--no-audit", "--no-fund", "--offline", join(tmp, info.filename)], {
    cwd: app,
    encoding: "utf8",
  });
});

after(() => {
  if (tmp) rmSync(tmp, { recursive: true, force: true });
});

test("the tarball has no runtime dependencies", () => {
  const pj = JSON.parse(readFileSync(join(app, "node_modules/@sandfort/sdk/package.json"), "utf8"));
  assert.equal(pj.dependencies, undefined);
  assert.deepEqual(Object.keys(pj.exports["."]).sort(), ["import", "require"]);
});

const probe = `
  const ok = typeof SandfortClient === "function" && typeof Sandbox === "function" && typeof Sandbox.create === "function";
  const e = new SandfortError("x", { code: "not_found", status: 404, requestId: "req-1" });
  const c = new SandfortClient();
  Promise.resolve(c.whoami()).then((w) => console.log(kind, ok, e instanceof Error, e.status, w.auth)).catch((err) => { console.error(err); process.exit(1); });
`;

test("import (ESM) works from the installed tarball and talks to the daemon", () => {
  writeFileSync(join(app, "esm.mjs"), `import { SandfortClient, Sandbox, SandfortError } from "@sandfort/sdk";\nconst kind = "esm";\n${probe}`);
  const out = execFileSync(process.execPath, ["esm.mjs"], { cwd: app, encoding: "utf8" });
  assert.equal(out.trim(), "esm true true 404 api_key");
});

test("require (CommonJS) works from the installed tarball and talks to the daemon", () => {
  writeFileSync(join(app, "cjs.cjs"), `const { SandfortClient, Sandbox, SandfortError } = require("@sandfort/sdk");\nconst kind = "cjs";\n${probe}`);
  const out = execFileSync(process.execPath, ["cjs.cjs"], { cwd: app, encoding: "utf8" });
  assert.equal(out.trim(), "cjs true true 404 api_key");
});

test("TypeScript consumers type-check against the declarations (ESM and CJS)", () => {
  const src = `
import { SandfortClient, Sandbox, SandfortError, type CommandResult, type SandboxRuntime, type StreamEvent } from "@sandfort/sdk";
async function main(): Promise<number> {
  const client = new SandfortClient({ baseUrl: "http://x", apiKey: "k" });
  const sbx: Sandbox = await client.createSandbox({ snapshot: "python:3.12-slim" });
  const r: CommandResult = await sbx.codeRun("python", "print(21 * 2)");
  const g = await client.createSandbox({ runtime: "gvisor" });
  const runtime: SandboxRuntime = g.runtime === g.info.runtime ? g.runtime : "runc";
  // @ts-expect-error a runtime the API does not know is a type error, not a 400 at run time
  await client.createSandbox({ runtime: "kata" });
  const s = await Sandbox.create();
  await s.files.write("/app/train.py", "print(1)");
  const { stdout } = await s.commands.run("python train.py");
  const h = await s.commands.run("sleep 1", { background: true });
  await h.kill("TERM");
  for await (const ev of s.commands.stream("ls")) { const e: StreamEvent = ev; void e; }
  const bytes: Uint8Array = await s.files.read("/x", { format: "bytes" });
  const text: string = await s.files.read("/x");
  try { await s.kill(); } catch (e) { if (e instanceof SandfortError) return e.status; }
  return r.exitCode + stdout.length + bytes.length + text.length + runtime.length;
}
void main;
`;
  writeFileSync(join(app, "consumer.mts"), src);
  writeFileSync(join(app, "consumer.cts"), src.replace("for await", "for await"));
  const tsc = join(pkgDir, "node_modules/typescript/bin/tsc");
  const args = ["--noEmit", "--strict", "--module", "nodenext", "--moduleResolution", "nodenext", "--target", "es2022", "--types", "node", "--typeRoots", join(pkgDir, "node_modules/@types")];
  execFileSync(process.execPath, [tsc, ...args, "consumer.mts", "consumer.cts"], { cwd: app, encoding: "utf8" });
});
