/**
 * Sandboxes: the client's calls that create, find, list and delete them (`Sandboxes`, behind
 * `SandfortClient.createSandbox` …) and the handle on one (`Sandbox`: its lifecycle, settings,
 * metrics, ports and previews; `sandbox.commands`, `.sessions`, `.files`, `.git` and `.pty` are in
 * their own modules).
 */
import { SandfortClient } from "./client.js";
import { Commands } from "./commands.js";
import { splitOptions, type ClientOptions } from "./config.js";
import { SandfortError } from "./errors.js";
import { Files } from "./files.js";
import { Code } from "./code.js";
import { Git } from "./git.js";
import type { RequestOptions, Transport } from "./http.js";
import { codeRun, codeStream } from "./processes.js";
import { PtyApi } from "./pty.js";
import { camel, deleted, enc, type Json } from "./resource.js";
import { Sessions } from "./sessions.js";
import type {
  CodeLanguage,
  CodeRunOptions,
  CommandResult,
  CreateSandboxOptions,
  ListSandboxesOptions,
  Page,
  PortInfo,
  PreviewLink,
  SandboxInfo,
  SandboxMetrics,
  SandboxRuntime,
  StreamEvent,
  UpdateSandboxOptions,
  VolumeMount,
} from "./types.js";

function toSandboxInfo(j: Json): SandboxInfo {
  const r = (j.resources ?? {}) as Json;
  return {
    id: j.id,
    name: j.name ?? null,
    state: j.state,
    snapshot: j.snapshot,
    runtime: j.runtime,
    createdAt: j.created_at,
    updatedAt: j.updated_at ?? null,
    expiresAt: j.expires_at ?? null,
    ttlS: j.ttl_s ?? null,
    idleTimeoutS: j.idle_timeout_s ?? null,
    resources: { cpus: r.cpus, memoryMb: r.memory_mb, pids: r.pids, diskMb: r.disk_mb },
    egressAllowlist: j.egress_allowlist ?? [],
    egressDeny: j.egress_deny ?? [],
    egressRules: j.egress_rules ?? [],
    labels: j.labels ?? {},
    envKeys: j.env_keys ?? [],
    user: j.user ?? null,
    workdir: j.workdir ?? null,
    publicPreview: !!j.public_preview,
    volumes: ((j.volumes ?? []) as Json[]).map((v) => ({ name: v.name, mountPath: v.mount_path, readOnly: !!v.read_only })),
    secrets: ((j.secrets ?? []) as Json[]).map((a) => ({ name: a.name, env: a.env, placeholder: a.placeholder })),
    previewUrlTemplate: j.preview_url_template ?? null,
    errorMessage: j.error_message ?? null,
  };
}

function mountBody(v: VolumeMount): Json {
  const m: Json = { name: v.name, mount_path: v.mountPath };
  if (v.readOnly !== undefined) m.read_only = v.readOnly;
  return m;
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
    if (o.resources.diskMb !== undefined) r.disk_mb = o.resources.diskMb;
    b.resources = r;
  }
  if (o.egressAllowlist !== undefined) b.egress_allowlist = o.egressAllowlist;
  if (o.egressDeny !== undefined) b.egress_deny = o.egressDeny;
  if (o.egressRules !== undefined) b.egress_rules = o.egressRules;
  if (o.ttlS !== undefined) b.ttl_s = o.ttlS;
  if (o.idleTimeoutS !== undefined) b.idle_timeout_s = o.idleTimeoutS;
  if (o.user !== undefined) b.user = o.user;
  if (o.workdir !== undefined) b.workdir = o.workdir;
  if (o.publicPreview !== undefined) b.public_preview = o.publicPreview;
  if (o.volumes !== undefined) b.volumes = o.volumes.map(mountBody);
  if (o.runtime !== undefined) b.runtime = o.runtime;
  if (o.secrets !== undefined) b.secrets = o.secrets;
  return b;
}

/** The sandbox calls behind `SandfortClient.createSandbox`, `getSandbox`, `listSandboxes` … */
export class Sandboxes {
  constructor(private readonly client: SandfortClient) {}

  async create(opts: CreateSandboxOptions): Promise<Sandbox> {
    const j = await this.client.http.json<Json>("POST", "/v1/sandboxes", { json: createBody(opts) });
    return new Sandbox(this.client, toSandboxInfo(j));
  }

  async get(idOrName: string, opts: { waitFor?: string; timeoutS?: number }): Promise<Sandbox> {
    return new Sandbox(this.client, await this.info(idOrName, opts));
  }

