import { SandfortError } from "./errors.js";
import type { Query, Transport } from "./http.js";
import type { Page, WhoAmI } from "./types.js";

/**
 * `client.audit`: an organization's audit chain, its signed checkpoints and their verification
 * (docs/audit.md). Events and checkpoints keep the daemon's field names (`org_id`, `prev_hash`,
 * …): they are signed records, and those names are part of what is hashed.
 *
 * An auditor who does not trust the host checks the downloaded chain against a public key
 * pinned earlier with {@link verifyChain} (or `client.audit.verifyRemote`): the same checks, and
 * the same reasons, as `sandfortd audit-verify`.
 */

export interface AuditEvent {
  org_id: string;
  seq: number;
  /** RFC 3339 UTC with milliseconds, the daemon's clock. */
  ts: string;
  actor: string;
  action: string;
  target: string;
  outcome: string;
  request_id: string;
  source: string;
  details: Record<string, unknown>;
  prev_hash: string;
  hash: string;
}

/** A signed statement "the chain of `org_id` had `head_hash` at `seq` at `ts`". */
export interface AuditCheckpoint {
  org_id: string;
  seq: number;
  head_hash: string;
  ts: string;
  key_id: string;
  /** Standard (padded) base64 of the Ed25519 signature of {@link checkpointMessage}. */
  signature: string;
}

export interface AuditPublicKey {
  keyId: string;
  algorithm: string;
  publicKeyPem: string;
}

export interface AuditVerifyReport {
  ok: boolean;
  orgId: string;
  /** Events verified before the first break (all of them when ok). */
  events: number;
  checkpoints: number;
  /** The recomputed hash of the last event verified (64 × "0" when none). */
  headHash: string;
  /** Only when not ok: the lowest bad seq and why. */
  firstBadSeq?: number;
  reason?: string;
  /** Only from the daemon's `verify()`: the latest checkpoint's seq, null when none. */
  latestCheckpointSeq?: number | null;
}

export interface AuditFilter {
  /** Events after this seq. */
  sinceSeq?: number;
  /** `ts` bounds, inclusive: a UTC time like `2025-01-02T03:04:05Z`, or a Date. */
  since?: string | Date;
  until?: string | Date;
  /** Exact matches. */
  actor?: string;
  action?: string;
  target?: string;
  /** Another organization's chain (superadmin only): its id or name. */
  org?: string;
}

export interface ListAuditEventsOptions extends AuditFilter {
  /** A page's `nextCursor`. */
  cursor?: string;
  /** 1–1000 (default 100). */
  limit?: number;
}

export interface AuditExportOptions extends AuditFilter {
  /** Events per request, 1–100,000 (default 1,000). */
  limit?: number;
}

export const GENESIS_HASH = "0".repeat(64);
const MAX_DEPTH = 32;
const LONE_SURROGATE = /\p{Surrogate}/u; // with the u flag, a proper pair is one code point
const ORG_ID = /^org-[0-9a-f]{16}$/;
const SPKI_ED25519 = "302a300506032b6570032100";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

function noForm(why: string): SandfortError {
  return new SandfortError(`no canonical form: ${why}`, { code: "invalid_argument" });
}

/** The code point of UTF-16 unit c, remapped so that astral characters (surrogates) sort above U+E000–U+FFFF. */
function rank(c: number): number {
  if (c >= 0xd800 && c <= 0xdfff) return c + 0x2000;
  if (c >= 0xe000) return c - 0x800;
  return c;
}

/** Orders strings by code point (Python's and UTF-8's order), not by UTF-16 unit like `sort()`. */
export function compareCodePoints(a: string, b: string): number {
  const n = Math.min(a.length, b.length);
  for (let i = 0; i < n; i++) {
    const x = a.charCodeAt(i);
    const y = b.charCodeAt(i);
    if (x !== y) return rank(x) - rank(y);
  }
  return a.length - b.length;
}

function writeString(s: string): string {
  if (LONE_SURROGATE.test(s)) throw noForm("a string is not valid Unicode (a lone surrogate)");
  return JSON.stringify(s); // escapes exactly `"`, `\` and U+0000–U+001F, as chain.hpp requires
}

