// files.write and files.read of 50 MB each way: the upload streamed to the agent's atomic write
// (never held whole), the download streamed back; compared by SHA-256. Other bodies keep the
// listener's limit.
import { test } from "node:test";
import assert from "node:assert/strict";
import { createHash, randomBytes } from "node:crypto";
import { readFileSync } from "node:fs";
import { sandbox, sandboxPlane } from "../lib/live.mjs";

const SIZE = 50 * 1024 * 1024;
const sha256 = (bytes) => createHash("sha256").update(bytes).digest("hex");
/** sandfortd's peak resident memory so far (VmHWM), in bytes. */
const daemonPeak = () => Number(/VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${process.env.SANDFORTD_PID}/status`, "utf8"))[1]) * 1024;
const inSandbox = async (sbx, path) => (await sbx.commands.run(`sha256sum ${path} | cut -d' ' -f1`)).stdout.trim();

/** `data` as a ReadableStream of 1 MiB chunks (the SDK sends a stream as octet-stream, chunked). */
function streamOf(data, { failAfter } = {}) {
  let at = 0;
  return new ReadableStream({
    pull(controller) {
      if (failAfter !== undefined && at >= failAfter) {
        controller.error(new Error("the source broke"));
        return;
      }
      if (at >= data.length) {
        controller.close();
        return;
      }
      controller.enqueue(data.subarray(at, at + (1 << 20)));
      at += 1 << 20;
    },
  });
}

test("50 MB up (multipart, the SDK's default) and back (bytes and stream), byte-exact", async () => {
  const sbx = await sandbox();
  const data = randomBytes(SIZE);
  const sum = sha256(data);
  const peakBefore = daemonPeak();
  const info = await sbx.files.write("/tmp/big/up/fifty.bin", data, { requestTimeoutMs: 300_000 });
  assert.equal(info.path, "/tmp/big/up/fifty.bin");
  assert.equal(await inSandbox(sbx, "/tmp/big/up/fifty.bin"), sum);
  assert.equal((await sbx.files.getInfo("/tmp/big/up/fifty.bin")).size, SIZE);

  const bytes = await sbx.files.read("/tmp/big/up/fifty.bin", { format: "bytes", requestTimeoutMs: 300_000 });
  assert.equal(bytes.length, SIZE);
  assert.equal(sha256(bytes), sum);

  const stream = await sbx.files.read("/tmp/big/up/fifty.bin", { format: "stream", requestTimeoutMs: 300_000 });
  const hash = createHash("sha256");
  let total = 0;
  for await (const chunk of stream) {
    hash.update(chunk);
    total += chunk.length;
  }
  assert.equal(total, SIZE);
  assert.equal(hash.digest("hex"), sum);
  // Neither way was the body held whole by sandfortd: its peak grew by less than the file.
  const grew = daemonPeak() - peakBefore;
  assert.ok(grew < 32 * 1024 * 1024, `sandfortd's peak memory grew by ${grew} bytes`);
});

test("50 MB from a ReadableStream (octet-stream, chunked) and several files in one multipart body", async () => {
  const sbx = await sandbox();
  const data = randomBytes(SIZE);
  const info = await sbx.files.write("/tmp/big/streamed.bin", streamOf(data), { requestTimeoutMs: 300_000 });
  assert.equal(info.path, "/tmp/big/streamed.bin");
  assert.equal(await inSandbox(sbx, "/tmp/big/streamed.bin"), sha256(data));

  // Parts around a large one, a part whose bytes look like the delimiter's start, an empty one.
  const middle = randomBytes(5 * 1024 * 1024 + 3);
  const tricky = Buffer.from("\r\n--\r\n-- not the boundary\r\n");
  const written = await sbx.files.write([
    { path: "/tmp/big/many/a.txt", data: "first" },
    { path: "/tmp/big/many/b.bin", data: middle },
    { path: "/tmp/big/many/c.txt", data: tricky },
    { path: "/tmp/big/many/empty", data: "" },
  ]);
  assert.deepEqual(written.map((f) => f.path), ["/tmp/big/many/a.txt", "/tmp/big/many/b.bin", "/tmp/big/many/c.txt", "/tmp/big/many/empty"]);
  assert.equal(await sbx.files.read("/tmp/big/many/a.txt"), "first");
  assert.equal(await inSandbox(sbx, "/tmp/big/many/b.bin"), sha256(middle));
  assert.deepEqual(Buffer.from(await sbx.files.read("/tmp/big/many/c.txt", { format: "bytes" })), tricky);
  assert.equal((await sbx.files.getInfo("/tmp/big/many/empty")).size, 0);
});

