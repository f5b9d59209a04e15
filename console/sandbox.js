// One sandbox's page, #/sandboxes/<id or name>[/<section>] (docs/console.md, "One sandbox"): a
// header with its state, resources and usage, refreshed every few seconds, and sections — Terminal,
// Files, Commands, Previews, Egress, Snapshots — as tabs. Everything goes through the public REST
// API with the session's key: a viewer's page reads everything and shows no control that writes,
// and what the API refuses (a stopped sandbox's files: 409) is said where it happened.
import { api, ApiError, apiStream } from "./api.js";
import { age, bytes, confirmAction, el, errorLine, every, redraw, show, whenLeaving } from "./dom.js";
import { fileBrowser } from "./files.js";

const q = encodeURIComponent;
const REFRESH_MS = 5000;
const SECTIONS = [
  ["terminal", "Terminal"], ["files", "Files"], ["commands", "Commands"],
  ["previews", "Previews"], ["egress", "Egress"], ["snapshots", "Snapshots"],
];
const DEFAULT_SECTION = "files";
// Characters of a command's log the page keeps (the server keeps the newest 1 MiB per stream).
const LOG_CAP = 2 * 1024 * 1024;

function when(iso) {
  return iso ? `${String(iso).replace("T", " ").slice(0, 19)} UTC` : "";
}

function duration(s) {
  if (s % 86400 === 0) return `${s / 86400} d`;
  if (s % 3600 === 0) return `${s / 3600} h`;
  if (s % 60 === 0) return `${s / 60} min`;
  return `${s} s`;
}

function fromNow(iso) {
  const s = (Date.parse(iso) - Date.now()) / 1000;
  return s >= 0 ? `in ${age(new Date(Date.now() - s * 1000).toISOString())}` : `${age(iso)} ago`;
}

