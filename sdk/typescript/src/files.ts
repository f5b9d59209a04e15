import { SandfortError } from "./errors.js";
import { camel, type Json } from "./resource.js";
import type { Sandbox } from "./sandboxes.js";
import type { ArchiveResult, FileInfo, WriteInfo } from "./types.js";

export type WriteData = string | Uint8Array | ArrayBuffer | Blob | ReadableStream<Uint8Array>;

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

  /** A tar of `path`. */
  async downloadArchive(path: string): Promise<Uint8Array> {
    const res = await this.sbx.http.raw("GET", this.sbx.path("/files/archive"), { query: { path } });
    return new Uint8Array(await res.arrayBuffer());
  }
}
