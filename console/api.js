// The console's only way to the server: the public REST API, same origin, with the session cookie.
// Every change carries the session's CSRF token (X-Sandfort-CSRF); docs/console.md says why.
let csrf = "";

export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function send(method, path, { body, headers = {} } = {}) {
  const h = { ...headers };
  if (body !== undefined) h["Content-Type"] = "application/json";
  if (method !== "GET" && method !== "HEAD" && csrf) h["X-Sandfort-CSRF"] = csrf;
  const init = { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body),
                 credentials: "same-origin", cache: "no-store" };
  // Chromium fails the requests in flight when the machine's addresses change
  // (net::ERR_NETWORK_CHANGED; Docker changes them whenever it creates a network): a read that
  // failed before any answer is asked once more. A change is not: it may have been done.
  const res = await fetch(path, init).catch((e) => { if (method !== "GET") throw e; return fetch(path, init); });
  if (res.status === 204) return null;
  const data = await res.json().catch(() => null);
  if (!res.ok) {
    const err = data && data.error ? data.error : { code: "unknown", message: `HTTP ${res.status}` };
    throw new ApiError(res.status, err.code, err.message);
  }
  return data;
}

export async function api(method, path, body) {
  const data = await send(method, path, { body });
  if (path === "/v1/console/session" && method === "GET") csrf = data.csrf_token;
  return data;
}

export async function signIn(key) {
  const data = await send("POST", "/v1/console/session", { headers: { Authorization: `Bearer ${key}` } });
  csrf = data.csrf_token;
  return data;
}

export async function signOut() {
  await send("DELETE", "/v1/console/session");
  csrf = "";
}

// A change whose body is raw bytes (a file uploaded as it is), not JSON. The same CSRF header as
// every other change; the browser streams the Blob, nothing is read into the page.
export async function apiRaw(method, path, blob) {
  const h = { "Content-Type": "application/octet-stream" };
  if (csrf) h["X-Sandfort-CSRF"] = csrf;
  const res = await fetch(path, { method, headers: h, body: blob, credentials: "same-origin", cache: "no-store" });
  if (!res.ok) throw await failure(res);
  return res.status === 204 ? null : res.json().catch(() => null);
}

// A read answered as it comes (a file's bytes, an event stream): the Response itself, once its
// status says it is not an error. `signal` (an AbortController's) ends it.
export async function apiStream(path, { signal, accept } = {}) {
  const res = await fetch(path, { headers: accept ? { Accept: accept } : {}, credentials: "same-origin",
                                  cache: "no-store", signal });
  if (!res.ok) throw await failure(res);
  return res;
}

async function failure(res) {
  const data = await res.json().catch(() => null);
  const err = data && data.error ? data.error : { code: "unknown", message: `HTTP ${res.status}` };
  return new ApiError(res.status, err.code, err.message);
}
