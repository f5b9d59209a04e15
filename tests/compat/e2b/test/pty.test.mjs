// PTYs through sbx.pty: process.Process/Start with `pty` over the agent's PTY WebSocket, which
// sandfortd holds so the terminal outlives its stream; sendInput (SendInput's `pty` bytes),
// resize (Update), kill (SendSignal), connect (Connect), and the bytes exact both ways.
import { test } from "node:test";
import assert from "node:assert/strict";
import { CommandExitError, NotFoundError, RateLimitError } from "e2b";
import { sandbox, sandboxPlane } from "../lib/live.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const enc = (s) => new TextEncoder().encode(s);

async function until(what, predicate, ms = 15_000, poll = async () => {}) {
  const deadline = Date.now() + ms;
  while ((await poll(), !predicate())) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

/** The tail of what a terminal wrote (its last 64 KiB), bytes as latin1 text. */
function screen() {
  const s = { text: "" };
  s.onData = (d) => {
    s.text = (s.text + Buffer.from(d).toString("latin1")).slice(-65536);
  };
  s.bytes = () => [...Buffer.from(s.text, "latin1")];
  return s;
}

function contains(haystack, needle) {
  outer: for (let i = 0; i + needle.length <= haystack.length; i++) {
    for (let j = 0; j < needle.length; j++) if (haystack[i + j] !== needle[j]) continue outer;
    return true;
  }
  return false;
}

test("pty: create with envs and cwd, input echoed back, resize, list, kill", async () => {
  const sbx = await sandbox();
  const out = screen();
  const pty = await sbx.pty.create({
    cols: 80, rows: 24, onData: out.onData, envs: { GREETING: "hello-env" }, cwd: "/tmp", timeoutMs: 0,
  });
  assert.ok(pty.pid > 0);
  await sbx.pty.sendInput(pty.pid, enc("echo hi; echo $GREETING-$TERM; pwd\n"));
  await until("the echo", () => out.text.includes("hi\r\n") && out.text.includes("hello-env-xterm-256color"));
  assert.ok(out.text.includes("/tmp\r\n"), out.text);
  await sbx.pty.sendInput(pty.pid, enc("stty size\n"));
  await until("the first size", () => out.text.includes("24 80"));
  await sbx.pty.resize(pty.pid, { cols: 100, rows: 40 });
  await sbx.pty.sendInput(pty.pid, enc("stty size\n"));
  await until("the new size", () => out.text.includes("40 100"));

  const listed = await sbx.commands.list();
  assert.ok(listed.some((p) => p.pid === pty.pid && p.cmd === "/bin/bash"), JSON.stringify(listed));

  assert.equal(await sbx.pty.kill(pty.pid), true);
  const ended = await pty.wait().catch((e) => e);
  assert.ok(ended instanceof CommandExitError, String(ended));
  assert.equal(ended.exitCode, -1);
  assert.equal(await sbx.pty.kill(pty.pid), false, "gone once killed");
  const after = await sbx.commands.list();
  assert.ok(!after.some((p) => p.pid === pty.pid), JSON.stringify(after));
});

test("pty: output bytes exact; the shell's own exit ends the stream with its code", async () => {
  const sbx = await sandbox();
  const out = screen();
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: out.onData, timeoutMs: 0 });
  await sbx.pty.sendInput(pty.pid, enc("printf '\\303\\251\\377\\001A'; echo\n"));
  await until("the bytes", () => contains(out.bytes(), [0xc3, 0xa9, 0xff, 0x01, 0x41]));
  await sbx.pty.sendInput(pty.pid, enc("exit 3\n"));
  const ended = await pty.wait().catch((e) => e);
  assert.ok(ended instanceof CommandExitError, String(ended));
  assert.equal(ended.exitCode, 3);
});

test("pty: disconnect, the terminal lives on; connect follows it again", async () => {
  const sbx = await sandbox();
  const first = screen();
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: first.onData, timeoutMs: 0 });
  await pty.disconnect();
  await sbx.pty.sendInput(pty.pid, enc("export MARK=kept\n"));
  const second = screen();
  const again = await sbx.pty.connect(pty.pid, { onData: second.onData, timeoutMs: 0 });
  assert.equal(again.pid, pty.pid);
  await sbx.pty.sendInput(pty.pid, enc("echo still-$MARK\n"));
  await until("output on the new stream", () => second.text.includes("still-kept\r\n"));
  await sbx.pty.sendInput(pty.pid, enc("exit\n"));
  const r = await again.wait();
  assert.equal(r.exitCode, 0);
});

