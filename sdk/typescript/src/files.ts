import { SandfortError } from "./errors.js";
import { parseSse, type SseEvent } from "./http.js";
import { camel, type Json } from "./resource.js";
import type { Sandbox } from "./sandboxes.js";
import type { ArchiveResult, FileInfo, WatchEvent, WriteInfo } from "./types.js";

export type WriteData = string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>;

export interface WatchOptions {
  /** Watch the whole tree, subdirectories made later included. */
  recursive?: boolean;
  /** create/write/chmod events carry the entry (`FileInfo`). */
  includeEntry?: boolean;
  /** Called for each event (the handle then reads the stream itself; do not iterate it too). */
  onEvent?: (event: WatchEvent) => void | Promise<void>;
  /** Called once when the watch ends: `error` when it broke, undefined when it ended or was stopped. */
  onExit?: (error?: unknown) => void;
  signal?: AbortSignal;
}

function watchEvent(ev: SseEvent): WatchEvent | undefined {
  let d: Json;
  try {
    d = JSON.parse(ev.data) as Json;
  } catch {
    return undefined;
  }
  if (typeof d !== "object" || d === null) return undefined;
  const out: WatchEvent = { type: (d.type ?? ev.event) as WatchEvent["type"], name: String(d.name ?? ""), isDir: !!d.is_dir };
  if (d.entry && typeof d.entry === "object") out.entry = d.entry as FileInfo;
  if (d.dropped !== undefined) out.dropped = Number(d.dropped);
  if (d.message !== undefined) out.message = String(d.message);
  return out;
}

/** A running directory watch (`sandbox.files.watch`): async-iterable, stopped with `stop()`. */
export class WatchHandle implements AsyncIterable<WatchEvent> {
  /** The watched directory, whether the whole tree is watched, and how many directories are. */
  readonly path: string;
  readonly recursive: boolean;
  readonly directories: number;
  /** Resolves when the watch has ended (stopped, the directory gone, the sandbox stopped). */
  readonly done: Promise<void>;
  private stopped = false;
  private resolveDone!: () => void;

  constructor(
    private readonly events: AsyncGenerator<SseEvent>,
    private readonly ctl: AbortController,
    start: Json,
    opts: WatchOptions,
  ) {
    this.path = String(start.path ?? "");
    this.recursive = !!start.recursive;
    this.directories = Number(start.directories ?? 0);
    this.done = new Promise((resolve) => (this.resolveDone = resolve));
    if (opts.onEvent) void this.pump(opts.onEvent, opts.onExit);
  }

  private async pump(onEvent: (e: WatchEvent) => void | Promise<void>, onExit?: (error?: unknown) => void): Promise<void> {
    let failure: unknown;
    try {
      for await (const e of this) await onEvent(e);
    } catch (err) {
      if (!this.stopped) failure = err;
    }
    onExit?.(failure);
  }

  async *[Symbol.asyncIterator](): AsyncGenerator<WatchEvent> {
    try {
      while (!this.stopped) {
        let next: IteratorResult<SseEvent>;
        try {
          next = await this.events.next();
        } catch (err) {
          if (this.stopped) return;
          throw err;
        }
        if (next.done) return;
        const e = watchEvent(next.value);
        if (!e) continue;
        yield e;
        if (e.type === "end") return;
      }
    } finally {
      this.finish();
    }
  }

  /** Ends the watch: sandfortd and the sandbox's agent let it go at once. */
  stop(): void {
    this.stopped = true;
    this.finish();
  }

  private finish(): void {
    this.ctl.abort();
    this.resolveDone();
  }
}

function modeString(mode: string | number | undefined): string | undefined {
  if (mode === undefined) return undefined;
  return typeof mode === "number" ? mode.toString(8).padStart(4, "0") : mode;
}

/** The sandbox's filesystem (absolute paths, resolved inside the sandbox). */
export class Files {
  constructor(private readonly sbx: Sandbox) {}

  /** Writes a file (parents created; atomic rename). Strings are written as UTF-8. */
  async write(path: string, data: WriteData, opts: { mode?: string | number } = {}): Promise<WriteInfo> {
    let body: BodyInit | Uint8Array;
    if (typeof data === "string") body = new TextEncoder().encode(data);
    else if (data instanceof ArrayBuffer) body = new Uint8Array(data);
    else body = data as BodyInit;
    const j = await this.sbx.req<Json>("PUT", "/files", { query: { path, mode: modeString(opts.mode) }, body });
    return camel<WriteInfo>(j);
  }

