// The control plane (/e2b) through the unmodified E2B SDK: create, getInfo, list with its
// metadata filter and pagination, setTimeout, pause and connect (resume), kill; its errors.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Sandbox, NotFoundError, AuthenticationError } from "e2b";
import { VIEWER_API_KEY, sandbox } from "../lib/live.mjs";

test("create answers what the SDK reads, getInfo and isRunning agree", async () => {
  const sbx = await sandbox({ metadata: { suite: "e2b", case: "create" }, envs: { GREETING: "hi" } });
  assert.match(sbx.sandboxId, /^sbx-[0-9a-f]{16}$/);
  const info = await sbx.getInfo();
  assert.equal(info.sandboxId, sbx.sandboxId);
  assert.equal(info.state, "running");
  assert.deepEqual(info.metadata, { suite: "e2b", case: "create" });
  assert.ok(info.startedAt instanceof Date && !Number.isNaN(info.startedAt.getTime()));
  assert.ok(info.endAt > info.startedAt, "the timeout is the sandbox's ttl");
  assert.equal(info.envdVersion, "0.5.7");
  assert.equal(await sbx.isRunning(), true, "GET /health through the sandbox plane");
});

test("list filters by metadata and pages with nextToken", async () => {
  const tag = `list-${process.pid}`;
  const a = await sandbox({ metadata: { tag } });
  const b = await sandbox({ metadata: { tag } });
  const seen = [];
  const paginator = Sandbox.list({ query: { metadata: { tag } }, limit: 1 });
  while (paginator.hasNext) {
    const items = await paginator.nextItems();
    assert.ok(items.length <= 1);
    seen.push(...items.map((s) => s.sandboxId));
  }
  assert.deepEqual(seen.sort(), [a.sandboxId, b.sandboxId].sort());
  const none = await Sandbox.list({ query: { metadata: { tag: "no-such-tag" } } }).nextItems();
  assert.deepEqual(none, []);
});

test("setTimeout moves the end, pause and connect resume the same sandbox", async () => {
  const sbx = await sandbox();
  const before = (await sbx.getInfo()).endAt;
  await sbx.setTimeout(3_600_000);
  const after = (await sbx.getInfo()).endAt;
  assert.ok(after > before, `${after} after ${before}`);

  assert.equal(await sbx.pause(), true);
  assert.equal((await sbx.getInfo()).state, "paused");
  assert.equal(await Sandbox.pause(sbx.sandboxId), false, "already paused: 409, read as false");
  assert.equal(await sbx.isRunning(), false, "a paused sandbox's health is 502");

  const again = await Sandbox.connect(sbx.sandboxId);
  assert.equal(again.sandboxId, sbx.sandboxId);
  assert.equal((await again.getInfo()).state, "running");
  assert.equal(await again.isRunning(), true, "the new access token opens the sandbox plane");
  assert.equal(await sbx.isRunning(), true, "and the first one still does");
});

test("kill removes it; a second kill and getInfo say not found", async () => {
  const sbx = await Sandbox.create({ timeoutMs: 120_000 });
  assert.equal(await sbx.kill(), true);
  assert.equal(await Sandbox.kill(sbx.sandboxId), false);
  await assert.rejects(Sandbox.getInfo(sbx.sandboxId), NotFoundError);
  assert.equal(await sbx.isRunning(), false, "its access token opens nothing any more");
});

test("a wrong key is AuthenticationError; an unknown template is refused", async () => {
  await assert.rejects(Sandbox.create({ apiKey: "sfk_not_a_real_key" }), AuthenticationError);
  await assert.rejects(Sandbox.list({ apiKey: "sfk_not_a_real_key" }).nextItems(), AuthenticationError);
  await assert.rejects(Sandbox.create("sandfort/no-such-image:never", { timeoutMs: 60_000 }));
});

test("a viewer's key reads but does not act (the route's role, as on the native API)", async () => {
  const sbx = await sandbox({ metadata: { role: "viewer-test" } });
  const viewer = { apiKey: VIEWER_API_KEY };
  assert.equal((await Sandbox.getInfo(sbx.sandboxId, viewer)).sandboxId, sbx.sandboxId);
  const listed = await Sandbox.list({ ...viewer, query: { metadata: { role: "viewer-test" } } }).nextItems();
  assert.deepEqual(listed.map((s) => s.sandboxId), [sbx.sandboxId]);
  await assert.rejects(Sandbox.create({ ...viewer, timeoutMs: 60_000 }), (e) => e.statusCode === 403);
  await assert.rejects(Sandbox.kill(sbx.sandboxId, viewer), (e) => e.statusCode === 403);
  await assert.rejects(Sandbox.setTimeout(sbx.sandboxId, 60_000, viewer), (e) => e.statusCode === 403);
  assert.equal((await sbx.getInfo()).state, "running");
});

test("the audit chain records E2B calls as the native ones (the sandbox plane under the token: e2b-token:<id>)", async () => {
  const sbx = await sandbox();
  await sbx.files.makeDir("/tmp/audited");
  await sbx.commands.run("true");
  await sbx.kill();
  const res = await fetch(`${process.env.SANDFORT_BASE_URL}/v1/audit?target=${sbx.sandboxId}&limit=100`, {
    headers: { Authorization: `Bearer ${process.env.SANDFORT_ORG_ADMIN_KEY}` },
  });
  assert.equal(res.status, 200);
  const actions = (await res.json()).items.map((e) => e.action);
  for (const must of ["sandbox.create", "sandbox.files.mkdir", "sandbox.commands", "sandbox.delete"])
    assert.ok(actions.includes(must), `${must} in ${actions}`);
});
