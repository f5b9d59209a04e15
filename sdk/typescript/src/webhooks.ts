/**
 * `client.webhooks` and `verifyWebhook`: an organization's webhooks (docs/events.md, "Webhooks").
 *
 * sandfortd POSTs each life-cycle event of the organization to every webhook whose `types` take it
 * (all when empty), as the same JSON object `client.events()` yields, with `Sandfort-Webhook-Id`,
 * `Sandfort-Event-Id` (`<org id>:<seq>`, the idempotency key, the same on every retry),
 * `Sandfort-Event-Type` and `Sandfort-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256(secret,
 * "<t>.<raw body>")>`. A receiver checks it over the body's raw bytes, before parsing:
 *
 *     const event = verifyWebhook(rawBody, req.headers["sandfort-signature"], secret);
 *
 * The signing secret (`whsec_…`) is shown once, by `create` and `rotateSecret`. Every webhook call
 * needs an admin key.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import type { Transport } from "./http.js";

export const DEFAULT_WEBHOOK_TOLERANCE_S = 300;

/** The signature header is missing or malformed, does not match, or is outside the tolerance. */
export class WebhookSignatureError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "WebhookSignatureError";
  }
}

function toBuffer(payload: string | Uint8Array): Buffer {
  return typeof payload === "string" ? Buffer.from(payload, "utf8") : Buffer.from(payload);
}

function mac(secret: string, t: number, payload: Buffer): string {
  return createHmac("sha256", secret).update(`${t}.`).update(payload).digest("hex");
}

/** The `Sandfort-Signature` value sandfortd would send for `payload` (for a receiver's tests). */
export function signWebhook(payload: string | Uint8Array, secret: string, timestamp?: number): string {
  const t = timestamp ?? Math.floor(Date.now() / 1000);
  return `t=${t},v1=${mac(secret, t, toBuffer(payload))}`;
}

export interface VerifyWebhookOptions {
  /** Seconds `t` may be away from now (a replayed delivery is refused); default 300. */
  toleranceS?: number;
  /** Now, in unix seconds (tests). */
  now?: number;
}

/**
 * Checks `header` (`Sandfort-Signature`) over `payload`, the raw request body, in constant time,
 * and returns the event, parsed. Throws WebhookSignatureError when it is malformed, no `v1`
 * matches, or `t` is more than `toleranceS` from now. Keep the `Sandfort-Event-Id` of what was
 * handled: retries carry the same one.
 */
export function verifyWebhook<T = Record<string, unknown>>(
  payload: string | Uint8Array,
  header: string | string[] | undefined | null,
  secret: string,
  opts: VerifyWebhookOptions = {},
): T {
  const value = Array.isArray(header) ? header[0] : header;
  if (!value) throw new WebhookSignatureError("no Sandfort-Signature header");
  let t: number | undefined;
  const signatures: string[] = [];
  for (const part of value.split(",")) {
    const eq = part.indexOf("=");
    const key = part.slice(0, eq).trim();
    const v = part.slice(eq + 1).trim();
    if (key === "t") {
      if (!/^[0-9]+$/.test(v)) throw new WebhookSignatureError("the signature's timestamp is not a number");
      t = Number(v);
    } else if (key === "v1") {
      signatures.push(v);
    }
  }
  if (t === undefined || signatures.length === 0) throw new WebhookSignatureError("the signature header has no t= or no v1=");
  const tolerance = opts.toleranceS ?? DEFAULT_WEBHOOK_TOLERANCE_S;
  const now = opts.now ?? Date.now() / 1000;
  if (Math.abs(now - t) > tolerance)
    throw new WebhookSignatureError(`the signature's timestamp is ${Math.round(now - t)} s away (tolerance ${tolerance} s)`);
  const body = toBuffer(payload);
  const expected = Buffer.from(mac(secret, t, body), "utf8");
  const matches = signatures.some((s) => {
    const given = Buffer.from(s, "utf8");
    return given.length === expected.length && timingSafeEqual(given, expected);
  });
  if (!matches) throw new WebhookSignatureError("no signature matches the payload with this secret");
  try {
    return JSON.parse(body.toString("utf8")) as T;
  } catch (e) {
    throw new WebhookSignatureError(`the payload is not JSON: ${(e as Error).message}`);
  }
}

export interface Webhook {
  id: string;
  url: string;
  /** Empty: every type. */
  types: string[];
  description: string;
  enabled: boolean;
  /** The last audit seq the webhook has taken. */
  cursor: number;
  createdAt: string;
  updatedAt: string;
  /** The signing secret: only in what `create` and `rotateSecret` return. */
  secret?: string;
}

