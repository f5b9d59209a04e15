/**
 * Processes run to their end in a sandbox, each a fresh process (`sandbox.commands.run`,
 * `sandbox.codeRun`) or a session's shell (sessions.ts): the result is a value (a non-zero exit is
 * `exitCode`, never thrown), or, with output handlers or as a stream, the output as it is produced.
 */
import { SandfortError } from "./errors.js";
import { parseSse, type Query, type Transport } from "./http.js";
import type { Json } from "./resource.js";
import type { Sandbox } from "./sandboxes.js";
import type { CodeLanguage, CodeRunOptions, CommandResult, OutputHandlers, RunOptions, StreamEvent } from "./types.js";

function fromB64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

export function toResult(j: Json): CommandResult {
  const r: CommandResult = {
    exitCode: j.exit_code,
    stdout: j.stdout ?? "",
    stderr: j.stderr ?? "",
    durationMs: j.duration_ms ?? 0,
    timedOut: !!j.timed_out,
    truncated: !!j.truncated,
  };
  if (typeof j.stdout_b64 === "string") r.stdoutBytes = fromB64(j.stdout_b64);
  if (typeof j.stderr_b64 === "string") r.stderrBytes = fromB64(j.stderr_b64);
  if (j.session_restarted !== undefined) r.sessionRestarted = !!j.session_restarted;
  return r;
}

/** Streams an exec-like call as events. */
export async function* streamCall(
  http: Transport,
  path: string,
  body: Json | undefined,
  opts: { method?: string; query?: Query; signal?: AbortSignal } = {},
): AsyncGenerator<StreamEvent> {
  const res = await http.raw(opts.method ?? "POST", path, {
    json: body,
    query: opts.query,
    headers: { Accept: "text/event-stream" },
    signal: opts.signal,
  });
  if (!res.body) return;
  for await (const ev of parseSse(res.body)) {
    let d: Json = {};
    try {
      d = ev.data ? (JSON.parse(ev.data) as Json) : {};
    } catch {
      d = { data: ev.data };
    }
    if (ev.event === "stdout" || ev.event === "stderr") {
      yield { type: ev.event, data: typeof d.data === "string" ? d.data : "" };
    } else if (ev.event === "exit") {
      const exit: StreamEvent = {
        type: "exit",
        exitCode: d.exit_code,
        timedOut: !!d.timed_out,
        truncated: !!d.truncated,
        durationMs: d.duration_ms ?? 0,
      };
      if (d.session_restarted !== undefined) exit.sessionRestarted = !!d.session_restarted;
      yield exit;
      return;
    } else if (ev.event === "error") {
      const e = (d.error ?? d) as Json;
      yield { type: "error", code: e.code ?? "internal", message: e.message ?? ev.data };
      return;
    }
  }
}

/** Drains an event stream into a CommandResult, calling the handlers on the way. */
export async function collect(events: AsyncIterable<StreamEvent>, h: OutputHandlers): Promise<CommandResult> {
  let stdout = "";
  let stderr = "";
  for await (const ev of events) {
    if (ev.type === "stdout") {
      stdout += ev.data;
      h.onStdout?.(ev.data);
    } else if (ev.type === "stderr") {
      stderr += ev.data;
      h.onStderr?.(ev.data);
    } else if (ev.type === "exit") {
      const r: CommandResult = {
        exitCode: ev.exitCode,
        stdout,
        stderr,
        durationMs: ev.durationMs,
        timedOut: ev.timedOut,
        truncated: ev.truncated,
      };
      if (ev.sessionRestarted !== undefined) r.sessionRestarted = ev.sessionRestarted;
      return r;
    } else if (ev.type === "error") {
      throw new SandfortError(`stream failed: ${ev.message}`, { code: ev.code });
    }
  }
  throw new SandfortError("the stream ended without an exit event", { code: "protocol" });
}

export function timeoutFor(timeoutS: number | undefined): number | undefined {
  return timeoutS !== undefined ? (timeoutS + 30) * 1000 : undefined;
}

export function execBody(command: string | string[], opts: RunOptions): Json {
  const body: Json = Array.isArray(command) ? { argv: command } : { command };
  if (opts.cwd !== undefined) body.cwd = opts.cwd;
  if (opts.env !== undefined) body.env = opts.env;
  if (opts.stdin !== undefined) body.stdin = opts.stdin;
  if (opts.timeoutS !== undefined) body.timeout_s = opts.timeoutS;
  if (opts.binary) body.binary = true;
  return body;
}

/**
 * Runs a process call at `sub` (`/process/exec`) to its end: streamed to the handlers when
 * `streamed` (by default: when there are any), else one JSON answer.
 */
export async function runProcess(
  sbx: Sandbox,
  sub: string,
  body: Json,
  opts: OutputHandlers & { timeoutS?: number },
  streamed = !!(opts.onStdout || opts.onStderr),
): Promise<CommandResult> {
  if (streamed) return collect(streamCall(sbx.http, sbx.path(sub), body, { signal: opts.signal }), opts);
  return toResult(await sbx.req<Json>("POST", sub, { json: body, signal: opts.signal, timeoutMs: timeoutFor(opts.timeoutS) }));
}

function codeBody(language: CodeLanguage, code: string, opts: CodeRunOptions): Json {
  const body: Json = { language, code };
  if (opts.argv !== undefined) body.argv = opts.argv;
  if (opts.env !== undefined) body.env = opts.env;
  if (opts.timeoutS !== undefined) body.timeout_s = opts.timeoutS;
  return body;
}

/** `sandbox.codeRun`. */
export function codeRun(sbx: Sandbox, language: CodeLanguage, code: string, opts: CodeRunOptions): Promise<CommandResult> {
  return runProcess(sbx, "/process/code-run", codeBody(language, code, opts), opts);
}

/** `sandbox.codeStream`. */
export function codeStream(sbx: Sandbox, language: CodeLanguage, code: string, opts: CodeRunOptions): AsyncGenerator<StreamEvent> {
  return streamCall(sbx.http, sbx.path("/process/code-run"), codeBody(language, code, opts), { signal: opts.signal });
}
