// The guardrails of the native API hold through the E2B door unchanged: an organization's sandbox
// quota (E2B's own answer to its concurrency limit is a 429 too: RateLimitError), the image policy
// and the kill switch. Each test makes an organization of its own (the operator's key), so that
// its limits touch no other test.
import { test, after } from "node:test";
import assert from "node:assert/strict";
import { RateLimitError, Sandbox, SandboxError } from "e2b";

const base = process.env.SANDFORT_BASE_URL;
const made = [];
after(async () => {
  await Promise.all(made.map((s) => s.kill().catch(() => {})));
});

async function native(method, path, key, body) {
  const r = await fetch(base + path, {
    method,
    headers: { authorization: `Bearer ${key}`, "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await r.text();
  return { status: r.status, json: text ? JSON.parse(text) : null };
}

/** A new organization with its own admin key, and the limits given set by the operator. */
async function organization(name, limits) {
  const su = process.env.SANDFORT_SUPERADMIN_KEY;
  const org = await native("POST", "/v1/orgs", su, { name });
  assert.equal(org.status, 201, JSON.stringify(org.json));
  const key = await native("POST", `/v1/orgs/${org.json.id}/api-keys`, su, { name: "e2b", role: "admin" });
  assert.equal(key.status, 201, JSON.stringify(key.json));
  if (limits) assert.equal((await native("PUT", `/v1/orgs/${org.json.id}/limits`, su, limits)).status, 200);
  return { id: org.json.id, apiKey: key.json.key };
}

async function create(apiKey, template) {
  const opts = { apiKey, timeoutMs: 600_000 };
  const sbx = await (template ? Sandbox.create(template, opts) : Sandbox.create(opts));
  made.push(sbx);
  return sbx;
}

test("the organization's sandbox quota: the next create is RateLimitError naming the quota", async () => {
  const { apiKey } = await organization("e2b-quota", { max_sandboxes: 1 });
  await create(apiKey);
  const err = await create(apiKey).catch((e) => e);
  assert.ok(err instanceof RateLimitError, String(err));
  assert.match(err.message, /quota exceeded: sandboxes — 1 of 1/);
});

test("the image policy: a template outside allowed_images is refused, naming it", async () => {
  const { apiKey } = await organization("e2b-images", { allowed_images: ["sandfort/base:*"] });
  const err = await create(apiKey, "debian:bookworm").catch((e) => e);
  assert.ok(err instanceof SandboxError, String(err));
  assert.match(err.message, /debian:bookworm/);
});

test("the kill switch stops the organization's sandboxes and refuses creates until lifted; connect starts one again", async () => {
  const { id, apiKey } = await organization("e2b-kill-switch");
  const sbx = await create(apiKey);
  assert.equal((await sbx.commands.run("echo up")).stdout, "up\n");
  assert.equal((await native("POST", `/v1/orgs/${id}/stop-all`, apiKey)).status, 200);
  assert.equal(await sbx.isRunning(), false);
  const err = await create(apiKey).catch((e) => e);
  assert.ok(err instanceof SandboxError, String(err));
  assert.match(err.message, /stopped \(kill switch/);
  assert.equal((await native("DELETE", `/v1/orgs/${id}/stop-all`, apiKey)).status, 204);
  // Once lifted, connect starts the stopped sandbox again, its files kept.
  const again = await Sandbox.connect(sbx.sandboxId, { apiKey });
  assert.equal(await again.isRunning(), true);
  assert.equal((await again.commands.run("echo back")).stdout, "back\n");
  await create(apiKey);
});
