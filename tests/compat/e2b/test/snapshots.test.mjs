// The control plane's snapshots, fork, metrics and network through the SDK: a snapshot is a
// Sandfort snapshot (the filesystem), a fork a snapshot and sandboxes made from it, the network
// settings the egress allowlist (never more than a native create), getHost the preview host.
import { test } from "node:test";
import assert from "node:assert/strict";
import { Sandbox, NotFoundError } from "e2b";
import { OTHER_API_KEY, VIEWER_API_KEY, sandbox } from "../lib/live.mjs";

/** The sandbox as the native API shows it (org A's admin key). */
async function native(path, init = {}) {
  const res = await fetch(`${process.env.SANDFORT_BASE_URL}${path}`, {
    ...init,
    headers: { Authorization: `Bearer ${process.env.SANDFORT_ORG_ADMIN_KEY}`, ...(init.headers ?? {}) },
  });
  return { status: res.status, body: res.status === 204 ? null : await res.json() };
}

async function allSnapshots(opts = {}) {
  const out = [];
  const pages = Sandbox.listSnapshots({ limit: 2, ...opts });
  while (pages.hasNext) out.push(...(await pages.nextItems()));
  return out;
}

test("createSnapshot → Sandbox.create(snapshotId) has the files; listSnapshots; deleteSnapshot", async () => {
  const sbx = await sandbox();
  await sbx.files.write("/home/state/step.json", '{"step": 1}');
  const snap = await sbx.createSnapshot({ name: `e2b-snap-${process.pid}` });
  assert.match(snap.snapshotId, /^snap-/);
  assert.deepEqual(snap.names, [`e2b-snap-${process.pid}`]);
  const unnamed = await sbx.createSnapshot();
  assert.match(unnamed.names[0], /^e2b-[0-9a-f]{12}$/);
  assert.equal((await sbx.getInfo()).state, "running", "the source runs on");

  const fromIt = await Sandbox.create(snap.snapshotId, { timeoutMs: 300_000 });
  try {
    assert.equal(await fromIt.files.read("/home/state/step.json"), '{"step": 1}');
    assert.equal((await fromIt.getInfo()).templateId, snap.snapshotId);
  } finally {
    await fromIt.kill();
  }

  const ofSandbox = (await sbx.listSnapshots().nextItems()).map((s) => s.snapshotId).sort();
  assert.deepEqual(ofSandbox, [snap.snapshotId, unnamed.snapshotId].sort());
  const paged = (await allSnapshots()).map((s) => s.snapshotId);
  assert.ok(paged.includes(snap.snapshotId) && paged.includes(unnamed.snapshotId), JSON.stringify(paged));
  const byName = await Sandbox.listSnapshots({ name: `e2b-snap-${process.pid}` }).nextItems();
  assert.deepEqual(byName.map((s) => s.snapshotId), [snap.snapshotId]);

  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), false, "gone: not found");
  assert.equal(await Sandbox.deleteSnapshot(unnamed.names[0]), true, "by name too");
  await assert.rejects(Sandbox.create(snap.snapshotId, { timeoutMs: 60_000 }));
});

test("fork: new sandboxes with the source's files and settings (memory is not copied)", async () => {
  const sbx = await sandbox({ metadata: { fork: "source" }, envs: { FROM_SOURCE: "kept" } });
  await sbx.files.write("/tmp/forked.txt", "on disk");
  const forks = await sbx.fork({ count: 2, timeoutMs: 120_000 });
  try {
    assert.equal(forks.length, 2);
    for (const f of forks) {
      assert.ok(f instanceof Sandbox, String(f));
      assert.notEqual(f.sandboxId, sbx.sandboxId);
      assert.equal(await f.files.read("/tmp/forked.txt"), "on disk");
      assert.equal((await f.commands.run("echo $FROM_SOURCE")).stdout, "kept\n");
      assert.deepEqual((await f.getInfo()).metadata, { fork: "source" });
    }
  } finally {
    await Promise.all(forks.map((f) => (f instanceof Sandbox ? f.kill() : null)));
  }
  const left = (await sbx.listSnapshots().nextItems()).filter((s) => s.names[0].startsWith("e2b-fork-"));
  assert.equal(left.length, 1, "the fork's snapshot is kept, named e2b-fork-…");
  assert.equal(await Sandbox.deleteSnapshot(left[0].snapshotId), true);
  await assert.rejects(Sandbox.fork("sbx-0000000000000000"), NotFoundError);
});

test("getMetrics: one sample of the native metrics", async () => {
  const sbx = await sandbox();
  const metrics = await sbx.getMetrics();
  assert.equal(metrics.length, 1);
  const [m] = metrics;
  assert.ok(m.timestamp instanceof Date && !Number.isNaN(m.timestamp.getTime()));
  assert.ok(m.memUsed > 0 && m.memTotal >= m.memUsed, JSON.stringify(m));
  assert.ok(m.cpuCount > 0 && m.cpuUsedPct >= 0, JSON.stringify(m));
  await assert.rejects(Sandbox.getMetrics("sbx-0000000000000000"), NotFoundError);
});