test("pty: a stream that reads nothing for 5 s is cut off; the terminal goes on, a reader slows it", async () => {
  const sbx = await sandbox();
  let release;
  const gate = new Promise((r) => (release = r));
  let calls = 0;
  const pty = await sbx.pty.create({
    cols: 80, rows: 24, timeoutMs: 0,
    onData: async () => {
      if (calls++ === 0) await gate; // the SDK reads no further while onData waits
    },
  });
  await sbx.pty.sendInput(pty.pid, enc("yes | head -c 24000000; echo done-flooding\n"));
  await sleep(9000);
  release();
  const ended = await pty.wait().catch((e) => e);
  assert.ok(ended instanceof RateLimitError, String(ended));
  assert.match(ended.message, /fell behind/, ended.message);
  // The terminal itself is still there: a new stream follows it.
  const out = screen();
  await sbx.pty.connect(pty.pid, { onData: out.onData, timeoutMs: 0 });
  await sbx.pty.sendInput(pty.pid, enc("echo after-$((1+1))\n"));
  await until("the terminal answers again", () => out.text.includes("after-2"), 30_000);
  assert.equal(await sbx.pty.kill(pty.pid), true);
});

test("pty: output nobody follows is dropped at most 1 MiB/s: a flood waits on its terminal", async () => {
  const sbx = await sandbox();
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {}, timeoutMs: 0 });
  await pty.disconnect();
  await sbx.pty.sendInput(
    pty.pid,
    enc("s=$(date +%s%N); yes | head -c 6000000; echo took-$(( ($(date +%s%N) - s) / 1000000 ))-ms > /tmp/took\n"),
  );
  // The time goes to a file: what the terminal prints while nobody follows it is dropped.
  let took = "";
  await until("the flood's time", () => /took-\d+-ms/.test(took), 60_000, async () => {
    took = await sbx.files.read("/tmp/took").catch(() => "");
  });
  const ms = Number(/took-(\d+)-ms/.exec(took)[1]);
  assert.ok(ms >= 2000, `6 MB unfollowed took ${ms} ms: not throttled`);
  assert.equal(await sbx.pty.kill(pty.pid), true);
});

test("pty: kill ends a terminal whose program reads none of the keystrokes queued for it", async () => {
  const sbx = await sandbox();
  const pty = await sbx.pty.create({ cols: 80, rows: 24, onData: () => {}, timeoutMs: 0 });
  await sbx.pty.sendInput(pty.pid, enc("sleep 1000\n"));
  await sleep(500);
  for (let i = 0; i < 3; i++) await sbx.pty.sendInput(pty.pid, new Uint8Array(300_000).fill(97));
  const started = Date.now();
  assert.equal(await sbx.pty.kill(pty.pid), true);
  const ended = await pty.wait().catch((e) => e);
  assert.ok(ended instanceof CommandExitError && ended.exitCode === -1, String(ended));
  assert.ok(Date.now() - started < 10_000, `ended after ${Date.now() - started} ms`);
  const left = await sbx.commands.run(
    "sleep 3; for p in /proc/[0-9]*; do [ \"$(cat $p/comm 2>/dev/null)\" = sleep ] && echo $p; done; true",
  );
  assert.equal(left.stdout.trim(), "", "the terminal's program was killed");
});

test("attacker: another sandbox's token can neither drive this PTY nor watch this sandbox", async () => {
  const a = await sandbox();
  const b = await sandbox();
  const out = screen();
  const pty = await a.pty.create({ cols: 80, rows: 24, onData: out.onData, timeoutMs: 0 });
  // Through b's own plane: a's pid means nothing there.
  await assert.rejects(b.pty.sendInput(pty.pid, enc("echo pwned-by-b\n")), NotFoundError);
  await assert.rejects(b.pty.resize(pty.pid, { cols: 10, rows: 10 }), NotFoundError);
  assert.equal(await b.pty.kill(pty.pid), false);
  await assert.rejects(b.pty.connect(pty.pid, { onData: () => {} }), NotFoundError);
  // b's token naming a's sandbox: refused before anything is looked up.
  const input = JSON.stringify({ process: { pid: pty.pid }, input: { pty: Buffer.from("echo pwned\n").toString("base64") } });
  for (const [path, body] of [
    ["/process.Process/SendInput", input],
    ["/process.Process/Update", JSON.stringify({ process: { pid: pty.pid }, pty: { size: { cols: 5, rows: 5 } } })],
    ["/process.Process/SendSignal", JSON.stringify({ process: { pid: pty.pid }, signal: "SIGNAL_SIGKILL" })],
    ["/filesystem.Filesystem/WatchDir", JSON.stringify({ path: "/tmp" })],
  ]) {
    const r = await sandboxPlane(path, { sandboxId: a.sandboxId, token: b.envdAccessToken, method: "POST", body });
    assert.equal(r.status, 401, path);
    assert.equal((await r.json()).code, "unauthenticated", path);
  }
  // a's terminal saw none of it and still answers its owner.
  await a.pty.sendInput(pty.pid, enc("echo owner-$((6*7))\n"));
  await until("the owner's echo", () => out.text.includes("owner-42"));
  assert.ok(!out.text.includes("pwned"), out.text);
  assert.equal(await a.pty.kill(pty.pid), true);
});
