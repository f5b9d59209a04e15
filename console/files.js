// The file browser of a sandbox's page (docs/console.md, "One sandbox"): a directory's entries,
// going up and down, a text file read in place (the first MiB), and for members upload (a file
// input, or files dropped on the browser), new folder, rename and delete. Downloads are links to
// GET …/files?path= (the session cookie goes with them; the browser streams the bytes to disk).
// Every name is someone else's string (an agent's, often) and is drawn as text.
import { api, apiRaw, apiStream } from "./api.js";
import { age, bytes, confirmAction, el, errorLine, redraw } from "./dom.js";

// How much of a file the browser shows in place; the rest is for the download.
export const VIEW_CAP = 1024 * 1024;

export function joinPath(dir, name) {
  return dir === "/" ? `/${name}` : `${dir}/${name}`;
}

export function parentOf(path) {
  const i = path.lastIndexOf("/");
  return i <= 0 ? "/" : path.slice(0, i);
}

// "/a//b/" → "/a/b"; relative paths are refused (the API resolves absolute ones only).
function normalize(path) {
  const p = path.trim().replace(/\/+/g, "/");
  if (!p.startsWith("/")) return null;
  return p.length > 1 ? p.replace(/\/$/, "") : p;
}

function nameProblem(name) {
  if (!name) return "Type a name.";
  if (name.includes("/")) return "A name cannot contain “/”.";
  if (name === "." || name === "..") return `“${name}” is not a name.`;
  return "";
}

