// The organization's audit chain (docs/audit.md): its events, filtered and paged by seq; the chain's
// verification and its latest signed checkpoint; a JSON Lines export. Every route here is the
// admin's: for anyone else the page shows the API's own 403 and offers nothing to press.
import { api, ApiError } from "./api.js";
import { el, errorLine, every, show, whenLeaving } from "./dom.js";

const PAGE = 100;
const FOLLOW_MS = 5000;
const OUTCOMES = new Set(["ok", "denied", "accepted", "started", "allowed"]);

// What a refusal of the API says, in the page's words and the API's.
export function refusal(e, what) {
  if (e instanceof ApiError && e.status === 403)
    return el("p", { class: "error ops-refusal", role: "alert" }, `Only an admin ${what}. `,
              el("span", { class: "muted" }, `(The API answered 403: ${e.message})`));
  return errorLine(e);
}

export function when(iso) {
  return iso ? iso.replace("T", " ").replace(/\.\d+Z$/, "Z") : "";
}

// The query string of a request: the filters, the superadmin's ?org=, and the page's own.
function query(view, extra = {}) {
  const q = new URLSearchParams();
  if (view.org) q.set("org", view.org);
  for (const [k, v] of Object.entries({ ...view.filters, ...extra }))
    if (v !== undefined && v !== null && v !== "") q.set(k, String(v));
  return q.toString();
}

async function eventsAfter(view, seq, limit = PAGE) {
  return api("GET", `/v1/audit?${query(view, { since_seq: seq > 0 ? seq : undefined, limit })}`);
}

// The PAGE matching events just before seq `before` (Infinity: the newest). The API lists in
// ascending seq only (since_seq, limit), so the page's first seq is found by bisection: the
// largest x after which at least PAGE matching events still come before `before`.
async function eventsBefore(view, before) {
  let hi;
  if (before === Infinity) {
    hi = 1024;
    while ((await eventsAfter(view, hi, 1)).items.length) hi *= 2;
  } else {
    hi = before - 1;
  }
  const full = async (x) => {
    const page = await eventsAfter(view, x, PAGE);
    const inside = page.items.filter((e) => e.seq < before);
    return { ok: inside.length === PAGE, inside };
  };
  let lo = 0;
  let best = await full(0);
  if (!best.ok) return { items: best.inside, older: false };
  while (hi - lo > 1) {
    const mid = Math.floor((lo + hi) / 2);
    const r = await full(mid);
    if (r.ok) { lo = mid; best = r; } else hi = mid;
  }
  return { items: best.inside, older: lo > 0 };
}

function eventRow(e) {
  const details = typeof e.details === "string" ? JSON.stringify(e.details) : JSON.stringify(e.details ?? {});
  return el("tr", { "data-seq": String(e.seq) },
    el("td", { class: "ops-num" }, String(e.seq)),
    el("td", { class: "ops-nowrap", title: e.ts }, when(e.ts)),
    el("td", { class: "ops-id" }, e.actor ?? ""),
    el("td", { class: "ops-action" }, e.action ?? ""),
    el("td", { class: "ops-id" }, e.target ?? ""),
    el("td", { class: `outcome outcome-${OUTCOMES.has(e.outcome) ? e.outcome : "other"}` }, e.outcome ?? ""),
    el("td", { class: "hide-narrow" }, el("code", { class: "ops-details" }, details)));
}

function eventsTable(items) {
  return el("table", { id: "audit-events", class: "ops-table ops-audit" },
    el("thead", {}, el("tr", {}, ...["Seq", "Time (UTC)", "Actor", "Action", "Target", "Outcome", "Details"].map((h) =>
      el("th", { scope: "col", class: h === "Details" ? "hide-narrow" : "" }, h)))),
    el("tbody", {}, ...[...items].reverse().map(eventRow)));
}

