// `runtime` on createSandbox (docs/gvisor.md) against a live daemon, real Docker and Debian's
// runsc: a gVisor sandbox says so and runs commands on gVisor's kernel; an unknown runtime is the
// API's 400. One gVisor sandbox for the file: each costs about a second and 50 MiB.
import { test } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { SandfortError } from "../dist/esm/index.js";
import { client, sandbox } from "../testlib/live.mjs";

function runscRegistered() {
  try {
    const runtimes = JSON.parse(execFileSync("docker", ["info", "--format", "{{json .Runtimes}}"], { encoding: "utf8", timeout: 60000 }) || "{}");
    return "runsc" in runtimes;
  } catch {
    return false;
  }
}

// This file exists to test gVisor: under CI a missing runsc is a failure, never a skip.
const noRunsc = runscRegistered() ? false : "runsc is not registered with the Docker Engine (scripts/setup registers it)";
if (noRunsc && process.env.CI === "true") throw new Error(noRunsc);

test("a gVisor sandbox says so and runs on a kernel that is not the host's", { skip: noRunsc }, async () => {
  const [runc, gvisor] = await Promise.all([sandbox(), sandbox({ runtime: "gvisor" })]);
  assert.equal(gvisor.runtime, "gvisor");
  assert.equal(gvisor.info.runtime, "gvisor");
  assert.equal((await client.getSandbox(gvisor.id)).runtime, "gvisor");
  assert.equal((await client.getSandboxInfo(gvisor.id)).runtime, "gvisor");
  const listed = await client.listSandboxes({ limit: 100 });
  assert.equal(listed.items.find((s) => s.id === gvisor.id)?.runtime, "gvisor");
  assert.equal(runc.runtime, "runc", "a create that names none gets the daemon's default_runtime");

  const r = await gvisor.commands.run("uname -r; exit 3");
  assert.equal(r.exitCode, 3);
  const runcKernel = (await runc.commands.run("uname -r")).stdout.trim();
  assert.ok(r.stdout.trim() && r.stdout.trim() !== runcKernel, `gVisor's Sentry, not the host's kernel: ${r.stdout}`);
});

test("an unknown runtime is the API's 400, surfaced as a SandfortError", async () => {
  // Past the type (a JavaScript caller, or a value from elsewhere): the daemon is the judge.
  const err = await client.createSandbox({ runtime: "kata" }).catch((e) => e);
  assert.ok(err instanceof SandfortError, String(err));
  assert.equal(err.status, 400);
  assert.equal(err.code, "invalid_argument");
  assert.match(err.message, /runtime must be runc or gvisor/);
  assert.match(err.requestId ?? "", /^req-/);
});