function showNotFound(session, id) {
  show(el("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, el("a", { href: "#/sandboxes" }, "Sandboxes")),
       el("h1", {}, "Sandbox not found"),
       el("p", { id: "not-found", role: "alert" }, "There is no sandbox ", el("code", {}, id),
          ` in the organization ${session.org}.`),
       el("p", {}, el("a", { href: "#/sandboxes" }, "All sandboxes")));
}

export async function showSandbox(session, idOrName, section) {
  let sb;
  try {
    sb = await api("GET", `/v1/sandboxes/${q(idOrName)}`);
  } catch (e) {
    if (e instanceof ApiError && e.status === 404) return showNotFound(session, idOrName);
    throw e;
  }
  const page = {
    sb, metrics: null, metricsError: null,
    base: `/v1/sandboxes/${q(sb.id)}`,
    canWrite: session.role !== "viewer",
    isAdmin: session.role === "admin",
  };

  const title = el("h1", {}, sb.name ?? sb.id);
  const facts = el("dl", { id: "sandbox-facts", class: "facts" });
  const headProblem = el("div");

  const panels = {
    terminal: terminalPanel(page),
    files: filesPanel(page),
    commands: commandsPanel(page),
    previews: previewsPanel(page),
    egress: egressPanel(page),
    snapshots: snapshotsPanel(page),
  };

  function drawFacts() {
    const s = page.sb;
    const r = s.resources ?? {};
    const rows = [
      ["Id", el("code", {}, s.id)],
      ["Name", s.name ?? el("span", { class: "muted" }, "none")],
      ["State", [el("span", { id: "sandbox-state", class: `state state-${s.state}` }, s.state),
                 s.error_message ? el("div", { id: "sandbox-why", class: "why" }, s.error_message) : ""]],
      ["Image", s.snapshot ?? ""],
      ["Runtime", s.runtime ?? ""],
      ["Resources", `${r.cpus} CPU · ${r.memory_mb} MiB memory · ${r.pids} processes` +
                    (r.disk_mb ? ` · ${r.disk_mb} MiB disk` : "")],
      ["Usage", usage()],
      ["Created", el("span", { title: s.created_at }, `${when(s.created_at)} (${age(s.created_at)} ago)`)],
      ["Expires", s.expires_at ? el("span", { title: s.expires_at }, `${when(s.expires_at)} (${fromNow(s.expires_at)})`)
                               : el("span", { class: "muted" }, "no TTL")],
      ["Idle stop", s.idle_timeout_s ? `after ${duration(s.idle_timeout_s)} without use` : "never"],
    ];
    const labels = Object.entries(s.labels ?? {});
    if (labels.length) rows.push(["Labels", labels.map(([k, v]) => el("span", { class: "tag" }, `${k}=${v}`))]);
    if ((s.volumes ?? []).length)
      rows.push(["Volumes", s.volumes.map((v) => el("span", { class: "tag" }, `${v.name} → ${v.mount_path}${v.read_only ? " (read-only)" : ""}`))]);
    rows.push(["Works in", `${s.workdir ?? "/work"}${s.user ? ` as ${s.user}` : ""}`]);
    facts.replaceChildren(...rows.flatMap(([k, v]) => [el("dt", {}, k), el("dd", {}, v)]));
  }

  function usage() {
    const m = page.metrics;
    if (page.sb.state !== "started") return el("span", { class: "muted" }, "not running");
    if (page.metricsError) return el("span", { class: "error" }, page.metricsError.message);
    if (!m) return el("span", { class: "muted" }, "measuring…");
    return el("span", { id: "sandbox-usage" },
      `CPU ${Number(m.cpu_percent).toFixed(1)} % · memory ${bytes(m.memory_bytes)} of ${bytes(m.memory_limit_bytes)}` +
      ` · ${m.pids} processes · disk ${m.disk_bytes === null || m.disk_bytes === undefined ? "not measured" : bytes(m.disk_bytes)}` +
      ` · egress ${bytes(m.egress_bytes_in)} in, ${bytes(m.egress_bytes_out)} out`);
  }

  let refreshing = false;
  async function refreshHeader() {
    if (refreshing) return;
    refreshing = true;
    try {
      page.sb = await api("GET", page.base);
      if (page.sb.state === "started") {
        try {
          page.metrics = await api("GET", `${page.base}/metrics`);
          page.metricsError = null;
        } catch (e) {
          page.metrics = null;
          page.metricsError = e;
        }
      } else {
        page.metrics = null;
        page.metricsError = null;
      }
      headProblem.replaceChildren();
      drawFacts();
      panels.egress.update();
    } catch (e) {
      headProblem.replaceChildren(e instanceof ApiError && e.status === 404
        ? el("p", { class: "error", role: "alert" }, "This sandbox no longer exists.") : errorLine(e));
    } finally {
      refreshing = false;
    }
  }

  // Tabs (WAI-ARIA): arrow keys, Home and End move between them; each panel has its own heading.
  const keys = SECTIONS.map(([k]) => k);
  let current = keys.includes(section) ? section : DEFAULT_SECTION;
  const tabs = SECTIONS.map(([key, label]) => el("button", {
    type: "button", role: "tab", id: `tab-${key}`, "aria-controls": `${key}-section`,
    onclick: () => select(key),
  }, label));
  const tablist = el("div", { role: "tablist", "aria-label": "Sandbox sections", class: "tabs", onkeydown: (ev) => {
    const i = keys.indexOf(current);
    const j = { ArrowRight: (i + 1) % keys.length, ArrowLeft: (i - 1 + keys.length) % keys.length,
                Home: 0, End: keys.length - 1 }[ev.key];
    if (j === undefined) return;
    ev.preventDefault();
    select(keys[j]);
    tabs[j].focus();
  } }, ...tabs);
  for (const [key] of SECTIONS) {
    const p = panels[key].element;
    p.setAttribute("role", "tabpanel");
    p.setAttribute("aria-labelledby", `tab-${key}`);
    p.classList.add("panel");
  }

  function select(key) {
    current = key;
    SECTIONS.forEach(([k], i) => {
      const on = k === key;
      tabs[i].setAttribute("aria-selected", on ? "true" : "false");
      tabs[i].tabIndex = on ? 0 : -1;
      panels[k].element.hidden = !on;
    });
    history.replaceState(null, "", `#/sandboxes/${q(page.sb.id)}/${key}`);
    panels[key].shown();
    // For what a section mounts later (the terminal): it is visible now, and may size itself.
    panels[key].element.dispatchEvent(new CustomEvent("sandfort:shown"));
  }

  drawFacts();
  show(el("nav", { class: "crumbs", "aria-label": "Breadcrumb" }, el("a", { href: "#/sandboxes" }, "Sandboxes"),
          el("span", { class: "muted", "aria-hidden": "true" }, "/"), el("span", { "aria-current": "page" }, sb.id)),
       title, headProblem, facts, tablist,
       ...SECTIONS.map(([k]) => panels[k].element));
  select(current);
  refreshHeader();

  every(REFRESH_MS, () => {
    if (document.hidden) return;
    refreshHeader();
    panels[current].tick?.();
  });
  whenLeaving(() => { for (const p of Object.values(panels)) p.stop?.(); });
}

// ---------------------------------------------------------------------------------------- terminal
// A member's terminal opens when its section is first shown (console/terminal.js, loaded then: the
// list and the other sections never download xterm.js); once its program ends, a button opens
// another. A viewer has none: a terminal acts in the sandbox.
function terminalPanel(page) {
  const screen = el("div", { id: "terminal" });
  const again = el("button", { type: "button", hidden: true, onclick: () => open() }, "Open a new terminal");
  const element = el("section", { id: "terminal-section" },
    el("h2", {}, "Terminal"),
    page.canWrite ? "" : el("p", { class: "muted" }, "A terminal acts in the sandbox: it needs the member role."),
    screen, again);
  let live = false;
  let ended = null;  // the terminal whose program exited: disposed when another opens
  async function open() {
    if (!page.canWrite || live) return;
    live = true;
    again.hidden = true;
    ended?.close();
    const { mountTerminal } = await import("./terminal.js");
    const terminal = mountTerminal(screen, page.sb.id, { onExit: () => {
      live = false;
      ended = terminal;
      again.hidden = false;
    } });
  }
  return { element, shown() { open().catch((e) => screen.replaceChildren(errorLine(e))); } };
}

// ------------------------------------------------------------------------------------------ files
function filesPanel(page) {
  const browser = fileBrowser(page.sb.id, { canWrite: page.canWrite, start: page.sb.workdir ?? "/work" });
  const element = el("section", { id: "files-section" }, el("h2", {}, "Files"), browser.element);
  return {
    element,
    shown() { if (!browser.loaded()) browser.load(); },
    stop: browser.stop,
  };
}

// --------------------------------------------------------------------------------------- commands
// Reads the server-sent events of a Response: calls onEvent(name, data) for each, data parsed.
async function readEvents(res, onEvent) {
  const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { done, value } = await reader.read();
    if (done) return;
    buf += value.replace(/\r\n?/g, "\n");
    let end;
    while ((end = buf.indexOf("\n\n")) >= 0) {
      const block = buf.slice(0, end);
      buf = buf.slice(end + 2);
      let name = "message";
      const data = [];
      for (const line of block.split("\n")) {
        if (line.startsWith(":")) continue;
        const i = line.indexOf(":");
        const field = i < 0 ? line : line.slice(0, i);
        const v = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
        if (field === "event") name = v;
        else if (field === "data") data.push(v);
      }
      if (!data.length) continue;
      let parsed;
      try { parsed = JSON.parse(data.join("\n")); } catch { parsed = { data: data.join("\n") }; }
      onEvent(name, parsed);
    }
  }
}

