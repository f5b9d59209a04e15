// The sandbox list in Debian's Chromium: create from the page, filter, stop, start and delete with
// a confirmation, live state changes with their reason, and a viewer offered no change.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { BASE, ADMIN, CHROMIUM, call, screenshot, signIn } from "./support.mjs";

let browser;
const org = {};

before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  const o = await call("POST", "/v1/orgs", ADMIN, { name: `console-list-${Date.now()}` });
  org.id = o.id;
  for (const role of ["member", "viewer"])
    org[role] = (await call("POST", `/v1/orgs/${o.id}/api-keys`, ADMIN, { name: `list-${role}`, role })).key;
});

after(async () => {
  await browser?.close();
  const left = await call("GET", "/v1/sandboxes?limit=1000", org.member).catch(() => ({ items: [] }));
  for (const s of left.items) await call("DELETE", `/v1/sandboxes/${s.id}`, org.member).catch(() => {});
});

test("a member creates a sandbox from the page, filters, stops, starts and deletes it, confirming each", async () => {
  const { context, page, errors } = await signIn(browser, org.member);
  try {
    await page.getByRole("button", { name: "New sandbox" }).click();
    await page.getByLabel("Name").fill("from-the-page");
    await page.getByLabel("Memory (MiB)").fill("256");
    await page.getByLabel("Labels").fill("made=console\nteam=a");
    await page.getByLabel("Environment").fill("GREETING=hello");
    await page.getByRole("button", { name: "Create" }).click();
    // The page goes to the new sandbox (whose page adds its first section to the address, "/files",
    // when it draws); the API has it with what the form said.
    await page.waitForURL(/#\/sandboxes\/sbx-/);
    const id = decodeURIComponent(page.url().match(/#\/sandboxes\/([^/?]+)/)[1]);
    const made = await call("GET", `/v1/sandboxes/${id}?wait_for=started&timeout_s=60`, org.member);
    assert.equal(made.state, "started");
    assert.equal(made.name, "from-the-page");
    assert.equal(made.resources.memory_mb, 256);
    assert.deepEqual(made.labels, { made: "console", team: "a" });
    assert.deepEqual(made.env_keys, ["GREETING"]);
    // Another sandbox with another label: the label filter shows one, not the other.
    const other = await call("POST", "/v1/sandboxes", org.member, { wait: false, labels: { made: "api" } });

    await page.goto(`${BASE}/console/#/sandboxes`);
    const row = page.locator(`#sandboxes tr[data-id="${id}"]`);
    await row.waitFor();
    await page.locator(`#sandboxes tr[data-id="${other.id}"]`).waitFor();
    await screenshot(page, "sandboxes");
    assert.equal((await page.locator(".pager").textContent()).trim(), "");  // one page: no pager
    await page.getByLabel("Label").fill("made:console");
    await page.getByRole("button", { name: "Filter" }).click();
    await page.locator(`#sandboxes tr[data-id="${other.id}"]`).waitFor({ state: "detached" });
    await page.locator("#list-status").filter({ hasText: /^1 sandbox on page 1/ }).waitFor();
    assert.equal(await page.locator("#sandboxes tbody tr").count(), 1);
    assert.match(page.url(), /label=made%3Aconsole/);

    // Stop: a confirmation first; Cancel changes nothing.
    await row.getByRole("button", { name: /^stop / }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Cancel" }).click();
    assert.equal((await call("GET", `/v1/sandboxes/${id}`, org.member)).state, "started");
    await row.getByRole("button", { name: /^stop / }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Stop" }).click();
    await page.locator(`#sandboxes tr[data-id="${id}"][data-state="stopped"]`).waitFor();
    await row.getByRole("button", { name: /^start / }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Start" }).click();
    await page.locator(`#sandboxes tr[data-id="${id}"][data-state="started"]`).waitFor({ timeout: 60000 });

    // A change made elsewhere (the API, an idle timeout, the kill switch) shows without a reload.
    await call("POST", `/v1/sandboxes/${id}/pause`, org.member);
    await page.locator(`#sandboxes tr[data-id="${id}"][data-state="paused"]`).waitFor({ timeout: 15000 });

    await row.getByRole("button", { name: /^delete / }).click();
    await page.getByRole("dialog").getByRole("button", { name: "Delete" }).click();
    await row.waitFor({ state: "detached" });
    await assert.rejects(call("GET", `/v1/sandboxes/${id}`, org.member), /404/);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("a sandbox that failed shows why; a refused create says why in the form", async () => {
  const { context, page, errors } = await signIn(browser, org.member);
  try {
    await page.getByRole("button", { name: "New sandbox" }).click();
    await page.getByLabel("Name").fill("sbx-not-allowed");
    await page.getByRole("button", { name: "Create" }).click();
    await page.getByRole("dialog").getByRole("alert").filter({ hasText: /name/ }).waitFor();
    await page.getByRole("dialog").getByRole("button", { name: "Cancel" }).click();
    // An image that is nowhere: the create is accepted (wait: false), the pull fails, and the
    // row says so with the API's reason.
    const failed = await call("POST", "/v1/sandboxes", org.member, { wait: false, snapshot: "docker.io/sandfort-none/absent:1" });
    const row = page.locator(`#sandboxes tr[data-id="${failed.id}"][data-state="error"]`);
    await row.waitFor({ timeout: 60000 });
    const reason = (await call("GET", `/v1/sandboxes/${failed.id}`, org.member)).error_message;
    assert.ok(reason);
    assert.equal(await row.locator(".reason").textContent(), reason);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("a viewer sees the list and is offered no change; one forged from its session is refused", async () => {
  const s = await call("POST", "/v1/sandboxes", org.member, { wait: false, name: "seen-by-viewer" });
  const { context, page, errors } = await signIn(browser, org.viewer);
  try {
    await page.locator(`#sandboxes tr[data-id="${s.id}"]`).waitFor();
    assert.equal(await page.getByRole("button", { name: "New sandbox" }).count(), 0);
    assert.equal(await page.locator("#sandboxes button").count(), 0);
    const status = await page.evaluate(async (id) => {
      const session = await (await fetch("/v1/console/session")).json();
      const res = await fetch(`/v1/sandboxes/${id}`, { method: "DELETE", headers: { "X-Sandfort-CSRF": session.csrf_token } });
      return res.status;
    }, s.id);
    assert.equal(status, 403);
    assert.equal((await call("GET", `/v1/sandboxes/${s.id}`, org.member)).id, s.id);
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});

test("pages of the size the address names, by the API's cursor: next, previous, and another size", async () => {
  const tag = `p${Date.now()}`;
  const made = [];
  for (let i = 0; i < 3; i++)
    made.push((await call("POST", "/v1/sandboxes", org.member,
                          { wait: false, labels: { paging: tag }, resources: { memory_mb: 64 } })).id);
  const { context, page, errors } = await signIn(browser, org.viewer);
  try {
    await page.goto(`${BASE}/console/#/sandboxes?label=paging:${tag}&per_page=2`);
    const status = page.locator("#list-status");
    const ids = async () => page.locator("#sandboxes tbody tr").evaluateAll((rows) => rows.map((r) => r.dataset.id));
    await status.filter({ hasText: /^2 sandboxes on page 1/ }).waitFor();
    assert.equal(await page.getByLabel("Per page").inputValue(), "2");
    const first = await ids();
    assert.equal(await page.getByRole("button", { name: "Previous page" }).count(), 0);

    await page.getByRole("button", { name: "Next page" }).click();
    await status.filter({ hasText: /^1 sandbox on page 2/ }).waitFor();
    const second = await ids();
    assert.deepEqual([...first, ...second].sort(), [...made].sort());
    assert.equal(await page.getByRole("button", { name: "Next page" }).count(), 0);

    await page.getByRole("button", { name: "Previous page" }).click();
    await status.filter({ hasText: /^2 sandboxes on page 1/ }).waitFor();
    assert.deepEqual(await ids(), first);

    // Another size from the list: page 1 again, all three, and the address says so.
    await page.getByLabel("Per page").selectOption("25");
    await status.filter({ hasText: /^3 sandboxes on page 1/ }).waitFor();
    assert.match(page.url(), /per_page=25/);
    assert.equal((await page.locator(".pager").textContent()).trim(), "");
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