function write(v: unknown, depth: number): string {
  if (depth > MAX_DEPTH) throw noForm("nested deeper than 32 levels");
  if (v === null) return "null";
  switch (typeof v) {
    case "boolean":
      return v ? "true" : "false";
    case "number":
      if (!Number.isSafeInteger(v)) throw noForm(`${v} is not an integer within ±(2^53 - 1)`);
      return String(v); // -0 too is "0"
    case "string":
      return writeString(v);
    case "object": {
      if (Array.isArray(v)) return "[" + v.map((x) => write(x, depth + 1)).join(",") + "]";
      const proto = Object.getPrototypeOf(v);
      if (proto !== Object.prototype && proto !== null) throw noForm("not a plain object");
      // Written by hand: JSON.stringify would put integer-like keys ("1", "2") first.
      const keys = Object.keys(v).sort(compareCodePoints);
      return "{" + keys.map((k) => writeString(k) + ":" + write((v as Json)[k], depth + 1)).join(",") + "}";
    }
    default:
      throw noForm(`${typeof v} has no JSON form`);
  }
}

/** The canonical JSON of a value (the rules of include/sandfort/audit/chain.hpp); throws when it has none. */
export function canonicalJson(value: unknown): string {
  return write(value, 0);
}

const EVENT_FIELDS = [
  "action",
  "actor",
  "details",
  "org_id",
  "outcome",
  "prev_hash",
  "request_id",
  "seq",
  "source",
  "target",
  "ts",
] as const;

