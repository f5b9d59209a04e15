"""Live tests: they need a running sandfortd given by SANDFORT_BASE_URL and SANDFORT_API_KEY
(run them through tests/integration/with_daemon.py). Nothing is skipped: without the
variables every test fails."""

import os
import sys

import pytest

# Test the source tree, not whatever might be installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from sandfort_sdk import Client, NotFoundError  # noqa: E402


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


# Volumes and snapshots are one named-resource layer in the SDK (sandfort_sdk/_resource.py): the
# checks of what they share. `kind` is "volume" or "snapshot", as in the Client's method names.

def check_named(client, kind, rec, name):
    """The resource `rec` called `name` is found by name, by id, and listed a page of one at a time."""
    get, list_ = getattr(client, f"get_{kind}"), getattr(client, f"list_{kind}s")
    assert get(name).id == rec.id
    assert get(rec.id).name == name
    assert name in [r.name for r in list_(limit=1)]


def check_deleted(client, kind, name):
    """Deletes `name`; then get and delete raise NotFoundError and the listing leaves it out."""
    get, delete = getattr(client, f"get_{kind}"), getattr(client, f"delete_{kind}")
    delete(name)
    with pytest.raises(NotFoundError):
        get(name)
    with pytest.raises(NotFoundError):
        delete(name)
    assert name not in [r.name for r in getattr(client, f"list_{kind}s")()]
