/**
 * Where a client's server and credentials come from: the options, then `SANDFORT_BASE_URL` and
 * `SANDFORT_API_KEY`, then the `sandfort` CLI's stored login (cliLogin.ts), whose key is only sent
 * to its own server.
 */
import { cliConfigPath, env, sameServer, storedLogin } from "./cliLogin.js";
import { SandfortError } from "./errors.js";
import type { TokenProvider, TransportOptions } from "./http.js";
import type { Json } from "./resource.js";

export interface ClientOptions {
  /** e.g. `http://127.0.0.1:8080`; default: env SANDFORT_BASE_URL, then the `sandfort` CLI's stored login. */
  baseUrl?: string;
  /**
   * `sfk_…`; default: env SANDFORT_API_KEY (unless `tokenProvider` is given), then the `sandfort`
   * CLI's stored login when it is for the same base URL (its key goes only to its own server).
   */
  apiKey?: string;
  /**
   * Instead of an API key: returns a bearer token (e.g. an OIDC access token). Called before
   * every request, so it should cache the token until it nears expiry; after a 401 it is called
   * once more and the request repeated once (not for a streamed body).
   */
  tokenProvider?: TokenProvider;
  /** Default per-request timeout in ms; 0 (default) leaves it to the runtime. */
  timeoutMs?: number;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof fetch;
}

/** The transport's options: exactly one of apiKey and tokenProvider set; `config` errors when nothing says where or who. */
export function resolveConfig(opts: ClientOptions): TransportOptions {
  let baseUrl = opts.baseUrl ?? env("SANDFORT_BASE_URL");
  let tokenProvider = opts.tokenProvider;
  let apiKey = tokenProvider ? undefined : (opts.apiKey ?? env("SANDFORT_API_KEY"));
  const login = !baseUrl || !(apiKey || tokenProvider) ? storedLogin() : undefined;
  const where = cliConfigPath() ?? "HOME is not set";
  if (!baseUrl) {
    if (!login) {
      throw new SandfortError(
        `no base URL: pass { baseUrl }, set SANDFORT_BASE_URL or run \`sandfort login\` (no stored login in ${where})`,
        { code: "config" },
      );
    }
    baseUrl = login.baseUrl;
  }
  if (tokenProvider !== undefined) {
    if (typeof tokenProvider !== "function") {
      throw new SandfortError("tokenProvider must be a function returning a bearer token", { code: "config" });
    }
    if (opts.apiKey) throw new SandfortError("pass { apiKey } or { tokenProvider }, not both", { code: "config" });
  } else if (!apiKey) {
    if (!login || !sameServer(login.baseUrl, baseUrl)) {
      throw new SandfortError(
        "no API key: pass { apiKey } or { tokenProvider }, set SANDFORT_API_KEY or run `sandfort login` " +
          (login ? `(the stored login is not for ${baseUrl})` : `(no stored login in ${where})`),
        { code: "config" },
      );
    }
    apiKey = login.apiKey;
    tokenProvider = login.tokenProvider;
  }
  return { baseUrl, apiKey, tokenProvider, timeoutMs: opts.timeoutMs ?? 0, headers: opts.headers, fetch: opts.fetch };
}

const CLIENT_KEYS = ["baseUrl", "apiKey", "tokenProvider", "timeoutMs", "headers", "fetch"] as const;

/** Options that mix a client's with a call's (`Sandbox.create`), split into the two. */
export function splitOptions<T extends object>(o: (T & ClientOptions) | undefined): [ClientOptions, T] {
  const client: Json = {};
  const rest: Json = {};
  for (const [k, v] of Object.entries(o ?? {})) {
    if ((CLIENT_KEYS as readonly string[]).includes(k)) client[k] = v;
    else rest[k] = v;
  }
  return [client as ClientOptions, rest as T];
}
