"""Files in and out of a sandbox, through sandfortd and the agent, never via host paths."""

import hashlib
import io
import os
import tarfile



def files(sandbox):
    return f"/v1/sandboxes/{sandbox['id']}/files"


def put(member, sandbox, path, data, mode=None):
    q = f"?path={path}" + (f"&mode={mode}" if mode else "")
    return member.request("PUT", files(sandbox) + q, raw=data, headers={"Content-Type": "application/octet-stream"})


def test_all_byte_values_round_trip(member, sandbox):
    data = bytes(range(256)) * 4
    r = put(member, sandbox, "/tmp/bytes/nested/all.bin", data)
    assert r.status == 201, r
    assert r.json()["size"] == len(data)
    r = member.get(files(sandbox) + "?path=/tmp/bytes/nested/all.bin")
    assert r.status == 200 and r.body == data
    assert int(r.headers["Content-Length"]) == len(data)
    assert member.exec(sandbox["id"], command="sha256sum /tmp/bytes/nested/all.bin")["stdout"].split()[0] == \
        hashlib.sha256(data).hexdigest()


def test_a_100_mib_random_file_round_trips_identically(member, sandbox):
    data = os.urandom(100 << 20)
    digest = hashlib.sha256(data).hexdigest()
    assert put(member, sandbox, "/tmp/big.bin", data).status == 201
    r = member.get(files(sandbox) + "?path=/tmp/big.bin")
    assert r.status == 200 and hashlib.sha256(r.body).hexdigest() == digest


def test_mode_and_empty_files(member, sandbox):
    assert put(member, sandbox, "/tmp/run.sh", b"#!/bin/sh\necho ran\n", mode="0755").status == 201
    assert member.exec(sandbox["id"], command="/tmp/run.sh")["stdout"] == "ran\n"
    st = member.get(files(sandbox) + "/stat?path=/tmp/run.sh").json()
    assert st["mode"] == "0755" and st["type"] == "file" and st["size"] == 19
    assert put(member, sandbox, "/tmp/empty", b"").status == 201
    assert member.get(files(sandbox) + "?path=/tmp/empty").body == b""


def test_list_stat_mkdir_move_delete(member, sandbox):
    base = files(sandbox)
    r = member.post(base + "/mkdir", {"path": "/tmp/tree/a/b", "parents": True})
    assert r.status in (200, 201), r
    put(member, sandbox, "/tmp/tree/f.txt", b"x")
    member.exec(sandbox["id"], command="ln -sf /etc /tmp/tree/link")
    items = {i["name"]: i for i in member.get(base + "/list?path=/tmp/tree").json()["items"]}
    assert items["a"]["type"] == "dir" and items["f.txt"]["type"] == "file" and items["link"]["type"] == "symlink"
    assert {"name", "path", "type", "size", "mode", "mtime"} <= set(items["f.txt"])
    assert member.post(base + "/move", {"from": "/tmp/tree/f.txt", "to": "/tmp/tree/g.txt"}).status == 200
    assert member.get(base + "/stat?path=/tmp/tree/f.txt").status == 404
    put(member, sandbox, "/tmp/tree/h.txt", b"y")
    assert member.post(base + "/move", {"from": "/tmp/tree/g.txt", "to": "/tmp/tree/h.txt"}).status == 409
    assert member.delete(base + "?path=/tmp/tree").status == 409
    assert member.delete(base + "?path=/tmp/tree&recursive=true").status == 204
    assert member.get(base + "/stat?path=/tmp/tree").status == 404
    assert member.exec(sandbox["id"], command="ls /etc/hostname")["exit_code"] == 0, "a symlink was followed"


def test_wrong_type_and_missing_paths(member, sandbox):
    base = files(sandbox)
    assert member.get(base + "?path=/no/such/file").status == 404
    assert member.get(base + "?path=/tmp").status == 400
    assert member.get(base + "/list?path=/etc/hostname").status == 400
    assert member.get(base + "/list?path=/no/such/dir").status == 404
    assert member.delete(base + "?path=/no/such").status == 404
    assert member.get(base + "?path=relative").status == 400


def test_directory_tree_round_trips_as_tar_with_a_symlink(member, sandbox):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in {"app/main.py": b"print('hi')\n", "app/pkg/util.py": b"X = 1\n",
                           "app/" + "d" * 60 + "/" + "f" * 90 + ".txt": b"long name\n"}.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o640
            t.addfile(info, io.BytesIO(data))
        link = tarfile.TarInfo("app/link.py")
        link.type = tarfile.SYMTYPE
        link.linkname = "main.py"
        t.addfile(link)
    r = member.request("PUT", files(sandbox) + "/archive?path=/tmp/unpacked", raw=buf.getvalue())
    assert r.status in (200, 201, 204), r
    r = member.exec(sandbox["id"], command="cd /tmp/unpacked && python3 app/link.py && readlink app/link.py")
    assert r["stdout"] == "hi\nmain.py\n", r
    r = member.get(files(sandbox) + "/archive?path=/tmp/unpacked")
    assert r.status == 200
    with tarfile.open(fileobj=io.BytesIO(r.body)) as t:
        names = {m.name.lstrip("./"): m for m in t.getmembers()}
        assert names["app/link.py"].issym() and names["app/link.py"].linkname == "main.py"
        assert t.extractfile(names["app/pkg/util.py"]).read() == b"X = 1\n"
        long = [n for n in names if n.endswith("f" * 90 + ".txt")]
        assert long and t.extractfile(names[long[0]]).read() == b"long name\n"


def test_an_archive_cannot_escape_its_directory(member, sandbox):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        info = tarfile.TarInfo("../escaped.txt")
        info.size = 1
        t.addfile(info, io.BytesIO(b"x"))
    r = member.request("PUT", files(sandbox) + "/archive?path=/tmp/jail", raw=buf.getvalue())
    assert r.status == 400, r
    assert member.get(files(sandbox) + "/stat?path=/tmp/escaped.txt").status == 404


def test_ports_lists_listeners_with_their_process(member, sandbox):
    member.post(f"/v1/sandboxes/{sandbox['id']}/commands", {"command": "python3 -m http.server 8123"})
    import time
    deadline = time.time() + 20
    found = None
    while time.time() < deadline and not found:
        items = member.get(f"/v1/sandboxes/{sandbox['id']}/ports").json()["items"]
        found = [p for p in items if p["port"] == 8123]
        time.sleep(0.2)
    assert found, items
    assert found[0]["process"] and "python" in found[0]["process"]


def test_viewer_cannot_write_files(org, sandbox):
    r = org["viewer"].request("PUT", files(sandbox) + "?path=/tmp/nope", raw=b"x")
    assert r.status == 403
