import { SandfortError, errorFromResponse } from "./errors.js";

export type Query = Record<string, string | number | boolean | undefined | null>;

export interface RequestOptions {
  query?: Query;
  /** JSON body (sent with Content-Type: application/json). */
  json?: unknown;
  /** Raw body. */
  body?: BodyInit | Uint8Array;
  headers?: Record<string, string>;
  signal?: AbortSignal;
  /** Per-request timeout in ms (overrides the client's); 0 = none. */
  timeoutMs?: number;
}

/** Returns a bearer token (e.g. an OIDC access token); called before every request, so it should cache. */
export type TokenProvider = () => string | Promise<string>;

export interface TransportOptions {
  baseUrl: string;
  apiKey?: string;
  tokenProvider?: TokenProvider;
  /** Default per-request timeout in ms; 0 = none. */
  timeoutMs: number;
  headers?: Record<string, string>;
  fetch?: typeof fetch;
}

/**
 * The thin HTTP layer: auth header, JSON, typed errors. Uses the global fetch (Node ≥ 18, Bun).
 * With a token provider, a 401 means the daemon did nothing: the provider is asked once more and
 * the request sent again, once (not when its body is a stream, which cannot be sent twice).
 */
export class Transport {
  readonly baseUrl: string;
  readonly apiKey: string | undefined;
  readonly tokenProvider: TokenProvider | undefined;
  readonly timeoutMs: number;
  private readonly extraHeaders: Record<string, string>;
  private readonly fetchImpl: typeof fetch;

  constructor(opts: TransportOptions) {
    this.baseUrl = opts.baseUrl.replace(/\/+$/, "");
    this.apiKey = opts.apiKey;
    this.tokenProvider = opts.tokenProvider;
    this.timeoutMs = opts.timeoutMs;
    this.extraHeaders = opts.headers ?? {};
    const f = opts.fetch ?? (globalThis as { fetch?: typeof fetch }).fetch;
    if (!f) throw new SandfortError("no global fetch: use Node >= 20 or pass `fetch`", { code: "config" });
    this.fetchImpl = f;
  }

  url(path: string, query?: Query): string {
    let u = this.baseUrl + path;
    if (query) {
      const qs = new URLSearchParams();
      for (const [k, v] of Object.entries(query)) {
        if (v === undefined || v === null) continue;
        qs.set(k, String(v));
      }
      const s = qs.toString();
      if (s) u += (u.includes("?") ? "&" : "?") + s;
    }
    return u;
  }

  /** The Authorization header for the next request: the API key, or the provider's token now. */
  async authHeaders(): Promise<Record<string, string>> {
    if (!this.tokenProvider) return this.apiKey ? { Authorization: `Bearer ${this.apiKey}` } : {};
    const token = await this.tokenProvider();
    if (typeof token !== "string" || token === "") {
      throw new SandfortError(`tokenProvider returned ${token === "" ? "an empty string" : typeof token}, not a token`, {
        code: "config",
      });
    }
    return { Authorization: `Bearer ${token}` };
  }

  /** Sends a request; resolves with the Response when its status is 2xx, throws SandfortError otherwise. */
  async raw(method: string, path: string, opts: RequestOptions = {}): Promise<Response> {
    let body: BodyInit | undefined;
    let contentType: string | undefined;
    if (opts.json !== undefined) {
      contentType = "application/json";
      body = JSON.stringify(opts.json);
    } else if (opts.body !== undefined) {
      body = opts.body as BodyInit;
      const given = { ...this.extraHeaders, ...(opts.headers ?? {}) };
      if (!Object.keys(given).some((h) => h.toLowerCase() === "content-type")) {
        contentType = "application/octet-stream";
      }
    }
    let res = await this.send(method, path, opts, body, contentType);
    if (res.status === 401 && this.tokenProvider && canResend(body)) {
      await res.body?.cancel().catch(() => {});
      res = await this.send(method, path, opts, body, contentType);
    }
    if (!res.ok) {
      const text = await res.text().catch(() => "");
      throw errorFromResponse(res.status, res.headers, text);
    }
    return res;
  }

  private async send(
    method: string,
    path: string,
    opts: RequestOptions,
    body: BodyInit | undefined,
    contentType: string | undefined,
  ): Promise<Response> {
    const headers: Record<string, string> = { ...this.extraHeaders, ...(await this.authHeaders()), ...(opts.headers ?? {}) };
    if (contentType) headers["Content-Type"] = contentType;
    const timeoutMs = opts.timeoutMs ?? this.timeoutMs;
    const signals: AbortSignal[] = [];
    if (opts.signal) signals.push(opts.signal);
    if (timeoutMs > 0) signals.push(AbortSignal.timeout(timeoutMs));
    const signal = signals.length === 0 ? undefined : signals.length === 1 ? signals[0] : anySignal(signals);
    const init: RequestInit & { duplex?: string } = { method, headers, body, signal };
    if (body && typeof (body as ReadableStream).getReader === "function") init.duplex = "half";
    try {
      return await this.fetchImpl(this.url(path, opts.query), init);
    } catch (err) {
      throw wrapFetchError(err, method, path);
    }
  }

