// The console's Audit and Administration pages (docs/console.md) in Debian's Chromium, against the
// daemon with_daemon.py started: an admin reads, verifies, filters and exports the audit chain;
// creates a key (its secret shown once, then nowhere), revokes it, uses the kill switch; a viewer's
// pages offer nothing to press and a forged write is refused; the superadmin creates, disables and
// enables an organization and sets its limits; hostile names stay text. Also writes the pages'
// screenshots shown in docs/console.md.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { mkdirSync, readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";
import { ADMIN, BASE, CHROMIUM, call, raw, signIn, until } from "./support.mjs";

const SUPER = ADMIN;
const HOSTILE = `<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>`;
const SHOTS = fileURLToPath(new URL("../../docs/console/", import.meta.url));

let browser;
const org = {};
const made = [];  // organizations to delete at the end

before(async () => {
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  const o = await call("POST", "/v1/orgs", SUPER, { name: `audit-admin-${Date.now()}` });
  made.push(o.id);
  org.id = o.id;
  org.name = o.name;
  for (const role of ["admin", "member", "viewer"]) {
    const k = await call("POST", `/v1/orgs/${o.id}/api-keys`, SUPER, { name: `console-${role}`, role });
    org[role] = k.key;
    org[`${role}_id`] = k.id;
  }
  // A sandbox action, so the chain holds a sandbox.create by the admin's key.
  org.sandbox = await call("POST", "/v1/sandboxes", org.admin, { wait: false, name: "audit-admin-sbx" });
});

after(async () => {
  await browser?.close();
  for (const id of made) await raw("DELETE", `/v1/orgs/${id}`, SUPER).catch(() => {});
});

const signedIn = (key) => signIn(browser, key);

// The confirmation dialog's own button (the page may have one of the same name behind it).
async function confirm(page, label, expect) {
  const dialog = page.locator("dialog.confirm");
  await dialog.waitFor();
  if (expect) assert.match(await dialog.textContent(), expect);
  await dialog.getByRole("button", { name: label, exact: true }).click();
  await dialog.waitFor({ state: "detached" });
}

// A narrow window (a phone's width) scrolls down, never sideways; back to 1280x800 after.
async function fitsNarrow(page) {
  await page.setViewportSize({ width: 400, height: 800 });
  const [scroll, width] = await page.evaluate(() => [document.documentElement.scrollWidth, window.innerWidth]);
  await page.setViewportSize({ width: 1280, height: 800 });
  assert.ok(scroll <= width, `at 400 px wide the page is ${scroll} px wide`);
}

const actionsShown = (page) => page.locator("#audit-events td.ops-action").allTextContents();

