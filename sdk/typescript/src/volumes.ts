/**
 * The organization's volumes (`client.createVolume` …): named storage mounted into sandboxes
 * (`createSandbox({ volumes })`) that outlives them. docs/api.md, "Volumes", has the routes.
 */
import { NamedResources, type Json } from "./resource.js";
import type { Volume } from "./types.js";

function toVolume(j: Json): Volume {
  return {
    id: j.id,
    name: j.name,
    sizeMb: j.size_mb ?? null,
    state: j.state,
    createdAt: j.created_at,
    updatedAt: j.updated_at ?? null,
  };
}

export const volumes = new NamedResources<Volume>("/v1/volumes", toVolume);
