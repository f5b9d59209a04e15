// The console (docs/console.md) in a real browser: Debian's Chromium driven by playwright-core,
// against the daemon with_daemon.py started (SANDFORT_BASE_URL, and its superadmin key in
// SANDFORT_API_KEY). Signing in with a key, the sandbox list, hostile names drawn as text, the
// page's headers, a cross-site form post, signing out.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createServer, request } from "node:http";
import { gunzipSync } from "node:zlib";
import { chromium } from "playwright-core";
import { BASE, ADMIN, CHROMIUM, call, openSignIn, screenshot, signIn } from "./support.mjs";

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

test("the page asks for every module main.js imports at once: its preloads are that set exactly", async () => {
  // The static imports, followed from main.js through the files as served (dynamic import() is
  // left out: xterm.js loads with the terminal only).
  const imported = new Set();
  const follow = async (name) => {
    const text = await (await fetch(`${BASE}/console/${name}`)).text();
    for (const [, dep] of text.matchAll(/^import [^;]*? from "\.\/([^"]+)";/gm)) {
      if (imported.has(dep)) continue;
      imported.add(dep);
      await follow(dep);
    }
  };
  await follow("main.js");
  const html = await (await fetch(`${BASE}/console/`)).text();
  const preloaded = [...html.matchAll(/<link rel="modulepreload" href="\/console\/([^"]+)">/g)].map((m) => m[1]);
  assert.ok(imported.size >= 5);
  assert.deepEqual(preloaded.sort(), [...imported].sort());
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
  const { context, page } = await openSignIn(browser);
  try {
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

test("a cross-site page's form posts, made in the signed-in browser, change nothing", async () => {
  const target = await call("GET", `/v1/sandboxes/${org.sandbox.id}?wait_for=started&timeout_s=60`, org.member);
  assert.equal(target.state, "started");
  // Another site: "localhost" is not the console's 127.0.0.1. A stop as a plain form, and a create
  // as the classic JSON-in-text/plain form.
  const attacker = createServer((req, res) => {
    res.setHeader("Content-Type", "text/html");
    res.end(`<form id="stop" method="POST" action="${BASE}/v1/sandboxes/${target.id}/stop"><input name="x" value="1"></form>
<form id="create" method="POST" enctype="text/plain" action="${BASE}/v1/sandboxes"><input name='{"name":"made-by-csrf","wait":false,"x":"' value='"}'></form>`);
  });
  await new Promise((r) => attacker.listen(0, "127.0.0.1", r));
  const { context } = await signedIn(org.member);
  try {
    for (const form of ["stop", "create"]) {
      const tab = await context.newPage();  // a tab of its own: each post navigates away
      await tab.goto(`http://localhost:${attacker.address().port}/`);
      const [answer] = await Promise.all([
        tab.waitForResponse((r) => r.url().startsWith(`${BASE}/v1/sandboxes`)),
        tab.evaluate((id) => document.getElementById(id).submit(), form),
      ]);
      // Refused before it could act: the session cookie (SameSite=Strict) did not come along.
      assert.equal(answer.status(), 401, form);
      assert.equal((await answer.request().allHeaders()).cookie, undefined, form);
    }
    assert.equal((await call("GET", `/v1/sandboxes/${target.id}`, org.member)).state, "started");
    const named = await call("GET", "/v1/sandboxes?limit=1000", org.member);
    assert.deepEqual(named.items.filter((s) => s.name === "made-by-csrf"), []);
  } finally {
    await context.close();
    attacker.close();
  }
});
