// The sandbox filesystem: text and bytes round trips, list/stat/mkdir/move/remove, tar archives.
import { test, before } from "node:test";
import assert from "node:assert/strict";
import { SandfortError } from "../dist/esm/index.js";
import { sandbox } from "../testlib/live.mjs";

let sbx;
before(async () => {
  sbx = await sandbox();
});

test("string round trip (UTF-8), parents created, mode", async () => {
  const text = "héllo wörld ✓ 🚀\nline 2\r\nno newline at end";
  const w = await sbx.files.write("/work/deep/dir/a.txt", text, { mode: 0o600 });
  assert.equal(w.size, Buffer.byteLength(text));
  assert.equal(w.mode, "0600");
  assert.equal(await sbx.files.read("/work/deep/dir/a.txt"), text);
  assert.equal((await sbx.commands.run("cat /work/deep/dir/a.txt")).stdout, text);
  assert.equal((await sbx.files.stat("/work/deep/dir/a.txt")).mode, "0600");
});

test("bytes round trip: every byte value, Uint8Array, Buffer and ArrayBuffer", async () => {
  const bytes = new Uint8Array(256 * 40);
  for (let i = 0; i < bytes.length; i++) bytes[i] = (i * 7) % 256;
  await sbx.files.write("/work/bin/all.bin", bytes);
  const back = await sbx.files.read("/work/bin/all.bin", { format: "bytes" });
  assert.ok(back instanceof Uint8Array);
  assert.deepEqual(Buffer.from(back), Buffer.from(bytes));
  await sbx.files.write("/work/bin/buf.bin", Buffer.from([0, 255, 1, 254]));
  assert.deepEqual([...(await sbx.files.readBytes("/work/bin/buf.bin"))], [0, 255, 1, 254]);
  await sbx.files.write("/work/bin/ab.bin", new Uint8Array([9, 8, 7]).buffer);
  assert.deepEqual([...(await sbx.files.readBytes("/work/bin/ab.bin"))], [9, 8, 7]);
  const sum = (await sbx.commands.run("sha256sum /work/bin/all.bin")).stdout.split(" ")[0];
  const { createHash } = await import("node:crypto");
  assert.equal(sum, createHash("sha256").update(bytes).digest("hex"));
});

test("a 3 MiB file and a streamed upload", async () => {
  const big = new Uint8Array(3 * 1024 * 1024).map((_, i) => i & 0xff);
  const w = await sbx.files.write("/work/big.bin", big);
  assert.equal(w.size, big.length);
  assert.equal((await sbx.files.readBytes("/work/big.bin")).length, big.length);
  const parts = ["a", "b", "c"].map((s) => new TextEncoder().encode(s.repeat(1000)));
  const stream = new ReadableStream({
    pull(c) {
      const p = parts.shift();
      if (p) c.enqueue(p);
      else c.close();
    },
  });
  await sbx.files.write("/work/streamed.txt", stream);
  const got = await sbx.files.read("/work/streamed.txt");
  assert.equal(got, "a".repeat(1000) + "b".repeat(1000) + "c".repeat(1000));
});

test("mkdir, list, stat, move, remove", async () => {
  const d = await sbx.files.mkdir("/work/tree/sub");
  assert.equal(d.type, "dir");
  await sbx.files.write("/work/tree/one.txt", "1");
  await sbx.files.write("/work/tree/sub/two.txt", "22");
  const items = await sbx.files.list("/work/tree");
  const byName = Object.fromEntries(items.map((i) => [i.name, i]));
  assert.equal(byName["one.txt"].type, "file");
  assert.equal(byName["one.txt"].size, 1);
  assert.equal(byName["one.txt"].path, "/work/tree/one.txt");
  assert.equal(byName.sub.type, "dir");
  const moved = await sbx.files.move("/work/tree/one.txt", "/work/tree/sub/one.txt");
  assert.equal(moved.path, "/work/tree/sub/one.txt");
  assert.equal(await sbx.files.exists("/work/tree/one.txt"), false);
  await sbx.files.write("/work/tree/x.txt", "x");
  await assert.rejects(sbx.files.move("/work/tree/x.txt", "/work/tree/sub/one.txt"), { status: 409 });
  await sbx.files.move("/work/tree/x.txt", "/work/tree/sub/one.txt", { overwrite: true });
  assert.equal(await sbx.files.read("/work/tree/sub/one.txt"), "x");
  await assert.rejects(sbx.files.remove("/work/tree"), (e) => e instanceof SandfortError && e.status >= 400);
  await sbx.files.remove("/work/tree", { recursive: true });
  assert.equal(await sbx.files.exists("/work/tree"), false);
});

