// The console's shell: the session (signing in through an identity provider, or with an API key:
// either way a session cookie stands for it, docs/console.md), the navigation, and the router from
// the URL's #fragment to a page.
import { api, ApiError, signIn, signOut } from "./api.js";
import { el, errorLine, leavePage, show } from "./dom.js";
import { showAdmin } from "./admin.js";
import { showAudit } from "./audit.js";
import { showSandbox } from "./sandbox.js";
import { showSandboxes } from "./sandboxes.js";

const who = document.getElementById("who");
const nav = document.getElementById("nav");

// #/path → a page. Each takes the session and the path's parts after its own.
const pages = {
  // #/sandboxes is the list; #/sandboxes/<id or name>[/<section>] one sandbox's page.
  sandboxes: (session, rest) => (rest[0] ? showSandbox(session, rest[0], rest[1]) : showSandboxes(session, rest)),
  audit: (session, rest) => showAudit(session, rest),
  admin: (session, rest) => showAdmin(session, rest),
};

let session = null;

// Why a sign-in through an identity provider came back without a session: the callback names a
// short code (never the provider's own words), and only these are shown.
const signInErrors = {
  cancelled: "The sign-in was cancelled at the identity provider.",
  provider_error: "The identity provider refused the sign-in.",
  bad_callback: "The identity provider's answer was incomplete: try again.",
  expired: "That sign-in took too long or was used already: try again.",
  wrong_browser: "That sign-in began in another browser or window: try again here.",
  issuer_mismatch: "The answer came from another identity provider than the one asked: try again.",
  token_exchange: "The identity provider would not complete the sign-in: try again.",
  token_refused: "Sandfort could not verify what the identity provider sent.",
  no_access: "Your identity provider gives you no role here, or your organization is disabled.",
  provider_unavailable: "The identity provider cannot be reached right now: try again later.",
  busy: "Too many sign-ins are under way: try again in a few minutes.",
  internal: "The sign-in failed on the server: try again.",
};

// One link per identity provider that offers sign-in: a plain navigation to the start route,
// which sends the browser on to the provider (no script, no form: CSP's form-action stays 'self').
async function providerLinks() {
  let issuers = [];
  try {
    issuers = (await api("GET", "/v1/console/oidc/issuers")).items;
  } catch {
    return null;  // the key form still works
  }
  if (!issuers.length) return null;
  return el("div", { class: "providers", id: "providers" },
    ...issuers.map((i) => el("a", { class: "provider", href: `/v1/console/oidc/start?issuer=${encodeURIComponent(i.id)}` },
                            `Sign in with ${i.name}`)),
    el("p", { class: "muted" }, "or with an API key:"));
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
  providerLinks().then((links) => { if (links && form.isConnected) form.before(links); });
}

function showWho(s) {
  nav.hidden = false;
  // Links to pages of a role the session lacks are not offered (the API refuses them anyway).
  const rank = { viewer: 0, member: 1, admin: 2 };
  for (const a of nav.querySelectorAll("a[data-role]")) a.hidden = (rank[s.role] ?? 0) < rank[a.dataset.role];
  const out = el("button", { class: "plain", type: "button", onclick: async () => {
    await signOut();
    session = null;
    showSignIn("Signed out.");
  } }, "Sign out");
  who.replaceChildren(el("span", { id: "signed-in-as" }, `${s.principal_name} · ${s.role} · ${s.org}`), out);
}

async function route() {
  leavePage();
  // Back from an identity provider without a session: say why, once (a reload shows the form alone).
  const [hashPath, hashQuery] = location.hash.replace(/^#\/?/, "").split("?");
  if (hashPath === "signin") {
    const code = new URLSearchParams(hashQuery ?? "").get("error");
    history.replaceState(null, "", location.pathname);
    session = null;
    // Only the codes above: the fragment is anyone's to write, and its words are not shown.
    return showSignIn(code ? (Object.hasOwn(signInErrors, code) ? signInErrors[code] : "The sign-in failed.") : "");
  }
  if (!session) {
    try {
      session = await api("GET", "/v1/console/session");
    } catch (e) {
      if (e instanceof ApiError && (e.status === 401 || e.status === 404)) return showSignIn();
      throw e;
    }
    showWho(session);
  }
  // "#/sandboxes/sbx-1?state=started": the path's parts; a page reads its own query.
  const path = location.hash.replace(/^#\/?/, "").split("?")[0];
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  const page = pages[parts[0]] ?? pages.sandboxes;
  for (const a of nav.querySelectorAll("a")) {
    if (a.getAttribute("href") === `#/${parts[0] ?? "sandboxes"}`) a.setAttribute("aria-current", "page");
    else a.removeAttribute("aria-current");
  }
  await page(session, parts.slice(1));
}

function showFailure(e) {
  if (e instanceof ApiError && e.status === 401) {
    session = null;
    return showSignIn("Your session has ended: sign in again.");
  }
  show(el("h1", {}, "Something went wrong"), errorLine(e));
}

// One page at a time: a navigation waits for the page being drawn, so an older page's answers
// never land over a newer page (a quick back and forth, a link followed while a page loads).
let drawing = Promise.resolve();
function navigate() {
  drawing = drawing.then(() => route().catch(showFailure));
  return drawing;
}
window.addEventListener("hashchange", navigate);
navigate();
