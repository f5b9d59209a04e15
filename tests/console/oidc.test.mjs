// Signing in to the console through an identity provider (docs/console.md), in Debian's Chromium
// driven by playwright-core: the sign-in page's button, the provider's own login and consent pages
// (tests/oidc's oidc-provider), and back to the console signed in. Run through
// `tests/integration/with_daemon.py --oidc`, whose daemon trusts that provider (SANDFORT_OIDC_ISSUER)
// with the console client sandfort-console, and has the organizations acme and other-org.
//
// The console is opened as http://localhost:<port> and the provider is http://127.0.0.1:<port>:
// two sites, so the way back from the provider is a cross-site navigation, as in a deployment
// (the pre-login cookie must be SameSite=Lax to come back with it).
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { existsSync } from "node:fs";
import { chromium } from "playwright-core";
import { load } from "./support.mjs";

const BASE = process.env.SANDFORT_BASE_URL;
const ISSUER = process.env.SANDFORT_OIDC_ISSUER;
const CHROMIUM = process.env.SANDFORT_CHROMIUM ?? "/usr/bin/chromium";
const CONSOLE = BASE?.replace("//127.0.0.1:", "//localhost:");

let browser;

before(async () => {
  assert.ok(BASE && ISSUER, "run through tests/integration/with_daemon.py --oidc");
  assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM} (scripts/setup installs Debian's)`);
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
});

after(async () => {
  await browser?.close();
});

// A fresh browser on the console's sign-in page, its script errors collected.
async function signInPage() {
  const context = await browser.newContext();
  const page = await context.newPage();
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && !m.text().startsWith("Failed to load resource") && errors.push(m.text()));
  await load(page, `${CONSOLE}/console/`, page.getByRole("link", { name: "Sign in with Test IdP" }));
  return { context, page, errors };
}

// The provider's own pages: its login form (a user name), then its consent form.
async function atTheProvider(page, username, { allow = true } = {}) {
  await page.waitForURL((url) => url.href.startsWith(ISSUER));
  await page.locator('#login input[name="login"]').fill(username);
  await page.locator("#login button").click();
  await page.locator(allow ? "#consent button" : "#abort button").click();
}

test("a person signs in through the identity provider's pages and lands in the console signed in", async () => {
  const { context, page, errors } = await signInPage();
  try {
    const link = page.getByRole("link", { name: "Sign in with Test IdP" });
    await link.click();
    await atTheProvider(page, "bob");
    await page.waitForURL(`${CONSOLE}/console/`);
    const who = page.locator("#signed-in-as");
    await who.waitFor();
    assert.equal(await who.textContent(), "bob · member · acme");
    await page.locator("#sandboxes, p.muted").first().waitFor();
    // The session cookie is this host's, HttpOnly and Strict; the pre-login cookie is gone; no
    // token is anywhere a script could read it.
    const cookies = await context.cookies(CONSOLE);
    const session = cookies.find((c) => c.name === "sandfort_session");
    assert.ok(session, JSON.stringify(cookies));
    assert.equal(session.httpOnly, true);
    assert.equal(session.sameSite, "Strict");
    assert.equal(cookies.find((c) => c.name === "sandfort_login"), undefined);
    assert.equal(await page.evaluate(() => document.cookie), "");
    assert.equal(await page.evaluate(() => localStorage.length + sessionStorage.length), 0);
    assert.deepEqual(errors, []);

    // Signing out ends it; the next sign-in goes through the provider again.
    await page.getByRole("button", { name: "Sign out" }).click();
    await page.getByRole("link", { name: "Sign in with Test IdP" }).waitFor();
    const res = await fetch(`${BASE}/v1/whoami`, { headers: { Cookie: `sandfort_session=${session.value}` } });
    assert.equal(res.status, 401);
  } finally {
    await context.close();
  }
});

test("cancelling at the provider comes back to the sign-in page, saying so", async () => {
  const { context, page, errors } = await signInPage();
  try {
    await page.getByRole("link", { name: "Sign in with Test IdP" }).click();
    await atTheProvider(page, "carol", { allow: false });
    await page.getByRole("alert").filter({ hasText: "The sign-in was cancelled at the identity provider." }).waitFor();
    // The reason is shown once: the address no longer carries it.
    assert.equal(new URL(page.url()).hash, "");
    assert.equal((await context.cookies(CONSOLE)).find((c) => c.name === "sandfort_session"), undefined);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("a user whose provider grants no role here is refused, and the page says why", async () => {
  const { context, page } = await signInPage();
  try {
    await page.getByRole("link", { name: "Sign in with Test IdP" }).click();
    await atTheProvider(page, "mallory");
    await page.getByRole("alert").filter({ hasText: /gives you no role here/ }).waitFor();
  } finally {
    await context.close();
  }
});

test("only the sign-in page's own reasons are shown: a made-up code says nothing of its own", async () => {
  const { context, page, errors } = await signInPage();
  try {
    for (const code of ["<img src=x onerror=window.pwned=1>", "constructor", "__proto__"]) {
      await page.goto(`${CONSOLE}/console/#/signin?error=${encodeURIComponent(code)}`);
      await page.getByRole("alert").filter({ hasText: "The sign-in failed." }).waitFor();
      assert.equal(await page.evaluate(() => window.pwned), undefined);
      assert.equal(await page.locator("#app img").count(), 0);
    }
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
