"""What the MCP server (mcp_server/sandfort_mcp.py) calls beyond the basics: a sandbox handle
without a request, one page of sandboxes with its cursor, a download cut after max_bytes, and a
bad base URL as a ConfigurationError."""

import io
import uuid

import pytest

from sandfort_sdk import (APIConnectionError, Client, ConfigurationError, NotFoundError, Sandbox,
                          SandboxPage)


def test_sandbox_handle_makes_no_request():
    # Port 9 (discard) refuses connections: any request would raise APIConnectionError.
    offline = Client(base_url="http://127.0.0.1:9", api_key="sfk_x")
    sbx = offline.sandbox("my-box")
    assert isinstance(sbx, Sandbox)
    assert sbx.id == "my-box" and sbx.state == "unknown" and sbx.info.raw == {"id": "my-box"}
    with pytest.raises(APIConnectionError):
        sbx.process.exec("true")
    with pytest.raises(ValueError):
        offline.sandbox("")


def test_sandbox_handle_by_id_and_by_name(client):
    name = f"handle-{uuid.uuid4().hex[:8]}"
    with client.create_sandbox(name=name) as made:
        by_name = client.sandbox(name)
        r = by_name.process.exec("echo hi")
        assert r.exit_code == 0 and r.stdout == "hi\n"
        assert by_name.refresh().id == made.id and by_name.state == "started"
        assert client.sandbox(made.id).process.code_run("python", "print(21 * 2)").stdout == "42\n"
    with pytest.raises(NotFoundError):
        client.sandbox("sbx-0000000000000000").process.exec("true")


def test_list_sandboxes_page_follows_the_cursor(client):
    tag = uuid.uuid4().hex[:8]
    made = [client.create_sandbox(labels={"page": tag}) for _ in range(3)]
    try:
        seen = []
        cursor = None
        pages = 0
        while True:
            page = client.list_sandboxes_page(labels=f"page:{tag}", limit=2, cursor=cursor)
            assert isinstance(page, SandboxPage) and len(page.items) <= 2
            assert all(isinstance(s, Sandbox) and s.info.raw["labels"] == {"page": tag} for s in page.items)
            seen += [s.id for s in page.items]
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        assert sorted(seen) == sorted(s.id for s in made) and pages == 2
        # A mapping works as the string does, and the state filter applies.
        assert {s.id for s in client.list_sandboxes_page(labels={"page": tag}, state="started").items} == set(seen)
        assert client.list_sandboxes_page(labels={"page": tag}, state="stopped").items == []
        # list_sandboxes (every page) agrees.
        assert sorted(s.id for s in client.list_sandboxes(labels={"page": tag}, limit=1)) == sorted(seen)
    finally:
        for s in made:
            s.delete()


def test_download_file_max_bytes(client, tmp_path):
    with client.create_sandbox() as sbx:
        sbx.fs.upload_file("/tmp/ten.txt", b"0123456789")
        assert sbx.fs.download_file("/tmp/ten.txt", max_bytes=4) == b"0123"
        assert sbx.fs.download_file("/tmp/ten.txt", max_bytes=11) == b"0123456789"
        assert sbx.fs.download_file("/tmp/ten.txt", max_bytes=0) == b""
        buf = io.BytesIO()
        assert sbx.fs.download_file("/tmp/ten.txt", buf, max_bytes=3) is None and buf.getvalue() == b"012"
        dest = tmp_path / "cut.txt"
        sbx.fs.download_file("/tmp/ten.txt", dest, max_bytes=5)
        assert dest.read_bytes() == b"01234"
        big = bytes(range(256)) * 4096  # 1 MiB: the connection is closed long before the end
        sbx.fs.upload_file("/tmp/big.bin", big)
        assert sbx.fs.download_file("/tmp/big.bin", max_bytes=70000) == big[:70000]
        assert sbx.fs.download_file("/tmp/big.bin") == big  # the client still works after a cut
        with pytest.raises(ValueError):
            sbx.fs.download_file("/tmp/ten.txt", max_bytes=-1)
        with pytest.raises(NotFoundError):
            sbx.fs.download_file("/tmp/missing.txt", max_bytes=10)


def test_a_bad_base_url_is_a_configuration_error():
    with pytest.raises(ConfigurationError) as ei:
        Client(base_url="ftp://example.com", api_key="sfk_x")
    assert isinstance(ei.value, ValueError)  # as before: ConfigurationError is a ValueError
    assert "ftp://example.com" in str(ei.value)