  async json<T = unknown>(method: string, path: string, opts: RequestOptions = {}): Promise<T> {
    const res = await this.raw(method, path, opts);
    if (res.status === 204) return undefined as T;
    const text = await readText(res, method, path);
    if (!text) return undefined as T;
    try {
      return JSON.parse(text) as T;
    } catch (err) {
      throw new SandfortError(`invalid JSON from ${method} ${path}`, {
        code: "protocol",
        status: res.status,
        requestId: res.headers.get("x-request-id"),
        cause: err,
      });
    }
  }
}

/** Bodies fetch can send twice: none, text, bytes, a Blob, form data (not a stream or an async iterable). */
function canResend(body: BodyInit | undefined): boolean {
  return (
    body === undefined ||
    typeof body === "string" ||
    body instanceof ArrayBuffer ||
    ArrayBuffer.isView(body) ||
    (typeof Blob !== "undefined" && body instanceof Blob) ||
    body instanceof URLSearchParams ||
    (typeof FormData !== "undefined" && body instanceof FormData)
  );
}

async function readText(res: Response, method: string, path: string): Promise<string> {
  try {
    return await res.text();
  } catch (err) {
    throw wrapFetchError(err, method, path);
  }
}

export function wrapFetchError(err: unknown, method: string, path: string): SandfortError {
  if (err instanceof SandfortError) return err;
  const e = err as { name?: string; message?: string; cause?: { code?: string; message?: string } };
  if (e?.name === "TimeoutError") {
    return new SandfortError(`${method} ${path}: timed out`, { code: "timeout", cause: err });
  }
  if (e?.name === "AbortError") {
    return new SandfortError(`${method} ${path}: aborted`, { code: "aborted", cause: err });
  }
  const detail = e?.cause?.code ?? e?.cause?.message ?? e?.message ?? String(err);
  return new SandfortError(`${method} ${path}: cannot reach sandfortd (${detail})`, {
    code: "connection_error",
    cause: err,
  });
}

function anySignal(signals: AbortSignal[]): AbortSignal {
  const anyFn = (AbortSignal as unknown as { any?: (s: AbortSignal[]) => AbortSignal }).any;
  if (anyFn) return anyFn(signals);
  const ctl = new AbortController();
  for (const s of signals) {
    if (s.aborted) {
      ctl.abort(s.reason);
      break;
    }
    s.addEventListener("abort", () => ctl.abort(s.reason), { once: true });
  }
  return ctl.signal;
}

export interface SseEvent {
  event: string;
  data: string;
  /** The event's `id:` line, when it has one. */
  id?: string;
}

/** Parses a text/event-stream body into events (`event:` + joined `data:` lines). */
export async function* parseSse(body: ReadableStream<Uint8Array>): AsyncGenerator<SseEvent> {
  const decoder = new TextDecoder();
  const reader = body.getReader();
  let buf = "";
  let event = "";
  let data: string[] = [];
  let id: string | undefined;
  const made = (): SseEvent => (id === undefined ? { event: event || "message", data: data.join("\n") } : { event: event || "message", data: data.join("\n"), id });
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) break;
      buf += decoder.decode(value, { stream: true });
      let idx: number;
      // SSE line ends: \r\n, \n or \r. Data is JSON, so raw \r never appears inside a line.
      while ((idx = buf.search(/\r\n|\n|\r/)) >= 0) {
        if (buf[idx] === "\r" && idx === buf.length - 1) break; // maybe a \r\n split across chunks
        const line = buf.slice(0, idx);
        buf = buf.slice(idx + (buf.startsWith("\r\n", idx) ? 2 : 1));
        if (line === "") {
          if (data.length > 0 || event) yield made();
          event = "";
          data = [];
          id = undefined;
          continue;
        }
        if (line.startsWith(":")) continue;
        const colon = line.indexOf(":");
        const field = colon < 0 ? line : line.slice(0, colon);
        let val = colon < 0 ? "" : line.slice(colon + 1);
        if (val.startsWith(" ")) val = val.slice(1);
        if (field === "event") event = val;
        else if (field === "data") data.push(val);
        else if (field === "id") id = val;
      }
    }
    buf += decoder.decode();
    if (buf.length > 0) {
      for (const line of buf.split(/\r\n|\n|\r/)) {
        if (line.startsWith("event:")) event = line.slice(6).trim();
        else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
      }
    }
    if (data.length > 0 || event) yield made();
  } finally {
    reader.cancel().catch(() => {});
  }
}
