// A client given no URL or key uses the sandfort CLI's stored login, after the environment
// variables: the login is made by the real CLI binary (`sandfort login --api-key-stdin`) in a
// temporary HOME / XDG_CONFIG_HOME, as a user would. The stored key only goes to its own URL and
// never appears in a message. (node --test runs each file in its own process: changing
// process.env here touches no other test file.)
import { test, before, beforeEach } from "node:test";
import assert from "node:assert/strict";
import { spawnSync } from "node:child_process";
import { mkdtempSync, mkdirSync, writeFileSync, existsSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { SandfortClient, SandfortError } from "../dist/esm/index.js";
import { BASE_URL, API_KEY } from "../testlib/live.mjs";

const REPO = join(dirname(fileURLToPath(import.meta.url)), "..", "..", "..");
const CLI =
  process.env.SANDFORT_CLI ?? join(process.env.SANDFORT_BUILD_DIR ?? join(REPO, "build"), "cli", "sandfort");

let viewerKey;
let home;

function cliLogin(url, key) {
  assert.ok(existsSync(CLI), `no sandfort binary at ${CLI} (set SANDFORT_BUILD_DIR or SANDFORT_CLI)`);
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => !k.startsWith("SANDFORT_")));
  const r = spawnSync(CLI, ["login", "--url", url, "--api-key-stdin"], { input: key, env, encoding: "utf8" });
  assert.equal(r.status, 0, r.stderr);
}

async function role(client) {
  return (await client.whoami()).role;
}

function configError(fn, pattern) {
  assert.throws(fn, (e) => e instanceof SandfortError && e.code === "config" && pattern.test(e.message) &&
    !e.message.includes(API_KEY) && !e.message.includes(viewerKey));
}

before(async () => {
  const res = await fetch(`${BASE_URL}/v1/api-keys`, {
    method: "POST",
    headers: { authorization: `Bearer ${API_KEY}`, "content-type": "application/json" },
    body: JSON.stringify({ name: "ts-cli-login-viewer", role: "viewer" }),
  });
  assert.equal(res.status, 201);
  viewerKey = (await res.json()).key;
});

beforeEach(() => {
  home = mkdtempSync(join(tmpdir(), "sandfort-ts-login-"));
  process.env.HOME = home;
  delete process.env.XDG_CONFIG_HOME;
  delete process.env.SANDFORT_BASE_URL;
  delete process.env.SANDFORT_API_KEY;
});

test("the CLI's login is used when nothing is given", async () => {
  cliLogin(BASE_URL, API_KEY);
  assert.ok(existsSync(join(home, ".config", "sandfort", "config.json")));
  const client = new SandfortClient();
  assert.equal(client.baseUrl, BASE_URL.replace(/\/+$/, ""));
  const me = await client.whoami();
  assert.equal(me.role, "admin");
  assert.equal(me.auth, "api_key");
});

test("XDG_CONFIG_HOME is where the CLI keeps it", async () => {
  cliLogin(BASE_URL, API_KEY); // under HOME/.config
  process.env.XDG_CONFIG_HOME = join(home, "xdg");
  configError(() => new SandfortClient(), /no stored login/); // the CLI would not read HOME/.config now either
  cliLogin(BASE_URL, viewerKey);
  assert.equal(await role(new SandfortClient()), "viewer");
});

test("the environment and the options come first", async () => {
  cliLogin(BASE_URL, API_KEY);
  process.env.SANDFORT_API_KEY = viewerKey;
  assert.equal(await role(new SandfortClient()), "viewer");
  assert.equal(await role(new SandfortClient({ apiKey: API_KEY })), "admin");
  delete process.env.SANDFORT_API_KEY;
  process.env.SANDFORT_BASE_URL = BASE_URL + "/";
  assert.equal(await role(new SandfortClient()), "admin"); // the same server: its stored key is used
});

test("the stored key goes only to its own server", () => {
  cliLogin(BASE_URL, API_KEY);
  configError(() => new SandfortClient({ baseUrl: "http://127.0.0.1:1" }), /not for http:\/\/127\.0\.0\.1:1/);
  process.env.SANDFORT_BASE_URL = "http://127.0.0.1:1";
  configError(() => new SandfortClient(), /not for http:\/\/127\.0\.0\.1:1/);
});

test("no login, or a file that is not JSON, is a configuration error", () => {
  configError(() => new SandfortClient(), /no stored login/);
  mkdirSync(join(home, ".config", "sandfort"), { recursive: true });
  writeFileSync(join(home, ".config", "sandfort", "config.json"), "{not json");
  configError(() => new SandfortClient(), /no stored login/);
});

function writeOidcLogin(token, expiresAt) {
  const dir = join(home, ".config", "sandfort");
  mkdirSync(dir, { recursive: true });
  // The shape `sandfort login --oidc` stores (cli/config.cpp); the daemon takes an API key as a
  // bearer token as well, so one stands in for the issuer's access token here.
  writeFileSync(join(dir, "config.json"), JSON.stringify({
    base_url: BASE_URL,
    oidc: { issuer: "https://issuer.example", client_id: "sandfort-cli", token_endpoint: "https://issuer.example/t",
      revocation_endpoint: "", scope: "openid", resource: "", audience: "", access_token: token, refresh_token: "r",
      expires_at: expiresAt },
  }));
}

test("an OIDC sign-in gives its current access token", async () => {
  const now = Math.floor(Date.now() / 1000);
  writeOidcLogin(viewerKey, now + 3600);
  const client = new SandfortClient();
  assert.equal(await role(client), "viewer");
  writeOidcLogin(API_KEY, now + 3600); // the CLI renews the token in place: the next request reads it
  assert.equal(await role(client), "admin");
  writeOidcLogin(API_KEY, now - 10);
  await assert.rejects(client.whoami(), (e) => e instanceof SandfortError && /sandfort whoami/.test(e.message) &&
    !e.message.includes(API_KEY));
});
