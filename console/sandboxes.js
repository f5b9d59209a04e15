// The organization's sandboxes: the list (GET /v1/sandboxes) filtered by state and label, paged
// by the API's cursor and refreshed every few seconds, so a sandbox stopped by its idle timeout,
// its memory limit or the kill switch shows it (with the reason) without a reload; creating one;
// stop, start, pause, resume and delete, each confirmed first. A viewer sees, and is offered no
// change (the API would refuse it anyway).
import { api, ApiError } from "./api.js";
import { age, bytes, confirmAction, el, errorLine, every, show } from "./dom.js";

const STATES = ["", "creating", "pulling", "started", "paused", "stopped", "error"];
const REFRESH_MS = 3000;
const PAGE_SIZES = [25, 50, 100, 500];  // offered; the address may name any size the API takes (1–1000)
const PAGE_SIZE = 100;

// Which actions a state allows, as the API defines them (docs/api.md "Sandboxes").
function actionsFor(state) {
  switch (state) {
    case "started": return ["stop", "pause"];
    case "paused": return ["resume", "stop"];
    case "stopped": return ["start"];
    default: return [];
  }
}

function resourcesText(r = {}) {
  return [r.cpus !== undefined && `${r.cpus} CPU`, r.memory_mb !== undefined && bytes(r.memory_mb * 1048576),
          r.disk_mb !== undefined && `${bytes(r.disk_mb * 1048576)} disk`].filter(Boolean).join(" · ");
}