function commandsPanel(page) {
  const base = `${page.base}/commands`;
  const problem = el("div");
  const tbody = el("tbody");
  const table = el("table", { id: "commands", class: "commands" },
    el("thead", {}, el("tr", {}, ...["Id", "Command", "State", "Exit code", "Started", ""].map((h, i) =>
      el("th", { scope: "col", class: i === 0 || i === 4 ? "hide-narrow" : i === 3 ? "num" : "" },
         h || el("span", { class: "visually-hidden" }, "Actions"))))),
    tbody);
  const logsTitle = el("h3", { id: "command-logs-title" }, "Logs");
  const logsState = el("p", { class: "muted", role: "status", id: "command-logs-state" });
  const logs = el("pre", { id: "command-logs", class: "logs", tabindex: "0", "aria-labelledby": "command-logs-title" });
  const logsBox = el("div", { class: "logs-box", hidden: true }, logsTitle, logsState, logs);
  let commands = [];
  let sig = null;
  let follow = null;
  let shown = null;
  let kept = 0;

  const element = el("section", { id: "commands-section" }, el("h2", {}, "Background commands"));
  if (page.canWrite) {
    const cmd = el("input", { id: "command-input", type: "text", required: true, autocomplete: "off", spellcheck: "false",
                              placeholder: "python3 -m http.server 8000 --bind 0.0.0.0" });
    const cwd = el("input", { id: "command-cwd", type: "text", autocomplete: "off", spellcheck: "false",
                              placeholder: page.sb.workdir ?? "/work" });
    const start = el("button", { type: "submit" }, "Start");
    element.append(el("form", { class: "stack-form", id: "command-form", onsubmit: async (ev) => {
      ev.preventDefault();
      problem.replaceChildren();
      start.disabled = true;
      try {
        const body = { command: cmd.value };
        if (cwd.value.trim()) body.cwd = cwd.value.trim();
        const c = await api("POST", base, body);
        cmd.value = "";
        await load();
        showLogs(commands.find((x) => x.id === c.id) ?? { ...c, command: body.command });
      } catch (e) {
        problem.replaceChildren(errorLine(e));
      } finally {
        start.disabled = false;
      }
    } },
    el("div", { class: "field grow" }, el("label", { for: "command-input" }, "Command (runs under /bin/sh -c, in the background)"), cmd),
    el("div", { class: "field" }, el("label", { for: "command-cwd" }, "Working directory"), cwd),
    start));
  }
  element.append(problem, table,
                 el("p", { class: "muted" }, "Exited commands are forgotten 10 minutes after they end; their logs keep the newest 1 MiB per stream."),
                 logsBox);

  function row(c) {
    const actions = el("td", { class: "actions" },
      el("button", { type: "button", class: "plain", "data-focus": `logs:${c.id}`, "aria-label": `Logs of ${c.id}`,
                     onclick: () => showLogs(c) }, "Logs"));
    if (page.canWrite && c.state === "running")
      actions.append(el("button", { type: "button", class: "plain danger-text", "data-focus": `kill:${c.id}`,
                                    "aria-label": `Kill ${c.id}`, onclick: () => kill(c) }, "Kill"));
    return el("tr", { "data-id": c.id, class: shown === c.id ? "selected" : "" },
      el("td", { class: "hide-narrow" }, el("code", {}, c.id)),
      el("td", {}, el("code", { class: "command" }, c.command ?? "")),
      el("td", { class: `state state-${c.state}` }, c.state),
      el("td", { class: "num" }, c.exit_code ?? ""),
      el("td", { class: "hide-narrow", title: c.started_at }, c.started_at ? `${age(c.started_at)} ago` : ""),
      actions);
  }

  function draw() {
    redraw(element, () => tbody.replaceChildren(...(commands.length ? commands.map(row)
      : [el("tr", {}, el("td", { colspan: "6", class: "muted" }, "No background commands."))])));
  }

  async function load() {
    try {
      const r = await api("GET", base);
      commands = (r.items ?? []).sort((a, b) => String(b.started_at).localeCompare(String(a.started_at)));
      problem.replaceChildren();
      const s = JSON.stringify([shown, commands.map((c) => [c.id, c.state, c.exit_code])]);
      if (s !== sig) { sig = s; draw(); }
    } catch (e) {
      problem.replaceChildren(errorLine(e));
    }
  }

  function stopFollow() {
    follow?.abort();
    follow = null;
  }

  function append(text, stream) {
    if (!text) return;
    const atEnd = logs.scrollTop + logs.clientHeight >= logs.scrollHeight - 4;
    logs.append(stream === "stderr" ? el("span", { class: "stderr" }, text) : document.createTextNode(text));
    kept += text.length;
    while (kept > LOG_CAP && logs.firstChild) {
      kept -= logs.firstChild.textContent.length;
      logs.firstChild.remove();
    }
    if (atEnd) logs.scrollTop = logs.scrollHeight;
  }

  async function showLogs(c) {
    stopFollow();
    shown = c.id;
    sig = null;
    draw();
    logsBox.hidden = false;
    logsTitle.textContent = `Logs of ${c.id}: ${c.command ?? ""}`;
    logs.replaceChildren();
    kept = 0;
    const path = `${base}/${q(c.id)}/logs`;
    if (c.state === "running") {
      const ctl = (follow = new AbortController());
      logsState.textContent = "Following live…";
      try {
        const res = await apiStream(`${path}?follow=true`, { signal: ctl.signal, accept: "text/event-stream" });
        let ended = false;
        await readEvents(res, (name, data) => {
          if (name === "stdout" || name === "stderr") append(data.data ?? "", name);
          else if (name === "exit") { ended = true; logsState.textContent = `Exited with code ${data.exit_code}.`; }
          else if (name === "error") { ended = true; logsState.textContent = data.error?.message ?? "The stream ended with an error."; }
        });
        if (!ended && follow === ctl) logsState.textContent = "The stream ended.";
        if (follow === ctl) { follow = null; load(); }
      } catch (e) {
        if (e.name !== "AbortError") logsState.textContent = e.message;
      }
    } else {
      logsState.textContent = c.exit_code === undefined ? "" : `Exited with code ${c.exit_code}.`;
      try {
        const r = await api("GET", path);
        if (shown !== c.id) return;
        append(r.stdout, "stdout");
        append(r.stderr, "stderr");
        if (!r.stdout && !r.stderr) logsState.textContent += " No output.";
      } catch (e) {
        logsState.textContent = e.message;
      }
    }
  }

  async function kill(c) {
    if (!(await confirmAction(`Send TERM to ${c.id} (${c.command}) and everything it started?`, "Kill"))) return;
    try {
      await api("POST", `${base}/${q(c.id)}/kill`, { signal: "TERM" });
    } catch (e) {
      problem.replaceChildren(errorLine(e));
    }
    await load();
  }

  return { element, shown: load, tick: load, stop: stopFollow };
}

