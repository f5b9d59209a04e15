// Administration: the organization's API keys, its limits and their use, its kill switch, and for
// the superadmin every organization (docs/console.md). The API decides who may do what: the page
// draws a write action only where the session's role may use it, and shows the API's refusal else.
import { api } from "./api.js";
import { age, confirmAction, el, errorLine, show, whenLeaving } from "./dom.js";
import { refusal, when } from "./audit.js";

const EXPIRIES = [["", "never"], ["3600", "in 1 hour"], ["86400", "in 1 day"], ["604800", "in 7 days"],
                  ["2592000", "in 30 days"], ["7776000", "in 90 days"], ["31536000", "in 1 year"]];

// [field, label, usage of it, kind]
const LIMITS = [
  ["max_sandboxes", "Sandboxes", (u) => `${u.sandboxes} (${u.running} running)`, "count"],
  ["max_cpus", "CPUs", (u) => String(u.cpus), "number"],
  ["max_memory_mb", "Memory (MiB)", (u) => String(u.memory_mb), "count"],
  ["max_disk_mb", "Disk (MiB)", (u) => String(u.disk_mb), "count"],
  ["max_volumes", "Volumes", (u) => String(u.volumes), "count"],
  ["max_snapshots", "Snapshots", (u) => String(u.snapshots), "count"],
  ["allowed_images", "Allowed images", null, "list"],
  ["allowed_runtimes", "Allowed runtimes", null, "list"],
];

const shown = (v) => (Array.isArray(v) ? v.join(", ") : v === null || v === undefined ? "" : String(v));
const orgPath = (org) => `/v1/orgs/${encodeURIComponent(org)}`;

function panel(id, title) {
  const body = el("div", { class: "ops-panel-body" }, el("p", { class: "muted" }, "Loading…"));
  const node = el("section", { id, class: "ops-panel", "aria-labelledby": `${id}-h` }, el("h2", { id: `${id}-h` }, title), body);
  return { node, body };
}

// ---------------------------------------------------------------- a new key's secret, once
// A modal that shows the secret until the person closes it; then the dialog leaves the DOM and
// nothing holds the secret any more (it is never written to storage, a field or the URL).
function showSecret(created) {
  return new Promise((resolve) => {
    let secret = created.key;
    const code = el("code", { id: "new-key-secret", class: "ops-secret" }, secret);
    const said = el("span", { class: "muted", "aria-live": "polite" });
    const copy = async () => {
      try {
        await navigator.clipboard.writeText(secret);
        said.textContent = "Copied.";
      } catch {
        const range = document.createRange();
        range.selectNodeContents(code);
        getSelection().removeAllRanges();
        getSelection().addRange(range);
        said.textContent = "Selected: press Ctrl+C to copy.";
      }
    };
    const dialog = el("dialog", { class: "secret-dialog", "aria-labelledby": "new-key-h" },
      el("h2", { id: "new-key-h" }, "New API key"),
      el("p", {}, `${created.name} (`, el("code", {}, created.id), `), role ${created.role}, `,
         created.expires_at ? `expires ${when(created.expires_at)}.` : "does not expire."),
      el("p", {}, el("strong", {}, "Copy it now: it is shown this once."),
         " The server keeps only its hash, and the console does not keep it."),
      code,
      el("div", { class: "ops-actions" },
         el("button", { type: "button", class: "plain", onclick: copy }, "Copy"), said,
         el("button", { type: "button", id: "new-key-done", onclick: () => done() }, "Done")));
    const done = () => {
      getSelection().removeAllRanges();
      dialog.close();
      dialog.remove();
      code.textContent = "";
      secret = null;
      resolve();
    };
    dialog.addEventListener("cancel", (ev) => { ev.preventDefault(); done(); });
    document.body.append(dialog);
    dialog.showModal();
  });
}

