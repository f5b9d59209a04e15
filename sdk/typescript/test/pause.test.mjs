// pause() freezes a sandbox (calls that need it running answer 409), resume() thaws it.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SandfortError } from "../dist/esm/index.js";
import { client, sandbox } from "../testlib/live.mjs";

test("pause and resume: 409 while paused, state kept", async () => {
  const sbx = await sandbox();
  await sbx.commands.run("echo kept > /tmp/state");

  assert.equal((await sbx.pause()).state, "paused");
  assert.equal(sbx.info.state, "paused");
  assert.equal((await sbx.pause()).state, "paused", "pausing twice leaves it paused");
  assert.equal((await client.getSandbox(sbx.info.id)).info.state, "paused");
  assert.equal((await sbx.waitFor("paused", 5)).state, "paused");
  const err = await sbx.commands.run("true").catch((e) => e);
  assert.ok(err instanceof SandfortError);
  assert.equal(err.status, 409);
  assert.equal(err.code, "conflict");
  assert.match(err.message, /paused/);

  assert.equal((await sbx.resume()).state, "started");
  assert.equal(sbx.info.state, "started");
  assert.equal((await sbx.resume()).state, "started", "resuming twice leaves it started");
  assert.equal((await sbx.commands.run("cat /tmp/state")).stdout, "kept\n");

  await sbx.stop();
  await assert.rejects(sbx.pause(), { status: 409, code: "conflict" });
  await assert.rejects(sbx.resume(), { status: 409, code: "conflict" });
});
