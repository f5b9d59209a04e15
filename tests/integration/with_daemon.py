#!/usr/bin/python3
"""Runs a command against a live sandfortd: starts one (its own state, network and port, like
the pytest suites), exports SANDFORT_BASE_URL, SANDFORT_API_KEY and SANDFORT_PREVIEW_PORT, runs
the command, then stops the daemon and removes everything it made. Exits with the command's
status. The SDK, CLI and MCP suites run through it:

  /usr/bin/python3 tests/integration/with_daemon.py -- node --test sdk/typescript/test/

--oidc: the daemon also trusts a real OpenID provider (tests/oidc/provider.mjs, started here and
stopped after), with console sign-in as its confidential client `sandfort-console` (docs/console.md);
the organizations its users name (acme, other-org) are made; SANDFORT_OIDC_ISSUER is exported. The
console suite runs so (its oidc.test.mjs signs in through the provider's own pages):

  /usr/bin/python3 tests/integration/with_daemon.py --oidc -- node --test tests/console/
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sandfort_harness import Daemon  # noqa: E402

USAGE = "usage: with_daemon.py [--oidc] -- COMMAND [ARGS...]"
CONSOLE_CLIENT = "sandfort-console"


def start_provider():
    """The provider, and the daemon's oidc settings for it (the client's secret in a file of its own)."""
    from oidc_fixture import OidcProvider, issuer_config
    provider = OidcProvider().start()
    secret = os.path.join(provider.workdir, "console-client-secret")
    with open(os.open(secret, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as f:
        f.write(provider.client_secret(CONSOLE_CLIENT) + "\n")
    issuer = issuer_config(provider, console_client_id=CONSOLE_CLIENT, console_client_secret_file=secret,
                           console_name="Test IdP")
    return provider, {"issuers": [issuer]}


def main(argv):
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print(USAGE, file=sys.stderr)
        return 2
    options = argv[1:argv.index("--")]
    if any(o != "--oidc" for o in options):
        print(USAGE, file=sys.stderr)
        return 2
    command = argv[argv.index("--") + 1:]
    extra = {"log_level": "warn"}
    provider = None
    if "--oidc" in options:
        provider, extra["oidc"] = start_provider()
    try:
        daemon = Daemon(extra).start()
        try:
            env = dict(os.environ, SANDFORT_BASE_URL=f"http://127.0.0.1:{daemon.port}",
                       SANDFORT_API_KEY=daemon.admin_key, SANDFORT_PREVIEW_PORT=str(daemon.preview_port))
            if provider is not None:
                for name in ("acme", "other-org"):
                    r = daemon.admin().post("/v1/orgs", {"name": name})
                    assert r.status == 201, r
                env["SANDFORT_OIDC_ISSUER"] = provider.issuer
            status = subprocess.run(command, env=env).returncode
            if status != 0:
                print("sandfortd log (tail):\n" + daemon.log(), file=sys.stderr)
                if provider is not None:
                    print("OpenID provider log (tail):\n" + provider.log()[-4000:], file=sys.stderr)
            return status
        finally:
            daemon.stop()
            daemon.cleanup()
    finally:
        if provider is not None:
            provider.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
