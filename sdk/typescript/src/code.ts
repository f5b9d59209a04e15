/**
 * `sandbox.code`: stateful code contexts (docs/api.md, "Code interpreter"). A context is one
 * long-lived interpreter — `python`, `js` (node) or `bash` — whose state carries over between
 * runs, as in a notebook:
 *
 *     await sbx.code.run("x = 1");
 *     (await sbx.code.run("x + 1")).text; // "2"
 *
 * A run streams stdout/stderr as produced, then its results (`display()` and the value of the
 * last expression; matplotlib figures as PNG, DataFrames as HTML), the error the code raised (a
 * value in `Execution.error`, never thrown) and `end`. Without a context a run goes to the
 * default context of its language (`python` by default).
 */
import { SandfortError } from "./errors.js";
import { parseSse } from "./http.js";
import { timeoutFor } from "./processes.js";
import type { Json } from "./resource.js";
import type { Sandbox } from "./sandboxes.js";

/** The interpreters a context can run. */
export type CodeContextLanguage = "python" | "js" | "bash";

/** A stateful code context. */
export interface CodeContext {
  id: string;
  language: CodeContextLanguage;
  cwd: string;
  /** The context a run that names only a language uses. */
  default: boolean;
  createdAt: string;
  /** The interpreter while it runs. */
  pid: number | null;
  busy: boolean;
  executionCount: number;
}

/** A value a run showed: `text` always, the other representations when the object has them (images base64). */
export interface CodeResult {
  text?: string;
  html?: string;
  markdown?: string;
  svg?: string;
  png?: string;
  jpeg?: string;
  pdf?: string;
  latex?: string;
  json?: unknown;
  javascript?: string;
  /** A matplotlib figure's data in E2B's chart schema (`type`, `title`, `elements`…; docs/api.md). */
  chart?: Json;
  /** The value of the run's last expression. */
  isMainResult: boolean;
  /** Every field as the daemon sent it. */
  raw: Json;
}

/** What a run raised. */
export interface CodeError {
  name: string;
  value: string;
  traceback: string;
}

/** A finished run. */
export interface Execution {
  results: CodeResult[];
  logs: { stdout: string[]; stderr: string[] };
  error?: CodeError;
  contextId?: string;
  executionCount?: number;
  timedOut: boolean;
  truncated: boolean;
  /** The interpreter was lost: the context's next run starts afresh. */
  restarted: boolean;
  durationMs?: number;
  /** The text of the main result, if any. */
  text?: string;
}

/** One event of a run, as `runStream` yields them. */
export type CodeEvent =
  | { type: "stdout" | "stderr"; text: string }
  | { type: "result"; result: CodeResult }
  | { type: "error"; error: CodeError }
  | { type: "end"; execution: Execution };

export interface CreateCodeContextOptions {
  language?: CodeContextLanguage;
  /** Absolute, an existing directory; default the sandbox's working directory. */
  cwd?: string;
  /** Over the sandbox's environment, for every run in the context. */
  env?: Record<string, string>;
}

export interface RunCodeOptions {
  /** Without `context`: the default context of this language (default `python`). */
  language?: CodeContextLanguage;
  /** A context or its id. */
  context?: string | CodeContext;
  /** For this run only. */
  env?: Record<string, string>;
  /** Default 300; the run is interrupted past it (its error `TimeoutError`). */
  timeoutS?: number;
  onStdout?: (text: string) => void;
  onStderr?: (text: string) => void;
  onResult?: (result: CodeResult) => void;
  onError?: (error: CodeError) => void;
  /** Aborting disconnects, which interrupts the run. */
  signal?: AbortSignal;
}

// The daemon's default timeout of a run (docs/api.md).
const DEFAULT_RUN_S = 300;

const FORMATS = ["html", "markdown", "svg", "png", "jpeg", "pdf", "latex", "json", "javascript"] as const;

function toContext(j: Json): CodeContext {
  return {
    id: j.id,
    language: j.language,
    cwd: j.cwd,
    default: !!j.default,
    createdAt: j.created_at,
    pid: j.pid ?? null,
    busy: !!j.busy,
    executionCount: j.execution_count ?? 0,
  };
}

function toResult(j: Json): CodeResult {
  const r: CodeResult = { isMainResult: !!j.is_main_result, raw: j };
  if (typeof j.text === "string") r.text = j.text;
  for (const f of FORMATS) if (j[f] !== undefined && j[f] !== null) (r as Json)[f] = j[f];
  if (j.chart && typeof j.chart === "object") r.chart = j.chart;
  return r;
}

const idOf = (c: string | CodeContext): string => (typeof c === "string" ? c : c.id);

