// The console (docs/console.md) in a real browser: Debian's Chromium driven by playwright-core,
// against the daemon with_daemon.py started (SANDFORT_BASE_URL, and its superadmin key in
// SANDFORT_API_KEY). Signing in with a key, the sandbox list, hostile names drawn as text, the
// page's headers, signing out.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";

const BASE = process.env.SANDFORT_BASE_URL;
const ADMIN = process.env.SANDFORT_API_KEY;
const CHROMIUM = process.env.SANDFORT_CHROMIUM ?? "/usr/bin/chromium";
const HOSTILE = `<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>`;

async function call(method, path, key, body) {
  const res = await fetch(BASE + path, {
    method,
    headers: { Authorization: `Bearer ${key}`, ...(body ? { "Content-Type": "application/json" } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

let browser;
const org = {};

before(async () => {
  assert.ok(BASE && ADMIN, "run through tests/integration/with_daemon.py");
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM} (scripts/setup installs Debian's)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  const o = await call("POST", "/v1/orgs", ADMIN, { name: `console-${Date.now()}` });
  org.id = o.id;
  for (const role of ["member", "viewer"])
    org[role] = (await call("POST", `/v1/orgs/${o.id}/api-keys`, ADMIN, { name: `console-${role}`, role })).key;
  org.sandbox = await call("POST", "/v1/sandboxes", org.member, {
    wait: false, name: "console-list", labels: { note: HOSTILE },
  });
});

after(async () => {
  await browser?.close();
  if (org.sandbox) await call("DELETE", `/v1/sandboxes/${org.sandbox.id}`, org.member).catch(() => {});
});

async function signedIn(key) {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  // A script error, or one the page logs; not the network's lines (the page asks for its session
  // before signing in, and that is a 401 by design).
  page.on("console", (m) => m.type() === "error" && !m.text().startsWith("Failed to load resource") && errors.push(m.text()));
  await page.goto(`${BASE}/console/`);
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#signed-in-as").waitFor();
  return { context, page, errors };
}

test("the page is served with a strict policy and no frame may hold it", async () => {
  const res = await fetch(`${BASE}/console/`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get("content-type"), /^text\/html/);
  const csp = res.headers.get("content-security-policy");
  assert.match(csp, /script-src 'self'/);
  assert.match(csp, /frame-ancestors 'none'/);
  assert.doesNotMatch(csp, /unsafe-inline|unsafe-eval/);
  assert.equal(res.headers.get("x-frame-options"), "DENY");
  assert.equal(res.headers.get("x-content-type-options"), "nosniff");
  // The ETag spares a second download; /console goes to /console/; other files are 404.
  const again = await fetch(`${BASE}/console/main.js`, { headers: { "If-None-Match": (await fetch(`${BASE}/console/main.js`)).headers.get("etag") } });
  assert.equal(again.status, 304);
  const bare = await fetch(`${BASE}/console`, { redirect: "manual" });
  assert.equal(bare.status, 308);
  assert.equal(bare.headers.get("location"), "/console/");
  assert.equal((await fetch(`${BASE}/console/nothing.js`)).status, 404);
  assert.equal((await fetch(`${BASE}/console/`, { method: "POST" })).status, 405);
});

test("a member signs in with a key, sees the organization's sandboxes, and hostile names stay text", async () => {
  const { context, page, errors } = await signedIn(org.member);
  try {
    const row = page.locator(`#sandboxes tr[data-id="${org.sandbox.id}"]`);
    await row.waitFor();
    assert.match(await row.textContent(), /console-list/);
    // The label is the string it is: drawn as text, never run.
    assert.ok((await row.textContent()).includes(HOSTILE));
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    assert.equal(await row.locator("img, script").count(), 0);
    assert.match(await page.locator("#signed-in-as").textContent(), /console-member · member/);
    // The key is nowhere the page's scripts can read: the session cookie is HttpOnly.
    assert.equal(await page.evaluate(() => document.cookie), "");
    const stored = await page.evaluate(() => JSON.stringify({ ...localStorage }) + JSON.stringify({ ...sessionStorage }));
    assert.ok(!stored.includes(org.member));
    const [cookie] = await context.cookies();
    assert.equal(cookie.name, "sandfort_session");
    assert.equal(cookie.httpOnly, true);
    assert.equal(cookie.sameSite, "Strict");
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("a wrong key is refused on the sign-in form, saying why", async () => {
  const context = await browser.newContext();
  const page = await context.newPage();
  try {
    await page.goto(`${BASE}/console/`);
    await page.getByLabel("API key").fill("sfk_00000000000000000000000000000000");
    await page.getByRole("button", { name: "Sign in" }).click();
    await page.getByRole("alert").filter({ hasText: /invalid API key/ }).waitFor();
    assert.deepEqual(await context.cookies(), []);
  } finally {
    await context.close();
  }
});

test("signing out ends the session on the server, not only in the page", async () => {
  const { context, page } = await signedIn(org.viewer);
  try {
    const [cookie] = await context.cookies();
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByLabel("API key").waitFor();
    // The old cookie, replayed by hand, opens nothing any more.
    const res = await fetch(`${BASE}/v1/whoami`, { headers: { Cookie: `sandfort_session=${cookie.value}` } });
    assert.equal(res.status, 401);
    assert.deepEqual(await context.cookies(), []);
  } finally {
    await context.close();
  }
});
