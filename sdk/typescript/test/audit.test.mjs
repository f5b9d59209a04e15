// client.audit against a live daemon: events, export, checkpoints, the daemon's and the
// client-side verification, tampering with the downloaded chain, and the canonical JSON checked
// byte for byte against Python's json.dumps.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, readFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { randomBytes } from "node:crypto";
import {
  SandfortClient,
  SandfortError,
  verifyChain,
  canonicalJson,
  eventCanonicalJson,
  eventHash,
  checkpointMessage,
  compareCodePoints,
  GENESIS_HASH,
} from "../dist/esm/index.js";
import { BASE_URL, client } from "../testlib/live.mjs";

// Key names that exercise every escaping rule of the canonical form.
const NAMES = [
  "clé-ü✓😀",
  'quote " backslash \\ slash / end',
  "ctrl \u0001\u001f\t\n\r\b\f del \u007f seps \u2028\u2029",
  "astral 𝄞 private \ue000",
];
const OTHER_ORG = "org-0000000000000000";

let org, admin, memberKey, keys, early, final, pem;

async function collect(it) {
  const out = [];
  for await (const x of it) out.push(x);
  return out;
}

/** Waits until the chain stops growing (the daemon's own sandbox.state events come late). */
async function waitQuiet(c, quietMs = 1500, limitMs = 30000) {
  const deadline = Date.now() + limitMs;
  let last;
  let since = Date.now();
  while (Date.now() < deadline) {
    const head = (await collect(c.audit.events())).at(-1).seq;
    if (head !== last) [last, since] = [head, Date.now()];
    else if (Date.now() - since >= quietMs) return head;
    await new Promise((r) => setTimeout(r, 300));
  }
  throw new Error("the audit chain kept growing");
}

before(async () => {
  org = await client.http.json("POST", "/v1/orgs", { json: { name: `audit-ts-${randomBytes(4).toString("hex")}` } });
  const adminKey = await client.http.json("POST", `/v1/orgs/${org.id}/api-keys`, {
    json: { name: "audit-admin", role: "admin" },
  });
  admin = new SandfortClient({ baseUrl: BASE_URL, apiKey: adminKey.key });
  early = await admin.audit.createCheckpoint();
  keys = [];
  for (const name of NAMES) keys.push(await admin.http.json("POST", "/v1/api-keys", { json: { name, role: "viewer" } }));
  await admin.http.json("DELETE", `/v1/api-keys/${keys.at(-1).id}`);
  memberKey = (await admin.http.json("POST", "/v1/api-keys", { json: { name: "member ✓", role: "member" } })).key;
  const sbx = await admin.createSandbox({ labels: { team: "clé-ü✓😀" } });
  try {
    // The daemon records a command cut at 1 KiB, with "…" appended.
    assert.equal((await sbx.commands.run("true é " + "x".repeat(1100))).exitCode, 0);
    assert.equal((await sbx.commands.run(`printf '%s' 'é😀 "q" \\\\'`)).stdout, 'é😀 "q" \\\\');
  } finally {
    await sbx.kill();
  }
  await waitQuiet(admin);
  final = await admin.audit.createCheckpoint();
  pem = (await admin.audit.publicKey()).publicKeyPem;
});

async function download() {
  const checkpoints = await admin.audit.checkpoints();
  const events = await collect(admin.audit.events());
  return { events, checkpoints };
}

