// A sandbox's terminal in Debian's Chromium: xterm.js over the PTY WebSocket, opened with the
// session cookie. Typing, reading the screen, a resize that `stty size` sees, a paste, true colour
// drawn under the strict policy (no violation logged), the exit code. (A socket from another
// origin is refused: tests/integration/test_console_session.py.)
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { chromium } from "playwright-core";
import { BASE, ADMIN, CHROMIUM, call, screenshot, signIn } from "./support.mjs";

let browser;
const org = {};

before(async () => {
  browser = await chromium.launch({ executablePath: CHROMIUM, args: ["--no-sandbox"] });
  const o = await call("POST", "/v1/orgs", ADMIN, { name: `console-term-${Date.now()}` });
  org.member = (await call("POST", `/v1/orgs/${o.id}/api-keys`, ADMIN, { name: "term-member", role: "member" })).key;
  org.sandbox = await call("POST", "/v1/sandboxes", org.member, { wait: true, name: "terminal" });
});

after(async () => {
  await browser?.close();
  if (org.sandbox) await call("DELETE", `/v1/sandboxes/${org.sandbox.id}`, org.member).catch(() => {});
});

// The screen's lines as xterm's DOM renderer draws them.
const lines = (page) => page.locator("#terminal .xterm-rows > div").allTextContents()
  .then((rows) => rows.map((r) => r.replace(/\u00a0/g, " ").trimEnd()));

async function typeAndWait(page, text, expected) {
  await page.keyboard.type(text);
  await page.keyboard.press("Enter");
  const deadline = Date.now() + 15000;
  for (;;) {
    const found = (await lines(page)).filter((l) => expected.test(l));
    if (found.length) return found.at(-1);
    if (Date.now() > deadline) throw new Error(`no line matches ${expected}:\n${(await lines(page)).join("\n")}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

test("type into the terminal and read the answer; copy, resize, paste, colour, exit", async () => {
  const { context, page, errors } = await signIn(browser, org.member);
  try {
    await page.goto(`${BASE}/console/#/sandboxes/${org.sandbox.id}/terminal`);
    await page.locator("#terminal .xterm").waitFor();
    await page.getByRole("status").filter({ hasText: "Connected." }).waitFor();
    await page.locator("#terminal .xterm").click();

    assert.equal(await typeAndWait(page, "echo $((6*7))", /^42$/), "42");
    await screenshot(page, "terminal");

    // Copy: a word selected with the mouse (a double click) is what a copy puts on the clipboard.
    // (At the row's place: xterm's screen layer takes the pointer events over its rows.)
    const row = await page.locator("#terminal .xterm-rows > div", { hasText: /^42\s*$/ }).last().boundingBox();
    await page.mouse.dblclick(row.x + 4, row.y + row.height / 2);
    const copied = await page.locator("#terminal .xterm").evaluate((term) => {
      const data = new DataTransfer();
      term.dispatchEvent(new ClipboardEvent("copy", { clipboardData: data, bubbles: true, cancelable: true }));
      return data.getData("text/plain");
    });
    assert.equal(copied, "42");
    await page.locator("#terminal .xterm").click();

    // The window's size is the terminal's: narrower window, fewer columns, and stty says so.
    const before = (await typeAndWait(page, "stty size", /^\d+ \d+$/)).split(" ").map(Number);
    await page.setViewportSize({ width: 760, height: 800 });
    await page.keyboard.type("clear");
    await page.keyboard.press("Enter");
    let after;
    for (let i = 0; i < 50; i++) {
      after = (await typeAndWait(page, "stty size", /^\d+ \d+$/)).split(" ").map(Number);
      if (after[1] !== before[1]) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    assert.ok(after[1] < before[1], `columns ${before[1]} → ${after[1]}`);
    assert.equal(after[0], before[0]);

    // A paste goes in as typed text.
    await page.locator("#terminal textarea").evaluate((area) => {
      const data = new DataTransfer();
      data.setData("text/plain", "echo pasted-$((1+1))");
      area.dispatchEvent(new ClipboardEvent("paste", { clipboardData: data, bubbles: true, cancelable: true }));
    });
    await page.keyboard.press("Enter");
    await typeAndWait(page, "", /^pasted-2$/);

    // True colour is drawn (xterm sets it as a style attribute: through the object model here).
    await typeAndWait(page, "printf '\\033[38;2;255;0;0mRED-TEXT\\033[0m\\n'", /^RED-TEXT$/);
    const color = await page.locator("#terminal .xterm-rows span", { hasText: "RED-TEXT" }).last()
      .evaluate((span) => getComputedStyle(span).color);
    assert.equal(color, "rgb(255, 0, 0)");
    // The rows have their height: xterm's sizing sheet applied (a refused <style> leaves them 0).
    const height = await page.locator("#terminal .xterm-rows > div").first().evaluate((row) => row.getBoundingClientRect().height);
    assert.ok(height > 8, `row height ${height}`);

    await page.keyboard.type("exit 3");
    await page.keyboard.press("Enter");
    await page.getByRole("status").filter({ hasText: "exited with code 3" }).waitFor();
    // No policy violation, no script error: a refused inline style would have logged one.
    assert.deepEqual(errors, []);
  } finally {
    await context.close();
  }
});