/** `sandbox.code`: code contexts and runs. */
export class Code {
  constructor(private readonly sbx: Sandbox) {}

  /** Starts an interpreter (ready when this resolves). */
  async createContext(opts: CreateCodeContextOptions = {}): Promise<CodeContext> {
    const json: Json = { language: opts.language ?? "python" };
    if (opts.cwd !== undefined) json.cwd = opts.cwd;
    if (opts.env !== undefined) json.env = opts.env;
    return toContext(await this.sbx.req<Json>("POST", "/code/contexts", { json }));
  }

  async listContexts(): Promise<CodeContext[]> {
    const j = await this.sbx.req<Json>("GET", "/code/contexts");
    return (j.items as Json[]).map(toContext);
  }

  async getContext(context: string | CodeContext): Promise<CodeContext> {
    return toContext(await this.sbx.req<Json>("GET", `/code/contexts/${encodeURIComponent(idOf(context))}`));
  }

  /** Kills the interpreter and everything it started. */
  async deleteContext(context: string | CodeContext): Promise<void> {
    await this.sbx.req<Json>("DELETE", `/code/contexts/${encodeURIComponent(idOf(context))}`);
  }

  /** A fresh interpreter: the context's state and execution count are reset. */
  async restartContext(context: string | CodeContext): Promise<CodeContext> {
    const path = `/code/contexts/${encodeURIComponent(idOf(context))}/restart`;
    return toContext(await this.sbx.req<Json>("POST", path, { json: {} }));
  }

  /** A run's events as they arrive; the last is `end`, with the whole `Execution`. */
  async *runStream(code: string, opts: RunCodeOptions = {}): AsyncGenerator<CodeEvent> {
    const json: Json = { code };
    if (opts.language !== undefined) json.language = opts.language;
    if (opts.context !== undefined) json.context_id = idOf(opts.context);
    if (opts.env !== undefined) json.env = opts.env;
    if (opts.timeoutS !== undefined) json.timeout_s = opts.timeoutS;
    const res = await this.sbx.http.raw("POST", this.sbx.path("/code/run"), {
      json,
      headers: { Accept: "text/event-stream" },
      signal: opts.signal,
      timeoutMs: timeoutFor(opts.timeoutS ?? DEFAULT_RUN_S),
    });
    const ex: Execution = { results: [], logs: { stdout: [], stderr: [] }, timedOut: false, truncated: false, restarted: false };
    if (!res.body) throw new SandfortError("the run answered no stream", { code: "protocol" });
    for await (const ev of parseSse(res.body)) {
      let d: Json = {};
      try {
        d = ev.data ? (JSON.parse(ev.data) as Json) : {};
      } catch {
        d = {};
      }
      if (ev.event === "stdout" || ev.event === "stderr") {
        const text = typeof d.text === "string" ? d.text : "";
        ex.logs[ev.event].push(text);
        (ev.event === "stdout" ? opts.onStdout : opts.onStderr)?.(text);
        yield { type: ev.event, text };
      } else if (ev.event === "result") {
        const result = toResult(d);
        ex.results.push(result);
        if (result.isMainResult && result.text !== undefined) ex.text = result.text;
        opts.onResult?.(result);
        yield { type: "result", result };
      } else if (ev.event === "error") {
        ex.error = { name: String(d.name ?? ""), value: String(d.value ?? ""), traceback: String(d.traceback ?? "") };
        opts.onError?.(ex.error);
        yield { type: "error", error: ex.error };
      } else if (ev.event === "end") {
        ex.contextId = d.context_id;
        ex.executionCount = d.execution_count;
        ex.timedOut = !!d.timed_out;
        ex.truncated = !!d.truncated;
        ex.restarted = !!d.restarted;
        ex.durationMs = d.duration_ms;
        yield { type: "end", execution: ex };
        return;
      } else if (ev.event === "failure") {
        const e = (d.error ?? {}) as Json;
        throw new SandfortError(`the run failed: ${e.message ?? ev.data}`, { code: e.code ?? "internal" });
      }
    }
    throw new SandfortError("the run's stream ended without an end event", { code: "protocol" });
  }

  /**
   * Runs `code` in `context` (or the default context of `language`, `python` when neither is
   * given) and resolves to the `Execution`; the handlers see each event as it arrives. An
   * exception in the code is `Execution.error`, not thrown.
   */
  async run(code: string, opts: RunCodeOptions = {}): Promise<Execution> {
    for await (const ev of this.runStream(code, opts)) if (ev.type === "end") return ev.execution;
    throw new SandfortError("the run's stream ended without an end event", { code: "protocol" });
  }
}