test("events: pages, cursors and filters", async () => {
  const events = await collect(admin.audit.events({ limit: 2 }));
  assert.deepEqual(
    events.map((e) => e.seq),
    events.map((_, i) => i + 1),
  );
  assert.deepEqual(new Set(events.map((e) => e.org_id)), new Set([org.id]));
  assert.deepEqual((await admin.audit.listEvents({ limit: 1000 })).items, events);
  const first = await admin.audit.listEvents({ limit: 3 });
  assert.deepEqual(
    first.items.map((e) => e.seq),
    [1, 2, 3],
  );
  assert.equal(first.nextCursor, "3");
  const rest = await admin.audit.listEvents({ cursor: first.nextCursor, limit: 1000 });
  assert.equal(rest.items[0].seq, 4);
  assert.equal(rest.nextCursor, null);
  const n = events.length;
  assert.deepEqual(
    (await admin.audit.listEvents({ sinceSeq: n - 2 })).items.map((e) => e.seq),
    [n - 1, n],
  );

  const created = events.filter((e) => e.action === "api_key.create");
  assert.deepEqual(
    created.slice(1, 1 + NAMES.length).map((e) => e.details.name),
    NAMES,
  );
  assert.deepEqual(
    (await collect(admin.audit.events({ action: "api_key.create" }))).map((e) => e.seq),
    created.map((e) => e.seq),
  );
  assert.deepEqual(
    (await collect(admin.audit.events({ target: keys.at(-1).id }))).map((e) => e.action),
    ["api_key.create", "api_key.revoke"],
  );
  const actor = created[1].actor;
  assert.ok((await collect(admin.audit.events({ actor }))).every((e) => e.actor === actor));
  const actions = new Set(events.map((e) => e.action));
  for (const a of ["org.create", "api_key.revoke", "sandbox.create", "sandbox.exec", "sandbox.delete"]) {
    assert.ok(actions.has(a), a);
  }

  // since/until are inclusive; a Date is sent as UTC.
  const ev = events[3];
  assert.deepEqual(
    (await collect(admin.audit.events({ since: new Date(ev.ts), until: ev.ts }))).map((e) => e.seq),
    events.filter((e) => e.ts === ev.ts).map((e) => e.seq),
  );
  assert.deepEqual(await collect(admin.audit.events({ until: new Date(Date.UTC(2000, 0, 1)) })), []);

  // The superadmin reads the organization's chain with org=; a member may not read it at all.
  assert.deepEqual(
    (await collect(client.audit.events({ org: org.id }))).map((e) => e.hash),
    events.map((e) => e.hash),
  );
  assert.deepEqual(
    (await collect(client.audit.events({ org: org.name }))).map((e) => e.hash),
    events.map((e) => e.hash),
  );
  const member = new SandfortClient({ baseUrl: BASE_URL, apiKey: memberKey });
  await assert.rejects(member.audit.listEvents(), { name: "SandfortError", status: 403, code: "permission_denied" });
  assert.equal((await member.audit.publicKey()).publicKeyPem, pem);
});

test("export: JSON Lines across requests, following X-Next-Cursor", async () => {
  const events = await collect(admin.audit.events());
  const chunks = await collect(admin.audit.export({ limit: 2 }));
  assert.equal(chunks.length, Math.ceil(events.length / 2));
  // Lines end at "\n" only: a raw U+2028 stays inside its string.
  const lines = chunks.join("").split("\n");
  assert.equal(lines.pop(), "");
  assert.deepEqual(
    lines.map((l) => JSON.parse(l)),
    events,
  );
  const later = (await collect(admin.audit.export({ sinceSeq: 2, limit: 3 }))).join("");
  assert.equal(later, lines.slice(2).join("\n") + "\n");
  const revokes = (await collect(admin.audit.export({ action: "api_key.revoke", limit: 1 }))).join("");
  assert.deepEqual(
    revokes
      .split("\n")
      .slice(0, -1)
      .map((l) => JSON.parse(l).action),
    ["api_key.revoke"],
  );
});

test("checkpoints, and the daemon's and the client-side verification agree", async () => {
  const { events, checkpoints } = await download();
  assert.ok(early.created && final.created);
  assert.equal(early.seq, 2); // org.create and the admin key's creation
  assert.equal(final.seq, events.length);
  const again = await admin.audit.createCheckpoint();
  assert.equal(again.created, false);
  assert.deepEqual(again, { ...final, created: false });
  const strip = ({ created, ...c }) => c; // eslint-disable-line no-unused-vars
  assert.deepEqual(checkpoints, [strip(early), strip(final)]);
  assert.deepEqual(
    (await admin.audit.checkpoints({ afterSeq: early.seq })).map((c) => c.seq),
    [final.seq],
  );
  assert.deepEqual(
    (await admin.audit.checkpoints({ limit: 1 })).map((c) => c.seq),
    [early.seq, final.seq],
  );

  const server = await admin.audit.verify();
  assert.equal(server.ok, true);
  assert.equal(server.orgId, org.id);
  assert.equal(server.latestCheckpointSeq, final.seq);
  const mine = await verifyChain(events, checkpoints, pem);
  assert.equal(mine.ok, true, mine.reason);
  assert.deepEqual(
    [mine.events, mine.checkpoints, mine.headHash, mine.orgId],
    [server.events, server.checkpoints, server.headHash, server.orgId],
  );
  assert.equal(mine.headHash, final.head_hash);
  assert.equal(mine.firstBadSeq, undefined);
  assert.equal(mine.reason, undefined);

  for (const e of events) assert.equal(await eventHash(e), e.hash);
  const body = events.map(eventCanonicalJson).join("");
  assert.ok(body.includes("clé-ü✓😀"));
  assert.ok(body.includes("\\u0001\\u001f\\t\\n\\r\\b\\f del \u007f seps \u2028\u2029"));
  assert.ok(body.includes('\\" backslash \\\\ slash / end'));
  assert.ok(body.includes("true é " + "x".repeat(1024 - 8) + "…"));

  const remote = await admin.audit.verifyRemote(pem);
  assert.equal(remote.ok, true, remote.reason);
  assert.equal(remote.headHash, server.headHash);
  const bySuper = await client.audit.verifyRemote(pem, { org: org.id });
  assert.equal(bySuper.ok, true, bySuper.reason);
  assert.equal(bySuper.orgId, org.id);
  assert.equal((await client.audit.verify({ org: org.name })).headHash, server.headHash);
});

