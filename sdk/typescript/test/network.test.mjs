// Preview links, ports, egress allowlist updates (PATCH), metrics, stop/start.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import http from "node:http";
import { sandbox, until, PREVIEW_PORT } from "../testlib/live.mjs";

let sbx;
before(async () => {
  sbx = await sandbox({ egressAllowlist: ["example.com"] });
  await sbx.files.write("/srv/index.html", "hello from the sandbox\n");
  await sbx.commands.start("cd /srv && python3 -m http.server 8080");
  await until(async () => (await sbx.ports()).some((p) => p.port === 8080), "port 8080 to listen");
});

function previewGet(url, headers = {}) {
  const u = new URL(url);
  return new Promise((resolve, reject) => {
    const req = http.request(
      { host: "127.0.0.1", port: u.port, path: u.pathname, headers: { Host: u.host, ...headers } },
      (res) => {
        let body = "";
        res.on("data", (c) => (body += c));
        res.on("end", () => resolve({ status: res.statusCode, body }));
      },
    );
    req.on("error", reject);
    req.end();
  });
}

test("preview link: URL of the template, a token that opens the port", async () => {
  const link = await sbx.getPreviewLink(8080);
  assert.equal(link.url, sbx.getPreviewUrl(8080));
  assert.match(link.url, new RegExp(`^http://8080-${sbx.id}\\.`));
  if (PREVIEW_PORT) assert.ok(link.url.endsWith(`:${PREVIEW_PORT}`), link.url);
  assert.match(link.token, /^[0-9a-f]{64}$/);
  const ok = await previewGet(link.url, { "X-Sandfort-Preview-Token": link.token });
  assert.equal(ok.status, 200);
  assert.equal(ok.body, "hello from the sandbox\n");
  assert.equal((await previewGet(link.url)).status, 401);
  // The link to hand on opens as printed: fetch resolves *.localhost through the system.
  assert.equal(link.link, `${link.url}/?sandfort_token=${link.token}`);
  const opened = await fetch(link.link);
  assert.equal(opened.status, 200);
  assert.equal(await opened.text(), "hello from the sandbox\n");
  await assert.rejects(sbx.getPreviewLink(70000), { status: 400 });
});

test("ports list the listener with its preview URL", async () => {
  const p = (await sbx.ports()).find((x) => x.port === 8080);
  assert.equal(p.protocol, "tcp");
  assert.equal(p.previewable, true);
  assert.equal(p.url, sbx.getPreviewUrl(8080));
  assert.equal(typeof p.address, "string");
});

test("egress allowlist: created, updated with PATCH, emptied", async () => {
  assert.deepEqual(sbx.info.egressAllowlist, ["example.com"]);
  const updated = await sbx.setEgressAllowlist(["example.com", "*.pypi.org"]);
  assert.deepEqual(updated.egressAllowlist, ["example.com", "*.pypi.org"]);
  assert.deepEqual((await sbx.refresh()).egressAllowlist, ["example.com", "*.pypi.org"]);
  // A host that is not allowed is refused by the proxy (403) and never dialled.
  const r = await sbx.commands.run(
    `python3 -c "import urllib.request as u
try:
    u.urlopen('http://not-allowed.invalid/', timeout=10)
except Exception as e:
    print(getattr(e, 'code', e))"`,
  );
  assert.match(r.stdout, /403/);
  const both = await sbx.update({ egressAllowlist: [], labels: { stage: "t" }, ttlS: 3600 });
  assert.deepEqual(both.egressAllowlist, []);
  assert.deepEqual(both.labels, { stage: "t" });
  assert.ok(both.expiresAt);
  await assert.rejects(sbx.update({ egressAllowlist: ["not a host!"] }), { status: 400, code: "invalid_argument" });
});

test("egress deny entries and rules: created, read back, replaced with PATCH, validated", async () => {
  const rule = { host: "example.com", methods: ["GET"], paths: ["/repos/acme/*"] };
  const other = await sandbox({ egressAllowlist: ["*"], egressDeny: ["example.org"], egressRules: [rule] });
  try {
    assert.deepEqual(other.info.egressDeny, ["example.org"]);
    assert.deepEqual(other.info.egressRules, [rule]);
    // The deny entry wins over "*": refused by the proxy, never dialled.
    const r = await other.commands.run(
      `python3 -c "import urllib.request as u
try:
    u.urlopen('http://example.org/', timeout=10)
except Exception as e:
    print(getattr(e, 'code', e))"`,
    );
    assert.match(r.stdout, /403/);
    const cleared = await other.update({ egressDeny: [], egressRules: [] });
    assert.deepEqual(cleared.egressDeny, []);
    assert.deepEqual(cleared.egressRules, []);
    await assert.rejects(other.update({ egressRules: [{ host: "example.com", methods: ["get"] }] }), {
      status: 400,
      code: "invalid_argument",
    });
  } finally {
    await other.kill();
  }
});

test("metrics and whoami", async () => {
  const m = await sbx.metrics();
  assert.equal(typeof m.cpuPercent, "number");
  assert.ok(m.memoryBytes > 0);
  assert.ok(m.memoryLimitBytes > 0);
  assert.ok(m.pids >= 1);
  assert.equal(typeof m.egressBytesOut, "number");
  const me = await sbx.client.whoami();
  assert.equal(me.auth, "api_key");
  assert.equal(typeof me.role, "string");
});

test("stop and start", async () => {
  const other = await sandbox();
  assert.equal((await other.stop()).state, "stopped");
  await assert.rejects(other.commands.run("true"), { status: 409, code: "conflict" });
  assert.equal((await other.start()).state, "started");
  assert.equal((await other.commands.run("echo back")).stdout, "back\n");
});
