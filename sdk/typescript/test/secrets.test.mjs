// client.secrets: a value goes in and never comes out; rotation bumps the version; a viewer reads
// the metadata and cannot change it; bad input is refused with the error shape.
import { before, test } from "node:test";
import assert from "node:assert/strict";
import { randomBytes } from "node:crypto";
import { SandfortClient } from "../dist/esm/index.js";
import { BASE_URL, client } from "../testlib/live.mjs";

let admin;

before(async () => {
  const org = await client.http.json("POST", "/v1/orgs", { json: { name: `secrets-ts-${randomBytes(4).toString("hex")}` } });
  const key = await client.http.json("POST", `/v1/orgs/${org.id}/api-keys`, { json: { name: "secrets-admin", role: "admin" } });
  admin = new SandfortClient({ baseUrl: BASE_URL, apiKey: key.key });
});

test("create, list, get, rotate and delete never return the value", async () => {
  const value = `sk-ts-${randomBytes(16).toString("hex")}`;
  const s = await admin.secrets.create({
    name: "openai",
    value,
    hosts: ["api.openai.com"],
    header: "Authorization",
    format: "Bearer {value}",
  });
  assert.equal(s.name, "openai");
  assert.equal(s.version, 1);
  assert.deepEqual(s.hosts, ["api.openai.com"]);
  assert.deepEqual(s.placement, { type: "header", header: "Authorization", format: "Bearer {value}" });
  assert.ok(!JSON.stringify(s).includes(value));
  await assert.rejects(admin.secrets.create({ name: "openai", value: "x", hosts: ["a.example"], header: "X-Key" }), {
    status: 409,
    code: "conflict",
  });
  const q = await admin.secrets.create({ name: "maps", value: "k", hosts: ["*.maps.example.com"], query: "key" });
  assert.deepEqual(q.placement, { type: "query", query: "key" });
  const b = await admin.secrets.create({
    name: "registry",
    value: "pw",
    hosts: ["registry.example.com"],
    basicAuth: { username: "deploy" },
  });
  assert.deepEqual(b.placement, { type: "basic_auth", username: "deploy" });

  const listed = await admin.secrets.list();
  assert.deepEqual(
    listed.map((x) => x.name),
    ["maps", "openai", "registry"],
  );
  assert.ok(!JSON.stringify(listed).includes(value));
  assert.equal((await admin.secrets.get("openai")).version, 1);

  const rotated = await admin.secrets.rotate("openai", { value: `sk-new-${randomBytes(8).toString("hex")}` });
  assert.equal(rotated.version, 2);
  const rehosted = await admin.secrets.rotate("openai", { hosts: ["api.openai.com", "*.openai.azure.com"] });
  assert.equal(rehosted.version, 3);
  assert.deepEqual(rehosted.hosts, ["api.openai.com", "*.openai.azure.com"]);

  for (const name of ["openai", "maps", "registry"]) await admin.secrets.delete(name);
  await assert.rejects(admin.secrets.get("openai"), { status: 404, code: "not_found" });
  await assert.rejects(admin.secrets.delete("openai"), { status: 404, code: "not_found" });
  assert.deepEqual(await admin.secrets.list(), []);
});

test("a viewer reads but cannot change; bad input is 400; the interception CA is a certificate", async () => {
  await admin.secrets.create({ name: "viewer-check", value: "v", hosts: ["example.com"], header: "X-Api-Key" });
  const viewerKey = await admin.http.json("POST", "/v1/api-keys", { json: { name: "viewer", role: "viewer" } });
  const viewer = new SandfortClient({ baseUrl: BASE_URL, apiKey: viewerKey.key });
  assert.deepEqual(
    (await viewer.secrets.list()).map((s) => s.name),
    ["viewer-check"],
  );
  await assert.rejects(viewer.secrets.create({ name: "nope", value: "v", hosts: ["example.com"], header: "X-Key" }), {
    status: 403,
  });
  await assert.rejects(viewer.secrets.rotate("viewer-check", { value: "w" }), { status: 403 });
  await assert.rejects(viewer.secrets.delete("viewer-check"), { status: 403 });
  await admin.secrets.delete("viewer-check");

  await assert.rejects(admin.secrets.create({ name: "Bad Name", value: "v", hosts: ["example.com"], header: "X-Key" }), {
    status: 400,
    code: "invalid_argument",
  });
  await assert.rejects(admin.secrets.create({ name: "any", value: "v", hosts: ["*"], header: "X-Key" }), { status: 400 });
  await assert.rejects(admin.secrets.rotate("whatever", {}), { status: 400 });
  const pem = await admin.secrets.interceptionCa();
  assert.match(pem, /^-----BEGIN CERTIFICATE-----/);
  assert.equal(await admin.secrets.interceptionCa(), pem);
});

test("a sandbox created with secrets holds placeholders only; an unknown secret creates nothing", async () => {
  const value = `sk-ts-${randomBytes(16).toString("hex")}`;
  await admin.secrets.create({ name: "model-key", value, hosts: ["api.example.com"], header: "Authorization", format: "Bearer {value}" });
  await assert.rejects(admin.createSandbox({ secrets: ["no-such-secret"] }), { status: 404, code: "not_found" });
  assert.deepEqual((await admin.listSandboxes()).items, []);
  const sbx = await admin.createSandbox({ secrets: [{ name: "model-key", env: "OPENAI_API_KEY" }] });
  try {
    const [attached] = sbx.info.secrets;
    assert.equal(attached.name, "model-key");
    assert.equal(attached.env, "OPENAI_API_KEY");
    assert.match(attached.placeholder, /^sfph_[0-9a-f]{32}$/);
    const env = (await sbx.commands.run("env")).stdout;
    assert.ok(env.includes(`OPENAI_API_KEY=${attached.placeholder}\n`), env);
    assert.ok(!env.includes(value));
    assert.deepEqual((await admin.getSandbox(sbx.id)).info.secrets, sbx.info.secrets);
  } finally {
    await sbx.kill();
    await admin.secrets.delete("model-key");
  }
});
