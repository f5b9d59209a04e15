import { cliConfigPath, env, sameServer, storedLogin } from "./cliLogin.js";
import { Audit } from "./audit.js";
import { SandfortError } from "./errors.js";
import { Guardrails, type LimitsUpdate, type OrgLimits, type StopAllReport } from "./guardrails.js";
import { Transport, parseSse, type Query, type RequestOptions, type TokenProvider } from "./http.js";
import { PtyApi } from "./pty.js";
import type {
  ArchiveResult,
  CodeLanguage,
  CodeRunOptions,
  CommandInfo,
  CommandLogs,
  CommandResult,
  CreateSandboxOptions,
  FileInfo,
  GitAddOptions,
  GitBranchesResult,
  GitCheckoutOptions,
  GitCloneOptions,
  GitCommitOptions,
  GitCredentials,
  GitFileStatus,
  GitOp,
  GitOptions,
  GitPullOptions,
  GitPushOptions,
  GitResult,
  GitStatusResult,
  ListSandboxesOptions,
  ListSnapshotsOptions,
  ListVolumesOptions,
  OutputHandlers,
  Page,
  PortInfo,
  PreviewLink,
  RunOptions,
  SandboxInfo,
  SandboxMetrics,
  SessionInfo,
  Signal,
  Snapshot,
  StreamEvent,
  UpdateSandboxOptions,
  Volume,
  VolumeMount,
  WhoAmI,
  WriteInfo,
} from "./types.js";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

export interface ClientOptions {
  /** e.g. `http://127.0.0.1:8080`; default: env SANDFORT_BASE_URL, then the `sandfort` CLI's stored login. */
  baseUrl?: string;
  /**
   * `sfk_…`; default: env SANDFORT_API_KEY (unless `tokenProvider` is given), then the `sandfort`
   * CLI's stored login when it is for the same base URL (its key goes only to its own server).
   */
  apiKey?: string;
  /**
   * Instead of an API key: returns a bearer token (e.g. an OIDC access token). Called before
   * every request, so it should cache the token until it nears expiry; after a 401 it is called
   * once more and the request repeated once (not for a streamed body).
   */
  tokenProvider?: TokenProvider;
  /** Default per-request timeout in ms; 0 (default) leaves it to the runtime. */
  timeoutMs?: number;
  /** Extra headers on every request. */
  headers?: Record<string, string>;
  /** A fetch implementation (default: the global one). */
  fetch?: typeof fetch;
}

function enc(s: string): string {
  return encodeURIComponent(s);
}

/** Shallow snake_case → camelCase of an object's own keys (values untouched). */
function camel<T>(o: Json): T {
  const out: Json = {};
  for (const [k, v] of Object.entries(o)) out[k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase())] = v;
  return out as T;
}

