// The `sandfort` CLI's stored login, read when a client is given no URL or key (as Docker's and
// kubectl's clients share their CLI's config). The CLI keeps it in
// $XDG_CONFIG_HOME/sandfort/config.json, else $HOME/.config/sandfort/config.json (mode 0600,
// cli/config.cpp): {base_url, api_key} after `sandfort login`, or {base_url, oidc: {access_token,
// expires_at, …}} after `sandfort login --oidc`, whose access token the CLI renews in place. There
// are no profiles. The file is read with node:fs through process.getBuiltinModule (Node ≥ 20.16,
// Bun, Deno), so the SDK imports nothing: where that is missing (a browser) there is no stored
// login. The secrets read here never appear in a message.
import { SandfortError } from "./errors.js";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

interface ProcessLike {
  env?: Record<string, string | undefined>;
  getBuiltinModule?: (id: string) => unknown;
}

// The CLI renews a token this long before it expires (cli/credentials.cpp): refuse it as late.
const EXPIRY_MARGIN_S = 30;

function processLike(): ProcessLike | undefined {
  return (globalThis as { process?: ProcessLike }).process;
}

/** An environment variable; empty counts as unset. */
export function env(name: string): string | undefined {
  const v = processLike()?.env?.[name];
  return v === "" ? undefined : v;
}

/** Where the CLI keeps its login; undefined when neither XDG_CONFIG_HOME nor HOME is set. */
export function cliConfigPath(): string | undefined {
  const xdg = env("XDG_CONFIG_HOME");
  if (xdg) return `${xdg}/sandfort/config.json`;
  const home = env("HOME");
  return home ? `${home}/.config/sandfort/config.json` : undefined;
}

function readConfig(path: string): Json {
  const fs = processLike()?.getBuiltinModule?.("node:fs") as
    | { readFileSync(path: string, encoding: "utf8"): string }
    | undefined;
  if (!fs) return {};
  try {
    const data: unknown = JSON.parse(fs.readFileSync(path, "utf8"));
    return data !== null && typeof data === "object" && !Array.isArray(data) ? (data as Json) : {};
  } catch {
    return {};
  }
}

export interface StoredLogin {
  baseUrl: string;
  /** Set after `sandfort login`; undefined for an OIDC sign-in (use tokenProvider). */
  apiKey?: string;
  /** An OIDC sign-in's access token, read from the file at each request (the CLI renews it). */
  tokenProvider?: () => string;
}

/** The CLI's login, or undefined when there is none (no file, not JSON, no URL, no credential). */
export function storedLogin(): StoredLogin | undefined {
  const path = cliConfigPath();
  if (!path) return undefined;
  const data = readConfig(path);
  const baseUrl = data.base_url;
  if (typeof baseUrl !== "string" || !baseUrl) return undefined;
  if (typeof data.api_key === "string" && data.api_key) return { baseUrl, apiKey: data.api_key };
  if (data.oidc === null || typeof data.oidc !== "object") return undefined;
  return {
    baseUrl,
    tokenProvider: () => {
      const oidc = readConfig(path).oidc as Json | undefined;
      const token = oidc?.access_token;
      if (typeof token !== "string" || !token) {
        throw new SandfortError(`the CLI's OIDC sign-in is gone from ${path} (logged out?)`, { code: "config" });
      }
      const expiresAt = oidc?.expires_at;
      if (typeof expiresAt === "number" && expiresAt > 0 && Date.now() / 1000 + EXPIRY_MARGIN_S >= expiresAt) {
        throw new SandfortError(
          "the access token of the CLI's OIDC sign-in has expired: run any `sandfort` command " +
            "(e.g. `sandfort whoami`) to renew it, or pass { apiKey }",
          { code: "config" },
        );
      }
      return token;
    },
  };
}

export function sameServer(a: string, b: string): boolean {
  return a.replace(/\/+$/, "") === b.replace(/\/+$/, "");
}
