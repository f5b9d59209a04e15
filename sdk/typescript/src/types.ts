export type SandboxState = "creating" | "pulling" | "started" | "paused" | "stopped" | "error" | "deleted" | string;

/**
 * What a sandbox runs under. `runc`: the host's kernel, as any container. `gvisor`: gVisor's `runsc`,
 * a kernel of the sandbox's own (stronger isolation, slower system calls) and no network interface
 * (egress through the proxy only); docs/gvisor.md.
 */
export type SandboxRuntime = "runc" | "gvisor";

export interface Resources {
  cpus?: number;
  memoryMb?: number;
  pids?: number;
  /** The writable layer plus mounted volumes, MiB (`resources.disk_mb`, docs/api.md). */
  diskMb?: number;
}

export interface SandboxInfo {
  id: string;
  name: string | null;
  state: SandboxState;
  snapshot: string;
  /** What it runs under (the daemon's `default_runtime` when the create named none). */
  runtime: SandboxRuntime;
  createdAt: string;
  updatedAt: string | null;
  expiresAt: string | null;
  /** The time to live it was given (seconds, from creation or the last update); null: none. */
  ttlS: number | null;
  /** Stopped after this long unused (seconds; 0 never). */
  idleTimeoutS: number | null;
  resources: Resources;
  egressAllowlist: string[];
  /** Host patterns refused whatever allows them (docs/egress.md). */
  egressDeny: string[];
  /** Allows by host, method and path (docs/egress.md). */
  egressRules: EgressRule[];
  labels: Record<string, string>;
  envKeys: string[];
  user: string | null;
  workdir: string | null;
  publicPreview: boolean;
  /** The volumes it mounts. */
  volumes: VolumeMount[];
  /**
   * The organization's secrets attached at create: the variable holding each placeholder. The
   * sandbox holds only placeholders; the egress proxy puts the values in (docs/secrets.md).
   */
  secrets: SecretAttachment[];
  previewUrlTemplate: string | null;
  errorMessage: string | null;
}

/** A volume of the organization mounted into a sandbox (`mount_path`, `read_only` on the wire). */
export interface VolumeMount {
  /** The volume's name (or id). */
  name: string;
  /** An absolute path inside the sandbox. */
  mountPath: string;
  /** Mount read-only (default false). */
  readOnly?: boolean;
}

/** A named volume of the organization: what a sandbox writes there outlives the sandbox. */
export interface Volume {
  /** `vol-…`. */
  id: string;
  name: string;
  /** Always null: a size limit is not enforced. */
  sizeMb: number | null;
  state: "ready" | string;
  createdAt: string;
  updatedAt: string | null;
}

export interface ListVolumesOptions {
  limit?: number;
  cursor?: string;
}

/**
 * A snapshot of the organization: a sandbox's filesystem committed as an image new sandboxes can
 * be created from (`createSandbox({snapshot: name})`). Files and installed packages are in it;
 * memory, processes and mounted volumes are not.
 */
export interface Snapshot {
  /** `snap-…`. */
  id: string;
  name: string;
  sizeBytes: number;
  /** The sandbox it was made from. */
  sourceSandboxId: string;
  state: "ready" | string;
  createdAt: string;
  updatedAt: string | null;
}

export interface ListSnapshotsOptions {
  limit?: number;
  cursor?: string;
}

/** A secret attached to a sandbox (docs/secrets.md): never its value. */
export interface SecretAttachment {
  name: string;
  /** The environment variable holding the placeholder. */
  env: string;
  /** `sfph_…`: worthless anywhere but in a request through this sandbox's proxy to the secret's hosts. */
  placeholder: string;
}

export interface CreateSandboxOptions {
  /** One of the organization's snapshots by name or id (createSnapshot), else an image reference; the daemon's default image when absent. */
  snapshot?: string;
  name?: string;
  /** Wait until the sandbox is started (default true). */
  wait?: boolean;
  env?: Record<string, string>;
  labels?: Record<string, string>;
  resources?: Resources;
  egressAllowlist?: string[];
  /** Host patterns refused whatever allows them; with none of the three egress fields the organization's egress defaults apply. */
  egressDeny?: string[];
  egressRules?: EgressRule[];
  /** Stopped this many seconds from now, deleted later (`guardrails.delete_grace_s`). */
  ttlS?: number;
  /** Stopped after this many seconds without use (exec, files, terminal, preview…); 0 never; the daemon's default when absent. */
  idleTimeoutS?: number;
  user?: string;
  workdir?: string;
  publicPreview?: boolean;
  /** Volumes of the organization to mount (at most 8). */
  volumes?: VolumeMount[];
  /**
   * The organization's secrets by name, or `{ name, env }` (default variable: the name in upper
   * case, `-` as `_`): the sandbox gets a placeholder in that variable and trusts the
   * organization's interception CA; requests to the secret's hosts carry the value (at most 16;
   * fixed at create). An unknown name is 404 `not_found` and nothing is created.
   */
  secrets?: (string | { name: string; env?: string })[];
  /**
   * `gvisor`: run under gVisor's kernel, not the host's (see `SandboxRuntime`); when absent, the
   * daemon's `default_runtime` (`runc`), or the first runtime the organization's `allowedRuntimes`
   * allows when that one is not allowed. Another value is the API's 400 (`SandfortError` with code
   * `invalid_argument`); one the organization's policy does not allow is 403 `runtime_not_allowed`;
   * a daemon that does not offer gVisor answers 503 `unavailable`.
   */
  runtime?: SandboxRuntime;
}

