/**
 * The API's error codes (docs/api.md), plus the client's own: `connection_error`, `timeout`,
 * `aborted`, `config`, `protocol`. Guardrails answer `quota_exceeded` (429: an organization's
 * quota of sandboxes, CPUs or memory, or a full disk), `image_not_allowed` (403: outside the
 * organization's image policy), `runtime_not_allowed` (403: a create or start on a runtime outside
 * its runtime policy), `conflict` (409, also while its kill switch is on) and
 * `rate_limited` (429, with `retryAfterS`). `insufficient_storage` (507): the daemon's state
 * disk is full and nothing was changed; reads, deletes and stops still work. The host answers
 * `host_full` (503: its memory cannot hold the sandbox beside every running one; nothing was made).
 */
export type ErrorCode =
  | "invalid_argument"
  | "unauthenticated"
  | "permission_denied"
  | "image_not_allowed"
  | "runtime_not_allowed"
  | "not_found"
  | "conflict"
  | "payload_too_large"
  | "quota_exceeded"
  | "rate_limited"
  | "internal"
  | "unavailable"
  | "idp_unavailable"
  | "insufficient_storage"
  | "host_full"
  | "connection_error"
  | "timeout"
  | "aborted"
  | "config"
  | "protocol";

/**
 * Every failure of the platform (an HTTP error answer, an unreachable daemon, a missing
 * configuration) is a SandfortError. A command that exits non-zero is NOT an error: it is a
 * result with a non-zero `exitCode`.
 */
export class SandfortError extends Error {
  /** The API's error code (`not_found`, `invalid_argument`, `conflict`, …), or a client-side
   *  code: `connection_error` (daemon unreachable), `timeout`, `config`, `protocol`. */
  readonly code: string;
  /** The HTTP status; 0 when no HTTP answer was received. */
  readonly status: number;
  /** The daemon's request id (`X-Request-Id`), when there was an answer. */
  readonly requestId: string | null;
  /** The parsed error body, when there was one. */
  readonly body: unknown;
  /** Seconds to wait before retrying, from the answer's `Retry-After` (sent with `rate_limited`); else null. */
  readonly retryAfterS: number | null;

  constructor(
    message: string,
    opts: {
      code: ErrorCode | string;
      status?: number;
      requestId?: string | null;
      body?: unknown;
      cause?: unknown;
      retryAfterS?: number | null;
    },
  ) {
    super(message, opts.cause !== undefined ? { cause: opts.cause } : undefined);
    this.name = "SandfortError";
    this.code = opts.code;
    this.status = opts.status ?? 0;
    this.requestId = opts.requestId ?? null;
    this.body = opts.body;
    this.retryAfterS = opts.retryAfterS ?? null;
  }

  get isNotFound(): boolean {
    return this.status === 404;
  }

  /** A quota of the organization (or a disk) is used up: deleting or stopping sandboxes makes room. */
  get isQuotaExceeded(): boolean {
    return this.code === "quota_exceeded";
  }

  /** The daemon's state disk is full: nothing was changed; retry once space returns (deletes still work). */
  get isInsufficientStorage(): boolean {
    return this.code === "insufficient_storage";
  }

  /** The host's memory cannot hold the sandbox now: stop or delete sandboxes, or ask for less memory. */
  get isHostFull(): boolean {
    return this.code === "host_full";
  }

  /** Too many requests from this key (or its organization): wait `retryAfterS` seconds. */
  get isRateLimited(): boolean {
    return this.code === "rate_limited";
  }
}

/** Retry-After as seconds (delta-seconds or an HTTP date); null when absent or unreadable. */
function retryAfterSeconds(value: string | null): number | null {
  if (value === null || value.trim() === "") return null;
  if (/^\s*\d+(\.\d+)?\s*$/.test(value)) return Number(value);
  const at = Date.parse(value);
  return Number.isNaN(at) ? null : Math.max(0, Math.ceil((at - Date.now()) / 1000));
}

const CODE_BY_STATUS: Record<number, string> = {
  400: "invalid_argument",
  401: "unauthenticated",
  403: "permission_denied",
  404: "not_found",
  405: "invalid_argument",
  409: "conflict",
  413: "payload_too_large",
  429: "rate_limited",
  500: "internal",
  502: "unavailable",
  503: "unavailable",
  504: "unavailable",
  507: "insufficient_storage",
};

/** Builds a SandfortError from an HTTP error answer (body already read as text). */
export function errorFromResponse(status: number, headers: Headers, text: string): SandfortError {
  const headerId = headers.get("x-request-id");
  let body: unknown = text;
  let code = CODE_BY_STATUS[status] ?? (status >= 500 ? "internal" : "unknown");
  let message = text.trim() || `HTTP ${status}`;
  let requestId = headerId;
  try {
    const parsed = JSON.parse(text) as { error?: { code?: string; message?: string; request_id?: string } };
    body = parsed;
    if (parsed && typeof parsed === "object" && parsed.error && typeof parsed.error === "object") {
      if (typeof parsed.error.code === "string") code = parsed.error.code;
      if (typeof parsed.error.message === "string") message = parsed.error.message;
      if (typeof parsed.error.request_id === "string") requestId = parsed.error.request_id;
    }
  } catch {
    /* not JSON: keep the text */
  }
  return new SandfortError(`${message} (${code}, HTTP ${status}${requestId ? `, request ${requestId}` : ""})`, {
    code,
    status,
    requestId,
    body,
    retryAfterS: retryAfterSeconds(headers.get("retry-after")),
  });
}
