/**
 * `sandbox.sessions`: persistent shells, whose cwd, exported variables, functions and background
 * jobs persist between calls.
 */
import { runProcess, streamCall } from "./processes.js";
import { camel, enc, type Json } from "./resource.js";
import type { Sandbox } from "./sandboxes.js";
import type { CommandResult, OutputHandlers, SessionInfo, StreamEvent } from "./types.js";

export interface SessionRunOptions extends OutputHandlers {
  timeoutS?: number;
}

/** Persistent shells: cwd, exported variables, functions and background jobs persist between calls. */
export class Sessions {
  constructor(private readonly sbx: Sandbox) {}

  async create(name: string): Promise<Session> {
    await this.sbx.req<Json>("POST", "/sessions", { json: { name } });
    return new Session(this.sbx, name);
  }

  /** A handle on a session by name (`default` always exists); no request is made. */
  get(name = "default"): Session {
    return new Session(this.sbx, name);
  }

  async list(): Promise<SessionInfo[]> {
    const j = await this.sbx.req<Json>("GET", "/sessions");
    return (j.items as Json[]).map((s) => camel<SessionInfo>(s));
  }

  /** Ends the shell and every job it started. */
  async delete(name: string): Promise<void> {
    await this.sbx.req("DELETE", `/sessions/${enc(name)}`);
  }

  /** Runs a command in a session (default: `default`). */
  run(command: string, opts: SessionRunOptions & { session?: string } = {}): Promise<CommandResult> {
    return this.get(opts.session ?? "default").run(command, opts);
  }
}

/**
 * The shell's state is what a session is for: its loss is told as a process warning
 * (`SessionRestartedWarning`, code `SANDFORT_SESSION_RESTARTED`; `process.on("warning")` sees it,
 * Node prints it to stderr) or, where there is no `process`, with console.warn.
 */
function warnRestarted(session: string, sandboxId: string): void {
  const message =
    `the shell of session "${session}" in ${sandboxId} was restarted (a command ended it, e.g. \`exit\`): ` +
    "the working directory, variables and background jobs of earlier commands are gone";
  const proc = (globalThis as { process?: { emitWarning?: (m: string, o: object) => void } }).process;
  if (typeof proc?.emitWarning === "function") {
    proc.emitWarning(message, { type: "SessionRestartedWarning", code: "SANDFORT_SESSION_RESTARTED" });
  } else {
    console.warn(`SessionRestartedWarning: ${message}`);
  }
}

export class Session {
  constructor(
    private readonly sbx: Sandbox,
    readonly name: string,
  ) {}

  private execSub(): string {
    return `/sessions/${enc(this.name)}/exec`;
  }

  /**
   * Runs a command in this shell; `exit 3` gives exitCode 3 and sessionRestarted true, and a
   * SessionRestartedWarning is emitted.
   */
  async run(command: string, opts: SessionRunOptions = {}): Promise<CommandResult> {
    const body: Json = { command };
    if (opts.timeoutS !== undefined) body.timeout_s = opts.timeoutS;
    const r = await runProcess(this.sbx, this.execSub(), body, opts);
    if (r.sessionRestarted) warnRestarted(this.name, this.sbx.id);
    return r;
  }

  /** run as a stream of events; the exit event carries sessionRestarted (and the warning is emitted). */
  async *stream(command: string, opts: SessionRunOptions = {}): AsyncGenerator<StreamEvent> {
    const body: Json = { command };
    if (opts.timeoutS !== undefined) body.timeout_s = opts.timeoutS;
    for await (const ev of streamCall(this.sbx.http, this.sbx.path(this.execSub()), body, { signal: opts.signal })) {
      if (ev.type === "exit" && ev.sessionRestarted) warnRestarted(this.name, this.sbx.id);
      yield ev;
    }
  }

  delete(): Promise<void> {
    return this.sbx.sessions.delete(this.name);
  }
}
