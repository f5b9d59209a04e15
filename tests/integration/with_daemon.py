#!/usr/bin/python3
"""Runs a command against a live sandfortd: starts one (its own state, network and port, like
the pytest suites), exports SANDFORT_BASE_URL, SANDFORT_API_KEY and SANDFORT_PREVIEW_PORT, runs
the command, then stops the daemon and removes everything it made. Exits with the command's
status. The SDK, CLI and MCP suites run through it:

  /usr/bin/python3 tests/integration/with_daemon.py -- node --test sdk/typescript/test/
"""

import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from sandfort_harness import Daemon  # noqa: E402


def main(argv):
    if "--" not in argv or argv.index("--") == len(argv) - 1:
        print("usage: with_daemon.py -- COMMAND [ARGS...]", file=sys.stderr)
        return 2
    command = argv[argv.index("--") + 1:]
    daemon = Daemon({"log_level": "warn"}).start()
    try:
        env = dict(os.environ, SANDFORT_BASE_URL=f"http://127.0.0.1:{daemon.port}",
                   SANDFORT_API_KEY=daemon.admin_key, SANDFORT_PREVIEW_PORT=str(daemon.preview_port))
        status = subprocess.run(command, env=env).returncode
        if status != 0:
            print("sandfortd log (tail):\n" + daemon.log(), file=sys.stderr)
        return status
    finally:
        daemon.stop()
        daemon.cleanup()


if __name__ == "__main__":
    sys.exit(main(sys.argv))
