// One sandbox's page of the console (#/sandboxes/<id>, docs/console.md "One sandbox") in Debian's
// Chromium driven by playwright-core, against the daemon with_daemon.py started
// (SANDFORT_BASE_URL, its superadmin key in SANDFORT_API_KEY). Files uploaded by the file input
// and by a dropped file and downloaded back byte for byte, a hostile file name drawn as text,
// rename, new folder, delete; a web server's preview opened from the page; a background command
// and its logs; the egress allowlist; a snapshot; another organization's sandbox not found; a
// viewer's page without a control that writes; no page errors.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { ADMIN, BASE, CHROMIUM, call, raw, signIn, until } from "./support.mjs";

const HOSTILE = `<img src=x onerror=window.pwned=1>`;
const SCREENSHOT = fileURLToPath(new URL("../../docs/console/sandbox.png", import.meta.url));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

let browser;
const org = {};
const other = {};
const stamp = Date.now();
const snapshotName = `console-snap-${stamp}`;

// Bytes that are not UTF-8 (a lone 0xff, a NUL, a cut sequence), and every byte value once.
function awkwardBytes(n) {
  const b = new Uint8Array(n);
  for (let i = 0; i < n; i++) b[i] = (i * 131 + 7) & 0xff;
  b.set([0xff, 0xfe, 0x00, 0xc3, 0x28, 0xe2, 0x82, 0x0a, 0x80], 0);
  return b;
}

before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  const o = await call("POST", "/v1/orgs", ADMIN, { name: `console-sbx-${stamp}` });
  org.id = o.id;
  org.name = o.name;
  for (const role of ["admin", "member", "viewer"])
    org[role] = (await call("POST", `/v1/orgs/${o.id}/api-keys`, ADMIN, { name: `console-${role}`, role })).key;
  org.sandbox = await call("POST", "/v1/sandboxes", org.member, { wait: true, name: "console-page", labels: { team: "console" } });
  // A connection the proxy refuses (the allowlist is empty): its decision reaches the audit chain
  // within a minute, while the tests below run, and the egress test finds it on the page.
  await call("POST", `/v1/sandboxes/${org.sandbox.id}/process/exec`, org.member, {
    argv: ["python3", "-c", "import urllib.request\ntry: urllib.request.urlopen('http://refused.example/', timeout=10)\nexcept Exception as e: print(e)"],
  });
  // Another organization, with a sandbox of its own whose id the first one must not see.
  const p = await call("POST", "/v1/orgs", ADMIN, { name: `console-other-${stamp}` });
  other.member = (await call("POST", `/v1/orgs/${p.id}/api-keys`, ADMIN, { name: "other-member", role: "member" })).key;
  other.sandbox = await call("POST", "/v1/sandboxes", other.member, { wait: false, name: "theirs" });
});

after(async () => {
  await browser?.close();
  await call("DELETE", `/v1/snapshots/${snapshotName}`, org.member).catch(() => {});
  if (org.sandbox) await call("DELETE", `/v1/sandboxes/${org.sandbox.id}`, org.member).catch(() => {});
  if (other.sandbox) await call("DELETE", `/v1/sandboxes/${other.sandbox.id}`, other.member).catch(() => {});
});

const signedIn = (key, viewport) => signIn(browser, key, viewport);

async function openSandbox(page, section = "files") {
  await page.goto(`${BASE}/console/#/sandboxes/${org.sandbox.id}/${section}`);
  await page.locator("#sandbox-facts").waitFor();
  await page.locator(`#${section}-section`).waitFor();
}

const row = (page, name) => page.locator("#files tbody tr").filter({ has: page.locator(`td.name button`, { hasText: name }) });
const nameOf = (page, name) => row(page, name).locator("td.name button");