test("an upload that breaks halfway leaves the file as it was, and no temporary file", async () => {
  const sbx = await sandbox();
  await sbx.files.write("/tmp/big/keep.txt", "before");
  const data = randomBytes(8 * 1024 * 1024);
  await assert.rejects(sbx.files.write("/tmp/big/keep.txt", streamOf(data, { failAfter: 4 << 20 })));
  assert.equal(await sbx.files.read("/tmp/big/keep.txt"), "before");
  // The agent drops its temporary file when the upload's connection ends.
  let left = [];
  for (let i = 0; i < 20; i++) {
    left = (await sbx.files.list("/tmp/big")).map((e) => e.name).filter((n) => n.includes("sandfort"));
    if (left.length === 0) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  assert.deepEqual(left, []);
});

test("a refused file: onto a directory is an error, the upload's other files are not half written", async () => {
  const sbx = await sandbox();
  await sbx.files.makeDir("/tmp/big/adir");
  await assert.rejects(sbx.files.write("/tmp/big/adir", randomBytes(1 << 20)));
  assert.equal((await sbx.files.getInfo("/tmp/big/adir")).type, "dir");
});

test("no token: refused before the body is read; other sandbox-plane bodies keep the 16 MiB limit", async () => {
  const sbx = await sandbox();
  const r = await fetch(`${process.env.E2B_SANDBOX_URL}/files?path=/tmp/nope`, {
    method: "POST",
    headers: { "E2b-Sandbox-Id": sbx.sandboxId, "E2b-Sandbox-Port": "49983", "Content-Type": "application/octet-stream" },
    // 8 MiB, far more than sockets buffer: the 401 is read only because the daemon reads and
    // drops the rest before it closes (a close with bytes unread is a reset that loses the answer).
    body: randomBytes(8 << 20),
  });
  assert.equal(r.status, 401);
  assert.equal(await sbx.files.exists("/tmp/nope"), false);

  const big = await sandboxPlane("/filesystem.Filesystem/Stat", {
    sandboxId: sbx.sandboxId, token: sbx.envdAccessToken, method: "POST",
    body: JSON.stringify({ path: "/tmp", pad: "x".repeat(17 * 1024 * 1024) }),
  }).catch((e) => e);
  // 413, or the connection closed while the rest was still being sent.
  assert.ok(big instanceof Error || big.status === 413, String(big.status ?? big));
});

/** A raw upload to the sandbox plane, as the SDK's but with the body given. */
function rawUpload(sbx, { token = sbx.envdAccessToken, sandboxId = sbx.sandboxId, type, body, path = "", headers = {} }) {
  return fetch(`${process.env.E2B_SANDBOX_URL}/files${path ? `?path=${encodeURIComponent(path)}` : ""}`, {
    method: "POST",
    headers: { "E2b-Sandbox-Id": sandboxId, "E2b-Sandbox-Port": "49983", "X-Access-Token": token, "Content-Type": type, ...headers },
    body,
  });
}

test("another sandbox's token uploads nothing; malformed multipart bodies write nothing", async () => {
  const a = await sandbox();
  const b = await sandbox();
  const part = (name, data) => `--XyZ\r\nContent-Disposition: form-data; name="file"; filename="${name}"\r\n\r\n${data}\r\n`;
  const theirs = await rawUpload(a, { token: b.envdAccessToken, type: "multipart/form-data; boundary=XyZ",
    body: part("/tmp/planted.txt", "from b") + "--XyZ--\r\n" });
  assert.equal(theirs.status, 401);
  assert.equal(await a.files.exists("/tmp/planted.txt"), false);
  assert.equal(await b.files.exists("/tmp/planted.txt"), false);

  for (const [what, type, body] of [
    ["a body that ends inside a part", "multipart/form-data; boundary=XyZ", part("/tmp/m/cut.txt", "half").slice(0, -8)],
    ["no boundary", "multipart/form-data", part("/tmp/m/nob.txt", "x") + "--XyZ--\r\n"],
    ["a part's header without end", "multipart/form-data; boundary=XyZ", "--XyZ\r\n" + "X-Pad: y\r\n".repeat(3000)],
    ["no delimiter at all", "multipart/form-data; boundary=XyZ", "z".repeat(200_000)],
  ]) {
    const r = await rawUpload(a, { type, body });
    assert.equal(r.status, 400, what);
    assert.equal((await r.json()).code, "invalid_argument", what);
  }
  assert.equal(await a.files.exists("/tmp/m/cut.txt"), false, "a cut part leaves no file");
  assert.equal(await a.files.exists("/tmp/m/nob.txt"), false);

  // A preamble, transport padding after a delimiter and an epilogue are allowed.
  const ok = await rawUpload(a, { type: "multipart/form-data; boundary=XyZ",
    body: "preamble\r\n--XyZ  \r\n" + `Content-Disposition: form-data; name="file"; filename="/tmp/m/fine.txt"\r\n\r\nfine\r\n--XyZ--\r\nepilogue` });
  assert.equal(ok.status, 200);
  assert.deepEqual(await ok.json(), [{ name: "fine.txt", type: "file", path: "/tmp/m/fine.txt" }]);
  assert.equal(await a.files.read("/tmp/m/fine.txt"), "fine");
});

test("gzip uploads: inflated on the way, a bomb never held, a corrupt or lying body writes nothing", async () => {
  const { gzipSync } = await import("node:zlib");
  const sbx = await sandbox();
  const data = randomBytes(3 * 1024 * 1024);
  await sbx.files.write("/tmp/gz/random.bin", data, { gzip: true });
  assert.equal(await inSandbox(sbx, "/tmp/gz/random.bin"), sha256(data));

  // 100 MB of zeros is ~100 KB compressed: inflated a piece at a time, never whole.
  const zeros = Buffer.alloc(100 * 1024 * 1024);
  const bomb = gzipSync(zeros);
  assert.ok(bomb.length < 200 * 1024);
  const peakBefore = daemonPeak();
  const r = await rawUpload(sbx, { path: "/tmp/gz/zeros.bin", type: "application/octet-stream", body: bomb,
    headers: { "Content-Encoding": "gzip" } });
  assert.equal(r.status, 200);
  assert.equal((await sbx.files.getInfo("/tmp/gz/zeros.bin")).size, zeros.length);
  const grew = daemonPeak() - peakBefore;
  assert.ok(grew < 32 * 1024 * 1024, `sandfortd's peak memory grew by ${grew} bytes`);

  const lying = gzipSync(Buffer.from("the checksum will not match"));
  lying[lying.length - 8] ^= 0xff;  // the CRC-32 of the trailer
  for (const [what, body, path] of [
    ["not gzip", Buffer.from("plain text, not gzip"), "/tmp/gz/plain.txt"],
    ["a wrong checksum", lying, "/tmp/gz/lying.txt"],
    ["cut short", gzipSync(randomBytes(100_000)).subarray(0, 50_000), "/tmp/gz/cut.bin"],
  ]) {
    const bad = await rawUpload(sbx, { path, type: "application/octet-stream", body, headers: { "Content-Encoding": "gzip" } });
    assert.equal(bad.status, 400, what);
    assert.equal(await sbx.files.exists(path), false, `${what}: nothing committed`);
  }
});