// A form that issues a key: POST /v1/api-keys, or the superadmin's POST /v1/orgs/{org}/api-keys.
function keyForm(path, onCreated) {
  const name = el("input", { id: "new-key-name", name: "name", required: "", autocomplete: "off", placeholder: "ci-agent" });
  const role = el("select", { id: "new-key-role", name: "role" },
                  ...["viewer", "member", "admin"].map((r) => el("option", { value: r, selected: r === "member" }, r)));
  const expiry = el("select", { id: "new-key-expiry", name: "expires_in_s" },
                    ...EXPIRIES.map(([v, label]) => el("option", { value: v }, label)));
  const error = el("p", { class: "error", role: "alert" });
  const submit = el("button", { type: "submit" }, "Create key");
  const form = el("form", { id: "new-key", class: "ops-form", "aria-label": "Create an API key", onsubmit: async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    submit.disabled = true;
    try {
      const body = { name: name.value.trim(), role: role.value };
      if (expiry.value) body.expires_in_s = Number(expiry.value);
      const created = await api("POST", path, body);
      form.reset();
      await showSecret(created);
      onCreated();
    } catch (e) {
      error.textContent = e.message;
    } finally {
      submit.disabled = false;
    }
  } },
  el("div", { class: "ops-field" }, el("label", { for: "new-key-name" }, "Name"), name),
  el("div", { class: "ops-field" }, el("label", { for: "new-key-role" }, "Role"), role),
  el("div", { class: "ops-field" }, el("label", { for: "new-key-expiry" }, "Expires"), expiry),
  el("div", { class: "ops-field ops-end" }, submit), error);
  return form;
}

// ---------------------------------------------------------------- keys
function keyState(k) {
  if (k.revoked_at) return { text: `revoked ${when(k.revoked_at)}`, working: false };
  if (k.expires_at && Date.parse(k.expires_at) <= Date.now()) return { text: "expired", working: false };
  return { text: "working", working: true };
}

// focus: the id of an element to focus once drawn (the form, after a key was made).
async function drawKeys(session, page, body, focus) {
  let keys;
  try {
    keys = await api("GET", "/v1/api-keys");
  } catch (e) {
    if (page.alive) body.replaceChildren(refusal(e, "manages the organization's API keys"));
    return;
  }
  if (!page.alive) return;
  const admin = session.role === "admin";
  const message = el("p", { class: "muted", "aria-live": "polite" });
  const revoke = async (k, mine) => {
    const ok = await confirmAction(`Revoke the key "${k.name}" (${k.id})? Whatever uses it is refused at once.` +
                                   (mine ? " It is the key this console is signed in with: you will be signed out." : ""),
                                   "Revoke");
    if (!ok) return;
    try {
      await api("DELETE", `/v1/api-keys/${encodeURIComponent(k.id)}`);
    } catch (e) {
      message.replaceChildren(errorLine(e));
      return;
    }
    if (mine) location.hash = "#/sandboxes";  // its session ends with it: the next page asks to sign in
    else drawKeys(session, page, body);
  };
  const rows = keys.items.map((k) => {
    const state = keyState(k);
    const mine = k.id === session.principal;
    return el("tr", { "data-id": k.id, class: state.working ? "" : "ops-gone" },
      el("td", {}, k.name, mine ? el("span", { class: "ops-badge" }, "this session") : ""),
      el("td", { class: "hide-narrow" }, el("code", {}, k.id)),
      el("td", {}, k.role),
      el("td", { class: "hide-narrow ops-nowrap", title: k.created_at }, when(k.created_at)),
      el("td", { class: "ops-nowrap", title: k.last_used_at ?? "" }, k.last_used_at ? `${age(k.last_used_at)} ago` : "never"),
      el("td", { class: "ops-nowrap", title: k.expires_at ?? "" }, k.expires_at ? when(k.expires_at) : "never"),
      el("td", {}, state.text),
      el("td", {}, admin && state.working
        ? el("button", { type: "button", class: "danger ops-small", "aria-label": `Revoke ${k.name}`, onclick: () => revoke(k, mine) }, "Revoke")
        : ""));
  });
  body.replaceChildren(
    el("table", { id: "api-keys", class: "ops-table ops-admin" },
       el("thead", {}, el("tr", {}, ...["Name", "Id", "Role", "Created", "Last used", "Expires", "State", "Actions"].map((h, i) =>
         el("th", { scope: "col", class: i === 1 || i === 3 ? "hide-narrow" : "" }, h)))),
       el("tbody", {}, ...rows)),
    message,
    admin ? keyForm("/v1/api-keys", () => drawKeys(session, page, body, "new-key-name")) : "");
  if (focus) document.getElementById(focus)?.focus();
}