export async function showSandboxes(session) {
  const canAct = session.role !== "viewer";
  const query = new URLSearchParams(location.hash.split("?")[1] ?? "");
  const state = el("select", { id: "filter-state", name: "state" },
                   ...STATES.map((s) => el("option", { value: s, selected: s === (query.get("state") ?? "") }, s || "any state")));
  const label = el("input", { id: "filter-label", name: "label", placeholder: "team:x", value: query.get("label") ?? "",
                              "aria-describedby": "filter-help" });
  const asked = Number(query.get("per_page"));
  const size = Number.isInteger(asked) && asked >= 1 && asked <= 1000 ? asked : PAGE_SIZE;
  const perPage = el("select", { id: "filter-per-page", name: "per_page" },
                     ...[...new Set([...PAGE_SIZES, size])].sort((a, b) => a - b)
                       .map((n) => el("option", { value: String(n), selected: n === size }, String(n))));
  const status = el("p", { class: "muted", role: "status", id: "list-status" });
  const failure = el("div");
  const body = el("tbody");
  const pager = el("div", { class: "pager" });
  const cursors = [null];  // the cursor of each page seen: back goes to the one before

  const headers = ["Id", "Name", "State", "Image", "Resources", "Labels", "Age", ...(canAct ? ["Actions"] : [])];
  const table = el("table", { id: "sandboxes", class: canAct ? "with-actions" : "" },
    el("thead", {}, el("tr", {}, ...headers.map((h, i) =>
      el("th", { scope: "col", class: i >= 3 && i <= 6 ? "hide-narrow" : "" }, h)))), body);

  async function act(s, action) {
    const what = action === "delete" ? `Delete ${s.name ?? s.id}? Its files are gone for good.` : `${action[0].toUpperCase()}${action.slice(1)} ${s.name ?? s.id}?`;
    if (!(await confirmAction(what, action[0].toUpperCase() + action.slice(1)))) return;
    try {
      if (action === "delete") await api("DELETE", `/v1/sandboxes/${encodeURIComponent(s.id)}`);
      else await api("POST", `/v1/sandboxes/${encodeURIComponent(s.id)}/${action}`);
      failure.replaceChildren();
    } catch (e) {
      failure.replaceChildren(errorLine(e));
    }
    await refresh();
  }

  function row(s) {
    return el("tr", { "data-id": s.id, "data-state": s.state },
      el("td", {}, el("a", { href: `#/sandboxes/${encodeURIComponent(s.id)}` }, el("code", {}, s.id))),
      el("td", {}, s.name ?? ""),
      el("td", { class: `state state-${s.state}` }, s.state, s.error_message ? el("div", { class: "muted reason" }, s.error_message) : ""),
      el("td", { class: "hide-narrow" }, s.snapshot ?? "", el("div", { class: "muted" }, s.runtime ?? "")),
      el("td", { class: "hide-narrow" }, resourcesText(s.resources)),
      el("td", { class: "hide-narrow" }, Object.entries(s.labels ?? {}).map(([k, v]) => `${k}=${v}`).join(", ")),
      el("td", { class: "hide-narrow", title: s.created_at }, age(s.created_at)),
      canAct ? el("td", { class: "actions" },
        ...[...actionsFor(s.state), "delete"].map((a) =>
          el("button", { type: "button", class: a === "delete" ? "plain danger-text" : "plain", "data-action": a,
                         "aria-label": `${a} ${s.name ?? s.id}` }, a))) : null);
  }

  // One listener for every row's buttons (a page of 500 rows would otherwise hold 1,500).
  const shown = new Map();  // id → the sandbox its row shows
  body.addEventListener("click", (ev) => {
    const button = ev.target.closest("button[data-action]");
    const s = button && shown.get(button.closest("tr").dataset.id);
    if (s) act(s, button.dataset.action);
  });

  // Rows whose sandbox did not change are kept as they are (and a focused button keeps focus).
  function render(items) {
    performance.mark("sandboxes-render-start");
    const old = new Map([...body.rows].map((r) => [r.dataset.id, r]));
    shown.clear();
    const rows = items.map((s) => {
      shown.set(s.id, s);
      const signature = JSON.stringify(s);
      const kept = old.get(s.id);
      if (kept && kept.dataset.signature === signature) return kept;
      const r = row(s);
      r.dataset.signature = signature;
      return r;
    });
    body.replaceChildren(...rows);
    // Style and layout included (bench/console.mjs reads this measure).
    table.getBoundingClientRect();
    performance.measure("sandboxes-render", "sandboxes-render-start");
  }

  // One request at a time; a refresh asked for during one (a filter, a page, an action) runs
  // right after it, so what is shown always answers the latest ask.
  let loading = false;
  let again = false;
  async function refresh() {
    if (loading) {
      again = true;
      return;
    }
    loading = true;
    const params = new URLSearchParams({ limit: perPage.value });
    if (state.value) params.set("state", state.value);
    if (label.value.trim()) params.set("label", label.value.trim());
    if (cursors.at(-1)) params.set("cursor", cursors.at(-1));
    try {
      const page = await api("GET", `/v1/sandboxes?${params}`);
      render(page.items);
      failure.replaceChildren();
      status.textContent = page.items.length
        ? `${page.items.length} sandbox${page.items.length === 1 ? "" : "es"} on page ${cursors.length}.`
        : "No sandboxes match.";
      pager.replaceChildren(...[
        cursors.length > 1 && el("button", { type: "button", class: "plain", onclick: () => { cursors.pop(); refresh(); } }, "Previous page"),
        page.next_cursor && el("button", { type: "button", class: "plain", onclick: () => { cursors.push(page.next_cursor); refresh(); } }, "Next page"),
      ].filter(Boolean));
    } catch (e) {
      if (e instanceof ApiError && e.status === 401) throw e;
      failure.replaceChildren(errorLine(e));
    } finally {
      loading = false;
      if (again) {
        again = false;
        refresh();
      }
    }
  }

  const filters = el("form", { class: "filters", role: "search", onsubmit: (ev) => {
    ev.preventDefault();
    cursors.splice(1);
    const q = new URLSearchParams();
    if (state.value) q.set("state", state.value);
    if (label.value.trim()) q.set("label", label.value.trim());
    if (Number(perPage.value) !== PAGE_SIZE) q.set("per_page", perPage.value);
    history.replaceState(null, "", `#/sandboxes${q.size ? `?${q}` : ""}`);
    refresh();
  } },
  el("label", { for: "filter-state" }, "State"), state,
  el("label", { for: "filter-label" }, "Label"), label,
  el("button", { type: "submit" }, "Filter"),
  el("span", { id: "filter-help", class: "muted" }, "key:value, several joined by commas"),
  el("label", { for: "filter-per-page" }, "Per page"), perPage);
  for (const select of [state, perPage]) select.addEventListener("change", () => filters.requestSubmit());

  const create = canAct ? el("button", { type: "button", id: "create-sandbox", onclick: () => createDialog(refresh) }, "New sandbox") : null;
  show(el("div", { class: "heading" }, el("h1", {}, "Sandboxes"), create), filters, failure, table, pager, status);
  await refresh();
  every(REFRESH_MS, () => refresh());
}