export interface UpdateSandboxOptions {
  labels?: Record<string, string>;
  /** Counted from now. */
  ttlS?: number;
  /** 0: never stopped for being idle. */
  idleTimeoutS?: number;
  egressAllowlist?: string[];
  egressDeny?: string[];
  egressRules?: EgressRule[];
}

/**
 * `{host: "api.github.com", methods: ["GET"], paths: ["/repos/acme/*"]}`: the host for these
 * methods and paths only (absent: any). Paths are matched against the decoded, normalized path;
 * HTTPS to a host only such rules allow is refused until the proxy intercepts TLS (docs/egress.md).
 */
export interface EgressRule {
  host: string;
  methods?: string[];
  paths?: string[];
}

/** The result of a finished command. A non-zero exit is a value, never an exception. */
export interface CommandResult {
  exitCode: number;
  stdout: string;
  stderr: string;
  durationMs: number;
  timedOut: boolean;
  truncated: boolean;
  /** Exact bytes, with `binary: true`. */
  stdoutBytes?: Uint8Array;
  stderrBytes?: Uint8Array;
  /** Session exec only: the shell ended (e.g. `exit 3`) and the next call gets a fresh one. */
  sessionRestarted?: boolean;
}

export type StreamEvent =
  | { type: "stdout"; data: string }
  | { type: "stderr"; data: string }
  | {
      type: "exit";
      exitCode: number;
      timedOut: boolean;
      truncated: boolean;
      durationMs: number;
      /** A session's command only: its shell ended (or had ended) and a fresh one replaced it. */
      sessionRestarted?: boolean;
    }
  | { type: "error"; code: string; message: string };

export interface OutputHandlers {
  /** Called with each stdout chunk as it is produced (switches the call to streaming). */
  onStdout?: (chunk: string) => void;
  /** Called with each stderr chunk as it is produced (switches the call to streaming). */
  onStderr?: (chunk: string) => void;
  signal?: AbortSignal;
}

export interface RunOptions extends OutputHandlers {
  cwd?: string;
  env?: Record<string, string>;
  /** Written to the command's stdin, then closed. */
  stdin?: string;
  /** Seconds (default 60 on the daemon). On expiry the process group is killed: exitCode 124, timedOut. */
  timeoutS?: number;
  /** Also return exact output bytes (`stdoutBytes`/`stderrBytes`). */
  binary?: boolean;
}

export interface CodeRunOptions extends OutputHandlers {
  argv?: string[];
  env?: Record<string, string>;
  timeoutS?: number;
}

export type CodeLanguage = "python" | "node" | "bash" | "sh";

export interface CommandInfo {
  id: string;
  pid: number;
  state: "running" | "exited" | string;
  command: string;
  exitCode: number | null;
  startedAt: string;
  endedAt: string | null;
}

export interface CommandLogs {
  stdout: string;
  stderr: string;
  droppedBytes: number;
}

export type Signal = "TERM" | "KILL" | "INT" | "HUP" | "QUIT" | "USR1" | "USR2" | number;

export interface SessionInfo {
  name: string;
  createdAt: string;
  pid: number;
  busy: boolean;
  waiting: number;
}

export interface FileInfo {
  name: string;
  path: string;
  type: "file" | "dir" | "symlink" | "other";
  size: number;
  mode: string;
  mtime: string;
  /** Symlinks (stat): where the link points. */
  target?: string;
}

/** One event of a directory watch (`sandbox.files.watch`). */
export interface WatchEvent {
  /**
   * `create` (made, or a rename's new name), `write`, `remove`, `rename` (a rename's old name),
   * `chmod`; `overflow` (events were dropped: `dropped` of them, 0 when the kernel's queue
   * overflowed; list the directory again), `limit` (a new subdirectory beyond the bounds is not
   * watched), `end` (the directory itself went; nothing follows).
   */
  type: "create" | "write" | "remove" | "rename" | "chmod" | "overflow" | "limit" | "end";
  /** Relative to the watched directory ("src/a.ts"); empty for overflow and end. */
  name: string;
  isDir: boolean;
  /** With `includeEntry`: the entry as `stat` gives it when the event was sent. */
  entry?: FileInfo;
  dropped?: number;
  message?: string;
}

