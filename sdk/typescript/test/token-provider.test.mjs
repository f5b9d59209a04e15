// tokenProvider: a bearer token per request instead of an API key; a 401 asks the provider once
// more and repeats the request once. Runs against a small node:http server standing in for the
// daemon (it refuses the tokens a test names and records every Authorization header): the daemon's
// side of OIDC is proven end to end by the Python SDK's and the CLI's tests.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { createHash } from "node:crypto";
import { createServer } from "node:http";
import { Sandbox, SandfortClient, SandfortError } from "../dist/esm/index.js";

const refused = new Set();
let seen = []; // [method, path, authorization, body]
let server;
let baseUrl;

function answer(res, status, body) {
  const text = JSON.stringify(body);
  res.writeHead(status, { "content-type": "application/json", "x-request-id": "req-00000000000000ab" });
  res.end(text);
}

const SANDBOX = { id: "sbx-1", name: null, state: "started", snapshot: "base", created_at: "2026-01-01T00:00:00Z" };

before(async () => {
  server = createServer(async (req, res) => {
    const chunks = [];
    for await (const c of req) chunks.push(c);
    const body = Buffer.concat(chunks).toString();
    const auth = req.headers.authorization ?? "";
    seen.push([req.method, req.url.split("?")[0], auth, body]);
    if (refused.has(auth.replace(/^Bearer /, ""))) {
      return answer(res, 401, { error: { code: "unauthenticated", message: "invalid token", request_id: "req-00000000000000ab" } });
    }
    if (req.url === "/v1/whoami") return answer(res, 200, { org: "acme", principal: "alice", role: "admin", auth: "oidc" });
    if (req.url.startsWith("/v1/sandboxes/sbx-1/files")) return answer(res, 200, { path: "/f", size: body.length });
    if (req.url.startsWith("/v1/sandboxes/sbx-1")) return answer(res, 200, SANDBOX);
    answer(res, 404, { error: { code: "not_found", message: "no" } });
  });
  // The PTY WebSocket: 401 to a refused token; otherwise the upgrade and an exit message.
  server.on("upgrade", (req, socket) => {
    const auth = req.headers.authorization ?? "";
    seen.push([req.method, req.url.split("?")[0], auth, ""]);
    if (refused.has(auth.replace(/^Bearer /, ""))) {
      const text = JSON.stringify({ error: { code: "unauthenticated", message: "invalid token" } });
      socket.end(`HTTP/1.1 401 Unauthorized\r\ncontent-type: application/json\r\ncontent-length: ${text.length}\r\nconnection: close\r\n\r\n${text}`);
      return;
    }
    const accept = createHash("sha1").update(req.headers["sec-websocket-key"] + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
    socket.write(`HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-accept: ${accept}\r\n\r\n`);
    const exit = Buffer.from(JSON.stringify({ type: "exit", exit_code: 7 }));
    socket.end(Buffer.concat([Buffer.from([0x81, exit.length]), exit]));
  });
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  baseUrl = `http://127.0.0.1:${server.address().port}`;
});

after(() => new Promise((resolve) => server.close(resolve)));

/** Hands out the given tokens in order, then the last one forever; counts the calls. */
function provider(...tokens) {
  const p = () => {
    p.calls += 1;
    return tokens.length > 1 ? tokens.shift() : tokens[0];
  };
  p.calls = 0;
  return p;
}

function fresh(...tokens) {
  seen = [];
  refused.clear();
  const tokenProvider = provider(...tokens);
  return { tokenProvider, client: new SandfortClient({ baseUrl, tokenProvider }) };
}

test("the provider's token is sent on every request, asked for each time", async () => {
  const { tokenProvider, client } = fresh("good");
  assert.equal((await client.whoami()).principal, "alice");
  await client.getSandbox("sbx-1");
  assert.equal(tokenProvider.calls, 2);
  assert.deepEqual(seen.map((s) => s[2]), ["Bearer good", "Bearer good"]);
});

test("an async provider works the same", async () => {
  seen = [];
  const client = new SandfortClient({ baseUrl, tokenProvider: async () => "async-token" });
  await client.whoami();
  assert.deepEqual(seen.map((s) => s[2]), ["Bearer async-token"]);
});

test("a refused token: the provider is asked again and the request repeated once", async () => {
  const { tokenProvider, client } = fresh("stale", "good");
  refused.add("stale");
  assert.equal((await client.whoami()).role, "admin");
  assert.equal(tokenProvider.calls, 2);
  assert.deepEqual(seen.map((s) => s[2]), ["Bearer stale", "Bearer good"]);
});

test("tokens that are always refused: a 401 SandfortError after exactly one retry", async () => {
  const { tokenProvider, client } = fresh("bad-1", "bad-2", "bad-3");
  refused.add("bad-1").add("bad-2").add("bad-3");
  const err = await client.whoami().catch((e) => e);
  assert.ok(err instanceof SandfortError);
  assert.equal(err.status, 401);
  assert.equal(err.code, "unauthenticated");
  assert.equal(err.requestId, "req-00000000000000ab");
  assert.equal(tokenProvider.calls, 2);
  assert.equal(seen.length, 2);
});

/** A Sandbox object on a client whose provider hands out `tokens` (the first one refused). */
async function sandboxWith(...tokens) {
  const info = (await new SandfortClient({ baseUrl, tokenProvider: () => "setup" }).getSandbox("sbx-1")).info;
  const made = fresh(...tokens);
  refused.add(tokens[0]);
  return { ...made, sbx: new Sandbox(made.client, info) };
}

test("a text or byte body is sent again whole", async () => {
  for (const data of ["payload", new TextEncoder().encode("payload")]) {
    const { tokenProvider, sbx } = await sandboxWith("stale", "good");
    await sbx.files.write("/f", data);
    assert.deepEqual(seen.map((s) => [s[2], s[3]]), [["Bearer stale", "payload"], ["Bearer good", "payload"]]);
    assert.equal(tokenProvider.calls, 2);
  }
});

test("a stream body cannot be sent twice: the 401 is the answer", async () => {
  const { tokenProvider, sbx } = await sandboxWith("stale", "good");
  const stream = new ReadableStream({
    start(c) {
      c.enqueue(new TextEncoder().encode("streamed"));
      c.close();
    },
  });
  const err = await sbx.files.write("/f", stream).catch((e) => e);
  assert.ok(err instanceof SandfortError);
  assert.equal(err.status, 401);
  assert.deepEqual(seen.map((s) => [s[2], s[3]]), [["Bearer stale", "streamed"]]);
  assert.equal(tokenProvider.calls, 1);
});

test("the PTY handshake retries with the provider's next token", async () => {
  const { sbx } = await sandboxWith("stale", "good");
  const term = await sbx.pty.connect({ cols: 80, rows: 24 });
  assert.equal(await term.exited, 7);
  assert.deepEqual(seen.map((s) => [s[1], s[2]]), [
    ["/v1/sandboxes/sbx-1/pty", "Bearer stale"],
    ["/v1/sandboxes/sbx-1/pty", "Bearer good"],
  ]);
});

test("an API key is never retried", async () => {
  seen = [];
  refused.clear();
  refused.add("sfk_refused");
  const client = new SandfortClient({ baseUrl, apiKey: "sfk_refused" });
  const err = await client.whoami().catch((e) => e);
  assert.equal(err.status, 401);
  assert.equal(seen.length, 1);
});

test("configuration errors", async () => {
  assert.throws(() => new SandfortClient({ baseUrl, apiKey: "sfk_x", tokenProvider: () => "t" }), /not both/);
  assert.throws(() => new SandfortClient({ baseUrl, tokenProvider: "t" }), /function/);
  const empty = new SandfortClient({ baseUrl, tokenProvider: () => "" });
  const err = await empty.whoami().catch((e) => e);
  assert.ok(err instanceof SandfortError);
  assert.equal(err.code, "config");
});
