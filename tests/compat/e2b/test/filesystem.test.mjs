// filesystem.Filesystem (Stat, ListDir with depth, MakeDir, Move, Remove) and GET /files through
// files.*: the agent's own file operations, inside the sandbox's filesystem.
import { test } from "node:test";
import assert from "node:assert/strict";
import { FileNotFoundError } from "e2b";
import { sandbox } from "../lib/live.mjs";

test("makeDir, list with depth, getInfo, exists, rename, remove", async () => {
  const sbx = await sandbox();
  assert.equal(await sbx.files.makeDir("/tmp/e2b/a/b"), true);
  assert.equal(await sbx.files.makeDir("/tmp/e2b/a/b"), false, "already there");
  await sbx.commands.run("printf 'hello' > /tmp/e2b/a/file.txt && printf 'deep' > /tmp/e2b/a/b/deep.txt");

  const top = await sbx.files.list("/tmp/e2b/a");
  assert.deepEqual(top.map((e) => [e.name, e.type]).sort(), [["b", "dir"], ["file.txt", "file"]]);
  const all = await sbx.files.list("/tmp/e2b/a", { depth: 2 });
  assert.deepEqual(all.map((e) => e.path).sort(), ["/tmp/e2b/a/b", "/tmp/e2b/a/b/deep.txt", "/tmp/e2b/a/file.txt"]);

  const info = await sbx.files.getInfo("/tmp/e2b/a/file.txt");
  assert.equal(info.type, "file");
  assert.equal(info.size, 5);
  assert.equal(info.name, "file.txt");
  assert.ok(info.modifiedTime instanceof Date && info.modifiedTime.getFullYear() >= 2024, String(info.modifiedTime));
  assert.equal(await sbx.files.exists("/tmp/e2b/a/file.txt"), true);
  assert.equal(await sbx.files.exists("/tmp/e2b/nope"), false);

  const moved = await sbx.files.rename("/tmp/e2b/a/file.txt", "/tmp/e2b/moved.txt");
  assert.equal(moved.path, "/tmp/e2b/moved.txt");
  assert.equal(await sbx.files.read("/tmp/e2b/moved.txt"), "hello");

  await sbx.files.remove("/tmp/e2b/a");
  assert.equal(await sbx.files.exists("/tmp/e2b/a"), false);
  await assert.rejects(sbx.files.getInfo("/tmp/e2b/a"), FileNotFoundError);
  await assert.rejects(sbx.files.list("/tmp/e2b/a"), FileNotFoundError);
});

test("read: text, bytes and a stream, the bytes as they are", async () => {
  const sbx = await sandbox();
  await sbx.commands.run("head -c 3000000 /dev/urandom > /tmp/big.bin && printf 'a\\0b\\n' > /tmp/nul.txt");
  const bytes = await sbx.files.read("/tmp/nul.txt", { format: "bytes" });
  assert.deepEqual([...bytes], [97, 0, 98, 10]);
  const sum = (await sbx.commands.run("sha256sum /tmp/big.bin | cut -d' ' -f1")).stdout.trim();
  const stream = await sbx.files.read("/tmp/big.bin", { format: "stream" });
  const { createHash } = await import("node:crypto");
  const hash = createHash("sha256");
  let total = 0;
  for await (const chunk of stream) {
    hash.update(chunk);
    total += chunk.length;
  }
  assert.equal(total, 3000000);
  assert.equal(hash.digest("hex"), sum);
  await assert.rejects(sbx.files.read("/tmp/no-such-file"), FileNotFoundError);
});

test("write: one file, several (multipart), octet-stream; directories made; read back", async () => {
  const sbx = await sandbox();
  const one = await sbx.files.write("/tmp/up/new/dir/one.txt", "first\n");
  assert.equal(one.path, "/tmp/up/new/dir/one.txt");
  assert.equal(one.name, "one.txt");
  assert.equal(await sbx.files.read("/tmp/up/new/dir/one.txt"), "first\n");

  const many = await sbx.files.write([
    { path: "/tmp/up/a.txt", data: "alpha" },
    { path: "/tmp/up/b.bin", data: new Uint8Array([0, 1, 2, 255]).buffer },
  ]);
  assert.deepEqual(many.map((f) => f.path), ["/tmp/up/a.txt", "/tmp/up/b.bin"]);
  assert.equal(await sbx.files.read("/tmp/up/a.txt"), "alpha");
  assert.deepEqual([...(await sbx.files.read("/tmp/up/b.bin", { format: "bytes" }))], [0, 1, 2, 255]);

  const raw = await sbx.files.write("/tmp/up/raw.txt", "octets\r\n--x--\r\n", { useOctetStream: true });
  assert.equal(raw.path, "/tmp/up/raw.txt");
  assert.equal(await sbx.files.read("/tmp/up/raw.txt"), "octets\r\n--x--\r\n");
  const out = await sbx.commands.run("cat /tmp/up/a.txt /tmp/up/raw.txt");
  assert.equal(out.stdout, "alphaoctets\r\n--x--\r\n");
});

test("write: a gzip upload is stored inflated", async () => {
  const sbx = await sandbox();
  await sbx.files.write("/tmp/zipped.txt", "text", { gzip: true });
  assert.equal(await sbx.files.read("/tmp/zipped.txt"), "text");
});