test("the canonical form is Python's json.dumps, byte for byte", async () => {
  const { events, checkpoints } = await download();
  const tricky = { "😀": 1, "\ue000": 2, b: [true, null, -0, "\u0001\"\\/\u2028"], 10: {}, 2: 3, a: "é", "\ud7ff": 4 };
  const inputs = [tricky, ...events.map(({ hash, ...rest }) => rest), ...checkpoints.map(({ signature, ...c }) => c)]; // eslint-disable-line no-unused-vars
  const py =
    "import json, sys\n" +
    "for line in sys.stdin.buffer.read().decode().split('\\n')[:-1]:\n" +
    "    sys.stdout.write(json.dumps(json.loads(line), sort_keys=True, separators=(',', ':'), ensure_ascii=False).encode().hex() + '\\n')\n";
  const out = execFileSync("/usr/bin/python3", ["-c", py], {
    input: inputs.map((o) => JSON.stringify(o) + "\n").join(""),
    encoding: "utf8",
  }).split("\n");
  const hex = (s) => Buffer.from(s, "utf8").toString("hex");
  assert.equal(hex(canonicalJson(tricky)), out[0]);
  events.forEach((e, i) => assert.equal(hex(eventCanonicalJson(e)), out[1 + i], `seq ${e.seq}`));
  checkpoints.forEach((c, i) => assert.equal(hex(checkpointMessage(c)), out[1 + events.length + i], `checkpoint ${c.seq}`));
  assert.equal(
    canonicalJson(tricky),
    '{"10":{},"2":3,"a":"é","b":[true,null,0,"\\u0001\\"\\\\/\u2028"],"\ud7ff":4,"\ue000":2,"😀":1}',
  );
  assert.ok(compareCodePoints("\ue000", "😀") < 0 && ["😀", "\ue000"].sort()[0] === "😀");
  for (const bad of [{ f: 1.5 }, { big: 2 ** 53 }, { s: "\ud800" }, { [String.fromCharCode(0xdc00)]: 1 }, { u: undefined }, { d: new Date() }]) {
    assert.throws(() => canonicalJson(bad), SandfortError);
  }
  let deep = {};
  for (let i = 0; i < 32; i++) deep = { x: deep };
  canonicalJson(deep);
  assert.throws(() => canonicalJson({ x: deep }), /deeper than 32/);
});

async function rehashFrom(events, seq) {
  // What an attacker with the database does: edit seq and recompute every hash after it.
  const out = structuredClone(events);
  out[seq - 1].actor = "key:someone-else";
  for (let i = seq - 1; i < out.length; i++) {
    if (i > 0) out[i].prev_hash = out[i - 1].hash;
    out[i].hash = await eventHash(out[i]);
  }
  return out;
}

function flipSignature(c) {
  const sig = Buffer.from(c.signature, "base64");
  sig[5] ^= 1;
  return { ...c, signature: sig.toString("base64") };
}