export interface WriteInfo {
  path: string;
  size: number;
  mode: string;
}

export interface ArchiveResult {
  path: string;
  entries: number;
  skipped: string[];
  skippedCount: number;
}

export interface PreviewLink {
  /** Opens the preview as it is (curl, fetch, a browser): the URL with `/?sandfort_token=`. Hand it on as it is. */
  link: string;
  url: string;
  /** Null when the sandbox is public_preview. Send as header `X-Sandfort-Preview-Token`. */
  token: string | null;
}

export interface PortInfo {
  port: number;
  address: string;
  protocol: string;
  family: string;
  pid: number | null;
  process: string | null;
  url: string;
  previewable: boolean;
}

export interface SandboxMetrics {
  cpuPercent: number;
  memoryBytes: number;
  memoryLimitBytes: number;
  pids: number;
  egressBytesIn: number;
  egressBytesOut: number;
  egressAllowed?: number;
  egressDenied?: number;
}

export interface WhoAmI {
  org: string;
  orgId: string;
  principal: string;
  principalName: string;
  role: string;
  superadmin: boolean;
  auth: string;
}

export interface ListSandboxesOptions {
  state?: string;
  /** `{team: "x"}` → `label=team:x`. */
  labels?: Record<string, string>;
  limit?: number;
  cursor?: string;
}

export interface Page<T> {
  items: T[];
  nextCursor: string | null;
}

/** `{name, email}` or `"Name <email>"`: becomes the commit's author and committer. */
export type GitAuthor = { name: string; email: string } | string;

/**
 * Credentials for clone, pull and push: `username` + `password`, or `token` alone (sent with the
 * user name `git`). Handed to that one git command through memory; stored nowhere.
 */
export interface GitCredentials {
  username?: string;
  password?: string;
  token?: string;
}

export interface GitOptions {
  /** Seconds (1–2000000; default and at most the daemon's `exec_max_timeout_s`). On expiry: exitCode 124, timedOut. */
  timeoutS?: number;
  signal?: AbortSignal;
}

export interface GitCloneOptions extends GitOptions, GitCredentials {
  branch?: string;
  /** ≥ 1: a shallow, single-branch clone. */
  depth?: number;
}

export interface GitPullOptions extends GitOptions, GitCredentials {
  /** Default `origin` (also when only `branch` is given). */
  remote?: string;
  branch?: string;
  /** true: `--rebase`; false (default): `--no-rebase` (merge). */
  rebase?: boolean;
}

export interface GitPushOptions extends GitOptions, GitCredentials {
  /** Default `origin`. */
  remote?: string;
  /** Default the current branch (`HEAD`). */
  branch?: string;
}

export interface GitAddOptions extends GitOptions {
  /** Paths to add; absent: `git add --all`. */
  files?: string[];
}

export interface GitCommitOptions extends GitOptions {
  author?: GitAuthor;
  /** Commit only these paths (`git commit -- FILES`). */
  files?: string[];
}

export interface GitCheckoutOptions extends GitOptions {
  /** true: `git checkout -b BRANCH`. */
  create?: boolean;
}

export type GitOp = "clone" | "pull" | "push" | "add" | "commit" | "checkout" | "branches" | "status";

/** The result of a git call: git's exit code and output (a git failure is a value, never thrown). */
export interface GitResult extends CommandResult {
  op: GitOp;
}

/** One entry of `git status`. */
export interface GitFileStatus {
  path: string;
  /** Git's letter for the index: `.` (unchanged), `M`, `T`, `A`, `D`, `R`, `C`, `U`, `?` (untracked), `!` (ignored). */
  index: string;
  /** Git's letter for the work tree, as `index`. */
  worktree: string;
  kind: "changed" | "renamed" | "unmerged" | "untracked" | "ignored" | string;
  /** `index` is a change. */
  staged: boolean;
  /** Renamed entries: where it came from. */
  origPath?: string;
}

/** `git.status`: the parsed fields are there when git succeeded (exitCode 0). */
export interface GitStatusResult extends GitResult {
  /** null when detached. */
  branch?: string | null;
  /** null before the first commit. */
  commit?: string | null;
  /** null without one. */
  upstream?: string | null;
  ahead?: number;
  behind?: number;
  files?: GitFileStatus[];
}

export interface GitBranch {
  name: string;
  commit: string;
  /** null when none. */
  upstream: string | null;
  current: boolean;
}

/** `git.branches`: the parsed fields are there when git succeeded (exitCode 0). */
export interface GitBranchesResult extends GitResult {
  /** null on a detached HEAD or before the first commit. */
  current?: string | null;
  branches?: GitBranch[];
  /** e.g. `["origin/main"]`. */
  remoteBranches?: string[];
}
