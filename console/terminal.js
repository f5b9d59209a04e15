// A sandbox's interactive terminal: xterm.js (console/vendor/xterm, the npm package as published)
// over the API's PTY WebSocket (docs/api.md "Interactive terminal"). The session cookie opens the
// socket: a browser cannot add headers to a WebSocket, so sandfortd checks its Origin instead.
import { Terminal } from "./vendor/xterm/xterm.mjs";
import { FitAddon } from "./vendor/xterm/addon-fit.mjs";
import { el, whenLeaving } from "./dom.js";

// xterm's DOM renderer sizes its rows and colours its text with <style> elements it creates and
// rewrites (loaded only with this module, so only once a terminal is wanted). The console's policy refuses inline <style> (style-src 'self'), so "style" elements
// it asks for are made as <sandfort-style>: an element whose text goes into a constructed style
// sheet adopted by the document (CSSOM, which a policy governs no more than element.style). The
// policy stays strict for every other page and element. docs/console.md says why.
class AdoptedStyle extends HTMLElement {
  #sheet = new CSSStyleSheet();
  connectedCallback() {
    document.adoptedStyleSheets = [...document.adoptedStyleSheets, this.#sheet];
  }
  disconnectedCallback() {
    document.adoptedStyleSheets = document.adoptedStyleSheets.filter((s) => s !== this.#sheet);
  }
  set textContent(css) {
    this.#sheet.replaceSync(String(css));
  }
  get textContent() {
    return Array.from(this.#sheet.cssRules, (r) => r.cssText).join("\n");
  }
}
customElements.define("sandfort-style", AdoptedStyle);
const createElement = Document.prototype.createElement;
Document.prototype.createElement = function (name, options) {
  return createElement.call(this, String(name).toLowerCase() === "style" ? "sandfort-style" : name, options);
};
// Likewise its true-colour cells set a style="…" attribute; element.style.cssText is the same
// declarations through the object model. The console's own code never sets style attributes.
const setAttribute = Element.prototype.setAttribute;
Element.prototype.setAttribute = function (name, value) {
  if (String(name).toLowerCase() === "style" && this instanceof HTMLElement) {
    this.style.cssText = String(value);
    return;
  }
  return setAttribute.call(this, name, value);
};

function socketUrl(sandboxId, cols, rows) {
  const scheme = location.protocol === "https:" ? "wss:" : "ws:";
  return `${scheme}//${location.host}/v1/sandboxes/${encodeURIComponent(sandboxId)}/pty?cols=${cols}&rows=${rows}`;
}

// Opens a terminal into container; it lives until the page is left (or the program exits).
// onExit(code) is told when the program ends.
export function mountTerminal(container, sandboxId, { onExit } = {}) {
  const term = new Terminal({ cursorBlink: true, scrollback: 5000, fontSize: 14,
                              fontFamily: "ui-monospace, 'DejaVu Sans Mono', monospace" });
  const fit = new FitAddon();
  term.loadAddon(fit);
  const status = el("p", { class: "muted terminal-status", role: "status" }, "Connecting…");
  const screen = el("div", { class: "terminal-screen" });
  container.replaceChildren(screen, status);
  term.open(screen);
  fit.fit();

  const socket = new WebSocket(socketUrl(sandboxId, term.cols, term.rows));
  socket.binaryType = "arraybuffer";
  const encoder = new TextEncoder();
  let ended = false;
  const sendResize = () => {
    if (socket.readyState === WebSocket.OPEN)
      socket.send(JSON.stringify({ type: "resize", cols: term.cols, rows: term.rows }));
  };
  socket.addEventListener("open", () => {
    status.textContent = "Connected.";
    term.focus();
  });
  socket.addEventListener("message", (ev) => {
    if (typeof ev.data !== "string") return term.write(new Uint8Array(ev.data));
    let message;
    try { message = JSON.parse(ev.data); } catch { return; }
    if (message.type === "exit") {
      ended = true;
      status.textContent = `The program exited with code ${message.exit_code}.`;
      onExit?.(message.exit_code);
    } else if (message.type === "error") {
      status.textContent = `Terminal: ${message.message}`;
    }
  });
  socket.addEventListener("close", (ev) => {
    if (!ended) status.textContent = ev.code === 1000 ? "Disconnected." : `Disconnected (${ev.code}${ev.reason ? `: ${ev.reason}` : ""}).`;
  });
  // Keys and pastes go as bytes, as a terminal sends them.
  term.onData((data) => socket.readyState === WebSocket.OPEN && socket.send(encoder.encode(data)));
  term.onResize(sendResize);
  const observer = new ResizeObserver(() => fit.fit());
  observer.observe(screen);

  let closed = false;
  const close = () => {
    if (closed) return;
    closed = true;
    observer.disconnect();
    socket.close(1000);
    term.dispose();
  };
  whenLeaving(close);
  return { term, close };
}
