// Volumes: what one sandbox writes to a volume is there for the next that mounts it; a mounted
// volume cannot be deleted (409); a deleted one is gone (404).
import { test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { client } from "../testlib/live.mjs";
import { checkDeleted, checkInUse, checkNamed } from "../testlib/named.mjs";

test("a volume outlives the sandbox that wrote it", async () => {
  const name = `ts-vol-${randomBytes(4).toString("hex")}`;
  const vol = await client.createVolume(name);
  assert.match(vol.id, /^vol-/);
  assert.equal(vol.name, name);
  assert.equal(vol.state, "ready");
  assert.equal(vol.sizeMb, null);
  await checkNamed("Volume", vol, name);
  await assert.rejects(client.createVolume(name), { status: 409, code: "conflict" });

  const a = await client.createSandbox({ volumes: [{ name, mountPath: "/data" }] });
  try {
    assert.deepEqual(a.info.volumes, [{ name, mountPath: "/data", readOnly: false }]);
    assert.equal((await a.commands.run("echo kept > /data/note")).exitCode, 0);
  } finally {
    await a.kill();
  }

  const b = await client.createSandbox({ volumes: [{ name, mountPath: "/mnt/v", readOnly: true }] });
  try {
    assert.equal(b.info.volumes[0].readOnly, true);
    assert.equal((await b.commands.run("cat /mnt/v/note")).stdout, "kept\n");
    assert.notEqual((await b.commands.run("touch /mnt/v/other")).exitCode, 0);
    await checkInUse("Volume", name);
  } finally {
    await b.kill();
  }

  await checkDeleted("Volume", name);
});