function fromB64(s: string): Uint8Array {
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

function toSandboxInfo(j: Json): SandboxInfo {
  const r = (j.resources ?? {}) as Json;
  return {
    id: j.id,
    name: j.name ?? null,
    state: j.state,
    snapshot: j.snapshot,
    createdAt: j.created_at,
    updatedAt: j.updated_at ?? null,
    expiresAt: j.expires_at ?? null,
    ttlS: j.ttl_s ?? null,
    idleTimeoutS: j.idle_timeout_s ?? null,
    resources: { cpus: r.cpus, memoryMb: r.memory_mb, pids: r.pids },
    egressAllowlist: j.egress_allowlist ?? [],
    labels: j.labels ?? {},
    envKeys: j.env_keys ?? [],
    user: j.user ?? null,
    workdir: j.workdir ?? null,
    publicPreview: !!j.public_preview,
    volumes: ((j.volumes ?? []) as Json[]).map((v) => ({ name: v.name, mountPath: v.mount_path, readOnly: !!v.read_only })),
    previewUrlTemplate: j.preview_url_template ?? null,
    errorMessage: j.error_message ?? null,
  };
}

function toVolume(j: Json): Volume {
  return {
    id: j.id,
    name: j.name,
    sizeMb: j.size_mb ?? null,
    state: j.state,
    createdAt: j.created_at,
    updatedAt: j.updated_at ?? null,
  };
}

function toSnapshot(j: Json): Snapshot {
  return {
    id: j.id,
    name: j.name,
    sizeBytes: j.size_bytes,
    sourceSandboxId: j.source_sandbox_id,
    state: j.state,
    createdAt: j.created_at,
    updatedAt: j.updated_at ?? null,
  };
}

function mountBody(v: VolumeMount): Json {
  const m: Json = { name: v.name, mount_path: v.mountPath };
  if (v.readOnly !== undefined) m.read_only = v.readOnly;
  return m;
}

function toResult(j: Json): CommandResult {
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

function createBody(o: CreateSandboxOptions): Json {
  const b: Json = { wait: o.wait ?? true };
  if (o.snapshot !== undefined) b.snapshot = o.snapshot;
  if (o.name !== undefined) b.name = o.name;
  if (o.env !== undefined) b.env = o.env;
  if (o.labels !== undefined) b.labels = o.labels;
  if (o.resources !== undefined) {
    const r: Json = {};
    if (o.resources.cpus !== undefined) r.cpus = o.resources.cpus;
    if (o.resources.memoryMb !== undefined) r.memory_mb = o.resources.memoryMb;
    if (o.resources.pids !== undefined) r.pids = o.resources.pids;
    b.resources = r;
  }
  if (o.egressAllowlist !== undefined) b.egress_allowlist = o.egressAllowlist;
  if (o.ttlS !== undefined) b.ttl_s = o.ttlS;
  if (o.idleTimeoutS !== undefined) b.idle_timeout_s = o.idleTimeoutS;
  if (o.user !== undefined) b.user = o.user;
  if (o.workdir !== undefined) b.workdir = o.workdir;
  if (o.publicPreview !== undefined) b.public_preview = o.publicPreview;
  if (o.volumes !== undefined) b.volumes = o.volumes.map(mountBody);
  return b;
}

const CLIENT_KEYS = ["baseUrl", "apiKey", "tokenProvider", "timeoutMs", "headers", "fetch"] as const;

function splitOptions<T extends object>(o: (T & ClientOptions) | undefined): [ClientOptions, T] {
  const client: Json = {};
  const rest: Json = {};
  for (const [k, v] of Object.entries(o ?? {})) {
    if ((CLIENT_KEYS as readonly string[]).includes(k)) client[k] = v;
    else rest[k] = v;
  }
  return [client as ClientOptions, rest as T];
}

/** The entry point: one daemon, one API key or token provider. */
export class SandfortClient {
  /** @internal */
  readonly http: Transport;
  /** The organization's audit chain, its checkpoints and their verification. */
  readonly audit: Audit;
  private readonly guardrails: Guardrails;

  constructor(opts: ClientOptions = {}) {
    let baseUrl = opts.baseUrl ?? env("SANDFORT_BASE_URL");
    let tokenProvider = opts.tokenProvider;
    let apiKey = tokenProvider ? undefined : (opts.apiKey ?? env("SANDFORT_API_KEY"));
    const login = !baseUrl || !(apiKey || tokenProvider) ? storedLogin() : undefined;
    const where = cliConfigPath() ?? "HOME is not set";
    if (!baseUrl) {
      if (!login) {
        throw new SandfortError(
          `no base URL: pass { baseUrl }, set SANDFORT_BASE_URL or run \`sandfort login\` (no stored login in ${where})`,
          { code: "config" },
        );
      }
      baseUrl = login.baseUrl;
    }
    if (tokenProvider !== undefined) {
      if (typeof tokenProvider !== "function") {
        throw new SandfortError("tokenProvider must be a function returning a bearer token", { code: "config" });
      }
      if (opts.apiKey) throw new SandfortError("pass { apiKey } or { tokenProvider }, not both", { code: "config" });
    } else if (!apiKey) {
      if (!login || !sameServer(login.baseUrl, baseUrl)) {
        throw new SandfortError(
          "no API key: pass { apiKey } or { tokenProvider }, set SANDFORT_API_KEY or run `sandfort login` " +
            (login ? `(the stored login is not for ${baseUrl})` : `(no stored login in ${where})`),
          { code: "config" },
        );
      }
      apiKey = login.apiKey;
      tokenProvider = login.tokenProvider;
    }
    this.http = new Transport({
      baseUrl,
      apiKey,
      tokenProvider,
      timeoutMs: opts.timeoutMs ?? 0,
      headers: opts.headers,
      fetch: opts.fetch,
    });
    this.audit = new Audit(this.http, () => this.whoami());
    this.guardrails = new Guardrails(this.http, () => this.whoami());
  }

  get baseUrl(): string {
    return this.http.baseUrl;
  }

  /**
   * Creates a sandbox and (by default) waits until it is started. The organization's guardrails
   * may refuse it: `quota_exceeded` (429), `image_not_allowed` (403), `conflict` (409) while its
   * kill switch is on.
   */
  async createSandbox(opts: CreateSandboxOptions = {}): Promise<Sandbox> {
    const j = await this.http.json<Json>("POST", "/v1/sandboxes", { json: createBody(opts) });
    return new Sandbox(this, toSandboxInfo(j));
  }

  /** An existing sandbox, by id or name. */
  async getSandbox(idOrName: string, opts: { waitFor?: string; timeoutS?: number } = {}): Promise<Sandbox> {
    return new Sandbox(this, await this.getSandboxInfo(idOrName, opts));
  }

  /** Alias of getSandbox. */
  connect(idOrName: string): Promise<Sandbox> {
    return this.getSandbox(idOrName);
  }

  async getSandboxInfo(idOrName: string, opts: { waitFor?: string; timeoutS?: number } = {}): Promise<SandboxInfo> {
    const j = await this.http.json<Json>("GET", `/v1/sandboxes/${enc(idOrName)}`, {
      query: { wait_for: opts.waitFor, timeout_s: opts.timeoutS },
    });
    return toSandboxInfo(j);
  }

  /** One page of sandboxes. */
  async listSandboxes(opts: ListSandboxesOptions = {}): Promise<Page<SandboxInfo>> {
    const label = opts.labels
      ? Object.entries(opts.labels)
          .map(([k, v]) => `${k}:${v}`)
          .join(",")
      : undefined;
    const j = await this.http.json<Json>("GET", "/v1/sandboxes", {
      query: { state: opts.state, label, limit: opts.limit, cursor: opts.cursor },
    });
    return { items: (j.items as Json[]).map(toSandboxInfo), nextCursor: j.next_cursor ?? null };
  }

  /** Deletes a sandbox; false when it did not exist. */
  async deleteSandbox(idOrName: string): Promise<boolean> {
    try {
      await this.http.json("DELETE", `/v1/sandboxes/${enc(idOrName)}`);
      return true;
    } catch (e) {
      if (e instanceof SandfortError && e.status === 404) return false;
      throw e;
    }
  }

  /** Creates a named volume of the organization (a taken name: `conflict`, 409). */
  async createVolume(name: string): Promise<Volume> {
    return toVolume(await this.http.json<Json>("POST", "/v1/volumes", { json: { name } }));
  }

  /** One page of volumes, by name. */
  async listVolumes(opts: ListVolumesOptions = {}): Promise<Page<Volume>> {
    const j = await this.http.json<Json>("GET", "/v1/volumes", { query: { limit: opts.limit, cursor: opts.cursor } });
    return { items: (j.items as Json[]).map(toVolume), nextCursor: j.next_cursor ?? null };
  }

  /** A volume by name or id. */
  async getVolume(nameOrId: string): Promise<Volume> {
    return toVolume(await this.http.json<Json>("GET", `/v1/volumes/${enc(nameOrId)}`));
  }

  /**
   * Deletes a volume and its data; false when it did not exist. While a sandbox that is not
   * deleted mounts it: `conflict` (409).
   */
  async deleteVolume(nameOrId: string): Promise<boolean> {
    try {
      await this.http.json("DELETE", `/v1/volumes/${enc(nameOrId)}`);
      return true;
    } catch (e) {
      if (e instanceof SandfortError && e.status === 404) return false;
      throw e;
    }
  }

  /**
   * Commits a sandbox's filesystem (by id, name or object; started, paused or stopped) as a
   * snapshot of the organization called `name`. A taken name, or a sandbox in another state:
   * `conflict` (409); an unknown sandbox: `not_found` (404).
   */
  async createSnapshot(sandbox: string | Sandbox, name: string): Promise<Snapshot> {
    const sandbox_id = typeof sandbox === "string" ? sandbox : sandbox.id;
    return toSnapshot(await this.http.json<Json>("POST", "/v1/snapshots", { json: { sandbox_id, name } }));
  }

  /** One page of snapshots, by name. */
  async listSnapshots(opts: ListSnapshotsOptions = {}): Promise<Page<Snapshot>> {
    const j = await this.http.json<Json>("GET", "/v1/snapshots", { query: { limit: opts.limit, cursor: opts.cursor } });
    return { items: (j.items as Json[]).map(toSnapshot), nextCursor: j.next_cursor ?? null };
  }

  /** A snapshot by name or id. */
  async getSnapshot(nameOrId: string): Promise<Snapshot> {
    return toSnapshot(await this.http.json<Json>("GET", `/v1/snapshots/${enc(nameOrId)}`));
  }

  /**
   * Deletes a snapshot; false when it did not exist. While a sandbox that is not deleted was
   * created from it: `conflict` (409).
   */
  async deleteSnapshot(nameOrId: string): Promise<boolean> {
    try {
      await this.http.json("DELETE", `/v1/snapshots/${enc(nameOrId)}`);
      return true;
    } catch (e) {
      if (e instanceof SandfortError && e.status === 404) return false;
      throw e;
    }
  }

  /** The organization's limits, their use and its kill switch (admin). `org`: an id or a name; absent, your own. */
  orgLimits(org?: string): Promise<OrgLimits> {
    return this.guardrails.limits(org);
  }

  /** Superadmin: sets an organization's limits. Absent fields stay as they are; `null` resets one to the configured default. */
  setOrgLimits(org: string, update: LimitsUpdate): Promise<OrgLimits> {
    return this.guardrails.setLimits(org, update);
  }

  /**
   * The kill switch: stops every started sandbox of the organization at once; new and restarted
   * ones are refused (`conflict`, 409) until liftStopAll.
   */
  stopAll(org?: string): Promise<StopAllReport> {
    return this.guardrails.stopAll(org);
  }

  /** Lifts the kill switch (one the superadmin threw: superadmin only, else `permission_denied`). */
  liftStopAll(org?: string): Promise<void> {
    return this.guardrails.liftStopAll(org);
  }

  async whoami(): Promise<WhoAmI> {
    return camel<WhoAmI>(await this.http.json<Json>("GET", "/v1/whoami"));
  }

  /** GET /healthz → true when the daemon serves. */
  async health(): Promise<boolean> {
    const j = await this.http.json<Json>("GET", "/healthz");
    return j?.status === "ok";
  }
}

/** Streams an exec-like call as events. */
async function* streamCall(
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
async function collect(events: AsyncIterable<StreamEvent>, h: OutputHandlers): Promise<CommandResult> {
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

function timeoutFor(timeoutS: number | undefined): number | undefined {
  return timeoutS !== undefined ? (timeoutS + 30) * 1000 : undefined;
}

/** A sandbox: an isolated container with its own filesystem, processes, shells and network policy. */
export class Sandbox {
  readonly client: SandfortClient;
  /** The last known state of the sandbox (refresh() to update). */
  info: SandboxInfo;
  readonly commands: Commands;
  readonly files: Files;
  readonly sessions: Sessions;
  readonly pty: PtyApi;
  /** Git in the sandbox: clone, pull, push, add, commit, checkout, branches, status. */
  readonly git: Git;

  /** @internal use SandfortClient.createSandbox / Sandbox.create / Sandbox.connect */
  constructor(client: SandfortClient, info: SandboxInfo) {
    this.client = client;
    this.info = info;
    this.commands = new Commands(this);
    this.files = new Files(this);
    this.sessions = new Sessions(this);
    this.git = new Git(this);
    this.pty = new PtyApi(client.http, `/v1/sandboxes/${enc(info.id)}/pty`);
  }

  /** Creates a sandbox with a client configured from the options or SANDFORT_BASE_URL / SANDFORT_API_KEY. */
  static async create(opts?: CreateSandboxOptions & ClientOptions): Promise<Sandbox> {
    const [clientOpts, createOpts] = splitOptions<CreateSandboxOptions>(opts);
    return new SandfortClient(clientOpts).createSandbox(createOpts);
  }

  /** An existing sandbox by id or name, with a client configured from the options or the environment. */
  static async connect(idOrName: string, opts?: ClientOptions): Promise<Sandbox> {
    return new SandfortClient(opts).getSandbox(idOrName);
  }

  get id(): string {
    return this.info.id;
  }
  get name(): string | null {
    return this.info.name;
  }
  get state(): string {
    return this.info.state;
  }

  /** @internal */
  get http(): Transport {
    return this.client.http;
  }
  /** @internal */
  path(sub = ""): string {
    return `/v1/sandboxes/${enc(this.info.id)}${sub}`;
  }
  /** @internal */
  req<T>(method: string, sub: string, opts?: RequestOptions): Promise<T> {
    return this.http.json<T>(method, this.path(sub), opts);
  }

  async refresh(): Promise<SandboxInfo> {
    this.info = toSandboxInfo(await this.req<Json>("GET", ""));
    return this.info;
  }

  /** Blocks (server side, ≤ 300 s) until the sandbox reaches `state` (waiting for started also returns on error). */
  async waitFor(state = "started", timeoutS = 60): Promise<SandboxInfo> {
    this.info = toSandboxInfo(await this.req<Json>("GET", "", { query: { wait_for: state, timeout_s: timeoutS } }));
    return this.info;
  }

  async stop(): Promise<SandboxInfo> {
    this.info = toSandboxInfo(await this.req<Json>("POST", "/stop"));
    return this.info;
  }

  async start(): Promise<SandboxInfo> {
    this.info = toSandboxInfo(await this.req<Json>("POST", "/start"));
    return this.info;
  }

  /**
   * Freezes every process (memory kept): state `paused`; commands, files and sessions then answer
   * 409 until `resume()`. Already paused: unchanged; not started: 409.
   */
  async pause(): Promise<SandboxInfo> {
    this.info = toSandboxInfo(await this.req<Json>("POST", "/pause"));
    return this.info;
  }

  /** Lets a paused sandbox's processes carry on where they were: state `started`. Already started: unchanged; not paused: 409. */
  async resume(): Promise<SandboxInfo> {
    this.info = toSandboxInfo(await this.req<Json>("POST", "/resume"));
    return this.info;
  }

  /** Deletes the sandbox (container, files, preview URLs, proxy credential). False if it was already gone. */
  async kill(): Promise<boolean> {
    return this.client.deleteSandbox(this.info.id);
  }

  /** Deletes the sandbox; throws SandfortError (404) if it was already gone. */
  async delete(): Promise<void> {
    await this.req("DELETE", "");
  }

  /** PATCH: labels, ttl (seconds from now), idle timeout, egress allowlist (applies to the proxy's next connection). */
  async update(opts: UpdateSandboxOptions): Promise<SandboxInfo> {
    const body: Json = {};
    if (opts.labels !== undefined) body.labels = opts.labels;
    if (opts.ttlS !== undefined) body.ttl_s = opts.ttlS;
    if (opts.idleTimeoutS !== undefined) body.idle_timeout_s = opts.idleTimeoutS;
    if (opts.egressAllowlist !== undefined) body.egress_allowlist = opts.egressAllowlist;
    this.info = toSandboxInfo(await this.req<Json>("PATCH", "", { json: body }));
    return this.info;
  }

  /** Replaces the egress allowlist (`[]` = no egress, `["*"]` = any public host). */
  setEgressAllowlist(hosts: string[]): Promise<SandboxInfo> {
    return this.update({ egressAllowlist: hosts });
  }

  /** Sets the time to live, counted from now. */
  setTimeout(ttlS: number): Promise<SandboxInfo> {
    return this.update({ ttlS });
  }

  async metrics(): Promise<SandboxMetrics> {
    return camel<SandboxMetrics>(await this.req<Json>("GET", "/metrics"));
  }

  /** The link to hand on (opens the preview as it is), and its URL and token (null for public_preview sandboxes). */
  async getPreviewLink(port: number): Promise<PreviewLink> {
    const j = await this.req<Json>("GET", `/preview/${port}`);
    return { link: j.link, url: j.url, token: j.token ?? null };
  }

  /** The preview URL of a port, from the template (no request). */
  getPreviewUrl(port: number): string {
    const t = this.info.previewUrlTemplate;
    if (!t) throw new SandfortError("this sandbox has no preview URL template", { code: "unavailable" });
    return t.replace("{port}", String(port));
  }

  /** TCP ports listening inside the sandbox, with their preview URLs. */
  async ports(): Promise<PortInfo[]> {
    const j = await this.req<Json>("GET", "/ports");
    return (j.items as Json[]).map((p) => camel<PortInfo>(p));
  }

  /** Runs code: python (python3 -c), node (node -e), bash or sh. A fresh process each call. */
  async codeRun(language: CodeLanguage, code: string, opts: CodeRunOptions = {}): Promise<CommandResult> {
    const body: Json = { language, code };
    if (opts.argv !== undefined) body.argv = opts.argv;
    if (opts.env !== undefined) body.env = opts.env;
    if (opts.timeoutS !== undefined) body.timeout_s = opts.timeoutS;
    if (opts.onStdout || opts.onStderr) {
      return collect(streamCall(this.http, this.path("/process/code-run"), body, { signal: opts.signal }), opts);
    }
    return toResult(
      await this.req<Json>("POST", "/process/code-run", { json: body, signal: opts.signal, timeoutMs: timeoutFor(opts.timeoutS) }),
    );
  }

  /** codeRun as a stream of events. */
  codeStream(language: CodeLanguage, code: string, opts: CodeRunOptions = {}): AsyncGenerator<StreamEvent> {
    const body: Json = { language, code };
    if (opts.argv !== undefined) body.argv = opts.argv;
    if (opts.env !== undefined) body.env = opts.env;
    if (opts.timeoutS !== undefined) body.timeout_s = opts.timeoutS;
    return streamCall(this.http, this.path("/process/code-run"), body, { signal: opts.signal });
  }
}

function execBody(command: string | string[], opts: RunOptions): Json {
  const body: Json = Array.isArray(command) ? { argv: command } : { command };
  if (opts.cwd !== undefined) body.cwd = opts.cwd;
  if (opts.env !== undefined) body.env = opts.env;
  if (opts.stdin !== undefined) body.stdin = opts.stdin;
  if (opts.timeoutS !== undefined) body.timeout_s = opts.timeoutS;
  if (opts.binary) body.binary = true;
  return body;
}

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
    const body = execBody(command, opts);
    if ((opts.onStdout || opts.onStderr) && !opts.binary) {
      return collect(streamCall(this.sbx.http, this.sbx.path("/process/exec"), body, { signal: opts.signal }), opts);
    }
    return toResult(
      await this.sbx.req<Json>("POST", "/process/exec", {
        json: body,
        signal: opts.signal,
        timeoutMs: timeoutFor(opts.timeoutS),
      }),
    );
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

  private execPath(): string {
    return this.sbx.path(`/sessions/${enc(this.name)}/exec`);
  }

  /**
   * Runs a command in this shell; `exit 3` gives exitCode 3 and sessionRestarted true, and a
   * SessionRestartedWarning is emitted.
   */
  async run(command: string, opts: SessionRunOptions = {}): Promise<CommandResult> {
    const body: Json = { command };
    if (opts.timeoutS !== undefined) body.timeout_s = opts.timeoutS;
    let r: CommandResult;
    if (opts.onStdout || opts.onStderr) {
      r = await collect(streamCall(this.sbx.http, this.execPath(), body, { signal: opts.signal }), opts);
    } else {
      r = toResult(
        await this.sbx.http.json<Json>("POST", this.execPath(), {
          json: body,
          signal: opts.signal,
          timeoutMs: timeoutFor(opts.timeoutS),
        }),
      );
    }
    if (r.sessionRestarted) warnRestarted(this.name, this.sbx.id);
    return r;
  }

  /** run as a stream of events; the exit event carries sessionRestarted (and the warning is emitted). */
  async *stream(command: string, opts: SessionRunOptions = {}): AsyncGenerator<StreamEvent> {
    const body: Json = { command };
    if (opts.timeoutS !== undefined) body.timeout_s = opts.timeoutS;
    for await (const ev of streamCall(this.sbx.http, this.execPath(), body, { signal: opts.signal })) {
      if (ev.type === "exit" && ev.sessionRestarted) warnRestarted(this.name, this.sbx.id);
      yield ev;
    }
  }

  delete(): Promise<void> {
    return this.sbx.sessions.delete(this.name);
  }
}

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

/** Removes the fields left undefined. */
function defined(o: Json): Json {
  const out: Json = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out;
}

function credBody(o: GitCredentials): Json {
  return { username: o.username, password: o.password, token: o.token };
}

function toGitResult(j: Json): GitResult {
  return { ...toResult(j), op: j.op };
}

/**
 * Git in the sandbox (`POST /v1/sandboxes/{id}/git/{op}`): the sandbox's own `git`, once per call.
 * `path` is absolute (an existing directory for everything but clone). A git failure (conflict,
 * rejected push, wrong token, nothing to commit) is a non-zero `exitCode`, never thrown; invalid
 * arguments throw `invalid_argument` (400). Credentials go to that one git command through memory
 * and are stored nowhere (not in `.git/config`, no credential helper, no log or audit record).
 */
export class Git {
  constructor(private readonly sbx: Sandbox) {}

  private async call(op: GitOp, body: Json, opts: GitOptions): Promise<Json> {
    const json = defined({ ...body, timeout_s: opts.timeoutS });
    return this.sbx.req<Json>("POST", `/git/${op}`, { json, signal: opts.signal, timeoutMs: timeoutFor(opts.timeoutS) });
  }

  /** `git clone [--branch B] [--depth N] -- URL PATH` (leading directories created). A URL with a password in it is refused: pass `password`/`token`. */
  async clone(url: string, path: string, opts: GitCloneOptions = {}): Promise<GitResult> {
    const body = { url, path, branch: opts.branch, depth: opts.depth, ...credBody(opts) };
    return toGitResult(await this.call("clone", body, opts));
  }

  /** `git pull --no-edit --no-rebase|--rebase [REMOTE [BRANCH]]`. */
  async pull(path: string, opts: GitPullOptions = {}): Promise<GitResult> {
    const body = { path, remote: opts.remote, branch: opts.branch, rebase: opts.rebase, ...credBody(opts) };
    return toGitResult(await this.call("pull", body, opts));
  }

  /** `git push --set-upstream REMOTE BRANCH|HEAD` (`origin` and the current branch by default). */
  async push(path: string, opts: GitPushOptions = {}): Promise<GitResult> {
    const body = { path, remote: opts.remote, branch: opts.branch, ...credBody(opts) };
    return toGitResult(await this.call("push", body, opts));
  }

  /** `git add -- FILES`; without `files`, `git add --all`. */
  async add(path: string, opts: GitAddOptions = {}): Promise<GitResult> {
    return toGitResult(await this.call("add", { path, files: opts.files }, opts));
  }

  /** `git commit --message M [-- FILES]`; `author` becomes author and committer. Nothing to commit: exitCode 1. */
  async commit(path: string, message: string, opts: GitCommitOptions = {}): Promise<GitResult> {
    return toGitResult(await this.call("commit", { path, message, author: opts.author, files: opts.files }, opts));
  }

  /** `git checkout BRANCH --`, or `git checkout -b BRANCH` with `create: true`. */
  async checkout(path: string, branch: string, opts: GitCheckoutOptions = {}): Promise<GitResult> {
    return toGitResult(await this.call("checkout", { path, branch, create: opts.create }, opts));
  }

  /** The local branches (`current`, `branches`) and `remoteBranches`. */
  async branches(path: string, opts: GitOptions = {}): Promise<GitBranchesResult> {
    const j = await this.call("branches", { path }, opts);
    const r: GitBranchesResult = toGitResult(j);
    if (j.current !== undefined) r.current = j.current;
    if (Array.isArray(j.branches)) {
      r.branches = (j.branches as Json[]).map((b) => ({
        name: b.name,
        commit: b.commit,
        upstream: b.upstream ?? null,
        current: !!b.current,
      }));
    }
    if (Array.isArray(j.remote_branches)) r.remoteBranches = j.remote_branches;
    return r;
  }

  /** `git status --porcelain=v2 --branch`, parsed: `branch`, `commit`, `upstream`, `ahead`, `behind`, `files`. */
  async status(path: string, opts: GitOptions = {}): Promise<GitStatusResult> {
    const j = await this.call("status", { path }, opts);
    const r: GitStatusResult = toGitResult(j);
    for (const k of ["branch", "commit", "upstream", "ahead", "behind"] as const) {
      if (j[k] !== undefined) (r as Json)[k] = j[k];
    }
    if (Array.isArray(j.files)) {
      r.files = (j.files as Json[]).map((f) => {
        const e: GitFileStatus = {
          path: f.path,
          index: f.index,
          worktree: f.worktree,
          kind: f.kind,
          staged: !!f.staged,
        };
        if (f.orig_path !== undefined) e.origPath = f.orig_path;
        return e;
      });
    }
    return r;
  }
}