test("tampering with the downloaded chain is found at the right seq", async () => {
  const { events, checkpoints: cps } = await download();
  const n = events.length;
  assert.ok(n >= 10 && final.seq === n);
  const edit = (seq, fields) => {
    const out = structuredClone(events);
    Object.assign(out[seq - 1], fields);
    return out;
  };
  const swapped = [...events];
  [swapped[2], swapped[3]] = [swapped[3], swapped[2]];
  const details = { ...events[3].details, name: events[3].details.name + "!" };
  const cases = [
    ["edited actor", edit(3, { actor: "key:evil" }), cps, 3, "does not match its content"],
    ["edited details", edit(4, { details }), cps, 4, "does not match its content"],
    ["edited last ts", edit(n, { ts: "2000-01-01T00:00:00.000Z" }), cps, n, "does not match its content"],
    ["float in details", edit(5, { details: { x: 1.5 } }), cps, 5, "no canonical form"],
    ["dropped event", [...events.slice(0, 4), ...events.slice(5)], cps, 5, "seq 5 is missing"],
    ["swapped events", swapped, cps, 3, "seq 3 is missing"],
    ["duplicated event", [...events.slice(0, 2), events[1], ...events.slice(2)], cps, 2, "appears again"],
    ["moved from another org", edit(6, { org_id: OTHER_ORG }), cps, 6, "belongs to organization"],
    ["tail cut", events.slice(0, -2), cps, n - 1, "the tail was cut off"],
    ["everything deleted", [], cps, 1, "the tail was cut off"],
    ["rewritten after the early checkpoint", await rehashFrom(events, early.seq + 2), cps, n, `events after seq ${early.seq} were rewritten`],
    ["rewritten from the start", await rehashFrom(events, 1), cps, early.seq, "differs from the signed checkpoint"],
    ["forged signature", events, [cps[0], flipSignature(cps[1])], n, "invalid signature"],
    ["signature not base64", events, [cps[0], { ...cps[1], signature: "*" + cps[1].signature.slice(1) }], n, "invalid signature"],
    ["altered head_hash", events, [cps[0], { ...cps[1], head_hash: events[n - 2].hash }], n, "invalid signature"],
    ["altered checkpoint seq", events, [cps[0], { ...cps[1], seq: n - 1 }], n - 1, "invalid signature"],
    ["another org's checkpoint", events, [cps[0], { ...cps[1], org_id: OTHER_ORG }], n, `is for organization ${OTHER_ORG}`],
  ];
  for (const [name, evs, cs, bad, reason] of cases) {
    const r = await verifyChain(evs, cs, pem, { orgId: org.id });
    assert.equal(r.ok, false, name);
    assert.equal(r.firstBadSeq, bad, `${name}: ${r.reason}`);
    assert.ok(r.reason.includes(reason), `${name}: ${r.reason}`);
  }
  assert.equal((await verifyChain([...events.slice(0, 4), ...events.slice(5)], cps, pem)).events, 4);
  // Without checkpoints a cut tail or a re-hashed chain cannot be seen: what they are for.
  assert.equal((await verifyChain(events.slice(0, -2), [], pem)).ok, true);
  assert.equal((await verifyChain(await rehashFrom(events, 1), [], pem)).ok, true);
  const none = await verifyChain([], [], pem, { orgId: org.id });
  assert.deepEqual(none, { ok: true, orgId: org.id, events: 0, checkpoints: 0, headHash: GENESIS_HASH });
});

test("a wrong pinned key and PEMs that are not an Ed25519 public key", async () => {
  const { events, checkpoints } = await download();
  const dir = mkdtempSync(join(tmpdir(), "sandfort-audit-"));
  const key = join(dir, "other.pem");
  execFileSync("openssl", ["genpkey", "-algorithm", "ed25519", "-out", key]);
  const other = execFileSync("openssl", ["pkey", "-in", key, "-pubout"], { encoding: "utf8" });
  const r = await verifyChain(events, checkpoints, other);
  assert.equal(r.ok, false);
  assert.equal(r.firstBadSeq, early.seq);
  assert.match(r.reason, /names key [0-9a-f]{16}, not the trusted key [0-9a-f]{16}/);
  assert.equal((await admin.audit.verifyRemote(other)).ok, false);
  const rsa = execFileSync("openssl", ["genpkey", "-algorithm", "rsa", "-pkeyopt", "rsa_keygen_bits:1024"], {
    encoding: "utf8",
    stdio: ["ignore", "pipe", "ignore"], // its progress dots
  });
  const rsaPub = execFileSync("openssl", ["pkey", "-pubout"], { input: rsa, encoding: "utf8" });
  for (const bad of ["", "not a key", readFileSync(key, "utf8"), rsaPub]) {
    await assert.rejects(verifyChain(events, checkpoints, bad), { name: "SandfortError", code: "invalid_argument" });
  }
});

test("the superadmin checkpoints another organization", async () => {
  const other = await client.http.json("POST", "/v1/orgs", { json: { name: `audit-ts-other-${randomBytes(4).toString("hex")}` } });
  const cp = await client.audit.createCheckpoint({ org: other.id });
  assert.equal(cp.created, true);
  assert.equal(cp.seq, 1); // its chain holds its org.create
  assert.equal(cp.org_id, other.id);
  const again = await client.audit.createCheckpoint({ org: other.name });
  assert.equal(again.created, false);
  assert.equal(again.signature, cp.signature);
});
