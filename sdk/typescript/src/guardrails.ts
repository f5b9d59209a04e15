/**
 * An organization's guardrails (docs/api.md, "Identity"): its limits and their use, the operator
 * setting them, and its kill switch. `org` is an organization id or name; absent, the caller's
 * own (found with whoami). Reading needs the admin role; setting limits is the superadmin's;
 * the kill switch is thrown by an organization admin or the superadmin, and one the superadmin
 * threw only the superadmin lifts.
 */
import type { Transport } from "./http.js";
import type { SandboxRuntime, WhoAmI } from "./types.js";

type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** What an organization may take. */
export interface Limits {
  /** Sandboxes not deleted (stopped ones count). */
  maxSandboxes: number;
  /** CPUs of its running sandboxes together. */
  maxCpus: number;
  /** Memory (MiB) of its running sandboxes together. */
  maxMemoryMb: number;
  /** Image patterns it may start (`*` is any run of characters). */
  allowedImages: string[];
  /** Volumes not deleted. */
  maxVolumes: number;
  /** Snapshots not deleted. */
  maxSnapshots: number;
  /** `disk_mb` (MiB) of its sandboxes not deleted together (stopped ones count). */
  maxDiskMb: number;
  /** Runtimes its sandboxes may be created or started on; `["gvisor"]` requires gVisor. */
  allowedRuntimes: SandboxRuntime[];
}

export type LimitField = keyof Limits;

/** `setOrgLimits`: an absent field stays as it is, `null` resets it to the daemon's configured default. */
export type LimitsUpdate = { [K in LimitField]?: Limits[K] | null };

export interface LimitsUsage {
  sandboxes: number;
  running: number;
  cpus: number;
  memoryMb: number;
  /** Volumes not deleted. */
  volumes: number;
  /** Snapshots not deleted. */
  snapshots: number;
  /** `disk_mb` (MiB) of the sandboxes not deleted. */
  diskMb: number;
}

export interface OrgLimits {
  orgId: string;
  limits: Limits;
  /** The fields set for this organization (`maxCpus`, …); the others are the configured defaults. */
  own: LimitField[];
  usage: LimitsUsage;
  /** The kill switch: null unless it is on. */
  stopped: { since: string; bySuperadmin: boolean } | null;
}

/** What the kill switch did: the sandboxes it stopped, and those it could not stop (id → why). */
export interface StopAllReport {
  orgId: string;
  stopped: string[];
  failed: Record<string, string>;
}

const WIRE: Record<LimitField, string> = {
  maxSandboxes: "max_sandboxes",
  maxCpus: "max_cpus",
  maxMemoryMb: "max_memory_mb",
  allowedImages: "allowed_images",
  maxVolumes: "max_volumes",
  maxSnapshots: "max_snapshots",
  maxDiskMb: "max_disk_mb",
  allowedRuntimes: "allowed_runtimes",
};
const FIELD_OF: Record<string, LimitField> = Object.fromEntries(
  Object.entries(WIRE).map(([k, v]) => [v, k as LimitField]),
) as Record<string, LimitField>;

function toOrgLimits(j: Json): OrgLimits {
  const l = (j.limits ?? {}) as Json;
  const u = (j.usage ?? {}) as Json;
  const s = j.stopped as Json | null | undefined;
  return {
    orgId: j.org_id,
    limits: {
      maxSandboxes: l.max_sandboxes,
      maxCpus: l.max_cpus,
      maxMemoryMb: l.max_memory_mb,
      allowedImages: l.allowed_images ?? [],
      maxVolumes: l.max_volumes,
      maxSnapshots: l.max_snapshots,
      maxDiskMb: l.max_disk_mb,
      allowedRuntimes: l.allowed_runtimes ?? [],
    },
    own: ((j.own ?? []) as string[]).map((f) => FIELD_OF[f] ?? (f as LimitField)),
    usage: {
      sandboxes: u.sandboxes ?? 0,
      running: u.running ?? 0,
      cpus: u.cpus ?? 0,
      memoryMb: u.memory_mb ?? 0,
      volumes: u.volumes ?? 0,
      snapshots: u.snapshots ?? 0,
      diskMb: u.disk_mb ?? 0,
    },
    stopped: s && typeof s === "object" ? { since: s.since, bySuperadmin: !!s.by_superadmin } : null,
  };
}

/** The calls behind `SandfortClient.orgLimits`, `setOrgLimits`, `stopAll` and `liftStopAll`. */
export class Guardrails {
  /** @internal */
  constructor(
    private readonly http: Transport,
    private readonly whoami: () => Promise<WhoAmI>,
  ) {}

  private async path(org: string | undefined, leaf: string): Promise<string> {
    if (org === undefined) {
      const who = await this.whoami();
      org = who.orgId || who.org;
    }
    return `/v1/orgs/${encodeURIComponent(org)}/${leaf}`;
  }

  async limits(org?: string): Promise<OrgLimits> {
    return toOrgLimits(await this.http.json<Json>("GET", await this.path(org, "limits")));
  }

  async setLimits(org: string, update: LimitsUpdate): Promise<OrgLimits> {
    if (!org) throw new TypeError("setOrgLimits needs the organization (an id or a name)");
    const body: Json = {};
    for (const [k, v] of Object.entries(update)) {
      if (v === undefined) continue;
      if (!(k in WIRE)) throw new TypeError(`${k} is not a limit (${Object.keys(WIRE).join(", ")})`);
      body[WIRE[k as LimitField]] = v;
    }
    return toOrgLimits(await this.http.json<Json>("PUT", await this.path(org, "limits"), { json: body }));
  }

  async stopAll(org?: string): Promise<StopAllReport> {
    const j = await this.http.json<Json>("POST", await this.path(org, "stop-all"));
    return { orgId: j.org_id, stopped: j.stopped ?? [], failed: j.failed ?? {} };
  }

  async liftStopAll(org?: string): Promise<void> {
    await this.http.json("DELETE", await this.path(org, "stop-all"));
  }
}