export interface WebhookDelivery {
  seq: number;
  /** `Sandfort-Event-Id`. */
  eventId: string;
  type: string;
  state: "pending" | "delivered" | "failed";
  attempts: number;
  lastStatus: number | null;
  lastError: string;
  nextAttemptAt: string | null;
  createdAt: string;
  deliveredAt: string | null;
}

export interface CreateWebhookOptions {
  url: string;
  types?: string[];
  description?: string;
}

export interface UpdateWebhookOptions {
  url?: string;
  types?: string[];
  description?: string;
  enabled?: boolean;
}

interface WebhookJson {
  id: string;
  url: string;
  types: string[];
  description: string;
  enabled: boolean;
  cursor: number;
  created_at: string;
  updated_at: string;
  secret?: string;
}

interface DeliveryJson {
  seq: number;
  event_id: string;
  type: string;
  state: "pending" | "delivered" | "failed";
  attempts: number;
  last_status: number | null;
  last_error: string;
  next_attempt_at: string | null;
  created_at: string;
  delivered_at: string | null;
}

function webhookOf(j: WebhookJson): Webhook {
  const w: Webhook = {
    id: j.id,
    url: j.url,
    types: j.types,
    description: j.description,
    enabled: j.enabled,
    cursor: j.cursor,
    createdAt: j.created_at,
    updatedAt: j.updated_at,
  };
  if (j.secret !== undefined) w.secret = j.secret;
  return w;
}

function deliveryOf(j: DeliveryJson): WebhookDelivery {
  return {
    seq: j.seq,
    eventId: j.event_id,
    type: j.type,
    state: j.state,
    attempts: j.attempts,
    lastStatus: j.last_status,
    lastError: j.last_error,
    nextAttemptAt: j.next_attempt_at,
    createdAt: j.created_at,
    deliveredAt: j.delivered_at,
  };
}

const path = (id: string) => `/v1/webhooks/${encodeURIComponent(id)}`;

export class Webhooks {
  /** @internal */
  constructor(private readonly http: Transport) {}

  /** Registers a URL (400 when its host is or resolves to an address the policy refuses); `.secret` is shown once. */
  async create(opts: CreateWebhookOptions): Promise<Webhook> {
    const body: Record<string, unknown> = { url: opts.url };
    if (opts.types !== undefined) body.types = opts.types;
    if (opts.description !== undefined) body.description = opts.description;
    return webhookOf(await this.http.json<WebhookJson>("POST", "/v1/webhooks", { json: body }));
  }

  async list(): Promise<Webhook[]> {
    const page = await this.http.json<{ items: WebhookJson[] }>("GET", "/v1/webhooks");
    return page.items.map(webhookOf);
  }

  async get(id: string): Promise<Webhook> {
    return webhookOf(await this.http.json<WebhookJson>("GET", path(id)));
  }

  async update(id: string, opts: UpdateWebhookOptions): Promise<Webhook> {
    const body: Record<string, unknown> = {};
    for (const k of ["url", "types", "description", "enabled"] as const) if (opts[k] !== undefined) body[k] = opts[k];
    return webhookOf(await this.http.json<WebhookJson>("PATCH", path(id), { json: body }));
  }

  async delete(id: string): Promise<void> {
    await this.http.json("DELETE", path(id));
  }

  /**
   * A new signing secret (`.secret`), used from the next attempt on; with `keepPreviousS` the
   * previous one also signs (a second `v1=`) for that many seconds (at most a day).
   */
  async rotateSecret(id: string, opts: { keepPreviousS?: number } = {}): Promise<Webhook> {
    const body: Record<string, unknown> = {};
    if (opts.keepPreviousS !== undefined) body.keep_previous_s = opts.keepPreviousS;
    return webhookOf(await this.http.json<WebhookJson>("POST", `${path(id)}/rotate-secret`, { json: body }));
  }

  /** The delivery log, newest first; `nextCursor` continues it. */
  async deliveries(
    id: string,
    opts: { limit?: number; cursor?: string } = {},
  ): Promise<{ items: WebhookDelivery[]; nextCursor: string | null }> {
    const page = await this.http.json<{ items: DeliveryJson[]; next_cursor: string | null }>("GET", `${path(id)}/deliveries`, {
      query: { limit: opts.limit, cursor: opts.cursor },
    });
    return { items: page.items.map(deliveryOf), nextCursor: page.next_cursor };
  }
}