// "KEY=value" per line (env, labels) → an object; blank lines are skipped.
function pairs(text, separator) {
  const out = {};
  for (const line of text.split("\n").map((l) => l.trim()).filter(Boolean)) {
    const at = line.indexOf(separator);
    if (at <= 0) throw new Error(`"${line}" is not name${separator}value`);
    out[line.slice(0, at).trim()] = line.slice(at + 1).trim();
  }
  return out;
}

function field(id, text, input, help) {
  input.id = id;
  return el("div", { class: "field" }, el("label", { for: id }, text), input, help ? el("small", { class: "muted" }, help) : null);
}

// The create form: only what is filled in is sent, so the daemon's defaults apply to the rest.
function createDialog(onCreated) {
  const v = (tag, attrs = {}) => el(tag, attrs);
  const inputs = {
    snapshot: v("input", { placeholder: "the daemon's default image" }),
    name: v("input", { placeholder: "optional", pattern: "[A-Za-z0-9][A-Za-z0-9_.\\-]{0,62}" }),
    runtime: v("select", {}),
    cpus: v("input", { type: "number", step: "0.1", min: "0.1" }),
    memory_mb: v("input", { type: "number", min: "64" }),
    disk_mb: v("input", { type: "number", min: "16" }),
    egress: v("textarea", { rows: "2", placeholder: "example.com, *.pypi.org" }),
    env: v("textarea", { rows: "2", placeholder: "NAME=value, one per line" }),
    labels: v("textarea", { rows: "2", placeholder: "team=x, one per line" }),
    ttl_s: v("input", { type: "number", min: "1" }),
    idle_timeout_s: v("input", { type: "number", min: "0" }),
  };
  for (const [name, input] of Object.entries(inputs)) input.name = name;
  inputs.runtime.append(...["", "runc", "gvisor"].map((r) => el("option", { value: r }, r || "the default runtime")));
  const error = el("div");
  const dialog = el("dialog", { class: "create", "aria-labelledby": "create-title" });
  const close = () => { dialog.close(); dialog.remove(); };
  const form = el("form", { onsubmit: async (ev) => {
    ev.preventDefault();
    const body = { wait: false };
    try {
      for (const k of ["snapshot", "name", "runtime"]) if (inputs[k].value.trim()) body[k] = inputs[k].value.trim();
      const resources = {};
      for (const k of ["cpus", "memory_mb", "disk_mb"]) if (inputs[k].value) resources[k] = Number(inputs[k].value);
      if (Object.keys(resources).length) body.resources = resources;
      for (const k of ["ttl_s", "idle_timeout_s"]) if (inputs[k].value) body[k] = Number(inputs[k].value);
      if (inputs.egress.value.trim()) body.egress_allowlist = inputs.egress.value.split(/[\s,]+/).filter(Boolean);
      if (inputs.env.value.trim()) body.env = pairs(inputs.env.value, "=");
      if (inputs.labels.value.trim()) body.labels = pairs(inputs.labels.value, "=");
      const made = await api("POST", "/v1/sandboxes", body);
      close();
      await onCreated();
      location.hash = `#/sandboxes/${encodeURIComponent(made.id)}`;
    } catch (e) {
      error.replaceChildren(errorLine(e));
    }
  } },
  el("h2", { id: "create-title" }, "New sandbox"),
  el("div", { class: "grid" },
    field("new-snapshot", "Image or snapshot", inputs.snapshot),
    field("new-name", "Name", inputs.name),
    field("new-runtime", "Runtime", inputs.runtime),
    field("new-cpus", "CPUs", inputs.cpus),
    field("new-memory", "Memory (MiB)", inputs.memory_mb),
    field("new-disk", "Disk (MiB)", inputs.disk_mb),
    field("new-ttl", "Time to live (s)", inputs.ttl_s),
    field("new-idle", "Idle timeout (s)", inputs.idle_timeout_s, "0: never")),
  field("new-egress", "Egress allowlist", inputs.egress, "empty: no egress at all"),
  field("new-env", "Environment", inputs.env),
  field("new-labels", "Labels", inputs.labels),
  error,
  el("div", { class: "actions" },
    el("button", { type: "button", class: "plain", onclick: close }, "Cancel"),
    el("button", { type: "submit" }, "Create")));
  dialog.append(form);
  dialog.addEventListener("cancel", close);
  document.body.append(dialog);
  dialog.showModal();
  inputs.snapshot.focus();
}
