"""Live tests: they need a running sandfortd given by SANDFORT_BASE_URL and SANDFORT_API_KEY
(run them through tests/integration/with_daemon.py). Nothing is skipped: without the
variables every test fails."""

import os
import sys

import pytest

# Test the source tree, not whatever might be installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sandfort_sdk import Client  # noqa: E402


@pytest.fixture(scope="session")
def env():
    url = os.environ.get("SANDFORT_BASE_URL")
    key = os.environ.get("SANDFORT_API_KEY")
    if not url or not key:
        pytest.fail("SANDFORT_BASE_URL and SANDFORT_API_KEY must point at a live sandfortd "
                    "(run: /usr/bin/python3 tests/integration/with_daemon.py -- /usr/bin/python3 -m pytest -q sdk/python/tests)")
    return {"url": url, "key": key}


@pytest.fixture(scope="session")
def client(env):
    return Client(base_url=env["url"], api_key=env["key"])