// --------------------------------------------------------------------------------------- previews
function previewsPanel(page) {
  const links = new Map(); // port → the preview link (with its token), fetched once per page
  const problem = el("div");
  const tbody = el("tbody");
  const table = el("table", { id: "ports", class: "ports" },
    el("thead", {}, el("tr", {}, ...["Port", "Address", "Process", "Preview"].map((h, i) =>
      el("th", { scope: "col", class: i === 1 || i === 2 ? "hide-narrow" : "" }, h)))),
    tbody);
  let sig = null;
  const element = el("section", { id: "previews-section" }, el("h2", {}, "Previews"),
    el("p", { class: "muted" }, "The ports listening in the sandbox. A preview opens the port's server in a new tab; " +
       "its link carries a token for that one port, which the preview keeps as its own cookie."),
    problem, table);

  async function linkOf(port) {
    if (!links.has(port)) links.set(port, (await api("GET", `${page.base}/preview/${port}`)).link);
    return links.get(port);
  }

  if (page.canWrite) {
    const port = el("input", { id: "preview-port", type: "number", min: "1", max: "65535", required: true, inputmode: "numeric" });
    const result = el("p", { class: "muted", role: "status" });
    element.append(el("form", { class: "inline-form", id: "preview-form", onsubmit: async (ev) => {
      ev.preventDefault();
      result.replaceChildren();
      const n = Number(port.value);
      try {
        const link = await linkOf(n);
        window.open(link, "_blank", "noopener,noreferrer");
        // Shown too, should the browser have blocked the new tab.
        result.replaceChildren("Opened in a new tab: ",
          el("a", { href: link, target: "_blank", rel: "noopener noreferrer" }, `the preview of port ${n}`), ".");
      } catch (e) {
        result.replaceChildren(errorLine(e));
      }
    } }, el("label", { for: "preview-port" }, "Open the preview of port"), port,
    el("button", { type: "submit" }, "Open preview")), result);
  } else {
    element.append(el("p", { class: "muted" }, page.sb.public_preview
      ? "This sandbox's previews are public: their URLs open without a token."
      : "Opening a preview takes a member's link (its token reaches the app with every method): a viewer sees the URLs only."));
  }

  function cell(p) {
    if (!p.previewable)
      return el("span", { class: "muted" }, `Listens on ${p.address} only: a preview reaches servers bound to 0.0.0.0 or ::.`);
    const link = page.canWrite ? links.get(p.port) : page.sb.public_preview ? p.url : null;
    if (!link) return el("span", {}, el("code", {}, p.url));
    return el("a", { href: link, target: "_blank", rel: "noopener noreferrer", class: "preview-link", "data-focus": `port:${p.port}`,
                     "aria-label": `Open the preview of port ${p.port} in a new tab` }, p.url);
  }

  async function load() {
    try {
      const r = await api("GET", `${page.base}/ports`);
      const items = (r.items ?? []).sort((a, b) => a.port - b.port || String(a.address).localeCompare(String(b.address)));
      if (page.canWrite)
        await Promise.all(items.filter((p) => p.previewable && !links.has(p.port)).map((p) => linkOf(p.port).catch(() => {})));
      problem.replaceChildren();
      const s = JSON.stringify(items.map((p) => [p.port, p.address, p.previewable, p.process, p.pid, links.has(p.port)]));
      if (s === sig) return;
      sig = s;
      redraw(element, () => tbody.replaceChildren(...(items.length ? items.map((p) => el("tr", { "data-port": String(p.port) },
        el("td", { class: "num" }, String(p.port)),
        el("td", { class: "hide-narrow" }, el("code", {}, p.address), p.family === "ipv6" ? " (IPv6)" : ""),
        el("td", { class: "hide-narrow" }, p.process ?? "", p.pid ? el("span", { class: "muted" }, ` (pid ${p.pid})`) : ""),
        el("td", {}, cell(p))))
        : [el("tr", {}, el("td", { colspan: "4", class: "muted" }, "Nothing listens yet."))])));
    } catch (e) {
      sig = null;
      problem.replaceChildren(errorLine(e));
    }
  }

  return { element, shown: load, tick: load };
}

