/**
 * The organization's snapshots (`client.createSnapshot` …): a sandbox's filesystem committed as an
 * image that `createSandbox({ snapshot })` starts from. docs/api.md, "Snapshots", has the routes.
 */
import { NamedResources } from "./resource.js";
import type { Snapshot } from "./types.js";

export const snapshots = new NamedResources<Snapshot>("/v1/snapshots", (j) => ({
  sizeBytes: j.size_bytes,
  sourceSandboxId: j.source_sandbox_id,
}));
