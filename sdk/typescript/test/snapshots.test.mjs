// Snapshots: a file one sandbox wrote is in a sandbox created from its snapshot; a snapshot in
// use cannot be deleted (409); an unknown or deleted one is 404.
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { client } from "../testlib/live.mjs";
import { checkDeleted, checkInUse, checkNamed } from "../testlib/named.mjs";

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
  await checkNamed("Snapshot", snap, name);

  const copy = await client.createSandbox({ snapshot: name });
  try {
    assert.equal(copy.info.snapshot, name);
    assert.equal((await copy.commands.run("cat /root/note")).stdout, "kept\n");
    await checkInUse("Snapshot", name);
  } finally {
    await copy.kill();
  }

  await checkDeleted("Snapshot", name);
});

test("unknown snapshots and sandboxes are 404", async () => {
  const missing = `no-such-${randomBytes(4).toString("hex")}`;
  await assert.rejects(client.getSnapshot(missing), { status: 404, code: "not_found" });
  await assert.rejects(client.createSnapshot(missing, `ts-snap-${randomBytes(4).toString("hex")}`), {
    status: 404,
    code: "not_found",
  });
});
