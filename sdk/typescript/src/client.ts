/**
 * The entry point: `SandfortClient`, its configuration (config.ts) and identity calls; the calls on
 * sandboxes, volumes, snapshots and guardrails are one line each here, handed to their own modules
 * (sandboxes.ts, volumes.ts, snapshots.ts, guardrails.ts); `client.audit` is audit.ts's, `client.secrets` secrets.ts's.
 */
import { Audit } from "./audit.js";
import { resolveConfig, type ClientOptions } from "./config.js";
import { EventStream, type EventsOptions } from "./events.js";
import { Guardrails, type LimitsUpdate, type OrgLimits, type StopAllReport } from "./guardrails.js";
import { Transport } from "./http.js";
import { camel, type Json } from "./resource.js";
import { Sandbox, Sandboxes } from "./sandboxes.js";
import { Secrets } from "./secrets.js";
import { Webhooks } from "./webhooks.js";
import { snapshots } from "./snapshots.js";
import type {
  CreateSandboxOptions,
  ListSandboxesOptions,
  ListSnapshotsOptions,
  ListVolumesOptions,
  Page,
  SandboxInfo,
  Snapshot,
  Volume,
  WhoAmI,
} from "./types.js";
import { volumes } from "./volumes.js";

/** The entry point: one daemon, one API key or token provider. */
export class SandfortClient {
  /** @internal */
  readonly http: Transport;
  /** The organization's audit chain, its checkpoints and their verification. */
  readonly audit: Audit;
  /** The organization's secrets: values go in, never come out. */
  readonly secrets: Secrets;
  /** The organization's webhooks and their delivery logs (admin). */
  readonly webhooks: Webhooks;
  private readonly guardrails: Guardrails;
  private readonly sandboxes = new Sandboxes(this);

  constructor(opts: ClientOptions = {}) {
    this.http = new Transport(resolveConfig(opts));
    this.audit = new Audit(this.http, () => this.whoami());
    this.secrets = new Secrets(this.http);
    this.webhooks = new Webhooks(this.http);
    this.guardrails = new Guardrails(this.http, () => this.whoami());
  }

  get baseUrl(): string {
    return this.http.baseUrl;
  }

  /**
   * Creates a sandbox and (by default) waits until it is started. The organization's guardrails
   * may refuse it: `quota_exceeded` (429), `image_not_allowed` (403), `runtime_not_allowed` (403: a
   * `runtime` its policy does not allow), `conflict` (409) while its kill switch is on.
   */
  async createSandbox(opts: CreateSandboxOptions = {}): Promise<Sandbox> {
    return this.sandboxes.create(opts);
  }

  /** An existing sandbox, by id or name. */
  async getSandbox(idOrName: string, opts: { waitFor?: string; timeoutS?: number } = {}): Promise<Sandbox> {
    return this.sandboxes.get(idOrName, opts);
  }

  /** Alias of getSandbox. */
  connect(idOrName: string): Promise<Sandbox> {
    return this.getSandbox(idOrName);
  }

  async getSandboxInfo(idOrName: string, opts: { waitFor?: string; timeoutS?: number } = {}): Promise<SandboxInfo> {
    return this.sandboxes.info(idOrName, opts);
  }

  /** One page of sandboxes. */
  async listSandboxes(opts: ListSandboxesOptions = {}): Promise<Page<SandboxInfo>> {
    return this.sandboxes.list(opts);
  }

  /** Deletes a sandbox; false when it did not exist. */
  async deleteSandbox(idOrName: string): Promise<boolean> {
    return this.sandboxes.delete(idOrName);
  }

  /** Creates a named volume of the organization (a taken name: `conflict`, 409). */
  async createVolume(name: string): Promise<Volume> {
    return volumes.create(this.http, { name });
  }

  /** One page of volumes, by name. */
  async listVolumes(opts: ListVolumesOptions = {}): Promise<Page<Volume>> {
    return volumes.list(this.http, opts);
  }

  /** A volume by name or id. */
  async getVolume(nameOrId: string): Promise<Volume> {
    return volumes.get(this.http, nameOrId);
  }

  /**
   * Deletes a volume and its data; false when it did not exist. While a sandbox that is not
   * deleted mounts it: `conflict` (409).
   */
  async deleteVolume(nameOrId: string): Promise<boolean> {
    return volumes.delete(this.http, nameOrId);
  }

  /**
   * Commits a sandbox's filesystem (by id, name or object; started, paused or stopped) as a
   * snapshot of the organization called `name`. A taken name, or a sandbox in another state:
   * `conflict` (409); an unknown sandbox: `not_found` (404).
   */
  async createSnapshot(sandbox: string | Sandbox, name: string): Promise<Snapshot> {
    const sandbox_id = typeof sandbox === "string" ? sandbox : sandbox.id;
    return snapshots.create(this.http, { sandbox_id, name });
  }

  /** One page of snapshots, by name. */
  async listSnapshots(opts: ListSnapshotsOptions = {}): Promise<Page<Snapshot>> {
    return snapshots.list(this.http, opts);
  }

  /** A snapshot by name or id. */
  async getSnapshot(nameOrId: string): Promise<Snapshot> {
    return snapshots.get(this.http, nameOrId);
  }

  /**
   * Deletes a snapshot; false when it did not exist. While a sandbox that is not deleted was
   * created from it: `conflict` (409).
   */
  async deleteSnapshot(nameOrId: string): Promise<boolean> {
    return snapshots.delete(this.http, nameOrId);
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

  /**
   * The organization's life-cycle events (docs/events.md): an async iterable that waits for new
   * ones and reconnects by itself after a dropped connection, resuming after the last event it
   * gave. `after`: start after that seq; `types`: only these; `signal` (or `close()`) ends it.
   */
  events(opts: EventsOptions = {}): EventStream {
    return new EventStream(this.http, opts);
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
