/**
 * `client.secrets`: the organization's secrets (docs/secrets.md). A value is write-only: `create`
 * and `rotate` send it and nothing returns it; a `Secret` is its name, hosts, placement, version
 * and times. Creating, rotating and deleting need an admin key; any role reads.
 *
 * Only storage is built so far: the egress proxy does not yet put a secret into requests, and a
 * sandbox cannot be created with secrets yet.
 */
import type { Transport } from "./http.js";

/** Where a request to a bound host will carry the value. */
export type SecretPlacement =
  | { type: "header"; header: string; format: string }
  | { type: "query"; query: string }
  | { type: "basic_auth"; username: string };

export interface Secret {
  name: string;
  hosts: string[];
  placement: SecretPlacement;
  /** 1 at creation, one more at each rotation. */
  version: number;
  createdAt: string;
  updatedAt: string;
}

export interface CreateSecretOptions {
  name: string;
  value: string;
  /** Exact host names or `*.suffix`. */
  hosts: string[];
  /** Exactly one placement: a header (with `format`, default `"{value}"`), a query parameter, or basic auth. */
  header?: string;
  format?: string;
  query?: string;
  basicAuth?: { username: string };
}

export interface RotateSecretOptions {
  value?: string;
  hosts?: string[];
}

interface SecretJson {
  name: string;
  hosts: string[];
  placement: SecretPlacement;
  version: number;
  created_at: string;
  updated_at: string;
}

function secretOf(j: SecretJson): Secret {
  return {
    name: j.name,
    hosts: j.hosts,
    placement: j.placement,
    version: j.version,
    createdAt: j.created_at,
    updatedAt: j.updated_at,
  };
}

const path = (name: string) => `/v1/secrets/${encodeURIComponent(name)}`;

export class Secrets {
  /** @internal */
  constructor(private readonly http: Transport) {}

  async create(opts: CreateSecretOptions): Promise<Secret> {
    const body: Record<string, unknown> = { name: opts.name, value: opts.value, hosts: opts.hosts };
    if (opts.header !== undefined) body.header = opts.header;
    if (opts.format !== undefined) body.format = opts.format;
    if (opts.query !== undefined) body.query = opts.query;
    if (opts.basicAuth !== undefined) body.basic_auth = { username: opts.basicAuth.username };
    return secretOf(await this.http.json<SecretJson>("POST", "/v1/secrets", { json: body }));
  }

  /** Every secret of the organization, by name. */
  async list(): Promise<Secret[]> {
    const page = await this.http.json<{ items: SecretJson[] }>("GET", "/v1/secrets");
    return page.items.map(secretOf);
  }

  async get(name: string): Promise<Secret> {
    return secretOf(await this.http.json<SecretJson>("GET", path(name)));
  }

  /** A new value, new hosts, or both; `version` goes up by one. */
  async rotate(name: string, opts: RotateSecretOptions): Promise<Secret> {
    const body: Record<string, unknown> = {};
    if (opts.value !== undefined) body.value = opts.value;
    if (opts.hosts !== undefined) body.hosts = opts.hosts;
    return secretOf(await this.http.json<SecretJson>("PUT", path(name), { json: body }));
  }

  async delete(name: string): Promise<void> {
    await this.http.json("DELETE", path(name));
  }

  /** The PEM certificate of the organization's interception CA (made on first need). */
  async interceptionCa(): Promise<string> {
    const j = await this.http.json<{ certificate_pem: string }>("GET", "/v1/interception-ca");
    return j.certificate_pem;
  }
}
