// client.events(): the organization's life-cycle events in order, each stop with its reason,
// filtered by type, resumed after a given event, and followed across a dropped connection
// without losing or repeating an event.
import { test } from "node:test";
import assert from "node:assert/strict";
import { SandfortError } from "../dist/esm/index.js";
import { client } from "../testlib/live.mjs";

/** Events of the stream up to the first `type` of `sandboxId`. */
async function upTo(stream, iterator, sandboxId, type) {
  const got = [];
  for (;;) {
    const { value, done } = await iterator.next();
    assert.ok(!done, "the stream ended");
    got.push(value);
    if (value.type === type && value.target === sandboxId) return got;
  }
}

test("events: a sandbox's life in order, with the stop's reason; after and types", async () => {
  const stream = client.events();
  const it = stream[Symbol.asyncIterator]();
  const first = it.next(); // opens the stream before the sandbox is made
  const sbx = await client.createSandbox();
  await sbx.stop();
  await sbx.kill();
  const events = [(await first).value, ...(await upTo(stream, it, sbx.info.id, "sandbox.deleted"))];
  stream.close();
  const mine = events.filter((e) => e.target === sbx.info.id);
  assert.deepEqual(
    mine.map((e) => e.type),
    ["sandbox.created", "sandbox.started", "sandbox.stopped", "sandbox.deleted"],
  );
  assert.equal(mine[2].reason, "request");
  assert.equal(mine[0].reason, undefined);
  const seqs = events.map((e) => e.seq);
  assert.deepEqual(seqs, [...seqs].sort((a, b) => a - b));
  assert.equal(new Set(seqs).size, seqs.length);

  const later = client.events({ after: mine[1].seq });
  const got = await upTo(later, later[Symbol.asyncIterator](), sbx.info.id, "sandbox.deleted");
  later.close();
  assert.deepEqual(
    got.map((e) => e.seq),
    events.filter((e) => e.seq > mine[1].seq).map((e) => e.seq),
  );

  const ctl = new AbortController();
  const only = client.events({ after: mine[0].seq - 1, types: ["sandbox.stopped", "sandbox.deleted"], signal: ctl.signal });
  const filtered = await upTo(only, only[Symbol.asyncIterator](), sbx.info.id, "sandbox.deleted");
  ctl.abort();
  assert.deepEqual(
    filtered.filter((e) => e.target === sbx.info.id).map((e) => [e.type, e.reason]),
    [["sandbox.stopped", "request"], ["sandbox.deleted", undefined]],
  );
});

test("events: a dropped connection is resumed without a gap or a repeat", async () => {
  const first = await client.createSandbox();
  const stream = client.events({ types: ["sandbox.created", "sandbox.deleted"] });
  const it = stream[Symbol.asyncIterator]();
  const before = await upTo(stream, it, first.info.id, "sandbox.created");
  stream.drop(); // the connection breaks as a network failure would
  await first.kill();
  const second = await client.createSandbox();
  await second.kill();
  const after = await upTo(stream, it, second.info.id, "sandbox.deleted");
  stream.close();
  assert.ok(stream.reconnects >= 1);
  assert.deepEqual(
    after.filter((e) => e.target === first.info.id || e.target === second.info.id).map((e) => [e.type, e.target]),
    [
      ["sandbox.deleted", first.info.id],
      ["sandbox.created", second.info.id],
      ["sandbox.deleted", second.info.id],
    ],
  );
  assert.ok(after[0].seq > before[before.length - 1].seq);
});

test("events: a bad type is thrown, not retried", async () => {
  const it = client.events({ types: ["sandbox.exploded"] })[Symbol.asyncIterator]();
  const err = await it.next().catch((e) => e);
  assert.ok(err instanceof SandfortError);
  assert.equal(err.status, 400);
  assert.equal(err.code, "invalid_argument");
});