test("the pages draw with el() only: no HTML parsed from strings, no inline style, writes through api()", () => {
  for (const name of ["audit.js", "admin.js"]) {
    const src = readFileSync(fileURLToPath(new URL(`../../console/${name}`, import.meta.url)), "utf8");
    assert.doesNotMatch(src, /innerHTML|outerHTML|insertAdjacentHTML|document\.write|\beval\(|new Function/, name);
    assert.doesNotMatch(src, /["']style["']\s*:|\.style\b|setAttribute\(\s*["']style/, name);
    // The one fetch() outside api() is the export's GET (JSON Lines, which api() does not read).
    const fetches = [...src.matchAll(/\bfetch\(/g)].length;
    assert.equal(fetches, name === "audit.js" ? 1 : 0, name);
  }
});

test("an admin sees a sandbox's event, verifies the chain, signs a checkpoint, filters by action and exports JSON Lines", async () => {
  const { context, page, errors } = await signedIn(org.admin);
  try {
    await page.getByRole("link", { name: "Audit", exact: true }).click();
    const row = page.locator("#audit-events tbody tr", { hasText: org.sandbox.id }).filter({ hasText: "sandbox.create" });
    await row.waitFor();
    assert.match(await row.textContent(), new RegExp(`key:${org.admin_id}`));
    assert.match(await row.textContent(), /audit-admin-sbx/);  // the details, as compact JSON

    // The chain verifies; a checkpoint signed from the page is the latest one shown.
    await page.getByRole("button", { name: "Verify now" }).click();
    await page.locator("#audit-verdict .verdict-ok").waitFor();
    assert.match(await page.locator("#audit-verdict").textContent(), /OK/);
    const [answer] = await Promise.all([
      page.waitForResponse((r) => r.url().includes("/v1/audit/checkpoints") && r.request().method() === "POST"),
      page.getByRole("button", { name: "Sign a checkpoint now" }).click()]);
    const signed = await answer.json();
    assert.equal(signed.org_id, org.id);
    await page.locator("#audit-checkpoint", { hasText: `seq ${signed.seq}` }).waitFor();
    const listed = (await call("GET", `/v1/audit/checkpoints?after_seq=${signed.seq - 1}&limit=1`, org.admin)).items[0];
    assert.deepEqual(listed, signed);
    await page.getByRole("button", { name: "Verify now" }).click();
    await page.locator("#audit-verdict .verdict-ok").waitFor();
    assert.equal((await call("GET", "/v1/audit/verify", org.admin)).ok, true);

    // Filtered by action: exactly the API's events of that action, newest first.
    await page.getByLabel("Action").fill("sandbox.create");
    await page.getByRole("button", { name: "Apply" }).click();
    const api = await call("GET", "/v1/audit?action=sandbox.create", org.admin);
    assert.ok(api.items.length >= 1);
    await until("the filtered page", async () => {
      const shown = await actionsShown(page);
      return shown.length === api.items.length && shown.every((a) => a === "sandbox.create");
    });
    const seqs = await page.locator("#audit-events tbody tr").evaluateAll((rows) => rows.map((r) => Number(r.dataset.seq)));
    assert.deepEqual(seqs, api.items.map((e) => e.seq).reverse());

    // The export: a file of JSON Lines, each line one of the API's events.
    const [download] = await Promise.all([page.waitForEvent("download"),
                                          page.getByRole("button", { name: "Export JSON Lines" }).click()]);
    assert.match(download.suggestedFilename(), /^audit-.*\.jsonl$/);
    const lines = readFileSync(await download.path(), "utf8").split("\n").filter(Boolean).map((l) => JSON.parse(l));
    assert.deepEqual(lines, api.items);
    await page.locator("#audit-list", { hasText: `Exported ${api.items.length} event` }).waitFor();

    // Unfiltered again, for the picture.
    await page.getByRole("button", { name: "Clear" }).click();
    await until("every action again", async () => (await actionsShown(page)).some((a) => a !== "sandbox.create"));
    await page.screenshot({ path: `${SHOTS}audit.png` });
    await fitsNarrow(page);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("an admin creates a key whose secret is shown once, revokes it, and uses the kill switch", async () => {
  const { context, page, errors } = await signedIn(org.admin);
  try {
    await page.getByRole("link", { name: "Admin", exact: true }).click();
    await page.locator(`#api-keys tr[data-id="${org.viewer_id}"]`).waitFor();
    await page.locator("#limits").waitFor();

    const name = `${HOSTILE} agent`;
    await page.getByLabel("Name").fill(name);
    await page.getByLabel("Role").selectOption("viewer");
    await page.getByRole("button", { name: "Create key" }).click();
    const dialog = page.locator("dialog.secret-dialog");
    await dialog.waitFor();
    const secret = (await page.locator("#new-key-secret").textContent()).trim();
    assert.match(secret, /^sfk_/);
    assert.ok((await dialog.textContent()).includes(HOSTILE));

    // The key works, as the viewer it was made.
    const me = await call("GET", "/v1/whoami", secret);
    assert.equal(me.principal_name, name);
    assert.equal(me.role, "viewer");
    assert.equal(me.org_id, org.id);

    // Closed, the secret is nowhere the page holds: not in the DOM, a field, or storage.
    await page.getByRole("button", { name: "Done" }).click();
    await dialog.waitFor({ state: "detached" });
    const row = page.locator(`#api-keys tr[data-id="${me.principal}"]`);
    await row.waitFor();
    const held = await page.evaluate(() => [
      document.documentElement.outerHTML,
      ...[...document.querySelectorAll("input, textarea, select")].map((i) => i.value),
      JSON.stringify({ ...localStorage }), JSON.stringify({ ...sessionStorage }), location.href,
    ].join("\n"));
    assert.ok(!held.includes(secret), "the secret is still in the page");
    assert.ok((await row.textContent()).includes(HOSTILE));
    assert.equal(await page.locator("#api-keys img, #api-keys script").count(), 0);
    assert.equal(await page.evaluate(() => window.pwned), undefined);
    await page.screenshot({ path: `${SHOTS}admin.png` });
    await fitsNarrow(page);

    // Revoking asks first: "Cancel" keeps the key, "Revoke" ends it at once.
    await row.getByRole("button", { name: /Revoke/ }).click();
    await confirm(page, "Cancel", new RegExp(me.principal));
    assert.equal((await raw("GET", "/v1/whoami", secret)).status, 200);
    await row.getByRole("button", { name: /Revoke/ }).click();
    await confirm(page, "Revoke");
    await page.locator(`#api-keys tr[data-id="${me.principal}"]`, { hasText: "revoked" }).waitFor();
    assert.equal(await row.getByRole("button").count(), 0);
    assert.equal((await raw("GET", "/v1/whoami", secret)).status, 401);

    // The kill switch: engaged and released from the page, each after a confirmation.
    assert.equal((await call("GET", `/v1/sandboxes/${org.sandbox.id}?wait_for=started&timeout_s=60`, org.admin)).state, "started");
    await page.locator("#kill-engage").click();
    await confirm(page, "Stop every sandbox", /refuse creating or starting/);
    await page.locator("#admin-kill .verdict-bad", { hasText: "Engaged" }).waitFor();
    await page.locator("#kill-switch-report", { hasText: "Stopped" }).waitFor();
    const on = await call("GET", `/v1/orgs/${org.id}/limits`, org.admin);
    assert.equal(on.stopped.by_superadmin, false);
    assert.equal((await raw("POST", "/v1/sandboxes", org.admin, { wait: false })).status, 409);
    // The sandbox list says why its sandbox stopped.
    await page.goto(`${BASE}/console/#/sandboxes`);
    await page.locator(`#sandboxes tr[data-id="${org.sandbox.id}"][data-state="stopped"] .reason`,
                       { hasText: "stopped by the organization's kill switch" }).waitFor();
    await page.goto(`${BASE}/console/#/admin`);
    await page.locator("#kill-release").click();
    await confirm(page, "Release");
    await page.locator("#admin-kill .verdict-ok", { hasText: "Off" }).waitFor();
    assert.equal((await call("GET", `/v1/orgs/${org.id}/limits`, org.admin)).stopped, null);

    // The limits are the operator's: an organization's admin reads them, with no form.
    assert.equal(await page.locator("#limits-form").count(), 0);
    assert.equal(await page.locator("#admin-orgs").count(), 0);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("a viewer's audit and admin pages offer nothing to press, and a forged write from its session is refused", async () => {
  const { context, page, errors } = await signedIn(org.viewer);
  try {
    assert.equal(await page.locator('nav a[href="#/audit"]').isHidden(), true);
    assert.equal(await page.locator('nav a[href="#/admin"]').isHidden(), true);

    await page.evaluate(() => { location.hash = "#/audit"; });
    await page.locator("#app .ops-refusal", { hasText: /only an admin reads the audit log/i }).waitFor();
    assert.match(await page.locator("#app .ops-refusal").textContent(), /403/);
    assert.equal(await page.locator("#app button, #app form, #app input").count(), 0);

    await page.evaluate(() => { location.hash = "#/admin"; });
    await page.locator("#admin-keys .ops-refusal").waitFor();
    await page.locator("#admin-limits .ops-refusal").waitFor();
    await page.locator("#admin-kill .ops-refusal").waitFor();
    assert.equal(await page.locator("#app button, #app form, #app input, #app select").count(), 0);
    assert.equal(await page.locator("#admin-orgs").count(), 0);

    // The API is the authority: the session's own CSRF token and Origin, a viewer's role.
    const statuses = await page.evaluate(async ({ orgId, adminKeyId }) => {
      const { csrf_token } = await (await fetch("/v1/console/session")).json();
      const send = async (method, path, body) => (await fetch(path, {
        method, headers: { "Content-Type": "application/json", "X-Sandfort-CSRF": csrf_token },
        body: body ? JSON.stringify(body) : undefined,
      })).status;
      return [
        await send("POST", "/v1/api-keys", { name: "forged", role: "admin" }),
        await send("DELETE", `/v1/api-keys/${adminKeyId}`),
        await send("POST", `/v1/orgs/${orgId}/stop-all`),
        await send("POST", "/v1/audit/checkpoints"),
      ];
    }, { orgId: org.id, adminKeyId: org.admin_id });
    assert.deepEqual(statuses, [403, 403, 403, 403]);
    assert.equal((await raw("GET", "/v1/whoami", org.admin)).status, 200);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }

  // A member is no admin either: the audit page shows the API's refusal.
  const member = await signedIn(org.member);
  try {
    await member.page.evaluate(() => { location.hash = "#/audit"; });
    await member.page.locator("#app .ops-refusal", { hasText: /only an admin reads the audit log/i }).waitFor();
    assert.equal(await member.page.locator("#app button").count(), 0);
    assert.deepEqual(member.errors, []);
  } finally {
    await member.context.close();
  }
});

test("the superadmin creates, disables and enables an organization, sets its limits, and its hostile name stays text", async () => {
  const { context, page, errors } = await signedIn(SUPER);
  try {
    await page.getByRole("link", { name: "Admin", exact: true }).click();
    await page.locator("#orgs").waitFor();
    const name = `${HOSTILE} ${Date.now()}`;
    await page.locator("#new-org-name").fill(name);
    await page.getByRole("button", { name: "Create organization" }).click();
    const created = await until("the organization", async () => (await call("GET", "/v1/orgs", SUPER)).items.find((o) => o.name === name));
    made.push(created.id);
    const row = page.locator(`#orgs tr[data-id="${created.id}"]`);
    await row.waitFor();
    assert.ok((await row.textContent()).includes(HOSTILE));
    assert.equal(await page.locator("#orgs img, #orgs script").count(), 0);

    await row.getByRole("button", { name: /Disable/ }).click();
    await confirm(page, "Disable", /refused at once/);
    await page.locator(`#orgs tr[data-id="${created.id}"] td.org-state`, { hasText: "disabled" }).waitFor();
    assert.equal((await call("GET", "/v1/orgs", SUPER)).items.find((o) => o.id === created.id).state, "disabled");

    await row.getByRole("button", { name: /Enable/ }).click();
    await confirm(page, "Enable");
    await page.locator(`#orgs tr[data-id="${created.id}"] td.org-state`, { hasText: "active" }).waitFor();
    assert.equal((await call("GET", "/v1/orgs", SUPER)).items.find((o) => o.id === created.id).state, "active");

    // Its own page: the operator sets a limit.
    // (The Administration page has a limits form too, the operator's own organization's: wait for the new page.)
    await row.getByRole("link").click();
    await page.locator("h1", { hasText: /^Organization / }).waitFor();
    await page.locator("#limits-form").waitFor();
    await page.getByLabel("Sandboxes").fill("7");
    await page.getByRole("button", { name: "Save limits" }).click();
    await page.locator('#limits tr[data-limit="max_sandboxes"]', { hasText: "for this organization" }).waitFor();
    const limits = await call("GET", `/v1/orgs/${created.id}/limits`, SUPER);
    assert.equal(limits.limits.max_sandboxes, 7);
    assert.deepEqual(limits.own, ["max_sandboxes"]);
    assert.ok((await page.locator("h1").textContent()).includes(HOSTILE));

    assert.equal(await page.evaluate(() => window.pwned), undefined);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
