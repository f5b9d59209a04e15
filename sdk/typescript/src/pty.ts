import { SandfortError, errorFromResponse } from "./errors.js";
import type { Transport } from "./http.js";

export interface PtyOptions {
  cols?: number;
  rows?: number;
  /** Program to run (default: the agent's `bash -l`, or `sh -l`). */
  command?: string;
  cwd?: string;
  /** Terminal output bytes as they arrive. */
  onData?: (data: Uint8Array) => void;
  /** Connect timeout in ms (default 30 000). */
  timeoutMs?: number;
}

type NodeSocket = {
  write(b: Uint8Array): boolean;
  end(): void;
  destroy(): void;
  on(ev: string, f: (...a: any[]) => void): void; // eslint-disable-line @typescript-eslint/no-explicit-any
  setNoDelay?(v: boolean): void;
};

/**
 * An interactive terminal over the daemon's WebSocket (a small RFC 6455 client over node:http,
 * so it needs Node or Bun, not a browser).
 */
export class PtyHandle {
  /** Resolves with the program's exit code (from the server's exit message), or null if the socket closed without one. */
  readonly exited: Promise<number | null>;
  private exitCode: number | null = null;
  private resolveExit!: (c: number | null) => void;
  private buf = new Uint8Array(0);
  private fragments: Uint8Array[] = [];
  private fragOpcode = 0;
  private closed = false;

  /** @internal */
  constructor(
    private readonly socket: NodeSocket,
    head: Uint8Array,
    private readonly onData?: (d: Uint8Array) => void,
  ) {
    this.exited = new Promise((r) => (this.resolveExit = r));
    socket.setNoDelay?.(true);
    socket.on("data", (chunk: Uint8Array) => this.feed(chunk));
    socket.on("close", () => this.finish());
    socket.on("error", () => this.finish());
    if (head.length) this.feed(head);
  }

  /** Sends keystrokes / bytes to the terminal. */
  write(data: string | Uint8Array): void {
    this.send(0x2, typeof data === "string" ? new TextEncoder().encode(data) : data);
  }

  resize(cols: number, rows: number): void {
    this.send(0x1, new TextEncoder().encode(JSON.stringify({ type: "resize", cols, rows })));
  }

  /** Closes the terminal (the program's session gets SIGHUP). */
  close(): void {
    if (this.closed) return;
    this.send(0x8, new Uint8Array([0x03, 0xe8]));
    this.closed = true;
    setTimeout(() => this.socket.destroy(), 1000).unref?.();
  }

  private finish(): void {
    this.closed = true;
    this.resolveExit(this.exitCode);
  }

  private send(opcode: number, payload: Uint8Array): void {
    if (this.closed) throw new SandfortError("the terminal is closed", { code: "conflict" });
    const n = payload.length;
    const hdrLen = n < 126 ? 2 : n < 65536 ? 4 : 10;
    const frame = new Uint8Array(hdrLen + 4 + n);
    frame[0] = 0x80 | opcode;
    if (n < 126) frame[1] = 0x80 | n;
    else if (n < 65536) {
      frame[1] = 0x80 | 126;
      frame[2] = n >> 8;
      frame[3] = n & 0xff;
    } else {
      frame[1] = 0x80 | 127;
      new DataView(frame.buffer).setBigUint64(2, BigInt(n));
    }
    const mask = crypto.getRandomValues(new Uint8Array(4));
    frame.set(mask, hdrLen);
    for (let i = 0; i < n; i++) frame[hdrLen + 4 + i] = payload[i] ^ mask[i & 3];
    this.socket.write(frame);
  }

  private feed(chunk: Uint8Array): void {
    const merged = new Uint8Array(this.buf.length + chunk.length);
    merged.set(this.buf);
    merged.set(chunk, this.buf.length);
    this.buf = merged;
    for (;;) {
      const b = this.buf;
      if (b.length < 2) return;
      const fin = (b[0] & 0x80) !== 0;
      const opcode = b[0] & 0x0f;
      const masked = (b[1] & 0x80) !== 0;
      let len = b[1] & 0x7f;
      let off = 2;
      if (len === 126) {
        if (b.length < 4) return;
        len = (b[2] << 8) | b[3];
        off = 4;
      } else if (len === 127) {
        if (b.length < 10) return;
        len = Number(new DataView(b.buffer, b.byteOffset).getBigUint64(2));
        off = 10;
      }
      const maskOff = off;
      if (masked) off += 4;
      if (b.length < off + len) return;
      const payload = b.slice(off, off + len);
      if (masked) for (let i = 0; i < len; i++) payload[i] ^= b[maskOff + (i & 3)];
      this.buf = b.slice(off + len);
      this.frame(fin, opcode, payload);
    }
  }

