#!/usr/bin/env node
// The console's weight and speed in Debian's Chromium (docs/console.md states the goals: a first
// load under 300 KB compressed, a list of 500 sandboxes drawn in under 200 ms).
//
//   weight   the bytes the browser receives (encoded, as sent) for every /console/ file a first
//            visit loads: the sign-in page, then the sandbox list, then one sandbox's page with its
//            terminal (xterm.js). Printed per file and in all, against the 300 KB budget.
//   render   the list's own measure ("sandboxes-render": building the rows, style and layout) for
//            500 sandboxes, and for 50 as the baseline of the same run (the ratio shows whether
//            the cost grows with the rows, not more). The list's answer is served by the browser
//            from a fixture (page.route), so the figure is the page's, not the daemon's.
//
// Run after ./scripts/build and `npm ci` in tests/console:
//   /usr/bin/python3 tests/integration/with_daemon.py -- node bench/console.mjs

const here = new URL(".", import.meta.url);
const { chromium } = await import(new URL("../tests/console/node_modules/playwright-core/index.mjs", here).href);

const BASE = process.env.SANDFORT_BASE_URL;
const KEY = process.env.SANDFORT_API_KEY;
const CHROMIUM = process.env.SANDFORT_CHROMIUM ?? "/usr/bin/chromium";
const ROUNDS = process.argv.includes("--quick") ? 3 : 9;
if (!BASE || !KEY) {
  console.error("bench/console.mjs: run it under tests/integration/with_daemon.py");
  process.exit(2);
}

async function call(method, path, body) {
  const res = await fetch(BASE + path, { method, headers: { Authorization: `Bearer ${KEY}`, "Content-Type": "application/json" },
                                         body: body ? JSON.stringify(body) : undefined });
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${await res.text()}`);
  return res.status === 204 ? null : res.json();
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });

async function signedIn(context) {
  const page = await context.newPage();
  await page.goto(`${BASE}/console/`);
  await page.getByLabel("API key").fill(KEY);
  await page.getByRole("button", { name: "Sign in" }).click();
  await page.locator("#signed-in-as").waitFor();
  return page;
}

// --- weight ---------------------------------------------------------------------------------------
const sandbox = await call("POST", "/v1/sandboxes", { wait: true, name: `bench-console-${Date.now()}` });
try {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const received = new Map();
  context.on("requestfinished", async (request) => {
    const url = new URL(request.url());
    if (!url.pathname.startsWith("/console/")) return;
    const sizes = await request.sizes();
    received.set(url.pathname, Math.max(received.get(url.pathname) ?? 0, sizes.responseBodySize));
  });
  const page = await signedIn(context);
  await page.locator("#sandboxes").waitFor();
  await page.goto(`${BASE}/console/#/sandboxes/${sandbox.id}/terminal`);
  await page.locator("#terminal .xterm").waitFor();
  await page.waitForLoadState("networkidle");
  await context.close();
  let total = 0;
  console.log("weight: bytes received per file (compressed as sent)");
  for (const [path, size] of [...received].sort((a, b) => b[1] - a[1])) {
    total += size;
    console.log(`  ${String(size).padStart(8)}  ${path}`);
  }
  console.log(`  ${String(total).padStart(8)}  in all: ${(total / 1024).toFixed(1)} KiB, ${(100 * total / (300 * 1024)).toFixed(0)} % of the 300 KB budget`);
} finally {
  await call("DELETE", `/v1/sandboxes/${sandbox.id}`);
}

// --- render ---------------------------------------------------------------------------------------
function fixture(n) {
  const now = Date.now();
  return {
    next_cursor: null,
    items: Array.from({ length: n }, (_, i) => ({
      id: `sbx-${(0x1000000000000000 + i).toString(16)}`, name: `bench-${i}`, state: i % 7 ? "started" : "stopped",
      snapshot: "sandfort/base:bookworm", runtime: "runc", created_at: new Date(now - i * 60000).toISOString(),
      resources: { cpus: 1, memory_mb: 1024, pids: 512, disk_mb: 10240 }, labels: { team: `t${i % 5}`, run: String(i) },
    })),
  };
}

async function renderMs(n) {
  const context = await browser.newContext({ viewport: { width: 1280, height: 800 } });
  const page = await signedIn(context);
  const body = JSON.stringify(fixture(n));
  await page.route(/\/v1\/sandboxes\?/, (route) => route.fulfill({ status: 200, contentType: "application/json", body }));
  await page.goto(`${BASE}/console/#/sandboxes`);
  const times = [];
  for (let i = 0; i < ROUNDS; i++) {
    await page.reload();  // each round draws the list afresh, once: the first measure is that one
    await page.waitForFunction((count) => document.querySelectorAll("#sandboxes tbody tr").length === count, n);
    times.push(await page.evaluate(() => performance.getEntriesByName("sandboxes-render")[0].duration));
  }
  await context.close();
  return median(times);
}

const small = await renderMs(50);
const large = await renderMs(500);
console.log(`render: the list's rows built, styled and laid out (median of ${ROUNDS} loads)`);
console.log(`  50 sandboxes   ${small.toFixed(1)} ms (baseline)`);
console.log(`  500 sandboxes  ${large.toFixed(1)} ms (goal < 200 ms), ${(large / small).toFixed(1)}x the baseline for 10x the rows`);
await browser.close();
