/**
 * The organization's snapshots (`client.createSnapshot` …): a sandbox's filesystem committed as an
 * image that `createSandbox({ snapshot })` starts from. docs/api.md, "Snapshots", has the routes.
 */
import { NamedResources, type Json } from "./resource.js";
import type { Snapshot } from "./types.js";

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

export const snapshots = new NamedResources<Snapshot>("/v1/snapshots", toSnapshot);
