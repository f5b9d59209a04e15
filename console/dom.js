// Drawing helpers every page uses. Everything is built with createElement and text nodes, never
// innerHTML: a sandbox's name, a label, a file name or an audit field is someone else's string
// (an agent's, often) and renders as text.

export function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === "class") e.className = v;
    else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, v === true ? "" : v);
  }
  for (const c of children.flat()) {
    if (c === undefined || c === null || c === false) continue;
    e.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return e;
}

const app = () => document.getElementById("app");

// Replaces the page's content; focus moves to it, so keyboard and screen reader users land there.
export function show(...nodes) {
  app().replaceChildren(...nodes);
  app().focus({ preventScroll: true });
}

export function age(iso) {
  if (!iso) return "";
  const s = Math.max(0, (Date.now() - Date.parse(iso)) / 1000);
  if (s < 90) return `${Math.round(s)} s`;
  if (s < 5400) return `${Math.round(s / 60)} min`;
  if (s < 129600) return `${Math.round(s / 3600)} h`;
  return `${Math.round(s / 86400)} d`;
}

export function bytes(n) {
  if (n === undefined || n === null) return "";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

// A modal question with a default of "no": resolves true only when the person confirms.
export function confirmAction(question, confirmLabel = "Confirm") {
  return new Promise((resolve) => {
    const dialog = el("dialog", { class: "confirm", "aria-label": question });
    const done = (answer) => { dialog.close(); dialog.remove(); resolve(answer); };
    dialog.append(el("p", {}, question),
                  el("div", { class: "actions" },
                     el("button", { type: "button", class: "plain", onclick: () => done(false) }, "Cancel"),
                     el("button", { type: "button", class: "danger", onclick: () => done(true) }, confirmLabel)));
    dialog.addEventListener("cancel", () => done(false));
    document.body.append(dialog);
    dialog.showModal();
  });
}

// An error line a page shows in place; role=alert so it is read out.
export function errorLine(e) {
  return el("p", { class: "error", role: "alert" }, e && e.message ? e.message : String(e));
}

// What a page holds open (a timer, a terminal's socket) is let go when the person leaves it.
const onLeave = [];
export function whenLeaving(fn) {
  onLeave.push(fn);
}
export function leavePage() {
  for (const fn of onLeave.splice(0)) {
    try { fn(); } catch { /* a page's own cleanup failing must not block the next page */ }
  }
}
export function every(ms, fn) {
  const t = setInterval(fn, ms);
  whenLeaving(() => clearInterval(t));
}

// Lets the keyboard focus survive a redraw of what refreshes by itself: the element with the
// same data-focus as the focused one before is focused after.
export function redraw(container, draw) {
  const active = document.activeElement;
  const key = active && container.contains(active) ? active.getAttribute("data-focus") : null;
  draw();
  if (key === null) return;
  for (const e of container.querySelectorAll("[data-focus]")) {
    if (e.getAttribute("data-focus") === key) { e.focus(); return; }
  }
}
