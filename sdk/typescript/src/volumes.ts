/**
 * The organization's volumes (`client.createVolume` …): named storage mounted into sandboxes
 * (`createSandbox({ volumes })`) that outlives them. docs/api.md, "Volumes", has the routes.
 */
import { NamedResources } from "./resource.js";
import type { Volume } from "./types.js";

export const volumes = new NamedResources<Volume>("/v1/volumes", (j) => ({ sizeMb: j.size_mb ?? null }));