test("archive round trip: download a tar, extract it elsewhere", async () => {
  await sbx.files.write("/work/app/main.py", "print('hi')\n");
  await sbx.files.write("/work/app/pkg/util.py", "X = 1\n");
  const tar = await sbx.files.downloadArchive("/work/app");
  assert.ok(tar.length >= 1024 && tar.length % 512 === 0);
  const res = await sbx.files.uploadArchive("/work/copy", tar);
  assert.equal(res.path, "/work/copy");
  assert.ok(res.entries >= 2);
  assert.equal(res.skippedCount, 0);
  const listing = (await sbx.commands.run("cd /work/copy && find . -type f | sort")).stdout;
  assert.match(listing, /main\.py/);
  assert.match(listing, /util\.py/);
  const r = await sbx.commands.run("find /work/copy -name main.py -exec python3 {} \\;");
  assert.equal(r.stdout, "hi\n");
});

// Events in order, by name relative to the directory; a rename is its old name then its new one.
function inOrder(events, want) {
  let i = 0;
  for (const e of events) if (i < want.length && e.type === want[i][0] && e.name === want[i][1]) i++;
  return i === want.length;
}

test("watch: create, write, rename, chmod and remove arrive in order, recursive takes new subdirectories", async () => {
  await sbx.files.mkdir("/work/watched");
  const w = await sbx.files.watch("/work/watched", { recursive: true, includeEntry: true });
  assert.equal(w.path, "/work/watched");
  assert.equal(w.recursive, true);
  assert.equal(w.directories, 1);
  await sbx.commands.run(
    "cd /work/watched && echo hi > a.txt && mv a.txt b.txt && chmod 600 b.txt && mkdir sub && sleep 0.3 && echo x > sub/c.txt && rm b.txt",
  );
  const seen = [];
  for await (const e of w) {
    seen.push(e);
    if (e.type === "remove" && e.name === "b.txt") break;
  }
  w.stop();
  await w.done;
  const want = [["create", "a.txt"], ["write", "a.txt"], ["rename", "a.txt"], ["create", "b.txt"], ["chmod", "b.txt"],
    ["create", "sub"], ["create", "sub/c.txt"], ["remove", "b.txt"]];
  assert.ok(inOrder(seen, want), JSON.stringify(seen.map((e) => [e.type, e.name])));
  const sub = seen.find((e) => e.name === "sub");
  assert.equal(sub.isDir, true);
  assert.equal(sub.entry?.type, "dir");
});

test("watch with onEvent, stopped; errors for a missing path and a file", async () => {
  await sbx.files.mkdir("/work/cb");
  const got = [];
  let exited = false;
  const w = await sbx.files.watch("/work/cb", { onEvent: (e) => got.push(e), onExit: () => (exited = true) });
  await sbx.files.write("/work/cb/x.txt", "1");
  for (let i = 0; i < 100 && !got.some((e) => e.type === "create" && e.name === "x.txt"); i++) {
    await new Promise((r) => setTimeout(r, 50));
  }
  assert.ok(got.some((e) => e.type === "create" && e.name === "x.txt"), JSON.stringify(got));
  w.stop();
  await w.done;
  for (let i = 0; i < 100 && !exited; i++) await new Promise((r) => setTimeout(r, 20));
  assert.ok(exited);
  await assert.rejects(sbx.files.watch("/work/nope"), (e) => e instanceof SandfortError && e.status === 404);
  await assert.rejects(sbx.files.watch("/work/cb/x.txt"), (e) => e instanceof SandfortError && e.status === 400);
});