  /** Reads a file as UTF-8 text (default) or bytes (`{ format: "bytes" }`). */
  read(path: string, opts?: { format?: "text" }): Promise<string>;
  read(path: string, opts: { format: "bytes" }): Promise<Uint8Array>;
  async read(path: string, opts: { format?: "text" | "bytes" } = {}): Promise<string | Uint8Array> {
    const bytes = await this.readBytes(path);
    return opts.format === "bytes" ? bytes : new TextDecoder().decode(bytes);
  }

  async readBytes(path: string): Promise<Uint8Array> {
    const res = await this.sbx.http.raw("GET", this.sbx.path("/files"), { query: { path } });
    return new Uint8Array(await res.arrayBuffer());
  }

  /** The file's body as a web ReadableStream. */
  async readStream(path: string): Promise<ReadableStream<Uint8Array>> {
    const res = await this.sbx.http.raw("GET", this.sbx.path("/files"), { query: { path } });
    return res.body ?? new ReadableStream({ start: (c) => c.close() });
  }

  async list(path: string): Promise<FileInfo[]> {
    const j = await this.sbx.req<Json>("GET", "/files/list", { query: { path } });
    return j.items as FileInfo[];
  }

  async stat(path: string): Promise<FileInfo> {
    return this.sbx.req<FileInfo>("GET", "/files/stat", { query: { path } });
  }

  async exists(path: string): Promise<boolean> {
    try {
      await this.stat(path);
      return true;
    } catch (e) {
      if (e instanceof SandfortError && e.status === 404) return false;
      throw e;
    }
  }

  /** Creates a directory (with parents by default). */
  async mkdir(path: string, opts: { parents?: boolean; mode?: string | number } = {}): Promise<FileInfo> {
    const body: Json = { path, parents: opts.parents ?? true };
    const m = modeString(opts.mode);
    if (m !== undefined) body.mode = m;
    return this.sbx.req<FileInfo>("POST", "/files/mkdir", { json: body });
  }

  async move(from: string, to: string, opts: { overwrite?: boolean } = {}): Promise<FileInfo> {
    const body: Json = { from, to };
    if (opts.overwrite !== undefined) body.overwrite = opts.overwrite;
    return this.sbx.req<FileInfo>("POST", "/files/move", { json: body });
  }

  /** Deletes a file, or a directory with `recursive: true`. Never follows symlinks. */
  async remove(path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    await this.sbx.req("DELETE", "/files", { query: { path, recursive: opts.recursive ? "true" : undefined } });
  }

  /** Extracts a tar archive at `path`. */
  async uploadArchive(path: string, tar: Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>): Promise<ArchiveResult> {
    const body = tar instanceof ArrayBuffer ? new Uint8Array(tar) : (tar as BodyInit);
    const j = await this.sbx.req<Json>("PUT", "/files/archive", { query: { path }, body, headers: { "Content-Type": "application/x-tar" } });
    return camel<ArchiveResult>(j);
  }

  /**
   * Watches the directory `path`. Resolves once the watch is in place (a change made after
   * that is seen) with a {@link WatchHandle}: iterate it (`for await`) for {@link WatchEvent}s,
   * or give `onEvent` and it is called for each. `recursive` watches the whole tree (new
   * subdirectories included); `includeEntry` adds the entry to create/write/chmod events.
   * `handle.stop()` (or `signal`) ends it. A missing path rejects with a 404 SandfortError, a
   * file with 400, too many watches in the sandbox with 429 (`quota_exceeded`).
   */
  async watch(path: string, opts: WatchOptions = {}): Promise<WatchHandle> {
    const ctl = new AbortController();
    if (opts.signal) {
      if (opts.signal.aborted) ctl.abort(opts.signal.reason);
      else opts.signal.addEventListener("abort", () => ctl.abort(opts.signal?.reason), { once: true });
    }
    // No deadline: a quiet watch sends a keep-alive every 15 s and lasts until stopped.
    const res = await this.sbx.http.raw("GET", this.sbx.path("/files/watch"), {
      query: { path, recursive: opts.recursive ? "true" : undefined, include_entry: opts.includeEntry ? "true" : undefined },
      headers: { Accept: "text/event-stream" },
      signal: ctl.signal,
      timeoutMs: 0,
    });
    const events = parseSse(res.body ?? new ReadableStream({ start: (c) => c.close() }));
    const first = await events.next();
    if (first.done || first.value.event !== "start") {
      ctl.abort();
      throw new SandfortError("the watch's stream ended before it started", { code: "protocol" });
    }
    const start = JSON.parse(first.value.data) as Json;
    return new WatchHandle(events, ctl, start, opts);
  }

  /** A tar of `path`. */
  async downloadArchive(path: string): Promise<Uint8Array> {
    const res = await this.sbx.http.raw("GET", this.sbx.path("/files/archive"), { query: { path } });
    return new Uint8Array(await res.arrayBuffer());
  }
}
