// Snapshots: a file one sandbox wrote is in a sandbox created from its snapshot; a snapshot in
// use cannot be deleted (409); an unknown or deleted one is 404.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { SandfortError } from "../dist/esm/index.js";
import { client } from "../testlib/live.mjs";

test("a sandbox created from a snapshot has the files of its source", async () => {
  const name = `ts-snap-${randomBytes(4).toString("hex")}`;
  const src = await client.createSandbox();
  let snap;
  try {
    assert.equal((await src.commands.run("echo kept > /root/note")).exitCode, 0);
    snap = await client.createSnapshot(src, name);
    assert.match(snap.id, /^snap-/);
    assert.equal(snap.name, name);
    assert.equal(snap.state, "ready");
    assert.equal(snap.sourceSandboxId, src.id);
    assert.ok(Number.isInteger(snap.sizeBytes) && snap.sizeBytes > 0);
    await assert.rejects(client.createSnapshot(src.id, name), { status: 409, code: "conflict" });
  } finally {
    await src.kill();
  }
  assert.equal((await client.getSnapshot(name)).id, snap.id);
  assert.equal((await client.getSnapshot(snap.id)).name, name);

  const names = [];
  let cursor;
  do {
    const page = await client.listSnapshots({ limit: 1, cursor });
    assert.ok(page.items.length <= 1);
    names.push(...page.items.map((s) => s.name));
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  assert.ok(names.includes(name));

  const copy = await client.createSandbox({ snapshot: name });
  try {
    assert.equal(copy.info.snapshot, name);
    assert.equal((await copy.commands.run("cat /root/note")).stdout, "kept\n");
    const err = await client.deleteSnapshot(name).catch((e) => e);
    assert.ok(err instanceof SandfortError);
    assert.equal(err.status, 409);
  } finally {
    await copy.kill();
  }

  assert.equal(await client.deleteSnapshot(name), true);
  await assert.rejects(client.getSnapshot(name), { status: 404, code: "not_found" });
  assert.equal(await client.deleteSnapshot(name), false);
});

test("unknown snapshots and sandboxes are 404", async () => {
  const missing = `no-such-${randomBytes(4).toString("hex")}`;
  await assert.rejects(client.getSnapshot(missing), { status: 404, code: "not_found" });
  await assert.rejects(client.createSnapshot(missing, `ts-snap-${randomBytes(4).toString("hex")}`), {
    status: 404,
    code: "not_found",
  });
});
