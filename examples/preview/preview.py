#!/usr/bin/env python3
"""A preview URL from outside: start a small web app inside a sandbox and fetch it through the
sandbox's preview URL, with no port to expose.

    export SANDFORT_BASE_URL=http://127.0.0.1:8080 SANDFORT_API_KEY=sfk_...
    python3 examples/preview/preview.py [--keep]

How it works (docs/api.md "Network", docs/security.md "Preview URLs"): every port of a started
sandbox is reachable at http://<port>-<sandbox id>.<preview domain>:<preview port> on the preview
listener. GET /v1/sandboxes/{id}/preview/{port} gives that URL and a token; a request needs the
token as the X-Sandfort-Preview-Token header, or in the URL: the route's `link` (?sandfort_token=)
opens as printed, and its answer sets a cookie for the page's later requests (a browser opening it
in a tab is redirected to the URL without the token). Names under .localhost (the default domain)
resolve to loopback in browsers and curl, and in Python through nss-myhostname (scripts/setup
installs it); without it this script connects to 127.0.0.1 for them itself.

With --keep the sandbox stays up and the script prints a URL to open in a browser.
Exit 0 when every fetch answered as expected.
"""

import argparse
import http.client
import json
import os
import socket
import sys
import time
from urllib.parse import urlsplit

try:
    from sandfort_sdk import Client
except ImportError:  # not installed (pip install ./sdk/python): use the repository's copy
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))
    from sandfort_sdk import Client

HERE = os.path.dirname(os.path.abspath(__file__))
PORT = 3000


def fetch(url, headers=None):
    """GET url; a *.localhost name goes to 127.0.0.1 as browsers do. → (status, headers, body)"""
    parts = urlsplit(url)
    address = parts.hostname
    try:
        socket.getaddrinfo(address, parts.port or 80)
    except socket.gaierror:
        if address == "localhost" or address.endswith(".localhost"):
            address = "127.0.0.1"
        else:
            raise
    conn = http.client.HTTPConnection(address, parts.port or 80, timeout=30)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    conn.request("GET", target, headers={"Host": parts.netloc, **(headers or {})})
    r = conn.getresponse()
    out = (r.status, {k.lower(): v for k, v in r.getheaders()}, r.read())
    conn.close()
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--keep", action="store_true", help="leave the sandbox running and print a browser URL")
    args = parser.parse_args()
    client = Client()
    sbx = client.create_sandbox(labels={"example": "preview"})
    ok = False
    try:
        print(f"sandbox {sbx.id} is {sbx.state}")
        sbx.fs.upload_file("/work/app.py", open(os.path.join(HERE, "app.py"), "rb").read())
        cmd = sbx.process.start(f"python3 /work/app.py", env={"PORT": str(PORT)})
        print(f"started the app as background command {cmd.id}")

        deadline = time.time() + 30
        while not any(p.port == PORT for p in sbx.ports()):
            if time.time() > deadline:
                print("FAIL: the app never listened; its log:\n" + str(cmd.logs()))
                return 1
            time.sleep(0.2)
        print(f"port {PORT} is listening inside the sandbox")

        link = sbx.preview_link(PORT)
        print(f"preview URL: {link.url}")

        status, _, body = fetch(link.url + "/", link.headers)
        print(f"GET {link.url}/ with X-Sandfort-Preview-Token -> {status}: {body.decode().strip()}")
        assert status == 200 and b"Hello from inside a sandbox" in body

        status, _, body = fetch(link.url + "/api/status", link.headers)
        info = json.loads(body)
        print(f"GET {link.url}/api/status -> {status}: {info}")
        assert status == 200 and info["app"] == "sandfort-preview-example"

        status, _, _ = fetch(link.url + "/")
        print(f"GET {link.url}/ without the token -> {status}")
        assert status == 401

        status, headers, _ = fetch(link.link)
        cookie = headers.get("set-cookie", "").split(";")[0]
        print(f"GET {link.url}/?sandfort_token=... -> {status}, with a cookie")
        assert status == 200 and cookie.startswith("sandfort_preview_token=")
        status, _, _ = fetch(link.url + "/api/status", {"Cookie": cookie})
        print(f"GET {link.url}/api/status with that cookie -> {status}")
        assert status == 200

        if args.keep:
            print(f"\nopen in a browser: {link.link}\n(delete with: sandfort sandbox rm {sbx.id})")
        print("preview example OK")
        ok = True
        return 0
    finally:
        if not (args.keep and ok):
            sbx.delete()
            print(f"deleted {sbx.id}")


if __name__ == "__main__":
    sys.exit(main())
