#!/usr/bin/env python3
"""Gate: egress through the sandbox's proxy, from inside real sandboxes of a live deployment.

    SANDFORT_BASE_URL=... SANDFORT_API_KEY=sfk_... \
    SANDFORT_GATE_ALLOWED_URL=https://example.com/ python3 examples/gates/egress.py

SANDFORT_GATE_ALLOWED_URL is a URL the deployment may reach (default https://example.com/); its
host goes on the sandbox's allowlist.

Without internet access the gate brings its own target: SANDFORT_GATE_UPSTREAM=local starts an
HTTP server on this machine's 127.0.0.1 and allowlists `localhost` (run the gate on the daemon's
host), SANDFORT_GATE_UPSTREAM=local:ADDR one on ADDR (an address of this machine the daemon's host
can reach). The proxy refuses loopback and private addresses unless the operator allows them, so
the deployment needs them in `egress.allowed_ranges` (`127.0.0.0/8`, or ADDR's range). When neither
variable is set and example.com (SANDFORT_GATE_PROBE_HOST) does not resolve here, the gate uses the
local target on 127.0.0.1 and says so.

Checks (docs/security.md, "Egress"):
- the allowlisted URL answers through the proxy (HTTP_PROXY/HTTPS_PROXY as set inside), and is
  not reachable without the proxy; a local target must see the request arrive;
- another host gets 403 from the proxy, by CONNECT and by plain HTTP;
- a missing credential, a forged one, and another sandbox's real one used from the wrong
  sandbox get 407;
- removing the host from the allowlist (PATCH) applies to the next connection: 403.
A sandbox with no network interface (gVisor, or runc with runc_dials_home; docs/gvisor.md) has no
credential to forge: its proxy is its agent's listener on its own 127.0.0.1, and sandfortd knows it
by the door its tunnels come through. There the credential check becomes: a claimed identity (a
proxy credential naming an allowlisted sandbox, or none) from a sandbox whose allowlist is empty
still gets 403.
"""

import http.server
import re
import secrets
import socket
import threading
import time
from urllib.parse import urlsplit

import _gate
from _gate import env, retry, sh

THROUGH_PROXY = {"NO_PROXY": "", "no_proxy": ""}  # localhost targets too go through the proxy
DENIED_HOST = "sandfort-gate-denied.example.net"