// A datetime-local value (the browser's local time) as the API's UTC form.
function utc(local) {
  if (!local) return "";
  const d = new Date(local);
  return Number.isNaN(d.getTime()) ? "" : d.toISOString();
}

function field(id, label, attrs = {}) {
  const input = el("input", { id, name: id, ...attrs });
  return { input, node: el("div", { class: "ops-field" }, el("label", { for: id }, label), input) };
}

// GET /v1/audit?format=jsonl, following X-Next-Cursor, as one Blob. A GET: no CSRF header needed.
async function exportJsonl(view) {
  const parts = [];
  let lines = 0;
  let cursor = "";
  for (;;) {
    const res = await fetch(`/v1/audit?${query(view, { format: "jsonl", limit: 100000, cursor })}`,
                            { credentials: "same-origin", cache: "no-store" });
    if (!res.ok) {
      const data = await res.json().catch(() => null);
      const err = data?.error ?? { code: "unknown", message: `HTTP ${res.status}` };
      throw new ApiError(res.status, err.code, err.message);
    }
    const text = await res.text();
    parts.push(text);
    lines += text.split("\n").filter(Boolean).length;
    cursor = res.headers.get("X-Next-Cursor") ?? "";
    if (!cursor) break;
  }
  return { blob: new Blob(parts, { type: "application/x-ndjson" }), lines };
}

const plural = (n, what) => `${n} ${what}${n === 1 ? "" : "s"}`;

function fileName(s) {
  return String(s).replace(/[^A-Za-z0-9._-]+/g, "_").slice(0, 80);
}

