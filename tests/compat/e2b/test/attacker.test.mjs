// Another organization's key and a forged or another sandbox's access token must not reach a
// sandbox: the control plane answers not found, the sandbox plane 401, whatever the id.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Sandbox, NotFoundError } from "e2b";
import { OTHER_API_KEY, sandbox, sandboxPlane } from "../lib/live.mjs";

test("another organization's key finds nothing of this one", async () => {
  const sbx = await sandbox({ metadata: { owner: "a" } });
  const theirs = { apiKey: OTHER_API_KEY };
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId, theirs), NotFoundError);
  assert.equal(await Sandbox.kill(sbx.sandboxId, theirs), false);
  await assert.rejects(Sandbox.setTimeout(sbx.sandboxId, 10_000, theirs), NotFoundError);
  await assert.rejects(Sandbox.pause(sbx.sandboxId, theirs), NotFoundError);
  await assert.rejects(Sandbox.connect(sbx.sandboxId, theirs), NotFoundError);
  const listed = await Sandbox.list({ ...theirs, query: { metadata: { owner: "a" } } }).nextItems();
  assert.deepEqual(listed, []);
  assert.equal((await sbx.getInfo()).state, "running", "untouched");
});

test("a forged token, another sandbox's token or none opens no sandbox", async () => {
  const a = await sandbox();
  const b = await sandbox();
  const ok = await sandboxPlane("/health", { sandboxId: a.sandboxId, token: a.envdAccessToken });
  assert.equal(ok.status, 204);
  for (const [what, token] of [
    ["b's token", b.envdAccessToken],
    ["a forged one", "sfe2b_" + "0".repeat(64)],
    ["none", undefined],
    ["an API key", process.env.E2B_API_KEY],
  ]) {
    const r = await sandboxPlane("/health", { sandboxId: a.sandboxId, token });
    assert.equal(r.status, 401, what);
    assert.equal((await r.json()).code, "unauthenticated", what);
    const rpc = await sandboxPlane("/process.Process/List", { sandboxId: a.sandboxId, token, method: "POST", body: "{}" });
    assert.equal(rpc.status, 401, `${what}: process.Process/List`);
    const stat = await sandboxPlane("/filesystem.Filesystem/Stat", {
      sandboxId: a.sandboxId, token, method: "POST", body: JSON.stringify({ path: "/etc/hostname" }),
    });
    assert.equal(stat.status, 401, `${what}: filesystem.Filesystem/Stat`);
    const file = await sandboxPlane("/files?path=%2Fetc%2Fhostname", { sandboxId: a.sandboxId, token });
    assert.equal(file.status, 401, `${what}: GET /files`);
  }
  const own = await sandboxPlane("/files?path=%2Fetc%2Fhostname", { sandboxId: a.sandboxId, token: a.envdAccessToken });
  assert.equal(own.status, 200, "its own token reads its own file");
});

test("a flood through one sandbox's token is rate limited like a member key", async () => {
  const sbx = await sandbox();
  const statuses = [];
  // 32 at a time (below the listener's idle connections per source, 64, which is its own
  // defence), for up to a minute: the flood must outrun the refill (50/s) however slow a loaded
  // machine makes each request (16 at a time managed 32/s on CI's loaded machine).
  const until = Date.now() + 60_000;
  while (Date.now() < until && !statuses.includes(429)) {
    const batch = await Promise.all(
      Array.from({ length: 32 }, () => sandboxPlane("/health", { sandboxId: sbx.sandboxId, token: sbx.envdAccessToken })),
    );
    for (const r of batch) {
      statuses.push(r.status);
      if (r.status === 429) {
        assert.ok(Number(r.headers.get("retry-after")) >= 1);
        assert.equal((await r.json()).code, "resource_exhausted");
      } else await r.arrayBuffer();
    }
  }
  assert.ok(statuses.includes(429), `no 429 in ${statuses.length} requests`);
  assert.ok(statuses.filter((s) => s === 204).length >= 150, "the member burst (200) was served first");
});