test("the header shows the sandbox, and the sections are tabs the keyboard moves through", async () => {
  const { context, page, errors } = await signedIn(org.member);
  try {
    // By name in the URL: the page finds it, and the address then names it by id.
    await page.goto(`${BASE}/console/#/sandboxes/console-page`);
    const facts = page.locator("#sandbox-facts");
    await facts.waitFor();
    const text = await facts.textContent();
    assert.ok(text.includes(org.sandbox.id));
    assert.match(text, /started/);
    assert.match(text, /team=console/);
    assert.match(text, /MiB memory/);
    await page.locator("#sandbox-usage").waitFor({ timeout: 20000 });
    assert.match(await page.locator("#sandbox-usage").textContent(), /CPU .* % · memory/);
    assert.ok(page.url().endsWith(`#/sandboxes/${org.sandbox.id}/files`));
    // The terminal's container is there for console/terminal.js to mount into.
    assert.equal(await page.locator("#terminal-section #terminal").count(), 1);
    assert.equal(await page.locator("#terminal-section h2").textContent(), "Terminal");

    const files = page.getByRole("tab", { name: "Files" });
    assert.equal(await files.getAttribute("aria-selected"), "true");
    await files.focus();
    await page.keyboard.press("ArrowRight");
    const commands = page.getByRole("tab", { name: "Commands" });
    assert.equal(await commands.getAttribute("aria-selected"), "true");
    assert.equal(await page.evaluate(() => document.activeElement.id), "tab-commands");
    assert.equal(await page.locator("#commands-section").isVisible(), true);
    assert.equal(await page.locator("#files-section").isVisible(), false);
    await page.keyboard.press("End");
    assert.equal(await page.getByRole("tab", { name: "Snapshots" }).getAttribute("aria-selected"), "true");
    await page.keyboard.press("Home");
    assert.equal(await page.getByRole("tab", { name: "Terminal" }).getAttribute("aria-selected"), "true");
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("files: uploaded by the input and by a drop, downloaded back byte for byte; a text file read in place", async () => {
  const { context, page, errors } = await signedIn(org.member);
  try {
    await openSandbox(page, "files");
    const sent = awkwardBytes(70000);
    await page.getByLabel("Upload files").setInputFiles({ name: "upload.bin", mimeType: "application/octet-stream", buffer: Buffer.from(sent) });
    await row(page, "upload.bin").waitFor();
    // What the sandbox holds is what was sent.
    const stored = new Uint8Array(await (await raw("GET", `/v1/sandboxes/${org.sandbox.id}/files?path=/work/upload.bin`, org.member)).arrayBuffer());
    assert.ok(Buffer.from(stored).equals(Buffer.from(sent)));

    // Downloaded by the page's link: the same bytes again.
    const [download] = await Promise.all([
      page.waitForEvent("download"),
      row(page, "upload.bin").getByRole("link", { name: "Download upload.bin" }).click(),
    ]);
    assert.equal(download.suggestedFilename(), "upload.bin");
    assert.ok(readFileSync(await download.path()).equals(Buffer.from(sent)));

    // Dropped on the browser (a synthesized drop event carrying a File).
    const dropped = awkwardBytes(4096).reverse();
    await page.evaluate(({ name, data }) => {
      const dt = new DataTransfer();
      dt.items.add(new File([new Uint8Array(data)], name));
      const zone = document.querySelector("#files-section .dropzone");
      for (const type of ["dragenter", "dragover", "drop"])
        zone.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
    }, { name: "dropped.bin", data: [...dropped] });
    await row(page, "dropped.bin").waitFor();
    const [again] = await Promise.all([
      page.waitForEvent("download"),
      row(page, "dropped.bin").getByRole("link", { name: "Download dropped.bin" }).click(),
    ]);
    assert.ok(readFileSync(await again.path()).equals(Buffer.from(dropped)));

    // A text file opens read-only in the page; a large one is cut at 1 MiB, and says so.
    await call("PUT", `/v1/sandboxes/${org.sandbox.id}/files?path=/work/notes/hello.txt`, org.member, new TextEncoder().encode("hello from the sandbox\nsecond line\n"));
    await call("PUT", `/v1/sandboxes/${org.sandbox.id}/files?path=/work/notes/big.txt`, org.member, new TextEncoder().encode("x".repeat(1536 * 1024)));
    await page.getByRole("button", { name: "Refresh", exact: true }).click();
    await nameOf(page, "notes/").click();
    await nameOf(page, "hello.txt").click();
    const pre = page.locator("#file-view pre.file-text");
    await pre.waitFor();
    assert.equal(await pre.textContent(), "hello from the sandbox\nsecond line\n");
    await nameOf(page, "big.txt").click();
    await page.locator("#file-view .note").filter({ hasText: "Showing the first 1.0 MiB of 1.5 MiB" }).waitFor();
    assert.equal((await pre.textContent()).length, 1024 * 1024);
    // Up, and by the breadcrumb.
    await page.getByRole("button", { name: "Up", exact: true }).click();
    await row(page, "upload.bin").waitFor();
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("files: a hostile name is drawn as text; new folder, rename, and delete after a confirmation", async () => {
  await call("PUT", `/v1/sandboxes/${org.sandbox.id}/files?path=${encodeURIComponent(`/work/${HOSTILE}`)}`, org.member, new TextEncoder().encode("boo"));
  const { context, page, errors } = await signedIn(org.member);
  try {
    await openSandbox(page, "files");
    const hostile = row(page, HOSTILE);
    await hostile.waitFor();
    assert.equal(await page.locator("#files img, #files script").count(), 0);
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    // Opening it and reading it changes nothing either.
    await nameOf(page, HOSTILE).click();
    await page.locator("#file-view pre.file-text").filter({ hasText: "boo" }).waitFor();
    assert.equal(await page.locator("#file-view h3").textContent(), `/work/${HOSTILE}`);
    assert.equal(await page.locator("img").count(), 0);

    // New folder.
    await page.getByRole("button", { name: "New folder", exact: true }).click();
    await page.getByLabel("New folder name").fill("made-here");
    await page.getByRole("button", { name: "Create", exact: true }).click();
    await row(page, "made-here/").waitFor();
    assert.equal((await call("GET", `/v1/sandboxes/${org.sandbox.id}/files/stat?path=/work/made-here`, org.member)).type, "dir");

    // Rename, with the keyboard: Enter saves.
    await call("PUT", `/v1/sandboxes/${org.sandbox.id}/files?path=/work/old-name.txt`, org.member, new TextEncoder().encode("renamed"));
    await page.getByRole("button", { name: "Refresh", exact: true }).click();
    await row(page, "old-name.txt").getByRole("button", { name: "Rename old-name.txt" }).click();
    const field = page.getByLabel("New name of old-name.txt");
    await field.fill("new-name.txt");
    await field.press("Enter");
    await row(page, "new-name.txt").waitFor();
    assert.equal(await row(page, "old-name.txt").count(), 0);
    assert.equal((await call("GET", `/v1/sandboxes/${org.sandbox.id}/files/stat?path=/work/new-name.txt`, org.member)).size, 7);

    // Delete: Cancel keeps it, Delete removes it.
    await row(page, "new-name.txt").getByRole("button", { name: "Delete new-name.txt" }).click();
    const dialog = page.getByRole("dialog");
    await dialog.waitFor();
    assert.match(await dialog.textContent(), /Delete \/work\/new-name\.txt\?/);
    await dialog.getByRole("button", { name: "Cancel", exact: true }).click();
    assert.equal(await row(page, "new-name.txt").count(), 1);
    await row(page, "new-name.txt").getByRole("button", { name: "Delete new-name.txt" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete", exact: true }).click();
    await row(page, "new-name.txt").waitFor({ state: "detached" });
    assert.equal((await raw("GET", `/v1/sandboxes/${org.sandbox.id}/files/stat?path=/work/new-name.txt`, org.member)).status, 404);
    // A directory goes with what is in it.
    await call("PUT", `/v1/sandboxes/${org.sandbox.id}/files?path=/work/made-here/inner.txt`, org.member, new TextEncoder().encode("x"));
    await row(page, "made-here/").getByRole("button", { name: "Delete made-here" }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete", exact: true }).click();
    await row(page, "made-here/").waitFor({ state: "detached" });
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("previews: a web server in the sandbox opens from the page in a new tab, authorized", async () => {
  await call("POST", `/v1/sandboxes/${org.sandbox.id}/commands`, org.member,
             { command: "python3 -m http.server 8000 --bind 0.0.0.0", cwd: "/work" });
  await until("port 8000", async () => (await call("GET", `/v1/sandboxes/${org.sandbox.id}/ports`, org.member))
    .items.some((p) => p.port === 8000 && p.previewable));
  const { context, page, errors } = await signedIn(org.member);
  try {
    await openSandbox(page, "previews");
    const link = page.getByRole("link", { name: "Open the preview of port 8000 in a new tab" });
    await link.waitFor();
    assert.equal(await link.getAttribute("target"), "_blank");
    const [tab] = await Promise.all([context.waitForEvent("page"), link.click()]);
    await tab.waitForLoadState();
    assert.match(await tab.locator("body").textContent(), /Directory listing for \//);
    assert.match(await tab.locator("body").textContent(), /upload\.bin/);
    // The token left the address bar; the preview keeps its own cookie for that one host.
    assert.doesNotMatch(tab.url(), /sandfort_token/);
    assert.match(new URL(tab.url()).hostname, new RegExp(`^8000-${org.sandbox.id}\\.`));
    await tab.close();

    // The field opens a port by its number.
    await page.getByLabel("Open the preview of port", { exact: true }).fill("8000");
    const [second] = await Promise.all([context.waitForEvent("page"), page.getByRole("button", { name: "Open preview", exact: true }).click()]);
    await second.waitForLoadState();
    assert.match(await second.locator("body").textContent(), /Directory listing for \//);
    await second.close();
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("commands: one started from the page shows its output in its logs; kill asks first", async () => {
  const { context, page, errors } = await signedIn(org.member);
  try {
    await openSandbox(page, "commands");
    await page.getByRole("textbox", { name: /^Command/ }).fill("echo hello-from-console; sleep 1; echo to-stderr >&2; echo done");
    await page.getByRole("button", { name: "Start", exact: true }).click();
    const logs = page.locator("#command-logs");
    await logs.filter({ hasText: "hello-from-console" }).waitFor();
    await page.locator("#command-logs-state").filter({ hasText: "Exited with code 0." }).waitFor({ timeout: 20000 });
    assert.match(await logs.textContent(), /hello-from-console\n[\s\S]*done/);
    assert.equal(await logs.locator(".stderr").filter({ hasText: "to-stderr" }).count(), 1);
    const started = page.locator("#commands tbody tr").filter({ hasText: "hello-from-console" });
    await started.locator("td.state-exited").waitFor({ timeout: 15000 });

    await page.getByRole("textbox", { name: /^Command/ }).fill("sleep 300");
    await page.getByRole("button", { name: "Start", exact: true }).click();
    const sleeper = page.locator("#commands tbody tr").filter({ hasText: "sleep 300" });
    await sleeper.locator("td.state-running").waitFor();
    await sleeper.getByRole("button", { name: /^Kill / }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Kill", exact: true }).click();
    await sleeper.locator("td.state-exited").waitFor({ timeout: 15000 });
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("egress: the allowlist edited on the page is the sandbox's; a bad entry is refused, saying why", async () => {
  const { context, page, errors } = await signedIn(org.member);
  try {
    await openSandbox(page, "egress");
    const area = page.getByLabel("Hosts the sandbox may reach, one a line");
    assert.equal(await area.inputValue(), "");
    await area.fill("example.com\n*.pypi.org\n");
    await page.getByRole("button", { name: "Save allowlist", exact: true }).click();
    await page.locator("#egress-section [role=status]").filter({ hasText: "Saved" }).waitFor();
    assert.deepEqual((await call("GET", `/v1/sandboxes/${org.sandbox.id}`, org.member)).egress_allowlist, ["example.com", "*.pypi.org"]);
    await area.fill("not a host!");
    await page.getByRole("button", { name: "Save allowlist", exact: true }).click();
    await page.locator("#egress-section [role=alert]").waitFor();
    assert.deepEqual((await call("GET", `/v1/sandboxes/${org.sandbox.id}`, org.member)).egress_allowlist, ["example.com", "*.pypi.org"]);
    await page.locator("#egress-counts").filter({ hasText: "connections allowed" }).waitFor({ timeout: 20000 });
    // The proxy's decisions are the audit log's, an admin's to read: a member is told so.
    assert.match(await page.locator("#egress-decisions").textContent(), /audit log/);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("egress: an admin sees the proxy's recent decisions for the sandbox", async () => {
  // Written once a minute (audit.summary_interval_s); the refusal was made in before().
  await until("the egress event", async () => (await call("GET", `/v1/audit?action=egress&target=${org.sandbox.id}`, org.admin))
    .items.some((e) => e.details.host === "refused.example"), 120000);
  const { context, page, errors } = await signedIn(org.admin);
  try {
    await openSandbox(page, "egress");
    const refused = page.locator("#egress-decision-list tbody tr").filter({ hasText: "refused.example:80" });
    await refused.waitFor();
    assert.match(await refused.textContent(), /denied/);
    assert.match(await refused.textContent(), /host not in the allowlist/);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("snapshots: one taken from the page is listed as this sandbox's", async () => {
  const { context, page, errors } = await signedIn(org.member);
  try {
    await openSandbox(page, "snapshots");
    await page.getByLabel("Snapshot name").fill(snapshotName);
    await page.getByRole("button", { name: "Take snapshot", exact: true }).click();
    await page.locator("#snapshots tbody tr").filter({ hasText: snapshotName }).waitFor({ timeout: 120000 });
    const snap = await call("GET", `/v1/snapshots/${snapshotName}`, org.member);
    assert.equal(snap.source_sandbox_id, org.sandbox.id);
    assert.equal(await page.locator(`#snapshots tr[data-id="${snap.id}"]`).count(), 1);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("another organization's sandbox, or none, is not found", async () => {
  const { context, page, errors } = await signedIn(org.member);
  try {
    for (const id of [other.sandbox.id, "theirs", "sbx-0000000000000000"]) {
      await page.goto(`${BASE}/console/#/sandboxes/${id}`);
      await page.locator("#not-found").filter({ hasText: id }).waitFor();
      assert.equal(await page.getByRole("heading", { name: "Sandbox not found" }).count(), 1);
      assert.equal(await page.locator("#sandbox-facts").count(), 0);
    }
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("a viewer sees the sandbox and no control that writes", async () => {
  const { context, page, errors } = await signedIn(org.viewer);
  try {
    await openSandbox(page, "files");
    await row(page, "upload.bin").waitFor();
    // Reading stays: the listing, a download.
    assert.equal(await row(page, "upload.bin").getByRole("link", { name: "Download upload.bin" }).count(), 1);
    for (const section of ["terminal", "files", "commands", "previews", "egress", "snapshots"]) {
      await page.getByRole("tab", { name: section[0].toUpperCase() + section.slice(1) }).click();
      await page.locator(`#${section}-section`).waitFor();
    }
    await page.getByRole("tab", { name: "Previews" }).click();
    await page.locator("#ports tbody tr").filter({ hasText: "8000" }).waitFor();
    assert.equal(await page.locator("#ports tbody tr").filter({ hasText: "8000" }).getByRole("link").count(), 0);
    await page.getByRole("tab", { name: "Egress" }).click();
    await page.locator("#egress-allowlist-view").filter({ hasText: "example.com" }).waitFor();
    const writes = await page.evaluate(() => ({
      upload: document.querySelectorAll("input[type=file]").length,
      buttons: [...document.querySelectorAll("#app button")].map((b) => `${b.textContent} ${b.getAttribute("aria-label") ?? ""}`)
        .filter((t) => /^(upload|new folder|rename|delete|start|kill|save|take snapshot|open preview)( |$)/i.test(t.trim())),
      forms: ["#command-form", "#preview-form", "#egress-form", "#snapshot-form", "#egress-allowlist"]
        .filter((s) => document.querySelector(s)),
      previewLinks: document.querySelectorAll("#ports a").length,
      dropzone: document.querySelectorAll(".dropzone").length,
    }));
    assert.deepEqual(writes, { upload: 0, buttons: [], forms: [], previewLinks: 0, dropzone: 0 });
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("the page at 1280x800 (the screenshot in docs/console.md) and in a narrow window", async () => {
  const { context, page, errors } = await signedIn(org.member);
  try {
    await openSandbox(page, "files");
    await row(page, "upload.bin").waitFor();
    await page.locator("#sandbox-usage").waitFor({ timeout: 20000 });
    await call("PUT", `/v1/sandboxes/${org.sandbox.id}/files?path=/work/app.py`, org.member, new TextEncoder().encode(
      "from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer\n\n" +
      "ThreadingHTTPServer((\"0.0.0.0\", 8000), SimpleHTTPRequestHandler).serve_forever()\n"));
    await page.getByRole("button", { name: "Refresh", exact: true }).click();
    await nameOf(page, "app.py").click();
    await page.locator("#file-view pre.file-text").filter({ hasText: "serve_forever" }).waitFor();
    mkdirSync(fileURLToPath(new URL("../../docs/console/", import.meta.url)), { recursive: true });
    await page.screenshot({ path: SCREENSHOT });
    // Narrow: nothing wider than the window.
    await page.setViewportSize({ width: 400, height: 800 });
    for (const section of ["Files", "Commands", "Previews", "Egress", "Snapshots"]) {
      await page.getByRole("tab", { name: section }).click();
      await sleep(200);
      const wide = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(wide <= 400, `${section}: the page is ${wide}px wide in a 400px window`);
    }
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
