// What every console test file shares: the daemon with_daemon.py started (SANDFORT_BASE_URL, and
// its superadmin key in SANDFORT_API_KEY), Debian's Chromium, an API call with a key, and signing
// in through the page's form.
import assert from "node:assert/strict";
import { existsSync } from "node:fs";

export const BASE = process.env.SANDFORT_BASE_URL;
export const ADMIN = process.env.SANDFORT_API_KEY;
export const CHROMIUM = process.env.SANDFORT_CHROMIUM ?? "/usr/bin/chromium";
assert.ok(BASE && ADMIN, "run through tests/integration/with_daemon.py");
assert.ok(existsSync(CHROMIUM), `no Chromium at ${CHROMIUM} (scripts/setup installs Debian's)`);

// The API with a key: raw() answers the Response; call() the JSON of a success, else throws.
// A Uint8Array body is sent as bytes, anything else as JSON.
export async function raw(method, path, key, body) {
  const binary = body instanceof Uint8Array;
  return fetch(BASE + path, {
    method,
    headers: { Authorization: `Bearer ${key}`,
               ...(body === undefined ? {} : { "Content-Type": binary ? "application/octet-stream" : "application/json" }) },
    body: body === undefined ? undefined : binary ? body : JSON.stringify(body),
  });
}

export async function call(method, path, key, body) {
  const res = await raw(method, path, key, body);
  const text = await res.text();
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${text}`);
  return text ? JSON.parse(text) : null;
}

// fn's first truthy answer (a failing fn counts as not yet), asked every 250 ms.
export async function until(what, fn, timeoutMs = 30000) {
  const end = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn().catch(() => undefined);
    if (v) return v;
    if (Date.now() > end) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 250));
  }
}

// A new browser context on the sign-in page. errors collects the page's script errors and the
// errors it logs (not the network's lines: the page asks for its session before signing in, and a
// 401 is its answer; a 403 to a viewer or a 404 for another organization's sandbox are answers the
// tests look for). When the form does not come, the error says what the page shows and what it
// asked the server (a failure's first lines are what the end of scripts/test shows).
export async function openSignIn(browser, viewport = { width: 1280, height: 800 }) {
  const context = await browser.newContext({ viewport, acceptDownloads: true });
  const page = await context.newPage();
  page.setDefaultTimeout(30000);
  const errors = [];
  page.on("pageerror", (e) => errors.push(String(e)));
  page.on("console", (m) => m.type() === "error" && !m.text().startsWith("Failed to load resource") && errors.push(m.text()));
  const trail = [];
  const t0 = Date.now();
  const note = (line) => trail.push(`${Date.now() - t0} ms ${line}`);
  page.on("request", (r) => note(`asked ${r.method()} ${r.url()}`));
  page.on("response", (r) => note(`answered ${r.status()} ${r.request().method()} ${r.url()}`));
  page.on("requestfailed", (r) => note(`failed ${r.method()} ${r.url()}: ${r.failure()?.errorText}`));
  const stuck = async (what, e) => {
    const says = await page.locator("body").innerText().catch(() => "?");
    return new Error(`${what} (${e.message.split("\n")[0]}); the page says: ${JSON.stringify(says)}; ` +
                     `its errors: ${JSON.stringify(errors)}; its requests: ${trail.slice(-20).join(" | ")}`);
  };
  await load(page, `${BASE}/console/`, page.getByLabel("API key"))
    .catch(async (e) => { throw await stuck("no sign-in form", e); });
  return { context, page, errors, stuck };
}

// Opens url in page and waits for ready (a locator). Chromium fails every request in flight when
// the host's addresses change (net::ERR_NETWORK_CHANGED), and Docker changes them whenever a test
// daemon creates its network; the console's modules then never run and the page stays at
// "Loading…". Only that error loads the page again (five tries); any other failure is the
// console's own and fails the test.
export async function load(page, url, ready, timeoutMs = 30000) {
  let changed = false;
  const seen = (r) => { if (r.failure()?.errorText === "net::ERR_NETWORK_CHANGED") changed = true; };
  page.on("requestfailed", seen);
  try {
    for (let attempt = 1; ; attempt++) {
      changed = false;
      const failed = await page.goto(url).then(() => null, (e) => e);
      const end = Date.now() + timeoutMs;
      for (;;) {
        if (await ready.isVisible()) return;
        if (changed && attempt < 5) break;
        if (Date.now() > end) throw failed ?? new Error(`${ready} not shown in ${timeoutMs} ms`);
        await new Promise((r) => setTimeout(r, 100));
      }
    }
  } finally {
    page.off("requestfailed", seen);
  }
}

// A new browser context signed in with key, on the sandbox list.
export async function signIn(browser, key, viewport) {
  const { context, page, errors, stuck } = await openSignIn(browser, viewport);
  await page.getByLabel("API key").fill(key);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#signed-in-as").waitFor().catch(async (e) => { throw await stuck("not signed in", e); });
  return { context, page, errors };
}

// A screenshot of the page as it is, for docs/console.md (docs/console/<name>.png).
export async function screenshot(page, name) {
  await page.screenshot({ path: new URL(`../../docs/console/${name}.png`, import.meta.url).pathname });
}
