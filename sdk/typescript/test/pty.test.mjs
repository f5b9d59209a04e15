// The interactive terminal over WebSocket (the SDK's own small RFC 6455 client).
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { SandfortClient, SandfortError } from "../dist/esm/index.js";
import { BASE_URL, sandbox, until } from "../testlib/live.mjs";

let sbx;
before(async () => {
  sbx = await sandbox();
});

test("a shell: size, resize, echo, exit code", async () => {
  let out = "";
  const pty = await sbx.pty.connect({ cols: 100, rows: 30, cwd: "/tmp", onData: (d) => (out += new TextDecoder().decode(d)) });
  pty.write("stty size; pwd\n");
  await until(() => /30 100/.test(out) && out.includes("/tmp\r\n"), "stty size and pwd");
  pty.resize(132, 43);
  await new Promise((r) => setTimeout(r, 200));
  pty.write("stty size\n");
  await until(() => /43 132/.test(out), "the new size");
  pty.write(new TextEncoder().encode("echo $((6 * 7)); exit 5\n"));
  assert.equal(await pty.exited, 5);
  assert.match(out, /[\r\n]42\r\n/);
});

test("a command instead of a shell; Ctrl-C interrupts it", async () => {
  let out = "";
  const pty = await sbx.pty.connect({ command: "cat", onData: (d) => (out += new TextDecoder().decode(d)) });
  pty.write("typed\r");
  await until(() => out.split("typed").length >= 3, "cat's echo and its output");
  pty.write("\x03");
  assert.equal(await pty.exited, 128 + 2);
});

test("close ends the session", async () => {
  const pty = await sbx.pty.connect({ command: "sleep 300" });
  pty.close();
  assert.equal(await pty.exited, null);
  const r = await until(async () => {
    const ps = await sbx.commands.run("ps -eo args | grep -c '^sleep 300' || true");
    return ps.stdout.trim() === "0" ? ps : null;
  }, "sleep 300 to be gone");
  assert.ok(r);
});

test("connect errors are SandfortErrors", async () => {
  const bad = new SandfortClient({ baseUrl: BASE_URL, apiKey: "sfk_bad" });
  const other = await bad.getSandbox(sbx.id).catch((e) => e);
  assert.equal(other.status, 401);
  // A pty on a bad key: build the handle through the real sandbox object but another client.
  const { Sandbox } = await import("../dist/esm/index.js");
  const ghost = new Sandbox(bad, sbx.info);
  await assert.rejects(ghost.pty.connect(), (e) => e instanceof SandfortError && e.status === 401);
});
