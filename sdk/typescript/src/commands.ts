/**
 * `sandbox.commands`: commands run to their end (processes.ts runs them) and background commands,
 * started at once, their output kept (newest 1 MiB per stream) to read, follow, feed and signal
 * later (`CommandHandle`).
 */
import { SandfortError } from "./errors.js";
import { collect, execBody, runProcess, streamCall } from "./processes.js";
import { camel, enc, type Json } from "./resource.js";
import type { Sandbox } from "./sandboxes.js";
import type { CommandInfo, CommandLogs, CommandResult, OutputHandlers, RunOptions, Signal, StreamEvent } from "./types.js";

/** Processes: one-shot commands (a fresh process each call) and background commands. */
export class Commands {
  constructor(private readonly sbx: Sandbox) {}

  /**
   * Runs a command to its end: a string runs under `/bin/sh -c`, an array is an argv.
   * With `background: true`, starts it and returns a CommandHandle at once.
   * A non-zero exit is returned as `exitCode`, never thrown.
   */
  run(command: string | string[], opts?: RunOptions & { background?: false }): Promise<CommandResult>;
  run(command: string, opts: { background: true; cwd?: string; env?: Record<string, string> }): Promise<CommandHandle>;
  async run(
    command: string | string[],
    opts: RunOptions & { background?: boolean } = {},
  ): Promise<CommandResult | CommandHandle> {
    if (opts.background) {
      if (Array.isArray(command)) {
        throw new SandfortError("background commands take a shell string", { code: "invalid_argument" });
      }
      return this.start(command, opts);
    }
    const streamed = !!(opts.onStdout || opts.onStderr) && !opts.binary;
    return runProcess(this.sbx, "/process/exec", execBody(command, opts), opts, streamed);
  }

  /** Runs a command and yields its output as it is produced, then one `exit` event. */
  stream(command: string | string[], opts: RunOptions = {}): AsyncGenerator<StreamEvent> {
    const body = execBody(command, { ...opts, binary: false });
    return streamCall(this.sbx.http, this.sbx.path("/process/exec"), body, { signal: opts.signal });
  }

  /** Starts a background command (its own process group; output kept, newest 1 MiB per stream). */
  async start(command: string, opts: { cwd?: string; env?: Record<string, string> } = {}): Promise<CommandHandle> {
    const body: Json = { command };
    if (opts.cwd !== undefined) body.cwd = opts.cwd;
    if (opts.env !== undefined) body.env = opts.env;
    const j = await this.sbx.req<Json>("POST", "/commands", { json: body });
    return new CommandHandle(this.sbx, toCommandInfo({ command, ...j }));
  }

  async list(): Promise<CommandInfo[]> {
    const j = await this.sbx.req<Json>("GET", "/commands");
    return (j.items as Json[]).map(toCommandInfo);
  }

  /** A handle on an existing background command. */
  async connect(commandId: string): Promise<CommandHandle> {
    const h = new CommandHandle(this.sbx, { id: commandId } as CommandInfo);
    await h.refresh();
    return h;
  }

  async get(commandId: string): Promise<CommandInfo> {
    return toCommandInfo(await this.sbx.req<Json>("GET", `/commands/${enc(commandId)}`));
  }

  async logs(commandId: string): Promise<CommandLogs> {
    return camel<CommandLogs>(await this.sbx.req<Json>("GET", `/commands/${enc(commandId)}/logs`));
  }

  async kill(commandId: string, signal: Signal = "KILL"): Promise<void> {
    await this.sbx.req("POST", `/commands/${enc(commandId)}/kill`, { json: { signal } });
  }

  async sendStdin(commandId: string, data: string | Uint8Array, opts: { eof?: boolean } = {}): Promise<void> {
    const body = typeof data === "string" ? new TextEncoder().encode(data) : data;
    await this.sbx.req("POST", `/commands/${enc(commandId)}/stdin`, {
      body,
      query: { eof: opts.eof ? "true" : undefined },
    });
  }
}

function toCommandInfo(j: Json): CommandInfo {
  return {
    id: j.id,
    pid: j.pid,
    state: j.state,
    command: j.command,
    exitCode: j.exit_code ?? null,
    startedAt: j.started_at,
    endedAt: j.ended_at ?? null,
  };
}

/** A background command. */
export class CommandHandle {
  info: CommandInfo;
  constructor(
    private readonly sbx: Sandbox,
    info: CommandInfo,
  ) {
    this.info = info;
  }
  get id(): string {
    return this.info.id;
  }
  get pid(): number {
    return this.info.pid;
  }
  async refresh(): Promise<CommandInfo> {
    this.info = await this.sbx.commands.get(this.info.id);
    return this.info;
  }
  logs(): Promise<CommandLogs> {
    return this.sbx.commands.logs(this.info.id);
  }
  /** What is buffered, then new output, then one `exit` event. */
  streamLogs(opts: { signal?: AbortSignal } = {}): AsyncGenerator<StreamEvent> {
    return streamCall(this.sbx.http, this.sbx.path(`/commands/${enc(this.info.id)}/logs`), undefined, {
      method: "GET",
      query: { follow: "true" },
      signal: opts.signal,
    });
  }
  /** Follows the output until the command exits; a non-zero exit is a value. */
  async wait(opts: OutputHandlers = {}): Promise<CommandResult> {
    const r = await collect(this.streamLogs({ signal: opts.signal }), opts);
    this.info = { ...this.info, state: "exited", exitCode: r.exitCode };
    return r;
  }
  kill(signal: Signal = "KILL"): Promise<void> {
    return this.sbx.commands.kill(this.info.id, signal);
  }
  sendStdin(data: string | Uint8Array, opts: { eof?: boolean } = {}): Promise<void> {
    return this.sbx.commands.sendStdin(this.info.id, data, opts);
  }
  closeStdin(): Promise<void> {
    return this.sbx.commands.sendStdin(this.info.id, new Uint8Array(0), { eof: true });
  }
}
