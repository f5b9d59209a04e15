// Shared by the tests in ../test/: a live daemon from SANDFORT_BASE_URL / SANDFORT_API_KEY
// (tests/integration/with_daemon.py exports them). Lives outside test/ so `node --test test/`
// does not run it as a test file.
import { after } from "node:test";
import { SandfortClient } from "../dist/esm/index.js";

export const BASE_URL = process.env.SANDFORT_BASE_URL;
export const API_KEY = process.env.SANDFORT_API_KEY;
if (!BASE_URL || !API_KEY) {
  throw new Error(
    "SANDFORT_BASE_URL and SANDFORT_API_KEY must be set: run the suite through " +
      "tests/integration/with_daemon.py -- node --test test/",
  );
}
export const PREVIEW_PORT = process.env.SANDFORT_PREVIEW_PORT;

export const client = new SandfortClient({ baseUrl: BASE_URL, apiKey: API_KEY });

const made = [];
/** A fresh sandbox (default image), deleted after the file's tests. */
export async function sandbox(opts = {}) {
  const sbx = await client.createSandbox(opts);
  made.push(sbx);
  return sbx;
}
after(async () => {
  await Promise.all(made.map((s) => s.kill().catch(() => {})));
});

export async function until(fn, what, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 150));
  }
}
