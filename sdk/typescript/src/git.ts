import { timeoutFor, toResult } from "./processes.js";
import type { Json } from "./resource.js";
import type { Sandbox } from "./sandboxes.js";
import type {
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
} from "./types.js";

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
