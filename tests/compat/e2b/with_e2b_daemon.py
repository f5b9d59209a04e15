#!/usr/bin/python3
"""Runs a command against a live sandfortd served over HTTPS, as the E2B SDKs reach it: makes a
test CA and a certificate for localhost, starts a daemon (its own state, network and port, like
the other suites), makes two organizations with keys, exports

  E2B_API_URL=https://localhost:<port>/e2b   E2B_SANDBOX_URL=https://localhost:<port>/e2b-sandbox
  E2B_API_KEY=<org A's member key>   E2B_VIEWER_API_KEY=<org A's viewer key>
  E2B_OTHER_API_KEY=<org B's member key>   NODE_EXTRA_CA_CERTS=<the CA>
  SANDFORT_BASE_URL, SANDFORT_ORG_ADMIN_KEY (org A's admin, to read its audit chain natively),
  SANDFORT_SUPERADMIN_KEY (the operator's, for tests that make an organization of their own)
  SANDFORTD_PID (the daemon's process, whose memory a test may read in /proc)

runs the command, then stops the daemon and removes everything it made. Exits with the
command's status:

  /usr/bin/python3 tests/compat/e2b/with_e2b_daemon.py -- node --test tests/compat/e2b/test/
"""

import os
import shutil
import ssl
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
from sandfort_harness import Daemon  # noqa: E402


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(directory):
    """A CA made here, and a server certificate for localhost, 127.0.0.1 and the preview hosts
    (*.preview.localhost: the same certificate serves previews) signed by it."""
    openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "2",
            "-subj", "/CN=Sandfort E2B test CA", "-keyout", "ca.key", "-out", "ca.pem", cwd=directory)
    with open(os.path.join(directory, "server.ext"), "w") as f:
        f.write("subjectAltName=DNS:localhost,IP:127.0.0.1,DNS:*.preview.localhost\nextendedKeyUsage=serverAuth\n")
    openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-subj", "/CN=localhost",
            "-keyout", "server.key", "-out", "server.csr", cwd=directory)
    openssl("x509", "-req", "-in", "server.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial", "-days",
            "2", "-extfile", "server.ext", "-out", "server.pem", cwd=directory)
    return {name: os.path.join(directory, f"{name}.pem") for name in ("ca", "server")} | {
        "key": os.path.join(directory, "server.key")}


def org_keys(admin, org_name, *roles):
    """A new organization and a key of each role asked, in that order."""
    r = admin.post("/v1/orgs", {"name": org_name})
    assert r.status == 201, r
    org_id, keys = r.json()["id"], []
    for role in roles:
        r = admin.post(f"/v1/orgs/{org_id}/api-keys", {"name": f"e2b-{role}", "role": role})
        assert r.status == 201, r
        keys.append(r.json()["key"])
    return keys


def main(argv):
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print("usage: with_e2b_daemon.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    command = argv[argv.index("--") + 1:]
    directory = tempfile.mkdtemp(prefix="sf-e2b-")
    try:
        pki = make_pki(directory)
        ctx = ssl.create_default_context(cafile=pki["ca"])
        daemon = Daemon({"log_level": "warn", "tls": {"cert_file": pki["server"], "key_file": pki["key"]}},
                        ssl_context=ctx).start()
        try:
            admin = daemon.admin()
            base = f"https://localhost:{daemon.port}"
            member, viewer, org_admin = org_keys(admin, "e2b-a", "member", "viewer", "admin")
            (other,) = org_keys(admin, "e2b-b", "member")
            env = dict(os.environ, E2B_API_URL=f"{base}/e2b", E2B_SANDBOX_URL=f"{base}/e2b-sandbox",
                       E2B_API_KEY=member, E2B_VIEWER_API_KEY=viewer, E2B_OTHER_API_KEY=other,
                       NODE_EXTRA_CA_CERTS=pki["ca"], SANDFORT_BASE_URL=base, SANDFORT_ORG_ADMIN_KEY=org_admin,
                       SANDFORT_SUPERADMIN_KEY=daemon.admin_key, SANDFORTD_PID=str(daemon.proc.pid))
            status = subprocess.run(command, env=env).returncode
            if status != 0:
                print("sandfortd log (tail):\n" + daemon.log(), file=sys.stderr)
            return status
        finally:
            daemon.stop()
            daemon.cleanup()
    finally:
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