function isPlainObject(v: unknown): v is Json {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

/** The canonical JSON of an event: every field but `hash`; throws when it has none. */
export function eventCanonicalJson(e: AuditEvent): string {
  const obj: Json = {};
  for (const k of EVENT_FIELDS) {
    const v = (e as unknown as Json)[k];
    if (k === "seq") {
      if (!Number.isSafeInteger(v)) throw noForm("seq is not an integer");
    } else if (k === "details") {
      if (!isPlainObject(v)) throw noForm("details is not a JSON object");
    } else if (typeof v !== "string") {
      throw noForm(v === undefined ? `missing ${k}` : `${k} is not a string`);
    }
    obj[k] = v;
  }
  return canonicalJson(obj);
}

/** What a checkpoint's signature signs: the canonical JSON of `{head_hash, key_id, org_id, seq, ts}`. */
export function checkpointMessage(c: AuditCheckpoint): string {
  const { head_hash, key_id, org_id, seq, ts } = c;
  for (const v of [head_hash, key_id, org_id, ts]) if (typeof v !== "string") throw noForm("not a checkpoint");
  if (!Number.isSafeInteger(seq)) throw noForm("not a checkpoint");
  return canonicalJson({ head_hash, key_id, org_id, seq, ts });
}

type NodeCrypto = typeof import("node:crypto");
// Loaded when first needed, so that importing the SDK needs no Node built-in (like pty.ts).
let cryptoModule: Promise<NodeCrypto> | undefined;
function nodeCrypto(): Promise<NodeCrypto> {
  cryptoModule ??= import("node:crypto");
  return cryptoModule;
}

/** Lowercase hex SHA-256 of the event's `prev_hash` followed by its canonical JSON. */
export async function eventHash(e: AuditEvent): Promise<string> {
  const { createHash } = await nodeCrypto();
  return createHash("sha256").update(e.prev_hash + eventCanonicalJson(e), "utf8").digest("hex");
}

interface PinnedKey {
  key: import("node:crypto").KeyObject;
  keyId: string;
}

async function pinnedKey(pem: string): Promise<PinnedKey> {
  const { createPublicKey, createHash } = await nodeCrypto();
  const bad = new SandfortError("not an Ed25519 public key in PEM", { code: "invalid_argument" });
  // A private key would be accepted by createPublicKey too: an auditor should never hold it.
  if (typeof pem !== "string" || !pem.includes("-----BEGIN PUBLIC KEY-----")) throw bad;
  let key;
  try {
    key = createPublicKey(pem);
  } catch (err) {
    throw new SandfortError("not an Ed25519 public key in PEM", { code: "invalid_argument", cause: err });
  }
  if (key.asymmetricKeyType !== "ed25519") throw bad;
  const der = key.export({ format: "der", type: "spki" });
  if (der.length !== 44 || der.subarray(0, 12).toString("hex") !== SPKI_ED25519) throw bad;
  return { key, keyId: createHash("sha256").update(der.subarray(12)).digest("hex").slice(0, 16) };
}

const BASE64 = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

async function signatureOk(c: AuditCheckpoint, pk: PinnedKey): Promise<boolean> {
  let message: string;
  try {
    message = checkpointMessage(c);
  } catch {
    return false;
  }
  if (typeof c.signature !== "string" || !BASE64.test(c.signature)) return false;
  const sig = Buffer.from(c.signature, "base64");
  if (sig.length !== 64) return false;
  const { verify } = await nodeCrypto();
  return verify(null, Buffer.from(message, "utf8"), pk.key, sig);
}

/** Mirrors sandfortd's chain_verifier: events in order, only the hashes at checkpoints kept. */
class ChainVerifier {
  lastSeq = 0;
  lastHash = GENESIS_HASH;
  badSeq: number | undefined;
  reason = "";
  private readonly kept = new Map<number, string>();

  constructor(
    readonly orgId: string,
    private readonly watched: Set<number>,
    private readonly crypto: NodeCrypto,
  ) {}

  private fail(seq: number, reason: string): boolean {
    this.badSeq = seq;
    this.reason = reason;
    return false;
  }

  feed(e: AuditEvent): boolean {
    const expected = this.lastSeq + 1;
    const seq = e?.seq;
    if (!Number.isSafeInteger(seq)) {
      return this.fail(expected, `the event where seq ${expected} belongs has no integer seq: edited`);
    }
    const at = `seq ${seq}`;
    if (seq > expected) {
      return this.fail(expected, `seq ${expected} is missing (the next event has ${at}): events were deleted`);
    }
    if (seq < 1) return this.fail(expected, `an event with invalid ${at} stands where seq ${expected} belongs`);
    if (seq < expected) {
      return this.fail(seq, `${at} appears again after seq ${this.lastSeq}: events were reordered, duplicated or inserted`);
    }
    if (e.org_id !== this.orgId) {
      return this.fail(seq, `the event at ${at} belongs to organization ${e.org_id}: moved from another organization`);
    }
    if (e.prev_hash !== this.lastHash) {
      return this.fail(
        seq,
        `the event at ${at} does not chain to its predecessor (prev_hash differs): an event before it was ` +
          "deleted, inserted or reordered, or it was moved from another organization",
      );
    }
    let body: string;
    try {
      body = eventCanonicalJson(e);
    } catch (err) {
      const why = (err as Error).message.replace(/^no canonical form: /, "");
      return this.fail(seq, `the event at ${at} has no canonical form (${why}): edited`);
    }
    const hash = this.crypto.createHash("sha256").update(this.lastHash + body, "utf8").digest("hex");
    if (hash !== e.hash) {
      return this.fail(seq, `the hash of the event at ${at} does not match its content: a field was edited`);
    }
    if (this.watched.has(seq)) this.kept.set(seq, hash);
    this.lastSeq = seq;
    this.lastHash = hash;
    return true;
  }

  private hashAt(seq: number): string | undefined {
    return seq === 0 ? GENESIS_HASH : this.kept.get(seq);
  }

  async finish(checkpoints: AuditCheckpoint[], pk: PinnedKey): Promise<AuditVerifyReport> {
    let worst: { seq: number; reason: string } | undefined;
    const note = (seq: number, reason: string) => {
      if (!worst || seq < worst.seq) worst = { seq, reason }; // lowest seq; among equals the first found
    };
    if (this.badSeq !== undefined) note(this.badSeq, this.reason);
    const seqOf = (c: AuditCheckpoint) => (Number.isSafeInteger(c?.seq) ? c.seq : -1);
    const sorted = [...checkpoints].sort((a, b) => seqOf(a) - seqOf(b));
    let lastMatching = 0;
    for (const c of sorted) {
      const seq = Math.max(seqOf(c), 0);
      const at = `the checkpoint at seq ${seq}`;
      if (c.org_id !== this.orgId) {
        note(seq, `${at} is for organization ${c.org_id}, not ${this.orgId}`);
      } else if (c.key_id !== pk.keyId) {
        note(seq, `${at} names key ${c.key_id}, not the trusted key ${pk.keyId}: forged or signed by another key`);
      } else if (!(await signatureOk(c, pk))) {
        note(seq, `${at} has an invalid signature: forged or altered`);
      } else if (this.badSeq !== undefined && seq >= this.badSeq) {
        continue; // the chain is already broken before it: nothing to compare with
      } else if (seq > this.lastSeq) {
        note(
          this.lastSeq + 1,
          `the chain ends at seq ${this.lastSeq} but a signed checkpoint covers seq ${seq}: the tail was cut off`,
        );
      } else if (this.hashAt(seq) === undefined) {
        note(seq, `${at} was not announced to the verifier before the events were fed`);
      } else if (this.hashAt(seq) !== c.head_hash) {
        note(
          seq,
          `the chain's hash at seq ${seq} differs from the signed checkpoint: events after seq ${lastMatching} were rewritten`,
        );
      } else {
        lastMatching = seq;
      }
    }
    const report: AuditVerifyReport = {
      ok: worst === undefined,
      orgId: this.orgId,
      events: this.lastSeq,
      checkpoints: checkpoints.length,
      headHash: this.lastHash,
    };
    if (worst) {
      report.firstBadSeq = worst.seq;
      report.reason = worst.reason;
    }
    return report;
  }
}

/**
 * Checks one organization's whole chain, from seq 1, against checkpoints signed by the key of
 * `publicKeyPem` (pinned earlier: never the one a doubted host serves now).
 *
 * Every event in order: seq 1, 2, 3, … without gaps, `org_id` the same throughout (`orgId`, or
 * else the first event's or checkpoint's), `prev_hash` the previous `hash`, and `hash` =
 * SHA-256(prev_hash || canonical JSON). Every checkpoint: of that organization, the pinned key's
 * id, a valid Ed25519 signature, and the chain had exactly its `head_hash` at its `seq` (one
 * beyond the last event means the tail was cut off). `events` may be an async iterable (e.g.
 * `client.audit.events()`): only the hashes at checkpoints are kept.
 *
 * Resolves with a report naming the lowest bad seq; rejects (code `invalid_argument`) when
 * `publicKeyPem` is not an Ed25519 public key.
 */
export async function verifyChain(
  events: Iterable<AuditEvent> | AsyncIterable<AuditEvent>,
  checkpoints: Iterable<AuditCheckpoint>,
  publicKeyPem: string,
  opts: { orgId?: string } = {},
): Promise<AuditVerifyReport> {
  const pk = await pinnedKey(publicKeyPem);
  const crypto = await nodeCrypto();
  const cps = [...checkpoints];
  const watched = new Set(cps.map((c) => c?.seq).filter((s) => Number.isSafeInteger(s)));
  let verifier: ChainVerifier | undefined;
  for await (const e of events) {
    verifier ??= new ChainVerifier(opts.orgId || e?.org_id || "", watched, crypto);
    if (!verifier.feed(e)) break;
  }
  verifier ??= new ChainVerifier(opts.orgId || cps[0]?.org_id || "", watched, crypto);
  return verifier.finish(cps, pk);
}

function time(v: string | Date | undefined): string | undefined {
  return v instanceof Date ? v.toISOString() : v;
}

function filterQuery(o: AuditFilter): Query {
  return {
    since_seq: o.sinceSeq,
    since: time(o.since),
    until: time(o.until),
    actor: o.actor,
    action: o.action,
    target: o.target,
    org: o.org,
  };
}

function toReport(j: Json): AuditVerifyReport {
  const r: AuditVerifyReport = {
    ok: !!j.ok,
    orgId: j.org_id,
    events: j.events,
    checkpoints: j.checkpoints,
    headHash: j.head_hash,
    latestCheckpointSeq: j.latest_checkpoint_seq ?? null,
  };
  if (j.first_bad_seq !== undefined) r.firstBadSeq = j.first_bad_seq;
  if (j.reason !== undefined) r.reason = j.reason;
  return r;
}

/**
 * `client.audit`. Every call reads the caller's organization; the superadmin reads another with
 * `org` (its id or name). All but `publicKey()` need the admin role.
 */
export class Audit {
  /** @internal */
  constructor(
    private readonly http: Transport,
    private readonly whoami: () => Promise<WhoAmI>,
  ) {}

  /** One page of events, ascending seq. */
  async listEvents(opts: ListAuditEventsOptions = {}): Promise<Page<AuditEvent>> {
    const j = await this.http.json<Json>("GET", "/v1/audit", {
      query: { ...filterQuery(opts), cursor: opts.cursor, limit: opts.limit },
    });
    return { items: j.items as AuditEvent[], nextCursor: j.next_cursor ?? null };
  }

  /** Every matching event, page after page (`limit` per page, default 1000), as they are read. */
  async *events(opts: AuditFilter & { limit?: number } = {}): AsyncGenerator<AuditEvent> {
    let cursor: string | undefined;
    for (;;) {
      const page = await this.listEvents({ ...opts, limit: opts.limit ?? 1000, cursor });
      yield* page.items;
      if (!page.nextCursor) return;
      cursor = page.nextCursor;
    }
  }

  /**
   * Every matching event as JSON Lines: one chunk of whole lines per request, asking again with
   * `X-Next-Cursor` until the daemon sends no more. Write the chunks to a file, or join them.
   */
  async *export(opts: AuditExportOptions = {}): AsyncGenerator<string> {
    const query: Query = { ...filterQuery(opts), format: "jsonl", limit: opts.limit };
    for (;;) {
      const res = await this.http.raw("GET", "/v1/audit", { query });
      const cursor = res.headers.get("x-next-cursor");
      const text = await res.text();
      if (text) yield text;
      if (!cursor) return;
      delete query.since_seq;
      query.cursor = cursor;
    }
  }

  /** Every signed checkpoint (all pages, `limit` per page), ascending seq; after `afterSeq` only when given. */
  async checkpoints(opts: { afterSeq?: number; limit?: number; org?: string } = {}): Promise<AuditCheckpoint[]> {
    const out: AuditCheckpoint[] = [];
    let cursor: string | undefined;
    for (;;) {
      const j = await this.http.json<Json>("GET", "/v1/audit/checkpoints", {
        query: {
          after_seq: cursor === undefined ? opts.afterSeq : undefined,
          cursor,
          limit: opts.limit ?? 1000,
          org: opts.org,
        },
      });
      out.push(...(j.items as AuditCheckpoint[]));
      if (!j.next_cursor) return out;
      cursor = j.next_cursor;
    }
  }

  /**
   * Signs the chain's head now. `created` is false when the head had not moved since the latest
   * checkpoint (that one is returned). Rejects with `conflict` when there are no events yet or
   * the chain no longer extends the latest checkpoint (it was edited).
   */
  async createCheckpoint(opts: { org?: string } = {}): Promise<AuditCheckpoint & { created: boolean }> {
    const res = await this.http.raw("POST", "/v1/audit/checkpoints", { query: { org: opts.org } });
    const c = JSON.parse(await res.text()) as AuditCheckpoint;
    return { ...c, created: res.status === 201 };
  }

  /** The daemon's checkpoint key (any role). Pin `publicKeyPem` and verify later downloads against that copy. */
  async publicKey(): Promise<AuditPublicKey> {
    const j = await this.http.json<Json>("GET", "/v1/audit/public-key");
    return { keyId: j.key_id, algorithm: j.algorithm, publicKeyPem: j.public_key_pem };
  }

  /**
   * The daemon's own check of its chain with its own key: a convenience for admins, not evidence
   * for an auditor who doubts the host (use `verifyRemote` for that).
   */
  async verify(opts: { org?: string } = {}): Promise<AuditVerifyReport> {
    return toReport(await this.http.json<Json>("GET", "/v1/audit/verify", { query: { org: opts.org }, timeoutMs: 0 }));
  }

  /**
   * Downloads every checkpoint and the whole chain and checks them here with {@link verifyChain}
   * against `publicKeyPem`. The organization the chain must belong to is `orgId`, else `org`
   * when it is an id, else the caller's own; for `org` given by name, the one the data names.
   */
  async verifyRemote(publicKeyPem: string, opts: { org?: string; orgId?: string } = {}): Promise<AuditVerifyReport> {
    let orgId = opts.orgId;
    if (orgId === undefined) {
      if (opts.org === undefined) orgId = (await this.whoami()).orgId;
      else if (ORG_ID.test(opts.org)) orgId = opts.org;
    }
    // Checkpoints first: each then covers events that the later download holds, even when the
    // chain grows (or the daemon signs a new checkpoint) in between.
    const checkpoints = await this.checkpoints({ org: opts.org });
    return verifyChain(this.events({ org: opts.org }), checkpoints, publicKeyPem, { orgId });
  }
}
