// filesystem.Filesystem/WatchDir through files.watchDir: the agent's directory watch (inotify)
// as E2B's FilesystemEvents, recursive and not; handle.stop() ends it (and frees its place);
// the per-sandbox bound of watches is refused clearly; the directory's removal ends the stream.
// The poll form (CreateWatcher, GetWatcherEvents, RemoveWatcher: E2B's Python SDK's) over raw
// Connect calls, as that SDK sends them.
import { test } from "node:test";
import assert from "node:assert/strict";
import { RateLimitError, NotFoundError } from "e2b";
import { sandbox, sandboxPlane } from "../lib/live.mjs";

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function until(what, predicate, ms = 15_000) {
  const deadline = Date.now() + ms;
  while (!predicate()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(50);
  }
}

const has = (events, type, name) => events.some((e) => e.type === type && e.name === name);
const show = (events) => JSON.stringify(events.map((e) => [e.type, e.name]));

test("watchDir: create, write, chmod, rename, remove with their names; not recursive; stop()", async () => {
  const sbx = await sandbox();
  await sbx.files.makeDir("/tmp/w/sub");
  const events = [];
  const handle = await sbx.files.watchDir("/tmp/w", (e) => events.push(e), { timeoutMs: 0 });
  await sbx.commands.run(
    "echo one > /tmp/w/a.txt && echo two >> /tmp/w/a.txt && chmod 600 /tmp/w/a.txt && " +
      "mv /tmp/w/a.txt /tmp/w/b.txt && echo deep > /tmp/w/sub/deep.txt && mkdir /tmp/w/new && rm /tmp/w/b.txt",
  );
  await until("the removal", () => has(events, "remove", "b.txt"));
  for (const [type, name] of [
    ["create", "a.txt"],
    ["write", "a.txt"],
    ["chmod", "a.txt"],
    ["rename", "a.txt"],
    ["create", "b.txt"],
    ["create", "new"],
    ["remove", "b.txt"],
  ])
    assert.ok(has(events, type, name), `${type} ${name} in ${show(events)}`);
  assert.ok(!events.some((e) => e.name.startsWith("sub/")), `not recursive: ${show(events)}`);

  await handle.stop();
  const seen = events.length;
  await sbx.commands.run("echo after > /tmp/w/after.txt");
  await sleep(1000);
  assert.equal(events.length, seen, `no events after stop(): ${show(events.slice(seen))}`);
});

test("watchDir recursive: a subdirectory made later is watched, names relative to the root", async () => {
  const sbx = await sandbox();
  await sbx.files.makeDir("/tmp/r/a");
  const events = [];
  const handle = await sbx.files.watchDir("/tmp/r", (e) => events.push(e), { recursive: true, timeoutMs: 0 });
  await sbx.commands.run("echo x > /tmp/r/a/x.txt && mkdir /tmp/r/later");
  await until("the new directory", () => has(events, "create", "later"));
  await sbx.commands.run("echo y > /tmp/r/later/y.txt");
  await until("the file in the new directory", () => has(events, "write", "later/y.txt"));
  assert.ok(has(events, "create", "a/x.txt"), show(events));
  assert.ok(has(events, "create", "later/y.txt"), show(events));
  await handle.stop();
});

test("watchDir: the watched directory removed ends the stream (onExit without an error)", async () => {
  const sbx = await sandbox();
  await sbx.files.makeDir("/tmp/gone");
  let exited;
  await sbx.files.watchDir("/tmp/gone", () => {}, { timeoutMs: 0, onExit: (err) => (exited = { err }) });
  await sbx.commands.run("rm -rf /tmp/gone");
  await until("onExit", () => exited !== undefined);
  assert.equal(exited.err, undefined, String(exited.err));
});