class LocalUpstream:
    """The gate's own target: answers every GET with 200 and remembers the paths it was asked for."""

    def __init__(self, address):
        paths = self.paths = []

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                paths.append(self.path)
                body = b"sandfort egress gate\n"
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer((address, 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        host = "localhost" if address == "127.0.0.1" else address
        self.url = f"http://{host}:{self.server.server_address[1]}/gate-{secrets.token_hex(4)}"

    def close(self):
        self.server.shutdown()
        self.server.server_close()


def resolves(host, timeout_s=5):
    """Whether this machine resolves host (a machine without internet usually does not)."""
    found = []

    def look_up():
        try:
            found.append(socket.getaddrinfo(host, 443))
        except OSError:
            pass

    t = threading.Thread(target=look_up, daemon=True)
    t.start()
    t.join(timeout_s)
    return bool(found)


def target():
    """(URL to allowlist, LocalUpstream or None) from SANDFORT_GATE_UPSTREAM / SANDFORT_GATE_ALLOWED_URL."""
    mode = env("SANDFORT_GATE_UPSTREAM", "")
    if not mode and not env("SANDFORT_GATE_ALLOWED_URL"):
        probe = env("SANDFORT_GATE_PROBE_HOST", "example.com")
        if resolves(probe):
            print("note: SANDFORT_GATE_ALLOWED_URL not set; using https://example.com/")
            return "https://example.com/", None
        mode = "local"
        print(f"note: {probe} does not resolve here (no internet?): the gate serves its own target on "
              "127.0.0.1; the deployment must allow 127.0.0.0/8 in egress.allowed_ranges")
    if mode == "local" or mode.startswith("local:"):
        local = LocalUpstream(mode[len("local:"):] or "127.0.0.1")
        print(f"note: local upstream {local.url}")
        return local.url, local
    if mode:
        raise SystemExit(f"SANDFORT_GATE_UPSTREAM={mode!r}: expected 'local' or 'local:ADDRESS'")
    return env("SANDFORT_GATE_ALLOWED_URL"), None


def code(sbx, args):
    r = sh(sbx, f"curl -sS -m 15 -o /dev/null -w '%{{http_code}}' {args}", env=THROUGH_PROXY, timeout_s=40)
    return r.stdout.strip(), r.stderr.strip()


def main(gate):
    c = _gate.client()
    url, local = target()
    host = urlsplit(url).hostname
    tunnel = "-p " if url.startswith("http://") else ""  # https is always a CONNECT tunnel
    made = []

    def create():
        sbx = retry(c.create_sandbox, env("SANDFORT_GATE_IMAGE"), egress_allowlist=[host], labels={"gate": "egress"})
        made.append(sbx)
        return sbx

    try:
        sbx = create()
        proxy = _gate.proxy_of(sbx)
        assert proxy.dials_home or proxy.user == sbx.id, f"the proxy credential names {proxy.user}, not {sbx.id}"
        gw = f"{proxy.host}:{proxy.port}"

        def allowed():
            status, err = code(sbx, f"{tunnel}{url}")
            hint = " (does egress.allowed_ranges allow the local upstream's address?)" if local else ""
            assert re.fullmatch(r"[23]\d\d", status), f"{url} through the proxy: {status!r} {err!r}{hint}"
            status2, err2 = code(sbx, f"-p {url}") if not tunnel else (status, err)
            assert re.fullmatch(r"[23]\d\d", status2), f"{url} by CONNECT: {status2!r} {err2!r}"
            r = sh(sbx, f"curl -sS -m 5 --noproxy '*' -o /dev/null {url}", timeout_s=30)
            assert r.exit_code != 0, f"{url} was reachable without the proxy"
            if local:
                arrived = local.paths.count(urlsplit(url).path)
                assert arrived >= 1, f"the local upstream saw no request for {url} (it got {local.paths})"
                status = f"{status}, {arrived} requests arrived"
            return f"{url} -> {status} through {gw}; without the proxy: curl exit {r.exit_code}"
        gate.check(f"allowlisted host ({host}) works through the proxy", allowed)

        def denied():
            got = {}
            for args in (f"https://{DENIED_HOST}/", f"http://{DENIED_HOST}/", f"-p http://{DENIED_HOST}/"):
                status, err = code(sbx, args)
                got[args] = status if status != "000" else err
            connect = got[f"https://{DENIED_HOST}/"]
            assert "403" in connect, f"CONNECT to {DENIED_HOST}: {connect!r}"
            assert got[f"http://{DENIED_HOST}/"] == "403", got
            assert "403" in got[f"-p http://{DENIED_HOST}/"], got
            return f"{DENIED_HOST}: CONNECT and plain HTTP refused with 403"
        gate.check("another host gets 403", denied)

        def through_each(sbx_from, proxies, expected):
            """Each (label, proxy URL) used from sbx_from must get `expected`; {label: what it got}."""
            results = {}
            for label, via in proxies:
                status, err = code(sbx_from, f"{tunnel}--proxy {via} {url}")
                results[label] = status if status != "000" else err
            bad = {k: v for k, v in results.items() if expected not in v}
            assert not bad, f"not {expected}: {bad}"
            return results

        def forged():
            other = create()
            stolen = sh(other, "printf %s \"$HTTP_PROXY\"").stdout
            results = through_each(sbx, (("no credential", f"http://{gw}"),
                                         ("forged password", f"http://{sbx.id}:forged{int(time.time())}@{gw}"),
                                         ("forged sandbox id", f"http://sbx-0000000000000000:secret@{gw}"),
                                         ("another sandbox's real credential", stolen)), "407")
            status, err = code(other, f"{tunnel}--proxy {stolen} {url}")
            assert re.fullmatch(r"[23]\d\d", status), f"the credential from its own sandbox: {status!r} {err!r}"
            return "407 for " + ", ".join(results) + f"; the real one works from its own sandbox ({status})"

        def claimed():
            other = create()
            retry(other.set_egress_allowlist, [])
            results = through_each(other, (("no credential", f"http://{gw}"),
                                           ("a credential naming the allowlisted sandbox", f"http://{sbx.id}:x@{gw}"),
                                           ("a forged sandbox id", f"http://sbx-0000000000000000:secret@{gw}")), "403")
            status, err = code(sbx, f"{tunnel}{url}")
            assert re.fullmatch(r"[23]\d\d", status), f"the allowlisted sandbox itself: {status!r} {err!r}"
            return (f"from a sandbox with an empty allowlist, 403 for {', '.join(results)}; "
                    f"the allowlisted sandbox itself: {status}")

        if proxy.dials_home:
            gate.check("a claimed identity is not believed (the door is the identity)", claimed)
        else:
            gate.check("forged proxy credential gets 407", forged)

        def patched():
            retry(sbx.set_egress_allowlist, [])
            status, err = code(sbx, f"{tunnel}{url}")
            assert status == "403" or "403" in err, f"after removing {host}: {status!r} {err!r}"
            return f"allowlist emptied by PATCH: {url} -> 403 on the next connection"
        gate.check("allowlist change applies at once", patched)
    finally:
        _gate.delete_all(c, made)
        if local:
            local.close()


if __name__ == "__main__":
    _gate.run("egress", main)
