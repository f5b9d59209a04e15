/**
 * The organization's life-cycle events (`GET /v1/events`, docs/events.md): `client.events()` is an
 * async iterable that follows the stream for as long as it is iterated and reconnects by itself
 * after a dropped connection, resuming exactly after the last event it gave (the event's `seq` is
 * the stream's `Last-Event-ID`).
 *
 * ```ts
 * for await (const e of client.events({ types: ["sandbox.stopped"], signal })) console.log(e.target, e.reason);
 * ```
 */
import { SandfortError } from "./errors.js";
import { parseSse, type Transport } from "./http.js";

/** Why a sandbox stopped (`sandbox.stopped` only). */
export type StopReason =
  | "request"
  | "idle_timeout"
  | "ttl"
  | "oom"
  | "kill_switch"
  | "daemon_restart"
  | "error"
  | "exited"
  | "disk_quota";

export interface LifecycleEvent {
  /** The audit chain's seq: the stream's event id. */
  seq: number;
  type: string;
  ts: string;
  orgId: string;
  /** What it happened to: `sbx-…`, `snap-…`, `vol-…`; empty when nothing. */
  target: string;
  actor: string;
  outcome: string;
  /** The audit action it comes from. */
  action: string;
  reason?: StopReason;
  /** The audit event's details, as they are. */
  details: Record<string, unknown>;
}

export interface EventsOptions {
  /** Start after the event with this seq (default: from the first). */
  after?: number;
  /** Only these types (`["sandbox.stopped"]`). */
  types?: string[];
  /** Another organization's (superadmin). */
  org?: string;
  /** Ends the iteration. */
  signal?: AbortSignal;
}

const FIRST_BACKOFF_MS = 500;
const MAX_BACKOFF_MS = 15_000;

/** Statuses that mean a reconnect may succeed later: too many streams, a daemon that restarts. */
function retryable(err: unknown): boolean {
  if (!(err instanceof SandfortError)) return false;
  if (err.code === "connection_error") return true;
  return err.status === 429 || err.status === 503;
}

/**
 * An async iterable of {@link LifecycleEvent}. A refusal the daemon means (a bad cursor or type:
 * 400; a key that may not read) is thrown; a dropped connection, a restarting daemon (503) or too
 * many streams (429) is retried, with a backoff, from `lastId`.
 */
export class EventStream implements AsyncIterable<LifecycleEvent> {
  /** The seq of the last event given. */
  lastId: number;
  /** How many times the stream was opened again after a drop. */
  reconnects = 0;
  private readonly stopped = new AbortController();
  private connection: AbortController | undefined;

  constructor(
    private readonly http: Transport,
    private readonly opts: EventsOptions = {},
  ) {
    this.lastId = opts.after ?? 0;
    const outer = opts.signal;
    if (outer) {
      if (outer.aborted) this.stopped.abort(outer.reason);
      else outer.addEventListener("abort", () => this.close(), { once: true });
    }
  }

  /** Ends the iteration (the pending `next()` resolves done). */
  close(): void {
    this.stopped.abort();
    this.connection?.abort();
  }

  /** @internal Ends the current connection as a network failure would (tests use it). */
  drop(): void {
    this.connection?.abort();
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<LifecycleEvent> {
    let backoff = FIRST_BACKOFF_MS;
    while (!this.stopped.signal.aborted) {
      const ctl = new AbortController();
      this.connection = ctl;
      let res: Response;
      try {
        res = await this.http.raw("GET", "/v1/events", {
          query: { types: this.opts.types?.join(","), org: this.opts.org },
          headers: { Accept: "text/event-stream", "Last-Event-ID": String(this.lastId) },
          signal: ctl.signal,
          timeoutMs: 0,
        });
      } catch (err) {
        if (this.stopped.signal.aborted) return;
        if (!retryable(err)) throw err;
        await sleep(backoff, this.stopped.signal);
        backoff = Math.min(backoff * 2, MAX_BACKOFF_MS);
        this.reconnects++;
        continue;
      }
      backoff = FIRST_BACKOFF_MS;
      try {
        for await (const ev of parseSse(res.body ?? new ReadableStream({ start: (c) => c.close() }))) {
          if (!ev.data) continue;
          const e = toEvent(JSON.parse(ev.data) as Record<string, unknown>, ev.id);
          this.lastId = e.seq;
          yield e;
        }
      } catch {
        // The connection broke (or drop()/close() ended it): open it again below, unless closed.
      } finally {
        ctl.abort();
      }
      if (this.stopped.signal.aborted) return;
      this.reconnects++;
    }
  }
}

function toEvent(d: Record<string, unknown>, id: string | undefined): LifecycleEvent {
  const e: LifecycleEvent = {
    seq: id !== undefined ? Number(id) : Number(d.seq),
    type: String(d.type ?? ""),
    ts: String(d.ts ?? ""),
    orgId: String(d.org_id ?? ""),
    target: String(d.target ?? ""),
    actor: String(d.actor ?? ""),
    outcome: String(d.outcome ?? ""),
    action: String(d.action ?? ""),
    details: (d.details as Record<string, unknown>) ?? {},
  };
  if (typeof d.reason === "string") e.reason = d.reason as StopReason;
  return e;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal.aborted) return resolve();
    const t = setTimeout(() => {
      signal.removeEventListener("abort", done);
      resolve();
    }, ms);
    const done = () => {
      clearTimeout(t);
      resolve();
    };
    signal.addEventListener("abort", done, { once: true });
  });
}