// ----------------------------------------------------------------------------------------- egress
function egressPanel(page) {
  const problem = el("div");
  const status = el("p", { class: "muted", role: "status" });
  const counts = el("p", { id: "egress-counts" });
  const decisions = el("div", { id: "egress-decisions" });
  const element = el("section", { id: "egress-section" }, el("h2", {}, "Egress"));
  let area = null;
  let dirty = false;
  let view = null;

  const help = el("p", { id: "allowlist-help", class: "muted" },
    "A host name (example.com: that host only), *.example.com (every name below it, not example.com itself) " +
    "or * (any public host). Empty: the sandbox reaches nothing outside. Private, loopback and metadata " +
    "addresses stay refused whatever the list says.");
  if (page.canWrite) {
    area = el("textarea", { id: "egress-allowlist", rows: "6", spellcheck: "false", autocomplete: "off",
                            "aria-describedby": "allowlist-help", oninput: () => { dirty = true; } });
    const save = el("button", { type: "submit" }, "Save allowlist");
    element.append(el("h3", {}, "Allowlist"), el("form", { class: "stack-form", id: "egress-form", onsubmit: async (ev) => {
      ev.preventDefault();
      problem.replaceChildren();
      status.textContent = "";
      const hosts = area.value.split(/[\s,]+/).map((h) => h.trim()).filter(Boolean);
      save.disabled = true;
      try {
        page.sb = await api("PATCH", page.base, { egress_allowlist: hosts });
        dirty = false;
        update();
        status.textContent = hosts.length
          ? "Saved: the proxy applies it from the sandbox's next connection."
          : "Saved: the sandbox now reaches nothing outside.";
      } catch (e) {
        problem.replaceChildren(errorLine(e));
      } finally {
        save.disabled = false;
      }
    } }, el("label", { for: "egress-allowlist" }, "Hosts the sandbox may reach, one a line"), area, help, save), problem, status);
  } else {
    view = el("ul", { id: "egress-allowlist-view", class: "hosts" });
    element.append(el("h3", {}, "Allowlist"), view, help);
  }
  element.append(el("h3", {}, "Decisions"), counts, decisions);

  function update() {
    const list = page.sb.egress_allowlist ?? [];
    if (area && !dirty) area.value = list.join("\n");
    if (view) view.replaceChildren(...(list.length ? list.map((h) => el("li", {}, el("code", {}, h)))
      : [el("li", { class: "muted" }, "Empty: the sandbox reaches nothing outside.")]));
    const m = page.metrics;
    counts.replaceChildren(m
      ? `Since the sandbox (re)started: ${m.egress_allowed} connections allowed, ${m.egress_denied} refused; ` +
        `${bytes(m.egress_bytes_in)} in, ${bytes(m.egress_bytes_out)} out.`
      : el("span", { class: "muted" }, page.sb.state === "started" ? "Counting…" : "Counts are kept while the sandbox runs."));
  }

  // The proxy's decisions are `egress` events of the organization's audit chain, written once a
  // minute per host and outcome (docs/audit.md); the audit log is an admin's to read.
  async function loadDecisions() {
    if (!page.isAdmin) {
      decisions.replaceChildren(el("p", { class: "muted" },
        "Each decision of the proxy (host, port, allowed or refused, why) is written to the organization's " +
        "audit log once a minute; an admin reads it there and on this page."));
      return;
    }
    try {
      const all = [];
      let cursor = null;
      for (let i = 0; i < 10; i++) {
        const r = await api("GET", `/v1/audit?action=egress&target=${q(page.sb.id)}&limit=1000${cursor ? `&cursor=${q(cursor)}` : ""}`);
        all.push(...(r.items ?? []));
        if (!r.next_cursor) break;
        cursor = r.next_cursor;
      }
      const recent = all.slice(-100).reverse();
      decisions.replaceChildren(recent.length ? el("table", { id: "egress-decision-list" },
        el("thead", {}, el("tr", {}, ...["Last", "Host", "Decision", "Count", "Bytes in / out", "Why"].map((h, i) =>
          el("th", { scope: "col", class: i === 4 ? "hide-narrow" : "" }, h)))),
        el("tbody", {}, ...recent.map((e) => {
          const d = e.details ?? {};
          return el("tr", {},
            el("td", { title: e.ts }, when(d.last ?? e.ts)),
            el("td", {}, el("code", {}, `${d.host || "?"}${d.port ? `:${d.port}` : ""}`)),
            el("td", { class: `decision decision-${e.outcome}` }, e.outcome),
            el("td", { class: "num" }, String(d.count ?? "")),
            el("td", { class: "hide-narrow" }, `${bytes(d.bytes_in ?? 0)} / ${bytes(d.bytes_out ?? 0)}`),
            el("td", {}, Object.entries(d.reasons ?? {}).map(([k, v]) => `${k} (${v})`).join(", ")));
        })))
        : el("p", { class: "muted" }, "No decisions written yet (they are written once a minute)."));
    } catch (e) {
      decisions.replaceChildren(errorLine(e));
    }
  }

  update();
  return { element, update, shown: loadDecisions };
}