  private frame(fin: boolean, opcode: number, payload: Uint8Array): void {
    if (opcode === 0x8) {
      if (!this.closed) {
        try {
          this.send(0x8, payload.slice(0, 2));
        } catch {
          /* closed */
        }
      }
      this.closed = true;
      this.socket.end();
      this.finish();
      return;
    }
    if (opcode === 0x9) {
      if (!this.closed) this.send(0xa, payload);
      return;
    }
    if (opcode === 0xa) return;
    if (opcode !== 0) this.fragOpcode = opcode;
    this.fragments.push(payload);
    if (!fin) return;
    const total = this.fragments.reduce((a, f) => a + f.length, 0);
    const msg = new Uint8Array(total);
    let o = 0;
    for (const f of this.fragments) {
      msg.set(f, o);
      o += f.length;
    }
    this.fragments = [];
    if (this.fragOpcode === 0x2) this.onData?.(msg);
    else if (this.fragOpcode === 0x1) {
      try {
        const j = JSON.parse(new TextDecoder().decode(msg)) as { type?: string; exit_code?: number };
        if (j.type === "exit" && typeof j.exit_code === "number") this.exitCode = j.exit_code;
      } catch {
        /* ignore */
      }
    }
  }
}

export class PtyApi {
  /** @internal */
  constructor(
    private readonly http: Transport,
    private readonly path: string,
  ) {}

  /** Opens an interactive terminal. A token provider's refused token is replaced once. */
  async connect(opts: PtyOptions = {}): Promise<PtyHandle> {
    try {
      return await this.connectOnce(opts);
    } catch (err) {
      if (!(err instanceof SandfortError && err.status === 401 && this.http.tokenProvider)) throw err;
    }
    return this.connectOnce(opts);
  }

  private async connectOnce(opts: PtyOptions): Promise<PtyHandle> {
    const auth = await this.http.authHeaders();
    const url = new URL(
      this.http.url(this.path, { cols: opts.cols ?? 80, rows: opts.rows ?? 24, command: opts.command, cwd: opts.cwd }),
    );
    const mod = url.protocol === "https:" ? await import("node:https") : await import("node:http");
    const { createHash, randomBytes } = await import("node:crypto");
    const key = randomBytes(16).toString("base64");
    return new Promise<PtyHandle>((resolve, reject) => {
      const req = mod.request(url, {
        method: "GET",
        headers: {
          ...auth,
          Connection: "Upgrade",
          Upgrade: "websocket",
          "Sec-WebSocket-Version": "13",
          "Sec-WebSocket-Key": key,
        },
        timeout: opts.timeoutMs ?? 30000,
      });
      req.on("timeout", () => req.destroy(new SandfortError("PTY connect timed out", { code: "timeout" })));
      req.on("error", (err: Error) =>
        reject(err instanceof SandfortError ? err : new SandfortError(`PTY connect failed: ${err.message}`, { code: "connection_error", cause: err })),
      );
      req.on("response", (res) => {
        let text = "";
        res.setEncoding("utf8");
        res.on("data", (c: string) => (text += c));
        res.on("end", () => {
          const h = new Headers();
          for (const [k, v] of Object.entries(res.headers)) if (typeof v === "string") h.set(k, v);
          reject(errorFromResponse(res.statusCode ?? 0, h, text));
        });
      });
      req.on("upgrade", (res, socket, head) => {
        const expect = createHash("sha1").update(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").digest("base64");
        if (res.headers["sec-websocket-accept"] !== expect) {
          socket.destroy();
          reject(new SandfortError("PTY: bad Sec-WebSocket-Accept", { code: "protocol" }));
          return;
        }
        resolve(new PtyHandle(socket as unknown as NodeSocket, new Uint8Array(head), opts.onData));
      });
      req.end();
    });
  }
}
