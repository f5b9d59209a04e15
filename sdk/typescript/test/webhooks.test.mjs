// verifyWebhook against good, tampered, wrongly keyed and stale deliveries, and
// client.webhooks against a live one: the secret shown once, the address policy, the log.
import { before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { SandfortClient, WebhookSignatureError, signWebhook, verifyWebhook } from "../dist/esm/index.js";
import { BASE_URL, client } from "../testlib/live.mjs";

const SECRET = "whsec_" + "ab".repeat(32);
const BODY = JSON.stringify({ seq: 7, type: "sandbox.stopped", reason: "oom" });

test("a good signature verifies and yields the event", () => {
  const t = Math.floor(Date.now() / 1000);
  assert.equal(verifyWebhook(BODY, signWebhook(BODY, SECRET, t), SECRET).reason, "oom");
  assert.equal(verifyWebhook(Buffer.from(BODY), signWebhook(BODY, SECRET, t), SECRET).seq, 7);
  // The scheme, computed apart (Python's hmac): the same value the daemon's unit test checks.
  assert.equal(
    signWebhook('{"a":1}', SECRET, 1700000000),
    "t=1700000000,v1=4b04ef65acbc4206285c1c32a0ecc6736f604a6d113dadee0537e39c2d2b1c41",
  );
  assert.equal(verifyWebhook(BODY, [signWebhook(BODY, SECRET, t) + ",v1=" + "0".repeat(64)], SECRET).seq, 7);
});

test("a tampered body, a wrong secret, a stale or malformed header are refused", () => {
  const t = Math.floor(Date.now() / 1000);
  const header = signWebhook(BODY, SECRET, t);
  assert.throws(() => verifyWebhook(BODY.replace("oom", "ttl"), header, SECRET), WebhookSignatureError);
  assert.throws(() => verifyWebhook(BODY, header, "whsec_" + "cd".repeat(32)), /no signature matches/);
  const stale = signWebhook(BODY, SECRET, t - 301);
  assert.throws(() => verifyWebhook(BODY, stale, SECRET), /tolerance/);
  assert.equal(verifyWebhook(BODY, stale, SECRET, { toleranceS: 600 }).seq, 7);
  for (const bad of [undefined, "", "v1=abc", "t=now,v1=abc", `t=${t}`]) {
    assert.throws(() => verifyWebhook(BODY, bad, SECRET), WebhookSignatureError);
  }
});

let admin;

before(async () => {
  const org = await client.http.json("POST", "/v1/orgs", { json: { name: `webhooks-ts-${randomBytes(4).toString("hex")}` } });
  const key = await client.http.json("POST", `/v1/orgs/${org.id}/api-keys`, { json: { name: "webhooks-admin", role: "admin" } });
  admin = new SandfortClient({ baseUrl: BASE_URL, apiKey: key.key });
});

test("create, list, update, rotate, read the log and delete", async () => {
  const hook = await admin.webhooks.create({ url: "https://1.1.1.1/sandfort", types: ["snapshot.deleted"] });
  assert.match(hook.id, /^whk-/);
  assert.match(hook.secret, /^whsec_[0-9a-f]{64}$/);
  const listed = await admin.webhooks.list();
  assert.deepEqual(listed.map((w) => w.id), [hook.id]);
  assert.equal(listed[0].secret, undefined);
  const off = await admin.webhooks.update(hook.id, { enabled: false });
  assert.equal(off.enabled, false);
  const rotated = await admin.webhooks.rotateSecret(hook.id, { keepPreviousS: 60 });
  assert.notEqual(rotated.secret, hook.secret);
  assert.deepEqual(await admin.webhooks.deliveries(hook.id, { limit: 5 }), { items: [], nextCursor: null });
  await admin.webhooks.delete(hook.id);
  await assert.rejects(admin.webhooks.get(hook.id), (e) => e.status === 404);
  await assert.rejects(admin.webhooks.create({ url: "http://169.254.169.254/latest/meta-data/" }),
    (e) => e.status === 400 && /link-local/.test(e.message));
});