test("network: allowOut is the egress allowlist; internet access opens nothing by itself", async () => {
  const open = await sandbox({ allowInternetAccess: true });
  assert.deepEqual((await native(`/v1/sandboxes/${open.sandboxId}`)).body.egress_allowlist, []);
  const some = await sandbox({ network: { allowOut: ["example.com", "*.pypi.org"], denyOut: ["0.0.0.0/0"] } });
  assert.deepEqual((await native(`/v1/sandboxes/${some.sandboxId}`)).body.egress_allowlist, ["example.com", "*.pypi.org"]);
  const closed = await sandbox({ allowInternetAccess: false });
  assert.deepEqual((await native(`/v1/sandboxes/${closed.sandboxId}`)).body.egress_allowlist, []);

  await some.updateNetwork({ allowOut: ["0.0.0.0/0"] });
  assert.deepEqual((await native(`/v1/sandboxes/${some.sandboxId}`)).body.egress_allowlist, ["*"]);
  await some.updateNetwork({});
  assert.deepEqual((await native(`/v1/sandboxes/${some.sandboxId}`)).body.egress_allowlist, [], "omitted: cleared");
  await assert.rejects(some.updateNetwork({ allowOut: ["not a host name!"] }));
  await assert.rejects(some.updateNetwork({ egressProxy: { address: "http://proxy:3128" } }));
  await assert.rejects(Sandbox.create({ timeoutMs: 60_000, network: { allowOut: ["1.2.3.0/24"] } }));
  assert.equal((await native(`/v1/sandboxes/${some.sandboxId}`)).body.public_preview, false);
  const shown = await sandbox({ network: { allowPublicTraffic: true } });
  assert.equal((await native(`/v1/sandboxes/${shown.sandboxId}`)).body.public_preview, true, "asked for by name");
});

test("getHost(port) is the sandbox's preview host: with the port's preview token it reaches the server", async () => {
  const sbx = await sandbox();
  const preview = await native(`/v1/sandboxes/${sbx.sandboxId}/preview/8000`);
  assert.equal(preview.status, 200);
  assert.equal(sbx.getHost(8000), new URL(preview.body.url).host);
  assert.equal(sbx.trafficAccessToken, sbx.envdAccessToken, "E2B's traffic token: the sandbox plane's (docs/e2b.md)");

  await sbx.files.write("/tmp/site/index.html", "served from the sandbox");
  await sbx.commands.run("cd /tmp/site && python3 -m http.server 8000 --bind 0.0.0.0", { background: true });
  const url = `https://${sbx.getHost(8000)}/index.html`;
  let res;
  for (let i = 0; i < 40; i++) {
    res = await fetch(url, { headers: { "X-Sandfort-Preview-Token": preview.body.token } });
    if (res.status === 200) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.equal(res.status, 200);
  assert.equal(await res.text(), "served from the sandbox");
  assert.equal((await fetch(url)).status, 401, "no token: refused");
  assert.equal((await fetch(url, { headers: { "e2b-traffic-access-token": sbx.envdAccessToken } })).status, 401,
    "E2B's header is not a preview token, nor is the envd access token");

  // The app is handed neither credential: an echo of the headers it received.
  await sbx.files.write("/tmp/echo.py", [
    "import http.server, json",
    "class H(http.server.BaseHTTPRequestHandler):",
    "    def do_GET(self):",
    "        body = json.dumps({k.lower(): v for k, v in self.headers.items()}).encode()",
    "        self.send_response(200); self.send_header('Content-Length', str(len(body))); self.end_headers()",
    "        self.wfile.write(body)",
    "http.server.HTTPServer(('0.0.0.0', 8001), H).serve_forever()",
  ].join("\n"));
  await sbx.commands.run("python3 /tmp/echo.py", { background: true });
  const echo = await native(`/v1/sandboxes/${sbx.sandboxId}/preview/8001`);
  const headers = { "X-Sandfort-Preview-Token": echo.body.token, "e2b-traffic-access-token": sbx.trafficAccessToken };
  for (let i = 0; i < 40; i++) {
    res = await fetch(`https://${sbx.getHost(8001)}/`, { headers });
    if (res.status === 200) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.equal(res.status, 200);
  const seen = await res.json();
  assert.equal(seen["e2b-traffic-access-token"], undefined, JSON.stringify(seen));
  assert.equal(seen["x-sandfort-preview-token"], undefined, JSON.stringify(seen));
});

test("another organization's key and a viewer's: no snapshot, fork, metrics or network of this one", async () => {
  const sbx = await sandbox();
  const snap = await sbx.createSnapshot();
  const theirs = { apiKey: OTHER_API_KEY };
  await assert.rejects(Sandbox.createSnapshot(sbx.sandboxId, theirs), NotFoundError);
  await assert.rejects(Sandbox.fork(sbx.sandboxId, theirs), NotFoundError);
  await assert.rejects(Sandbox.getMetrics(sbx.sandboxId, theirs), NotFoundError);
  await assert.rejects(Sandbox.updateNetwork(sbx.sandboxId, { allowOut: ["*"] }, theirs), NotFoundError);
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId, theirs), false);
  assert.equal(await Sandbox.deleteSnapshot(snap.names[0], theirs), false);
  assert.deepEqual(await Sandbox.listSnapshots({ ...theirs, sandboxId: sbx.sandboxId }).nextItems(), []);
  await assert.rejects(Sandbox.create(snap.snapshotId, { ...theirs, timeoutMs: 60_000 }));
  const viewer = { apiKey: VIEWER_API_KEY };
  await assert.rejects(Sandbox.createSnapshot(sbx.sandboxId, viewer), (e) => e.statusCode === 403 || /403/.test(e.message));
  assert.equal((await Sandbox.listSnapshots({ ...viewer, sandboxId: sbx.sandboxId }).nextItems()).length, 1);
  assert.equal(await Sandbox.deleteSnapshot(snap.snapshotId), true);
});
