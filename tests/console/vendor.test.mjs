// The console's vendored xterm.js (console/vendor/xterm/) is byte for byte the npm package this
// suite's lock file pins: what sandfortd serves is what the registry published, nothing edited.
// Updating it: bump the versions in package.json, npm install, copy the files (docs/console.md).
import { test } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { fileURLToPath } from "node:url";

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const vendored = (name) => readFileSync(here(`../../console/vendor/xterm/${name}`));
const lock = JSON.parse(readFileSync(here("package-lock.json")));

test("the vendored xterm files equal the locked npm packages", () => {
  const pairs = {
    "xterm.mjs": "node_modules/@xterm/xterm/lib/xterm.mjs",
    "xterm.css": "node_modules/@xterm/xterm/css/xterm.css",
    "LICENSE": "node_modules/@xterm/xterm/LICENSE",
    "addon-fit.mjs": "node_modules/@xterm/addon-fit/lib/addon-fit.mjs",
  };
  for (const [name, installed] of Object.entries(pairs))
    assert.ok(vendored(name).equals(readFileSync(here(installed))), `console/vendor/xterm/${name} differs from ${installed}`);
  assert.equal(lock.packages["node_modules/@xterm/xterm"].version, "6.0.0");
  assert.match(lock.packages["node_modules/@xterm/xterm"].integrity, /^sha512-/);
});
