#!/usr/bin/env python3
"""Gate: egress through the sandbox's proxy, from inside real sandboxes of a live deployment.

    SANDFORT_BASE_URL=... SANDFORT_API_KEY=sfk_... \
    SANDFORT_GATE_ALLOWED_URL=https://example.com/ python3 examples/gates/egress.py

SANDFORT_GATE_ALLOWED_URL is a URL the deployment may reach (default https://example.com/); its
host goes on the sandbox's allowlist. For a machine without internet access point it at a server
the operator allows (`egress.allowed_ranges` for a private address; the test driver uses a server
on the host's loopback). Checks (docs/security.md, "Egress"):
- the allowlisted URL answers through the proxy (HTTP_PROXY/HTTPS_PROXY as set inside), and is
  not reachable without the proxy;
- another host gets 403 from the proxy, by CONNECT and by plain HTTP;
- a missing credential, a forged one, and another sandbox's real one used from the wrong
  sandbox get 407;
- removing the host from the allowlist (PATCH) applies to the next connection: 403.
"""

import re
import time
from urllib.parse import urlsplit

import _gate
from _gate import env, retry, sh

THROUGH_PROXY = {"NO_PROXY": "", "no_proxy": ""}  # localhost targets too go through the proxy
DENIED_HOST = "sandfort-gate-denied.example.net"


def code(sbx, args):
    r = sh(sbx, f"curl -sS -m 15 -o /dev/null -w '%{{http_code}}' {args}", env=THROUGH_PROXY, timeout_s=40)
    return r.stdout.strip(), r.stderr.strip()


def main(gate):
    c = _gate.client()
    url = env("SANDFORT_GATE_ALLOWED_URL", "https://example.com/")
    if not env("SANDFORT_GATE_ALLOWED_URL"):
        print(f"note: SANDFORT_GATE_ALLOWED_URL not set; using {url}")
    host = urlsplit(url).hostname
    tunnel = "-p " if url.startswith("http://") else ""  # https is always a CONNECT tunnel
    made = []

    def create():
        sbx = retry(c.create_sandbox, env("SANDFORT_GATE_IMAGE"), egress_allowlist=[host], labels={"gate": "egress"})
        made.append(sbx)
        return sbx

    try:
        sbx = create()
        proxy_url = sh(sbx, "printf %s \"$HTTP_PROXY\"").stdout
        parts = urlsplit(proxy_url)
        assert parts.username == sbx.id and parts.password, f"unexpected HTTP_PROXY {proxy_url[:40]!r}"
        gw = f"{parts.hostname}:{parts.port}"

        def allowed():
            status, err = code(sbx, f"{tunnel}{url}")
            assert re.fullmatch(r"[23]\d\d", status), f"{url} through the proxy: {status!r} {err!r}"
            status2, err2 = code(sbx, f"-p {url}") if not tunnel else (status, err)
            assert re.fullmatch(r"[23]\d\d", status2), f"{url} by CONNECT: {status2!r} {err2!r}"
            r = sh(sbx, f"curl -sS -m 5 --noproxy '*' -o /dev/null {url}", timeout_s=30)
            assert r.exit_code != 0, f"{url} was reachable without the proxy"
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

        def forged():
            other = create()
            stolen = sh(other, "printf %s \"$HTTP_PROXY\"").stdout
            results = {}
            for label, proxy in (("no credential", f"http://{gw}"),
                                 ("forged password", f"http://{sbx.id}:forged{int(time.time())}@{gw}"),
                                 ("forged sandbox id", f"http://sbx-0000000000000000:secret@{gw}"),
                                 ("another sandbox's real credential", stolen)):
                status, err = code(sbx, f"{tunnel}--proxy {proxy} {url}")
                results[label] = status if status != "000" else err
            bad = {k: v for k, v in results.items() if "407" not in v}
            assert not bad, f"not 407: {bad}"
            status, err = code(other, f"{tunnel}--proxy {stolen} {url}")
            assert re.fullmatch(r"[23]\d\d", status), f"the credential from its own sandbox: {status!r} {err!r}"
            return "407 for " + ", ".join(results) + f"; the real one works from its own sandbox ({status})"
        gate.check("forged proxy credential gets 407", forged)

        def patched():
            retry(sbx.set_egress_allowlist, [])
            status, err = code(sbx, f"{tunnel}{url}")
            assert status == "403" or "403" in err, f"after removing {host}: {status!r} {err!r}"
            return f"allowlist emptied by PATCH: {url} -> 403 on the next connection"
        gate.check("allowlist change applies at once", patched)
    finally:
        _gate.delete_all(c, made)


if __name__ == "__main__":
    _gate.run("egress", main)