test("watchDir: a reader that falls behind a flood from inside gets the overflow in onExit", async () => {
  const sbx = await sandbox();
  await sbx.files.makeDir("/tmp/flood");
  let release;
  const gate = new Promise((r) => (release = r));
  let seen = 0;
  let exited;
  await sbx.files.watchDir(
    "/tmp/flood",
    async () => {
      if (seen++ === 0) await gate; // the SDK reads no further while onEvent waits
    },
    { timeoutMs: 0, onExit: (err) => (exited = { err }) },
  );
  // ~50000 files with long names: megabytes of events, more than the buffers in between hold.
  await sbx.commands.run("cd /tmp/flood && seq -f '%0200g' 1 50000 | xargs touch", { timeoutMs: 120_000 });
  release();
  await until("onExit", () => exited !== undefined, 60_000);
  assert.ok(exited.err instanceof RateLimitError, String(exited.err));
  assert.match(exited.err.message, /overflow/, exited.err.message);
  // The daemon is fine and the sandbox can watch again.
  const again = await sbx.files.watchDir("/tmp/flood", () => {}, { timeoutMs: 0 });
  await again.stop();
});

test("watchDir: a missing directory is NotFoundError; the 33rd watch of a sandbox is refused", async () => {
  const sbx = await sandbox();
  await assert.rejects(sbx.files.watchDir("/tmp/no-such-dir", () => {}), NotFoundError);
  await sbx.files.makeDir("/tmp/many");
  const handles = [];
  for (let i = 0; i < 32; i++) handles.push(await sbx.files.watchDir("/tmp/many", () => {}, { timeoutMs: 0 }));
  const refused = await sbx.files.watchDir("/tmp/many", () => {}, { timeoutMs: 0 }).catch((e) => e);
  assert.ok(refused instanceof RateLimitError, String(refused));
  assert.match(refused.message, /32 watches|stop one/, refused.message);
  // A stopped watch gives its place back (the server notices the client left).
  await handles.pop().stop();
  let again;
  for (let i = 0; i < 50 && !again; i++) {
    again = await sbx.files.watchDir("/tmp/many", () => {}, { timeoutMs: 0 }).catch(() => undefined);
    if (!again) await sleep(100);
  }
  assert.ok(again, "a watch could be made again once one was stopped");
  for (const h of [...handles, again]) await h.stop();
});

test("the poll form: CreateWatcher, GetWatcherEvents, RemoveWatcher; another sandbox's token finds no watcher", async () => {
  const sbx = await sandbox();
  const other = await sandbox();
  await sbx.files.makeDir("/tmp/poll");
  const rpc = async (box, method, message) => {
    const r = await sandboxPlane(`/filesystem.Filesystem/${method}`, {
      sandboxId: box.sandboxId, token: box.envdAccessToken, method: "POST", body: JSON.stringify(message),
    });
    return { status: r.status, body: await r.json() };
  };
  const created = await rpc(sbx, "CreateWatcher", { path: "/tmp/poll", recursive: false });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const watcherId = created.body.watcherId;
  assert.match(watcherId, /^[0-9a-f]{32}$/);
  await sbx.commands.run("echo x > /tmp/poll/p.txt && rm /tmp/poll/p.txt");
  const events = [];
  for (let i = 0; i < 100 && !events.some((e) => e.type === "EVENT_TYPE_REMOVE"); i++) {
    const got = await rpc(sbx, "GetWatcherEvents", { watcherId });
    assert.equal(got.status, 200, JSON.stringify(got.body));
    events.push(...got.body.events);
    await sleep(100);
  }
  assert.ok(events.some((e) => e.type === "EVENT_TYPE_CREATE" && e.name === "p.txt"), JSON.stringify(events));
  assert.ok(events.some((e) => e.type === "EVENT_TYPE_REMOVE" && e.name === "p.txt"), JSON.stringify(events));

  // The watcher is this sandbox's: another sandbox's token finds nothing by its id.
  const theirs = await rpc(other, "GetWatcherEvents", { watcherId });
  assert.equal(theirs.status, 404);
  assert.equal(theirs.body.code, "not_found");
  assert.equal((await rpc(other, "RemoveWatcher", { watcherId })).status, 404);

  assert.equal((await rpc(sbx, "RemoveWatcher", { watcherId })).status, 200);
  const gone = await rpc(sbx, "GetWatcherEvents", { watcherId });
  assert.equal(gone.status, 404);
  assert.equal((await rpc(sbx, "GetWatcherEvents", { watcher_id: "nope" })).status, 404);
});