// ---------------------------------------------------------------- limits and the kill switch
function limitsTable(v) {
  const own = new Set(v.own ?? []);
  return el("table", { id: "limits", class: "ops-table ops-admin" },
    el("thead", {}, el("tr", {}, ...["Limit", "In force", "In use", "Set"].map((h) => el("th", { scope: "col" }, h)))),
    el("tbody", {}, ...LIMITS.map(([key, label, used]) => el("tr", { "data-limit": key },
      el("th", { scope: "row" }, label),
      el("td", {}, shown(v.limits[key]) || "none"),
      el("td", {}, used ? used(v.usage) : ""),
      el("td", { class: "muted" }, own.has(key) ? "for this organization" : "default")))));
}

// The superadmin's form: PUT /v1/orgs/{org}/limits with the fields changed; an emptied field
// goes back to the configured default (null).
function limitsForm(org, v, redraw) {
  const inputs = LIMITS.map(([key, label, , kind]) => {
    const input = el("input", { id: `limit-${key}`, name: key, value: shown(v.limits[key]), autocomplete: "off",
                                inputmode: kind === "list" ? undefined : "decimal" });
    return { key, kind, input, was: shown(v.limits[key]),
             node: el("div", { class: "ops-field" }, el("label", { for: `limit-${key}` }, label), input) };
  });
  const error = el("p", { class: "error", role: "alert" });
  return el("form", { id: "limits-form", class: "ops-form", "aria-label": "Set the limits", onsubmit: async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    const body = {};
    for (const f of inputs) {
      const text = f.input.value.trim();
      if (text === f.was) continue;
      if (text === "") body[f.key] = null;
      else if (f.kind === "list") body[f.key] = text.split(/[\s,]+/).filter(Boolean);
      else if (Number.isFinite(Number(text))) body[f.key] = Number(text);
      else return void (error.textContent = `${f.key}: not a number`);
    }
    if (!Object.keys(body).length) return void (error.textContent = "Nothing changed.");
    try {
      redraw(await api("PUT", `${orgPath(org)}/limits`, body));
    } catch (e) {
      error.textContent = e.message;
    }
  } },
  ...inputs.map((f) => f.node),
  el("div", { class: "ops-field ops-end" }, el("button", { type: "submit" }, "Save limits")),
  el("p", { class: "muted ops-wide" }, "Lists are separated by commas; an emptied field goes back to the configured default."),
  error);
}

// report: what the last engage stopped, drawn under the new state.
function drawKill(session, org, label, v, body, reload, report) {
  const admin = session.role === "admin";
  const out = el("div", { id: "kill-switch-report", "aria-live": "polite" }, report ?? "");
  const s = v.stopped;
  const state = s
    ? el("p", { class: "verdict verdict-bad" }, el("strong", {}, "Engaged"),
         ` since ${when(s.since)}, by ${s.by_superadmin ? "the operator (superadmin)" : "an admin of the organization"}: ` +
         "creating or starting a sandbox is refused.")
    : el("p", { class: "verdict verdict-ok" }, el("strong", {}, "Off"), ": sandboxes may be created and started.");
  let action = "";
  if (admin && !s) {
    action = el("button", { type: "button", id: "kill-engage", class: "danger", onclick: async () => {
      if (!await confirmAction(`Stop every started sandbox of ${label} now, and refuse creating or starting any until ` +
                               "the switch is released?", "Stop every sandbox")) return;
      try {
        const r = await api("POST", `${orgPath(org)}/stop-all`);
        const failed = Object.entries(r.failed ?? {});
        await reload([
          el("p", {}, `Stopped ${r.stopped.length} sandbox${r.stopped.length === 1 ? "" : "es"}`,
             r.stopped.length ? ": " : ".", ...r.stopped.map((id) => el("code", { class: "ops-chip" }, id))),
          failed.length ? el("p", { class: "error" }, "Not stopped: ", failed.map(([id, why]) => `${id} (${why})`).join(", ")) : "",
        ]);
      } catch (e) {
        out.replaceChildren(errorLine(e));
      }
    } }, "Stop every sandbox");
  } else if (admin && s && (!s.by_superadmin || session.superadmin)) {
    action = el("button", { type: "button", id: "kill-release", onclick: async () => {
      if (!await confirmAction(`Release the kill switch of ${label}? Sandboxes may be created and started again; ` +
                               "those it stopped stay stopped until started.", "Release")) return;
      try {
        await api("DELETE", `${orgPath(org)}/stop-all`);
        await reload();
      } catch (e) {
        out.replaceChildren(errorLine(e));
      }
    } }, "Release");
  } else if (admin && s) {
    action = el("p", { class: "muted" }, "The operator engaged it: only the superadmin releases it.");
  }
  body.replaceChildren(state, action, out);
}

