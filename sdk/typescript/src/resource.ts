/**
 * What the resource modules share: the JSON type, a path segment, snake_case → camelCase keys, a
 * DELETE that answers false when there was nothing to delete, and one helper for the
 * organization's named resources.
 *
 * Volumes and snapshots are twins on the wire: `POST /v1/{kind}` creates one, `GET /v1/{kind}`
 * lists them by name a page at a time, `GET` and `DELETE /v1/{kind}/{name or id}` read and delete
 * one. Only the body of a create and the record's own fields differ, so each is a `NamedResources`
 * with its own path and converter of those fields (volumes.ts, snapshots.ts); the fields every
 * record has (`Named`) are read here.
 */
import { SandfortError } from "./errors.js";
import type { Transport } from "./http.js";
import type { Page } from "./types.js";

export type Json = Record<string, any>; // eslint-disable-line @typescript-eslint/no-explicit-any

/** `s` as one path segment. */
export function enc(s: string): string {
  return encodeURIComponent(s);
}

/** Shallow snake_case → camelCase of an object's own keys (values untouched). */
export function camel<T>(o: Json): T {
  const out: Json = {};
  for (const [k, v] of Object.entries(o)) out[k.replace(/_([a-z0-9])/g, (_, c: string) => c.toUpperCase())] = v;
  return out as T;
}

/** Awaits a DELETE: true when it deleted, false when there was nothing to delete (404). */
export async function deleted(request: Promise<unknown>): Promise<boolean> {
  try {
    await request;
    return true;
  } catch (e) {
    if (e instanceof SandfortError && e.status === 404) return false;
    throw e;
  }
}

/** What every named resource's record has. */
interface Named {
  id: string;
  name: string;
  state: string;
  createdAt: string;
  updatedAt: string | null;
}

/**
 * One collection of the organization's named resources at `path` (`/v1/volumes`), whose records'
 * own fields `own` reads (they stand between `name` and `state`). Stateless: each call is given
 * the client's transport.
 */
export class NamedResources<T extends Named> {
  constructor(
    readonly path: string,
    private readonly own: (j: Json) => Omit<T, keyof Named>,
  ) {}

  private readonly convert = (j: Json): T =>
    ({
      id: j.id,
      name: j.name,
      ...this.own(j),
      state: j.state,
      createdAt: j.created_at,
      updatedAt: j.updated_at ?? null,
    }) as T;

  async create(http: Transport, body: Json): Promise<T> {
    return this.convert(await http.json<Json>("POST", this.path, { json: body }));
  }

  /** One page, by name. */
  async list(http: Transport, opts: { limit?: number; cursor?: string } = {}): Promise<Page<T>> {
    const j = await http.json<Json>("GET", this.path, { query: { limit: opts.limit, cursor: opts.cursor } });
    return { items: (j.items as Json[]).map(this.convert), nextCursor: j.next_cursor ?? null };
  }

  async get(http: Transport, nameOrId: string): Promise<T> {
    return this.convert(await http.json<Json>("GET", `${this.path}/${enc(nameOrId)}`));
  }

  /** False when it did not exist. */
  delete(http: Transport, nameOrId: string): Promise<boolean> {
    return deleted(http.json("DELETE", `${this.path}/${enc(nameOrId)}`));
  }
}
