// The console (docs/console.md) in a real browser: Debian's Chromium driven by playwright-core,
// against the daemon with_daemon.py started (SANDFORT_BASE_URL, and its superadmin key in
// SANDFORT_API_KEY). Signing in with a key, the sandbox list, hostile names drawn as text, the
// page's headers, signing out.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { request } from "node:http";
import { gunzipSync } from "node:zlib";
import { chromium } from "playwright-core";
import { BASE, ADMIN, CHROMIUM, call, screenshot, signIn } from "./support.mjs";

const HOSTILE = `<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>`;

let browser;
const org = {};

before(async () => {
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

const signedIn = (key) => signIn(browser, key);

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
  // Sent gzipped to a client that takes it, as it is to one that does not; each with its own tag.
  const raw = async (encoding) => {
    return new Promise((resolve, reject) => {
      request(`${BASE}/console/vendor/xterm/xterm.mjs`, { headers: { "Accept-Encoding": encoding } }, (r) => {
        const chunks = [];
        r.on("data", (c) => chunks.push(c));
        r.on("end", () => resolve({ headers: r.headers, body: Buffer.concat(chunks) }));
      }).on("error", reject).end();
    });
  };
  const zipped = await raw("gzip, deflate, br");
  const plain = await raw("identity");
  assert.equal(zipped.headers["content-encoding"], "gzip");
  assert.equal(plain.headers["content-encoding"], undefined);
  assert.ok(gunzipSync(zipped.body).equals(plain.body));
  assert.ok(zipped.body.length < plain.body.length / 3);
  assert.notEqual(zipped.headers.etag, plain.headers.etag);
  assert.equal(zipped.headers.vary, "Accept-Encoding");
  assert.equal((await raw("gzip;q=0")).headers["content-encoding"], undefined);
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
    await page.setViewportSize({ width: 1280, height: 800 });
    await page.getByLabel("API key").waitFor();
    await screenshot(page, "sign-in");
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