// Limits, usage and the kill switch of one organization: one read (GET /v1/orgs/{org}/limits).
async function drawGuardrails(session, page, org, label, limitsBody, killBody, report) {
  let v;
  try {
    v = await api("GET", `${orgPath(org)}/limits`);
  } catch (e) {
    if (!page.alive) return;
    limitsBody.replaceChildren(refusal(e, "reads the organization's limits"));
    killBody.replaceChildren(refusal(e, "uses the kill switch"));
    return;
  }
  if (!page.alive) return;
  const reload = (r) => drawGuardrails(session, page, org, label, limitsBody, killBody, r);
  const drawLimits = (lv) => limitsBody.replaceChildren(
    limitsTable(lv),
    session.superadmin
      ? limitsForm(org, lv, (nv) => drawLimits(nv))
      : el("p", { class: "muted" }, "The operator (superadmin) sets the limits; an organization's admin reads them."));
  drawLimits(v);
  drawKill(session, org, label, v, killBody, reload, report);
}

// ---------------------------------------------------------------- organizations (superadmin)
async function drawOrgs(session, page, body, focus) {
  let orgs;
  try {
    orgs = await api("GET", "/v1/orgs");
  } catch (e) {
    if (page.alive) body.replaceChildren(errorLine(e));
    return;
  }
  if (!page.alive) return;
  const message = el("div", { "aria-live": "polite" });
  const redraw = (f) => drawOrgs(session, page, body, f);
  const change = async (o, verb, question) => {
    if (!await confirmAction(question, verb === "disable" ? "Disable" : "Enable")) return;
    try {
      await api("POST", `${orgPath(o.id)}/${verb}`);
      redraw();
    } catch (e) {
      message.replaceChildren(errorLine(e));
    }
  };
  const rows = orgs.items.map((o) => el("tr", { "data-id": o.id },
    el("td", {}, el("a", { href: `#/admin/orgs/${encodeURIComponent(o.id)}` }, o.name),
       o.superadmin ? el("span", { class: "ops-badge" }, "operator") : ""),
    el("td", { class: "hide-narrow" }, el("code", {}, o.id)),
    el("td", { class: `org-state org-${o.state === "active" ? "active" : "inactive"}` }, o.state),
    el("td", { class: "hide-narrow ops-nowrap", title: o.created_at }, when(o.created_at)),
    el("td", { class: "hide-narrow ops-nowrap", title: o.state_changed_at ?? "" }, when(o.state_changed_at)),
    el("td", {},
       !o.superadmin && o.state === "active"
         ? el("button", { type: "button", class: "danger ops-small", "aria-label": `Disable ${o.name}`, onclick: () =>
             change(o, "disable", `Disable the organization "${o.name}"? Its keys and tokens are refused at once and ` +
                                  "its started sandboxes stop.") }, "Disable")
         : "",
       !o.superadmin && o.state === "disabled"
         ? el("button", { type: "button", class: "ops-small", "aria-label": `Enable ${o.name}`, onclick: () =>
             change(o, "enable", `Enable the organization "${o.name}" again? Its keys work again; its sandboxes stay ` +
                                 "stopped until started.") }, "Enable")
         : "")));

  const name = el("input", { id: "new-org-name", name: "name", required: "", maxlength: "100", autocomplete: "off" });
  const withKey = el("input", { id: "new-org-key", name: "admin_key", type: "checkbox" });
  const error = el("p", { class: "error", role: "alert" });
  const form = el("form", { id: "new-org", class: "ops-form", "aria-label": "Create an organization", onsubmit: async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    try {
      const o = await api("POST", "/v1/orgs", { name: name.value.trim() });
      const key = withKey.checked
        ? await api("POST", `${orgPath(o.id)}/api-keys`, { name: "admin", role: "admin" }) : null;
      form.reset();
      if (key) await showSecret(key);
      redraw("new-org-name");
    } catch (e) {
      error.textContent = e.message;
    }
  } },
  el("div", { class: "ops-field" }, el("label", { for: "new-org-name" }, "Name"), name),
  el("div", { class: "ops-field ops-end" }, el("label", { class: "ops-check" }, withKey, " and its first admin key")),
  el("div", { class: "ops-field ops-end" }, el("button", { type: "submit" }, "Create organization")), error);

  body.replaceChildren(
    el("table", { id: "orgs", class: "ops-table ops-admin" },
       el("thead", {}, el("tr", {}, ...["Name", "Id", "State", "Created", "State changed", "Actions"].map((h, i) =>
         el("th", { scope: "col", class: i === 1 || i === 3 || i === 4 ? "hide-narrow" : "" }, h)))),
       el("tbody", {}, ...rows)),
    message, form);
  if (focus) document.getElementById(focus)?.focus();
}