export async function showAudit(session, rest) {
  // The superadmin reads another organization's chain with ?org= (#/audit/<org>).
  const org = session.superadmin && rest[0] ? rest[0] : "";
  const view = { org, filters: {} };
  let alive = true;
  whenLeaving(() => { alive = false; });

  const heading = el("h1", {}, org ? `Audit log of ${org}` : "Audit log");
  const list = el("div", { id: "audit-list" }, el("p", { class: "muted" }, "Loading…"));
  const status = el("section", { id: "audit-status", class: "ops-panel", "aria-labelledby": "audit-status-h" },
                    el("h2", { id: "audit-status-h" }, "The chain"));
  show(heading, list);

  // The API decides: a page of events, or its refusal (then nothing else is drawn).
  let first;
  try {
    first = await eventsBefore(view, Infinity);
  } catch (e) {
    if (!alive) return;
    list.replaceChildren(refusal(e, "reads the audit log"));
    return;
  }
  if (!alive) return;

  // ---- the chain's status: verification and the latest signed checkpoint
  const verdict = el("div", { id: "audit-verdict", "aria-live": "polite" });
  const checkpoint = el("div", { id: "audit-checkpoint" });
  const verifyButton = el("button", { type: "button", id: "verify-now", onclick: () => verify() }, "Verify now");
  const signButton = el("button", { type: "button", id: "sign-checkpoint", class: "plain", onclick: () => sign() },
                        "Sign a checkpoint now");
  status.append(verdict, checkpoint, el("div", { class: "ops-actions" }, verifyButton, signButton));

  async function latestCheckpoint(seq) {
    if (seq === null || seq === undefined) return null;
    const page = await api("GET", `/v1/audit/checkpoints?${query({ org, filters: {} },
                                                              { after_seq: seq > 0 ? seq - 1 : undefined, limit: 1 })}`);
    return page.items[0] ?? null;
  }
  function drawCheckpoint(c) {
    checkpoint.replaceChildren(c
      ? el("p", {}, `Latest signed checkpoint: seq ${c.seq}, ${when(c.ts)}, key `, el("code", {}, c.key_id),
           ", head ", el("code", { class: "ops-hash" }, c.head_hash))
      : el("p", { class: "muted" }, "No signed checkpoint yet."));
  }
  async function verify() {
    verifyButton.disabled = true;
    verdict.replaceChildren(el("p", { class: "muted" }, "Verifying…"));
    try {
      const v = await api("GET", `/v1/audit/verify?${query({ org, filters: {} })}`);
      if (!alive) return;
      const at = new Date().toISOString();
      verdict.replaceChildren(v.ok
        ? el("p", { class: "verdict verdict-ok" }, el("strong", {}, "OK"),
             ` — ${plural(v.events, "event")} verified, ${plural(v.checkpoints, "signed checkpoint")} (checked ${when(at)})`)
        : el("p", { class: "verdict verdict-bad", role: "alert" }, el("strong", {}, `BROKEN at seq ${v.first_bad_seq}`),
             `: ${v.reason ?? ""} (${plural(v.events, "event")} verified before it) `,
             el("button", { type: "button", class: "plain", onclick: () => load(() => eventsAfter(view, v.first_bad_seq - 1)) },
                `Show events from seq ${v.first_bad_seq}`)),
        el("p", { class: "muted" }, "Head ", el("code", { class: "ops-hash" }, v.head_hash || "(none)")));
      drawCheckpoint(await latestCheckpoint(v.latest_checkpoint_seq));
    } catch (e) {
      if (alive) verdict.replaceChildren(refusal(e, "verifies the audit chain"));
    } finally {
      verifyButton.disabled = false;
    }
  }
  async function sign() {
    signButton.disabled = true;
    try {
      const c = await api("POST", `/v1/audit/checkpoints?${query({ org, filters: {} })}`);
      if (!alive) return;
      drawCheckpoint(c);
    } catch (e) {
      if (alive) checkpoint.replaceChildren(errorLine(e));
    } finally {
      signButton.disabled = false;
    }
  }

  // ---- filters
  const actor = field("audit-actor", "Actor", { placeholder: "key:key-…", autocomplete: "off" });
  const action = field("audit-action", "Action", { placeholder: "sandbox.create", autocomplete: "off" });
  const target = field("audit-target", "Target", { placeholder: "sbx-…", autocomplete: "off" });
  const since = field("audit-since", "From (local time)", { type: "datetime-local", step: "1" });
  const until = field("audit-until", "Until (local time)", { type: "datetime-local", step: "1" });
  const after = field("audit-after", "After seq", { type: "number", min: "0", step: "1", inputmode: "numeric" });
  const filterError = el("p", { class: "error", role: "alert" });
  const filters = el("form", { id: "audit-filters", class: "ops-form", "aria-label": "Filter events", onsubmit: (ev) => {
    ev.preventDefault();
    view.filters = { actor: actor.input.value.trim(), action: action.input.value.trim(), target: target.input.value.trim(),
                     since: utc(since.input.value), until: utc(until.input.value) };
    const from = after.input.value.trim();
    load(() => (from ? eventsAfter(view, Number(from)) : eventsBefore(view, Infinity)));
  } },
  actor.node, action.node, target.node, since.node, until.node, after.node,
  el("div", { class: "ops-actions" },
     el("button", { type: "submit" }, "Apply"),
     el("button", { type: "button", class: "plain", onclick: () => {
       for (const f of [actor, action, target, since, until, after]) f.input.value = "";
       view.filters = {};
       load(() => eventsBefore(view, Infinity));
     } }, "Clear")),
  filterError);

  // ---- the page of events, its pager, following, the export
  const table = el("div", { id: "audit-table" });
  const note = el("p", { class: "muted", "aria-live": "polite" });
  const newer = el("button", { type: "button", class: "plain", id: "audit-newer" }, "Newer →");
  const older = el("button", { type: "button", class: "plain", id: "audit-older" }, "← Older");
  const newest = el("button", { type: "button", class: "plain", id: "audit-newest" }, "Newest");
  const follow = el("input", { type: "checkbox", id: "audit-follow" });
  const exportButton = el("button", { type: "button", id: "export-jsonl" }, "Export JSON Lines");
  const exportNote = el("span", { class: "muted", "aria-live": "polite" });
  let items = [];
  let hasNewer = false;

  function draw(page, more) {
    items = page.items;
    hasNewer = more.newer;
    table.replaceChildren(items.length ? eventsTable(items) : el("p", { class: "muted" }, "No events match."));
    older.disabled = !more.older;
    newer.disabled = !more.newer;
    note.textContent = items.length
      ? `${plural(items.length, "event")}, seq ${items[0].seq} to ${items[items.length - 1].seq}, newest first.`
      : "";
  }
  // emptyNote: when the page asked for is empty, the current one stays and this is said instead.
  async function load(fetchPage, emptyNote) {
    filterError.textContent = "";
    exportNote.textContent = "";
    const was = [older.disabled, newer.disabled];
    for (const b of [older, newer, newest]) b.disabled = true;
    try {
      const page = await fetchPage();
      if (!alive) return;
      if (emptyNote && !page.items.length) {
        [older.disabled, newer.disabled] = was;
        note.textContent = emptyNote;
        return;
      }
      // A page read forward (since_seq) says whether more follow; one read backward ends before
      // a known event, or is the newest.
      const more = "next_cursor" in page
        ? { newer: page.next_cursor !== null, older: page.items.length > 0 && page.items[0].seq > 1 }
        : { newer: page.newer ?? false, older: page.older };
      draw(page, more);
    } catch (e) {
      [older.disabled, newer.disabled] = was;
      if (alive) filterError.textContent = e instanceof ApiError ? e.message : String(e);
    } finally {
      newest.disabled = false;
    }
  }
  newer.addEventListener("click", () => load(() => eventsAfter(view, items.length ? items[items.length - 1].seq : 0),
                                            "No newer events match."));
  older.addEventListener("click", () => load(async () => ({
    ...(await eventsBefore(view, items.length ? items[0].seq : Infinity)), newer: true }), "No older events match."));
  newest.addEventListener("click", () => load(() => eventsBefore(view, Infinity)));

  // Following: while on the newest page, new events are added at the top every few seconds.
  every(FOLLOW_MS, async () => {
    if (!follow.checked || hasNewer || !alive) return;
    try {
      const last = items.length ? items[items.length - 1].seq : 0;
      const page = await eventsAfter(view, last);
      if (!alive || !page.items.length) return;
      const keep = [...items, ...page.items].slice(-PAGE);
      draw({ items: keep }, { newer: page.next_cursor !== null, older: keep[0].seq > 1 });
    } catch { /* the next round tries again; a lasting failure shows on the next click */ }
  });

  let lastUrl = null;
  whenLeaving(() => { if (lastUrl) URL.revokeObjectURL(lastUrl); });
  exportButton.addEventListener("click", async () => {
    exportButton.disabled = true;
    exportNote.textContent = "Exporting…";
    try {
      const { blob, lines } = await exportJsonl(view);
      if (!alive) return;
      if (lastUrl) URL.revokeObjectURL(lastUrl);
      lastUrl = URL.createObjectURL(blob);
      const stamp = new Date().toISOString().replace(/[:.]/g, "-");
      const a = el("a", { href: lastUrl, download: `audit-${fileName(org || session.org)}-${stamp}.jsonl` });
      document.body.append(a);
      a.click();
      a.remove();
      exportNote.textContent = `Exported ${lines} event${lines === 1 ? "" : "s"}.`;
    } catch (e) {
      exportNote.textContent = "";
      if (alive) filterError.textContent = e instanceof ApiError ? e.message : String(e);
    } finally {
      exportButton.disabled = false;
    }
  });

  const pager = el("div", { class: "ops-pager" }, older, newer, newest,
                   el("label", { class: "ops-check" }, follow, " Follow new events"),
                   el("span", { class: "ops-spacer" }), exportButton, exportNote);
  list.replaceChildren(status, filters, pager, note, table);
  draw(first, { newer: false, older: first.older });
  verify();
}
