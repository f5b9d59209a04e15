// Shared by the tests in ../test/: the daemon with_e2b_daemon.py started, and sandboxes made
// through the E2B SDK that are killed after each file. Outside test/ so node --test does not run it.
import { after } from "node:test";
import { Sandbox } from "e2b";

for (const name of ["E2B_API_URL", "E2B_SANDBOX_URL", "E2B_API_KEY", "E2B_VIEWER_API_KEY", "E2B_OTHER_API_KEY"]) {
  if (!process.env[name]) {
    throw new Error(`${name} must be set: run through tests/compat/e2b/with_e2b_daemon.py -- node --test test/`);
  }
}
export const OTHER_API_KEY = process.env.E2B_OTHER_API_KEY;
export const VIEWER_API_KEY = process.env.E2B_VIEWER_API_KEY;

const made = [];
/**
 * A sandbox made through the SDK (its class's default template: e2b's `base`, or the code
 * interpreter SDK's `code-interpreter-v1`), killed after the file's tests.
 */
export async function sandbox(opts = {}, SandboxClass = Sandbox) {
  const sbx = await SandboxClass.create({ timeoutMs: 600_000, ...opts });
  made.push(sbx);
  return sbx;
}
after(async () => {
  await Promise.all(made.map((s) => s.kill().catch(() => {})));
});

/** A raw request to the sandbox plane, as the SDK makes them, with the headers given. */
export function sandboxPlane(path, { sandboxId, token, trafficToken, port = "49983", method = "GET", body } = {}) {
  const headers = { "E2b-Sandbox-Id": sandboxId, "E2b-Sandbox-Port": port };
  if (token !== undefined) headers["X-Access-Token"] = token;
  if (trafficToken !== undefined) headers["E2B-Traffic-Access-Token"] = trafficToken;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  return fetch(`${process.env.E2B_SANDBOX_URL}${path}`, { method, headers, body });
}