  async info(idOrName: string, opts: { waitFor?: string; timeoutS?: number }): Promise<SandboxInfo> {
    const j = await this.client.http.json<Json>("GET", `/v1/sandboxes/${enc(idOrName)}`, {
      query: { wait_for: opts.waitFor, timeout_s: opts.timeoutS },
    });
    return toSandboxInfo(j);
  }

  async list(opts: ListSandboxesOptions): Promise<Page<SandboxInfo>> {
    const label = opts.labels
      ? Object.entries(opts.labels)
          .map(([k, v]) => `${k}:${v}`)
          .join(",")
      : undefined;
    const j = await this.client.http.json<Json>("GET", "/v1/sandboxes", {
      query: { state: opts.state, label, limit: opts.limit, cursor: opts.cursor },
    });
    return { items: (j.items as Json[]).map(toSandboxInfo), nextCursor: j.next_cursor ?? null };
  }

  delete(idOrName: string): Promise<boolean> {
    return deleted(this.client.http.json("DELETE", `/v1/sandboxes/${enc(idOrName)}`));
  }
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
  /** Stateful code contexts (python, js, bash) and runs with rich results. */
  readonly code: Code;

  /** @internal use SandfortClient.createSandbox / Sandbox.create / Sandbox.connect */
  constructor(client: SandfortClient, info: SandboxInfo) {
    this.client = client;
    this.info = info;
    this.commands = new Commands(this);
    this.files = new Files(this);
    this.sessions = new Sessions(this);
    this.git = new Git(this);
    this.code = new Code(this);
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
  get runtime(): SandboxRuntime {
    return this.info.runtime;
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
  /** A call answered with the sandbox's record (a read, a change, an action), kept as `info`. */
  private async load(method: string, sub: string, opts?: RequestOptions): Promise<SandboxInfo> {
    this.info = toSandboxInfo(await this.req<Json>(method, sub, opts));
    return this.info;
  }

  async refresh(): Promise<SandboxInfo> {
    return this.load("GET", "");
  }

  /** Blocks (server side, ≤ 300 s) until the sandbox reaches `state` (waiting for started also returns on error). */
  async waitFor(state = "started", timeoutS = 60): Promise<SandboxInfo> {
    return this.load("GET", "", { query: { wait_for: state, timeout_s: timeoutS } });
  }

  async stop(): Promise<SandboxInfo> {
    return this.load("POST", "/stop");
  }

  async start(): Promise<SandboxInfo> {
    return this.load("POST", "/start");
  }

  /**
   * Freezes every process (memory kept): state `paused`; commands, files and sessions then answer
   * 409 until `resume()`. Already paused: unchanged; not started: 409.
   */
  async pause(): Promise<SandboxInfo> {
    return this.load("POST", "/pause");
  }

  /** Lets a paused sandbox's processes carry on where they were: state `started`. Already started: unchanged; not paused: 409. */
  async resume(): Promise<SandboxInfo> {
    return this.load("POST", "/resume");
  }

  /** Deletes the sandbox (container, files, preview URLs, proxy credential). False if it was already gone. */
  async kill(): Promise<boolean> {
    return this.client.deleteSandbox(this.info.id);
  }

  /** Deletes the sandbox; throws SandfortError (404) if it was already gone. */
  async delete(): Promise<void> {
    await this.req("DELETE", "");
  }

  /** PATCH: labels, ttl (seconds from now), idle timeout, egress allowlist, deny list and rules (apply to the proxy's next request). */
  async update(opts: UpdateSandboxOptions): Promise<SandboxInfo> {
    const body: Json = {};
    if (opts.labels !== undefined) body.labels = opts.labels;
    if (opts.ttlS !== undefined) body.ttl_s = opts.ttlS;
    if (opts.idleTimeoutS !== undefined) body.idle_timeout_s = opts.idleTimeoutS;
    if (opts.egressAllowlist !== undefined) body.egress_allowlist = opts.egressAllowlist;
    if (opts.egressDeny !== undefined) body.egress_deny = opts.egressDeny;
    if (opts.egressRules !== undefined) body.egress_rules = opts.egressRules;
    return this.load("PATCH", "", { json: body });
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
    return codeRun(this, language, code, opts);
  }

  /** codeRun as a stream of events. */
  codeStream(language: CodeLanguage, code: string, opts: CodeRunOptions = {}): AsyncGenerator<StreamEvent> {
    return codeStream(this, language, code, opts);
  }
}
