// The organization's sandboxes: the list (GET /v1/sandboxes).
import { api } from "./api.js";
import { age, el, show } from "./dom.js";

export async function showSandboxes() {
  const page = await api("GET", "/v1/sandboxes?limit=500");
  const rows = page.items.map((s) => el("tr", { "data-id": s.id },
    el("td", {}, el("a", { href: `#/sandboxes/${encodeURIComponent(s.id)}` }, el("code", {}, s.id))),
    el("td", {}, s.name ?? ""),
    el("td", { class: `state state-${s.state}` }, s.state, s.error_message ? el("div", { class: "muted" }, s.error_message) : ""),
    el("td", { class: "hide-narrow" }, s.snapshot ?? "", el("div", { class: "muted" }, s.runtime ?? "")),
    el("td", { class: "hide-narrow" }, Object.entries(s.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(", ")),
    el("td", { class: "hide-narrow", title: s.created_at }, age(s.created_at))));
  const table = el("table", { id: "sandboxes" },
    el("thead", {}, el("tr", {}, ...["Id", "Name", "State", "Image", "Labels", "Age"].map((h, i) =>
      el("th", { scope: "col", class: i >= 3 ? "hide-narrow" : "" }, h)))),
    el("tbody", {}, ...rows));
  show(el("h1", {}, "Sandboxes"),
       page.items.length ? table : el("p", { class: "muted" }, "No sandboxes yet."));
}