// -------------------------------------------------------------------------------------- snapshots
function snapshotsPanel(page) {
  const problem = el("div");
  const status = el("p", { class: "muted", role: "status" });
  const tbody = el("tbody");
  const table = el("table", { id: "snapshots", class: "snapshots" },
    el("thead", {}, el("tr", {}, ...["Name", "Id", "Size", "State", "Taken"].map((h, i) =>
      el("th", { scope: "col", class: i === 1 ? "hide-narrow" : i === 2 ? "num" : "" }, h)))),
    tbody);
  const element = el("section", { id: "snapshots-section" }, el("h2", {}, "Snapshots"),
    el("p", { class: "muted" }, "A snapshot keeps the sandbox's files (installed packages included), not its memory or " +
       "processes; a new sandbox is made from it by naming it as its snapshot."));
  if (page.canWrite) {
    const name = el("input", { id: "snapshot-name", type: "text", required: true, autocomplete: "off", spellcheck: "false",
                               pattern: "[A-Za-z0-9][A-Za-z0-9_.\\-]{0,62}", "aria-describedby": "snapshot-name-help" });
    const take = el("button", { type: "submit" }, "Take snapshot");
    element.append(el("form", { class: "inline-form", id: "snapshot-form", onsubmit: async (ev) => {
      ev.preventDefault();
      problem.replaceChildren();
      take.disabled = true;
      status.textContent = `Taking ${name.value}… (a running sandbox is paused for the moment of the copy)`;
      try {
        const s = await api("POST", "/v1/snapshots", { sandbox_id: page.sb.id, name: name.value.trim() });
        status.textContent = `Snapshot ${s.name} taken (${bytes(s.size_bytes)}).`;
        name.value = "";
        await load();
      } catch (e) {
        status.textContent = "";
        problem.replaceChildren(errorLine(e));
      } finally {
        take.disabled = false;
      }
    } }, el("label", { for: "snapshot-name" }, "Snapshot name"), name, take),
    el("p", { id: "snapshot-name-help", class: "muted small" }, "1–63 letters, digits, “_”, “.”, “-”; unique in the organization."));
  }
  element.append(problem, status, el("h3", {}, "Taken from this sandbox"), table);

  async function load() {
    try {
      const mine = [];
      let cursor = null;
      for (let i = 0; i < 20; i++) {
        const r = await api("GET", `/v1/snapshots?limit=1000${cursor ? `&cursor=${q(cursor)}` : ""}`);
        mine.push(...(r.items ?? []).filter((s) => s.source_sandbox_id === page.sb.id));
        if (!r.next_cursor) break;
        cursor = r.next_cursor;
      }
      mine.sort((a, b) => String(b.created_at).localeCompare(String(a.created_at)));
      tbody.replaceChildren(...(mine.length ? mine.map((s) => el("tr", { "data-id": s.id },
        el("td", {}, s.name),
        el("td", { class: "hide-narrow" }, el("code", {}, s.id)),
        el("td", { class: "num" }, bytes(s.size_bytes)),
        el("td", {}, s.state),
        el("td", { title: s.created_at }, `${age(s.created_at)} ago`)))
        : [el("tr", {}, el("td", { colspan: "5", class: "muted" }, "None yet."))]));
    } catch (e) {
      problem.replaceChildren(errorLine(e));
    }
  }

  return { element, shown: load };
}
