"""File round trips: bytes, str, streams, local paths, directories via tar."""

import io
import os

import pytest

from sandfort_sdk import InvalidArgumentError, NotFoundError


def test_bytes_str_and_stream_round_trips(client, tmp_path):
    with client.create_sandbox() as sbx:
        blob = bytes(range(256)) * 1000
        assert sbx.fs.upload_file("/work/blob.bin", blob).size == len(blob)
        assert sbx.fs.download_file("/work/blob.bin") == blob

        text = "héllo\nwörld\n"
        up = sbx.fs.upload_file("/work/deep/new/dir/t.txt", text, mode=0o600)
        assert up.size == len(text.encode()) and up.mode == "0600"
        assert sbx.fs.read_text("/work/deep/new/dir/t.txt") == text

        # A non-seekable stream goes chunked; a seekable one too.
        class Pipe(io.RawIOBase):
            def __init__(self, data):
                self.src = io.BytesIO(data)

            def readable(self):
                return True

            def readinto(self, b):
                chunk = self.src.read(min(len(b), 7000))
                b[:len(chunk)] = chunk
                return len(chunk)

        big = os.urandom(300_000)
        assert sbx.fs.upload_file("/work/stream.bin", Pipe(big)).size == len(big)
        sink = io.BytesIO()
        assert sbx.fs.download_file("/work/stream.bin", sink) is None
        assert sink.getvalue() == big
        assert sbx.fs.upload_file("/work/seek.bin", io.BytesIO(big)).size == len(big)

        local = tmp_path / "local.bin"
        local.write_bytes(big)
        assert sbx.fs.upload_file("/work/from_path.bin", local).size == len(big)
        out = tmp_path / "out.bin"
        sbx.fs.download_file("/work/from_path.bin", out)
        assert out.read_bytes() == big


def test_list_stat_mkdir_move_remove(client):
    with client.create_sandbox() as sbx:
        d = sbx.fs.mkdir("/work/a/b", parents=True)
        assert d.type == "dir" and d.is_dir
        sbx.fs.upload_file("/work/a/one.txt", "1")
        sbx.fs.upload_file("/work/a/two.txt", "22")
        items = {i.name: i for i in sbx.fs.list_files("/work/a")}
        assert set(items) == {"b", "one.txt", "two.txt"}
        assert items["two.txt"].size == 2 and items["two.txt"].type == "file"
        assert items["two.txt"].path == "/work/a/two.txt"
        assert sbx.fs.stat("/work/a/one.txt").size == 1
        moved = sbx.fs.move("/work/a/one.txt", "/work/a/b/uno.txt")
        assert moved.path == "/work/a/b/uno.txt"
        assert not sbx.fs.exists("/work/a/one.txt") and sbx.fs.exists("/work/a/b/uno.txt")
        with pytest.raises(NotFoundError):
            sbx.fs.download_file("/work/nope")
        with pytest.raises(InvalidArgumentError):
            sbx.fs.download_file("/work/a")
        with pytest.raises(InvalidArgumentError):
            sbx.fs.list_files("relative/path")
        sbx.fs.remove("/work/a", recursive=True)
        assert not sbx.fs.exists("/work/a")


def test_directory_round_trip_via_tar(client, tmp_path):
    src = tmp_path / "src"
    (src / "pkg" / "sub").mkdir(parents=True)
    (src / "README").write_text("top\n")
    (src / "pkg" / "__init__.py").write_text("X = 1\n")
    (src / "pkg" / "sub" / "data.bin").write_bytes(b"\x00\x01\x02" * 5000)
    (src / "run.sh").write_text("#!/bin/sh\necho ran\n")
    os.chmod(src / "run.sh", 0o755)
    long_name = "n" * 150 + ".txt"
    (src / long_name).write_text("long\n")
    with client.create_sandbox() as sbx:
        res = sbx.fs.upload_dir(src, "/work/proj")
        assert res.entries >= 6 and res.skipped_count == 0
        assert sbx.process_exec(command="cd /work/proj && ./run.sh && python3 -c 'import pkg; print(pkg.X)'").stdout == "ran\n1\n"
        assert sbx.fs.read_text(f"/work/proj/{long_name}") == "long\n"
        dest = tmp_path / "back"
        names = sbx.fs.download_dir("/work/proj", dest)
        assert names
        assert "README" in names and "pkg/sub/data.bin" in names
        root = dest  # the archive holds the directory's contents, as upload_dir sent them
        assert (root / "README").read_text() == "top\n"
        assert (root / "pkg" / "sub" / "data.bin").read_bytes() == b"\x00\x01\x02" * 5000
        assert (root / long_name).read_text() == "long\n"
        assert os.stat(root / "run.sh").st_mode & 0o111
        tar = sbx.fs.download_archive("/work/proj")
        assert tar[257:262] == b"ustar"


def _in_order(events, want):
    i = 0
    for e in events:
        if i < len(want) and (e.type, e.name) == want[i]:
            i += 1
    return i == len(want)


def test_watch_reports_changes_in_order_and_follows_new_subdirectories(client):
    with client.create_sandbox() as sbx:
        sbx.fs.mkdir("/work/w", parents=True)
        with sbx.fs.watch("/work/w", recursive=True, include_entry=True) as w:
            assert (w.path, w.recursive, w.directories) == ("/work/w", True, 1)
            sbx.process.exec("cd /work/w && echo hi > a.txt && mv a.txt b.txt && chmod 600 b.txt && "
                             "mkdir sub && sleep 0.3 && echo x > sub/c.txt && rm b.txt")
            seen = []
            for e in w:
                seen.append(e)
                if (e.type, e.name) == ("remove", "b.txt"):
                    break
        want = [("create", "a.txt"), ("write", "a.txt"), ("rename", "a.txt"), ("create", "b.txt"),
                ("chmod", "b.txt"), ("create", "sub"), ("create", "sub/c.txt"), ("remove", "b.txt")]
        assert _in_order(seen, want), [(e.type, e.name) for e in seen]
        sub = next(e for e in seen if e.name == "sub")
        assert sub.is_dir and sub.entry is not None and sub.entry.type == "dir"


def test_watch_with_a_callback_stops_and_refuses_what_is_not_a_directory(client):
    import threading
    with client.create_sandbox() as sbx:
        sbx.fs.mkdir("/work/cb", parents=True)
        got, arrived = [], threading.Event()

        def on_event(e):
            got.append(e)
            if (e.type, e.name) == ("create", "x.txt"):
                arrived.set()

        w = sbx.fs.watch("/work/cb", on_event=on_event)
        sbx.fs.upload_file("/work/cb/x.txt", "1")
        assert arrived.wait(10), [(e.type, e.name) for e in got]
        w.stop()
        assert w.error is None
        with pytest.raises(NotFoundError):
            sbx.fs.watch("/work/nope")
        with pytest.raises(InvalidArgumentError):
            sbx.fs.watch("/work/cb/x.txt")
