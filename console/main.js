// The console's page: signs in with an API key (a session cookie stands for it, docs/console.md),
// then shows the organization's sandboxes. Everything is drawn with textContent, never innerHTML:
// a sandbox's name, a label or an image reference is the agent's to choose, and renders as text.
import { api, ApiError, signIn, signOut } from "./api.js";

const app = document.getElementById("app");
const who = document.getElementById("who");
const nav = document.getElementById("nav");

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  return e;
}

function show(...nodes) {
  app.replaceChildren(...nodes);
  app.focus();
}

function showSignIn(message) {
  nav.hidden = true;
  who.replaceChildren();
  const key = el("input", { id: "api-key", name: "api_key", type: "password", autocomplete: "off",
                            required: "", placeholder: "sfk_…", "aria-describedby": "sign-in-help" });
  const error = el("p", { class: "error", role: "alert" }, message || "");
  const form = el("form", { class: "sign-in", onsubmit: async (ev) => {
    ev.preventDefault();
    error.textContent = "";
    try {
      await signIn(key.value.trim());
      key.value = "";
      await route();
    } catch (e) {
      error.textContent = e instanceof ApiError ? e.message : String(e);
    }
  } },
  el("label", { for: "api-key" }, "API key"), key,
  el("p", { id: "sign-in-help", class: "muted" },
     "The key stays on the server: the console keeps a session cookie that stands for it."),
  el("button", { type: "submit" }, "Sign in"), error);
  show(el("h1", {}, "Sign in"), form);
  key.focus();
}

function showWho(session) {
  nav.hidden = false;
  const out = el("button", { class: "plain", type: "button", onclick: async () => {
    await signOut();
    showSignIn("Signed out.");
  } }, "Sign out");
  who.replaceChildren(el("span", { id: "signed-in-as" }, `${session.principal_name} · ${session.role} · ${session.org}`), out);
}

function age(iso) {
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 129600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

async function showSandboxes() {
  const page = await api("GET", "/v1/sandboxes?limit=500");
  const rows = page.items.map((s) => el("tr", { "data-id": s.id },
    el("td", {}, el("code", {}, s.id)),
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

async function route() {
  let session;
  try {
    session = await api("GET", "/v1/console/session");
  } catch (e) {
    if (e instanceof ApiError && (e.status === 401 || e.status === 404)) return showSignIn();
    throw e;
  }
  showWho(session);
  await showSandboxes();
}

window.addEventListener("hashchange", () => route().catch(showFailure));
function showFailure(e) {
  show(el("h1", {}, "Something went wrong"), el("p", { class: "error", role: "alert" }, e instanceof ApiError ? e.message : String(e)));
}
route().catch(showFailure);
