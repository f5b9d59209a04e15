// Volumes and snapshots are one named-resource layer in the SDK (src/resource.ts): the checks of
// what they share. `kind` is "Volume" or "Snapshot", as in the client's method names.
import assert from "node:assert/strict";
import { SandfortError } from "../dist/esm/index.js";
import { client } from "./live.mjs";

/** `rec`, called `name`, is found by name and by id, and listed when paged one at a time. */
export async function checkNamed(kind, rec, name) {
  assert.equal((await client[`get${kind}`](name)).id, rec.id);
  assert.equal((await client[`get${kind}`](rec.id)).name, name);
  const names = [];
  let cursor;
  do {
    const page = await client[`list${kind}s`]({ limit: 1, cursor });
    assert.ok(page.items.length <= 1);
    names.push(...page.items.map((r) => r.name));
    cursor = page.nextCursor ?? undefined;
  } while (cursor);
  assert.ok(names.includes(name));
}

/** Deleting `name` is refused with a 409 while it is in use. */
export async function checkInUse(kind, name) {
  const err = await client[`delete${kind}`](name).catch((e) => e);
  assert.ok(err instanceof SandfortError);
  assert.equal(err.status, 409);
}

/** Deletes `name`; then getting it is a 404 and deleting it again answers false. */
export async function checkDeleted(kind, name) {
  assert.equal(await client[`delete${kind}`](name), true);
  await assert.rejects(client[`get${kind}`](name), { status: 404, code: "not_found" });
  assert.equal(await client[`delete${kind}`](name), false);
}