export function fileBrowser(sandboxId, { canWrite, start }) {
  const base = `/v1/sandboxes/${encodeURIComponent(sandboxId)}/files`;
  const fileUrl = (path) => `${base}?path=${encodeURIComponent(path)}`;
  let dir = normalize(start || "/work") || "/work";
  let items = [];
  let loaded = false;
  let viewing = null; // an AbortController while a file is being read

  const status = el("p", { class: "muted files-status", role: "status" });
  const problem = el("div", { class: "files-problem" });
  const say = (text) => { status.textContent = text; };
  const fail = (e) => { problem.replaceChildren(errorLine(e)); };
  const clear = () => { problem.replaceChildren(); };

  const crumbs = el("nav", { class: "crumbs", "aria-label": "Directory" });
  const pathInput = el("input", { id: "files-path", type: "text", spellcheck: "false", autocomplete: "off",
                                  "aria-label": "Path" });
  const goForm = el("form", { class: "inline-form", onsubmit: (ev) => { ev.preventDefault(); go(pathInput.value); } },
                    pathInput, el("button", { type: "submit", class: "plain" }, "Go"));
  const upButton = el("button", { type: "button", class: "plain", onclick: () => list(parentOf(dir)) }, "Up");
  const refresh = el("button", { type: "button", class: "plain", onclick: () => list(dir) }, "Refresh");

  const tbody = el("tbody");
  const table = el("table", { id: "files", class: "files" },
    el("caption", { class: "visually-hidden" }, "Entries of the directory"),
    el("thead", {}, el("tr", {},
      el("th", { scope: "col" }, "Name"),
      el("th", { scope: "col", class: "hide-narrow" }, "Type"),
      el("th", { scope: "col", class: "num" }, "Size"),
      el("th", { scope: "col", class: "hide-narrow" }, "Mode"),
      el("th", { scope: "col", class: "hide-narrow" }, "Modified"),
      el("th", { scope: "col" }, el("span", { class: "visually-hidden" }, "Actions")))),
    tbody);
  const viewer = el("div", { id: "file-view", class: "file-view", hidden: true });

  // Writing: upload (input and drop), new folder.
  const toolbar = el("div", { class: "toolbar" }, upButton, refresh);
  const newFolderSlot = el("div");
  const root = el("div", { class: "file-browser" });
  if (canWrite) {
    const input = el("input", { id: "upload-input", type: "file", multiple: true, class: "visually-hidden",
                                onchange: async () => { const files = [...input.files]; input.value = ""; await upload(files); } });
    const newFolder = el("button", { type: "button", class: "plain", onclick: () => showNewFolder() }, "New folder");
    toolbar.append(newFolder,
                   el("label", { class: "button upload" }, "Upload files", input),
                   el("span", { class: "muted drop-hint" }, "or drop files on the list"));
    root.classList.add("dropzone");
    let depth = 0;
    const hasFiles = (ev) => ev.dataTransfer && [...ev.dataTransfer.types].includes("Files");
    root.addEventListener("dragenter", (ev) => { if (!hasFiles(ev)) return; ev.preventDefault(); depth++; root.classList.add("over"); });
    root.addEventListener("dragover", (ev) => { if (!hasFiles(ev)) return; ev.preventDefault(); ev.dataTransfer.dropEffect = "copy"; });
    root.addEventListener("dragleave", () => { if (--depth <= 0) { depth = 0; root.classList.remove("over"); } });
    root.addEventListener("drop", (ev) => {
      if (!hasFiles(ev)) return;
      ev.preventDefault();
      depth = 0;
      root.classList.remove("over");
      upload([...ev.dataTransfer.files]);
    });
  }
  root.append(el("div", { class: "files-head" }, crumbs, goForm), toolbar, newFolderSlot, problem, status, table, viewer);

  function drawCrumbs() {
    const parts = dir.split("/").filter(Boolean);
    const links = [el("button", { type: "button", class: "link", "data-focus": "crumb:/", onclick: () => list("/") }, "/")];
    let at = "";
    parts.forEach((p, i) => {
      at += `/${p}`;
      const target = at;
      if (i > 0) links.push(el("span", { class: "muted", "aria-hidden": "true" }, "/"));
      links.push(i === parts.length - 1
        ? el("span", { "aria-current": "location", class: "here" }, p)
        : el("button", { type: "button", class: "link", "data-focus": `crumb:${target}`, onclick: () => list(target) }, p));
    });
    crumbs.replaceChildren(...links);
    pathInput.value = dir;
    upButton.disabled = dir === "/";
  }

  function row(item) {
    const path = item.path || joinPath(dir, item.name);
    const isDir = item.type === "dir";
    const label = isDir ? `${item.name}/` : item.name;
    const nameCell = el("td", { class: "name" },
      el("button", { type: "button", class: "link", "data-focus": `open:${item.name}`,
                     title: item.type === "symlink" && item.target ? `→ ${item.target}` : undefined,
                     onclick: () => (isDir ? list(path) : item.type === "symlink" ? go(path) : view(item)) }, label),
      item.type === "symlink" && item.target ? el("span", { class: "muted" }, ` → ${item.target}`) : "");
    const actions = el("td", { class: "actions" });
    if (item.type === "file" || item.type === "symlink")
      actions.append(el("a", { href: fileUrl(path), download: item.name, class: "button plain",
                               "aria-label": `Download ${item.name}` }, "Download"));
    if (canWrite) {
      actions.append(
        el("button", { type: "button", class: "plain", "data-focus": `rename:${item.name}`, "aria-label": `Rename ${item.name}`,
                       onclick: () => rename(item, nameCell) }, "Rename"),
        el("button", { type: "button", class: "plain danger-text", "data-focus": `delete:${item.name}`,
                       "aria-label": `Delete ${item.name}`, onclick: () => remove(item) }, "Delete"));
    }
    return el("tr", { "data-name": item.name, "data-type": item.type }, nameCell,
      el("td", { class: "hide-narrow" }, item.type),
      el("td", { class: "num" }, item.type === "file" ? bytes(item.size) : ""),
      el("td", { class: "hide-narrow" }, el("code", {}, item.mode ?? "")),
      el("td", { class: "hide-narrow", title: item.mtime }, item.mtime ? `${age(item.mtime)} ago` : ""),
      actions);
  }

  function draw() {
    const hadFocus = root.contains(document.activeElement);
    redraw(root, () => {
      drawCrumbs();
      tbody.replaceChildren(...(items.length ? items.map(row)
        : [el("tr", {}, el("td", { colspan: "6", class: "muted" }, "This directory is empty."))]));
    });
    // The focused entry went with the directory it was in: the keyboard carries on in the new one.
    if (hadFocus && !root.contains(document.activeElement))
      (tbody.querySelector("td.name button") ?? (upButton.disabled ? refresh : upButton)).focus();
  }

  async function list(path) {
    clear();
    try {
      const r = await api("GET", `${base}/list?path=${encodeURIComponent(path)}`);
      dir = path;
      items = (r.items ?? []).sort((a, b) => (a.type === "dir") !== (b.type === "dir")
        ? (a.type === "dir" ? -1 : 1) : a.name < b.name ? -1 : a.name > b.name ? 1 : 0);
      loaded = true;
      draw();
      return true;
    } catch (e) {
      fail(e);
      if (!loaded) drawCrumbs();
      return false;
    }
  }

  // A path typed (or a symlink followed): a directory is listed; a file is shown in its directory.
  async function go(typed) {
    const path = normalize(typed);
    if (!path) return fail(new Error("A path starts with “/”."));
    clear();
    try {
      const st = await api("GET", `${base}/stat?path=${encodeURIComponent(path)}`);
      if (st.type === "dir") return list(path);
      if (st.type === "symlink") {
        // Where the link points is the sandbox's business: try it as a directory, else read it.
        try {
          await api("GET", `${base}/list?path=${encodeURIComponent(path)}`);
          return list(path);
        } catch { /* not a directory */ }
      }
      if (await list(parentOf(path))) view(st);
    } catch (e) {
      fail(e);
    }
  }

  async function view(item) {
    const path = item.path || joinPath(dir, item.name);
    viewing?.abort();
    const ctl = (viewing = new AbortController());
    const close = el("button", { type: "button", class: "plain", onclick: () => { ctl.abort(); viewer.hidden = true; viewer.replaceChildren(); } }, "Close");
    const head = el("div", { class: "file-view-head" }, el("h3", {}, path),
                    el("a", { href: fileUrl(path), download: item.name, class: "button plain" }, "Download"), close);
    viewer.hidden = false;
    viewer.replaceChildren(head, el("p", { class: "muted" }, "Reading…"));
    try {
      const res = await apiStream(fileUrl(path), { signal: ctl.signal });
      const reader = res.body.getReader();
      const chunks = [];
      let n = 0;
      let cut = false;
      for (;;) {
        const { done, value } = await reader.read();
        if (done) break;
        if (n + value.length > VIEW_CAP) {
          chunks.push(value.subarray(0, VIEW_CAP - n));
          n = VIEW_CAP;
          cut = true;
          await reader.cancel();
          break;
        }
        chunks.push(value);
        n += value.length;
      }
      const buf = new Uint8Array(n);
      let at = 0;
      for (const c of chunks) { buf.set(c, at); at += c.length; }
      const total = Number(res.headers.get("Content-Length")) || item.size || n;
      if (buf.subarray(0, 8192).includes(0)) {
        viewer.replaceChildren(head, el("p", { class: "muted" }, `A binary file (${bytes(total)}): download it to read it.`));
        return;
      }
      const text = new TextDecoder("utf-8").decode(buf);
      viewer.replaceChildren(head,
        cut ? el("p", { class: "note", role: "note" },
                 `Showing the first ${bytes(VIEW_CAP)} of ${bytes(total)}: download the file for the rest.`) : "",
        el("pre", { class: "file-text", tabindex: "0", "aria-label": `Contents of ${path}` }, text));
    } catch (e) {
      if (e.name === "AbortError") return;
      viewer.replaceChildren(head, errorLine(e));
    }
  }

  async function upload(files) {
    clear();
    for (const f of files) {
      const problemText = nameProblem(f.name);
      if (problemText) { fail(new Error(problemText)); continue; }
      const path = joinPath(dir, f.name);
      const existing = items.find((i) => i.name === f.name);
      if (existing && !(await confirmAction(`Replace ${path}? Its content will be lost.`, "Replace"))) continue;
      say(`Uploading ${f.name} (${bytes(f.size)})…`);
      try {
        const r = await apiRaw("PUT", fileUrl(path), f);
        say(`Uploaded ${r && r.path ? r.path : path} (${bytes(r && r.size !== undefined ? r.size : f.size)}).`);
      } catch (e) {
        say("");
        fail(e);
      }
    }
    await list(dir);
  }

  function showNewFolder() {
    const input = el("input", { id: "new-folder-name", type: "text", autocomplete: "off", spellcheck: "false" });
    const cancel = () => { newFolderSlot.replaceChildren(); };
    const form = el("form", { class: "inline-form", onsubmit: async (ev) => {
      ev.preventDefault();
      const name = input.value.trim();
      const p = nameProblem(name);
      if (p) return fail(new Error(p));
      clear();
      try {
        await api("POST", `${base}/mkdir`, { path: joinPath(dir, name) });
        cancel();
        say(`Made ${joinPath(dir, name)}.`);
        await list(dir);
      } catch (e) {
        fail(e);
      }
    }, onkeydown: (ev) => { if (ev.key === "Escape") cancel(); } },
    el("label", { for: "new-folder-name" }, "New folder name"), input,
    el("button", { type: "submit" }, "Create"),
    el("button", { type: "button", class: "plain", onclick: cancel }, "Cancel"));
    newFolderSlot.replaceChildren(form);
    input.focus();
  }

  function rename(item, cell) {
    const from = item.path || joinPath(dir, item.name);
    const input = el("input", { type: "text", value: item.name, autocomplete: "off", spellcheck: "false",
                                "aria-label": `New name of ${item.name}` });
    const restore = () => draw();
    const form = el("form", { class: "inline-form", onsubmit: async (ev) => {
      ev.preventDefault();
      const name = input.value.trim();
      if (name === item.name) return restore();
      const p = nameProblem(name);
      if (p) return fail(new Error(p));
      clear();
      try {
        await api("POST", `${base}/move`, { from, to: joinPath(dir, name) });
        say(`Renamed ${item.name} to ${name}.`);
        await list(dir);
      } catch (e) {
        fail(e);
      }
    }, onkeydown: (ev) => { if (ev.key === "Escape") { ev.preventDefault(); restore(); } } },
    input, el("button", { type: "submit" }, "Save"), el("button", { type: "button", class: "plain", onclick: restore }, "Cancel"));
    cell.replaceChildren(form);
    input.focus();
    input.select();
  }

  async function remove(item) {
    const path = item.path || joinPath(dir, item.name);
    const isDir = item.type === "dir";
    if (!(await confirmAction(isDir ? `Delete the directory ${path} and everything in it?` : `Delete ${path}?`, "Delete")))
      return;
    clear();
    try {
      await api("DELETE", `${base}?path=${encodeURIComponent(path)}${isDir ? "&recursive=true" : ""}`);
      say(`Deleted ${path}.`);
      await list(dir);
    } catch (e) {
      fail(e);
    }
  }

  return {
    element: root,
    load: () => list(dir),
    loaded: () => loaded,
    stop: () => viewing?.abort(),
  };
}