// ---------------------------------------------------------------- the pages
function tracked() {
  const page = { alive: true };
  whenLeaving(() => { page.alive = false; });
  return page;
}

async function showOwn(session) {
  const page = tracked();
  const org = panel("admin-org", "Organization");
  const keys = panel("admin-keys", "API keys");
  const limits = panel("admin-limits", "Limits and usage");
  const kill = panel("admin-kill", "Kill switch");
  const orgs = session.superadmin ? panel("admin-orgs", "Organizations") : null;
  show(el("h1", {}, "Administration"), org.node, keys.node, limits.node, kill.node, orgs ? orgs.node : "");

  org.body.replaceChildren(el("dl", { class: "ops-facts" },
    el("dt", {}, "Name"), el("dd", {}, session.org),
    el("dt", {}, "Id"), el("dd", {}, el("code", {}, session.org_id)),
    el("dt", {}, "Signed in as"), el("dd", {}, `${session.principal_name} (`, el("code", {}, session.principal),
                                         `), role ${session.role}${session.superadmin ? ", the operator (superadmin)" : ""}`)));
  await Promise.all([
    drawKeys(session, page, keys.body),
    drawGuardrails(session, page, session.org_id, `"${session.org}"`, limits.body, kill.body),
    orgs ? drawOrgs(session, page, orgs.body) : null,
  ]);
}

// The superadmin's page of another organization: its limits (editable), its kill switch, a key in
// it. (The API lists keys of one's own organization only.)
async function showOrg(session, ref) {
  const page = tracked();
  if (!session.superadmin) {
    show(el("h1", {}, "Organization"), el("p", { class: "error", role: "alert" }, "Only the superadmin administers other organizations."));
    return;
  }
  const found = (await api("GET", "/v1/orgs")).items.find((o) => o.id === ref || o.name === ref);
  if (!page.alive) return;
  if (!found) {
    show(el("h1", {}, "Organization"), el("p", { class: "error", role: "alert" }, `No organization ${ref}.`),
         el("p", {}, el("a", { href: "#/admin" }, "← Administration")));
    return;
  }
  const limits = panel("admin-limits", "Limits and usage");
  const kill = panel("admin-kill", "Kill switch");
  const keys = panel("admin-keys", "A new API key");
  show(el("p", {}, el("a", { href: "#/admin" }, "← Administration")),
       el("h1", {}, `Organization ${found.name}`),
       el("p", {}, el("code", {}, found.id), ` · ${found.state} · `,
          el("a", { href: `#/audit/${encodeURIComponent(found.id)}` }, "its audit log")),
       limits.node, kill.node, keys.node);
  keys.body.replaceChildren(
    found.state === "active"
      ? keyForm(`${orgPath(found.id)}/api-keys`, () => {})
      : el("p", { class: "muted" }, `A ${found.state} organization gets no new key.`),
    el("p", { class: "muted" }, "Its keys are listed and revoked by its own admins (the API lists a key only to its organization)."));
  await drawGuardrails(session, page, found.id, `"${found.name}"`, limits.body, kill.body);
}

export async function showAdmin(session, rest) {
  if (rest[0] === "orgs" && rest[1]) return showOrg(session, rest[1]);
  return showOwn(session);
}
