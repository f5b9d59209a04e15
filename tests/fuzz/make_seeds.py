#!/usr/bin/python3
"""Writes the seed corpora under tests/fuzz/corpus/<target>/ (valid inputs plus the malformed
ones the unit tests use). Re-run after editing; the files are committed, so the fuzzers do not
need this script. Standard library only."""

import base64
import hashlib
import io
import json
import os
import sys
import tarfile

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode("latin-1")
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def b64(s):
    return base64.b64encode(s.encode("latin-1")).decode()


# --- fuzz_proxy_request: a request head, then (optionally) an operator's range list --------
def proxy():
    auths = [
        "Basic c2J4LTE6czNjcmV0", "basic c2J4LTE6czNjcmV0", "BASIC   c2J4LTE6czNjcmV0  ", "Basic YTpiOmM=",
        "Basic YWI6Y2Q=", "Basic YWI6Yw==",
        # refused by the unit tests
        "", "Basic", "Basic ", "Basicc2J4LTE6czNjcmV0", "Bearer c2J4LTE6czNjcmV0", 'Digest username="x"',
        "Basic c2J4LTE6czNjcmV0=", "Basic c2J4LTE6czNjcmV", "Basic c2J4LTE6czNj!mV0", "Basic c2J4-TE6czNjcmV0",
        "Basic c2J4LTE6 czNjcmV0", "Basic YWI6Yx==", "Basic ====", "Basic YWI=YWI6Yw==", "Basic c2J4LTE=",
        "Basic OnNlY3JldA==", "Basic c2J4LTE6", "Basic c2J4DTE6czNjcmV0", "Basic c2J4LTE6czMKY3JldA==",
        "Basic " + "A" * 1100,
    ]
    connects = [
        "Upstream.TEST.:443", "[::1]:22", "api.test:443", "a.example.com:443", "127.0.0.1:443", "127.1:443",
        "0x7f.1:80", "2130706433:80", "017700000001:80", "[::ffff:127.0.0.1]:443", "[::ffff:169.254.169.254]:80",
        "169.254.169.254:80", "[fe80::1]:80", "[64:ff9b::a9fe:a9fe]:80", "[2002:7f00:1::1]:443",
        "[2001:0:808:808::80ff:fffe]:443", "[fe80::1%25eth0]:80",
        # refused by the unit tests
        "upstream.test", "upstream.test:0", "upstream.test:65536", "upstream.test:abc", "http://upstream.test:80",
        "/path", "*", "user@upstream.test:443", ".:443", ":443",
    ]
    forwards = [
        "http://Upstream.Test/a/b?q=1", "HTTP://upstream.test:8080", "http://upstream.test?x=1", "http://[::1]:81/x",
        "http://[::1]/", "http://api.test./", "http://169.254.169.254/latest/meta-data/",
        # refused by the unit tests
        "/", "/path", "*", "https://upstream.test/", "ftp://upstream.test/", "upstream.test:80",
        "http:/upstream.test/", "http://", "http:///path", "http://upstream.test:/", "http://upstream.test:0/",
        "http://upstream.test:65536/", "http://upstream.test:abc/", "http://user:pw@upstream.test/",
        "http://upstream.test/#frag", "http://up stream.test/", "http://[::1/", "http://upstream.test:80:80/",
    ]
    ranges = ["", "10.0.0.0/8", "127.0.0.0/8, fd00:1::/32, 169.254.169.254/32", "0.0.0.0/0", "::/0",
              # refused
              "10.0.0.0", "10.0.0.0/", "10.0.0.0/33", "::/129", "10.0.0.0/-1", "10.0.0.0/+8", "10.0.0.0/8x",
              "10.0.0.0/ 8", "10.0.0/8", "0x0a.0.0.0/8", "010.0.0.0/8", "host/8", "10.0.0.1/8", "fe80::1%1/64",
              "fd00::1/8", "10.0.0.0/1000", "/8", "10.0.0.0//8"]
    n = 0
    for i, t in enumerate(connects):
        a = auths[i % len(auths)]
        write("fuzz_proxy_request", f"connect-{i:03}",
              f"CONNECT {t} HTTP/1.1\r\nHost: {t}\r\nProxy-Authorization: {a}\r\n\r\n" + ranges[i % len(ranges)])
    for i, t in enumerate(forwards):
        a = auths[(i + 7) % len(auths)]
        write("fuzz_proxy_request", f"forward-{i:03}",
              f"GET {t} HTTP/1.1\r\nHost: evil.test\r\nProxy-Authorization: {a}\r\nConnection: keep-alive, X-Drop\r\n"
              f"X-Drop: 1\r\nContent-Length: 3\r\nUser-Agent: curl/8\r\n\r\nabc" )
    for i, a in enumerate(auths):
        write("fuzz_proxy_request", f"auth-{i:03}",
              f"CONNECT api.test:443 HTTP/1.1\r\nProxy-Authorization: {a}\r\n\r\n")
    for i, r in enumerate(ranges):
        write("fuzz_proxy_request", f"ranges-{i:03}", "CONNECT [::ffff:10.1.2.3]:443 HTTP/1.1\r\n\r\n" + r)
    # What the head scanner refuses (server_test.cpp): bare CR/LF, obs-fold, control characters,
    # two credentials, HTTP/2.0, a very long head.
    bad_heads = [
        "CONNECT api.test:443 HTTP/1.1\nHost: x\r\n\r\n",
        "CONNECT api.test:443 HTTP/1.1\r\nHost: x\rY\r\n\r\n",
        "GET http://api.test/ HTTP/1.1\r\nX-A: 1\r\n  folded\r\n\r\n",
        "GET http://api.test/ HTTP/1.1\r\nX-A: a\x00b\r\n\r\n",
        "GET http://api.test/ HTTP/1.1\r\nX-A: a\x7fb\r\n\r\n",
        "CONNECT api.test:443 HTTP/1.1\r\nProxy-Authorization: Basic YTpi\r\nProxy-Authorization: Basic YTpi\r\n\r\n",
        "CONNECT api.test:443 HTTP/2.0\r\n\r\n",
        "CONNECT api.test:443 HTTP/1.0\r\n\r\n",
        "GET http://api.test/ HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n",
        "GET http://api.test/ HTTP/1.1\r\n" + "X-Pad: " + "a" * 9000 + "\r\n\r\n",
    ]
    for i, h in enumerate(bad_heads):
        write("fuzz_proxy_request", f"head-{i:03}", h)


# --- fuzz_preview_request: a request head (the values alone are fuzzed too) -----------------
def preview():
    sid = "sbx-0123456789abcdef"
    hosts = [
        f"8080-{sid}.preview.localhost", f"8080-{sid}.preview.localhost:8081",
        "8080-SBX-0123456789ABCDEF.Preview.LOCALHOST:8081", f"8080-{sid}.preview.localhost.",
        f"8080-{sid}.preview.localhost.:8081", f"1-{sid}.preview.localhost", f"65535-{sid}.preview.localhost",
        # refused by the unit tests
        "", "preview.localhost", ".preview.localhost", f"8080-{sid}.other.localhost",
        f"8080-{sid}.evilpreview.localhost", f"8080-{sid}.preview.localhost.evil", f"0-{sid}.preview.localhost",
        f"65536-{sid}.preview.localhost", f"99999999-{sid}.preview.localhost", f"abc-{sid}.preview.localhost",
        f"08080-{sid}.preview.localhost", f"-{sid}.preview.localhost", f"8080sbx-0123456789abcdef.preview.localhost",
        "8080-sbx-0123456789abcde.preview.localhost", "8080-sbx-0123456789abcdef0.preview.localhost",
        "8080-sbx-0123456789abcdeg.preview.localhost", "8080-key-0123456789abcdef.preview.localhost",
        f"8080-{sid}.x.preview.localhost", f"x.8080-{sid}.preview.localhost", f"8080-{sid}.preview.localhost:",
        f"8080-{sid}.preview.localhost:abc", f"8080-{sid}.preview.localhost:123456",
        f"8080-{sid}.preview.localhost..", "[::1]:8081", "127.0.0.1:8081",
    ]
    targets = ["/", "/?sandfort_token=abc", "/a?x=1&sandfort_token=abc&y=2", "/a?sandfort_token=a&sandfort_token=b",
               "/a?sandfort%5Ftoken=abc", "/a?sandfort_token", "/a?&&sandfort_token=%zz&", "//evil.test/?sandfort_token=x",
               "/\\evil.test/", "/a?b"]
    cookies = ["sandfort_preview_token=abc", "a=1; sandfort_preview_token=x; b=2",
               'sandfort_preview_token="quoted"; sandfort_preview_token=second', " ; ;a=1;;",
               "sandfort_preview_token", "  sandfort_preview_token  =  spaced  ; keep=me", "a=1;b"]
    for i, h in enumerate(hosts):
        t = targets[i % len(targets)]
        c = cookies[i % len(cookies)]
        write("fuzz_preview_request", f"head-{i:03}",
              f"GET {t} HTTP/1.1\r\nHost: {h}\r\nCookie: {c}\r\nOrigin: http://{hosts[(i + 1) % len(hosts)]}\r\n"
              f"X-Sandfort-Preview-Token: abc\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
        write("fuzz_preview_request", f"host-{i:03}", h)
    for i, t in enumerate(targets):
        write("fuzz_preview_request", f"target-{i:03}", t)
    for i, c in enumerate(cookies):
        write("fuzz_preview_request", f"cookie-{i:03}", c)


# --- fuzz_jwt: mode byte, then a JWKS, a compact token, or header\0claims to be signed -------
def b64u(b):
    if isinstance(b, str):
        b = b.encode()
    return base64.urlsafe_b64encode(b).rstrip(b"=").decode()


def jwt():
    now = 1767225600
    iss = "https://idp.example.test"
    claims = {"iss": iss, "aud": "sandfortd", "sub": "user-123", "iat": now - 10, "nbf": now - 10, "exp": now + 300,
              "groups": ["sandfort-admins"]}
    variants = [claims, dict(claims, aud=["x", "sandfortd"]), dict(claims, exp="soon"), dict(claims, exp=1e300),
                dict(claims, exp=-9223372036854775808), dict(claims, sub=""), dict(claims, iss=5),
                {k: v for k, v in claims.items() if k != "exp"}, dict(claims, nbf=now + 10**12), dict(claims, aud=[]),
                dict(claims, exp=18446744073709551615), dict(claims, iat=[1])]
    headers = [{"alg": "EdDSA", "kid": "ed"}, {"alg": "ES256", "kid": "ec"}, {"alg": "RS256", "kid": "rsa"},
               {"alg": "none"}, {"alg": "HS256", "kid": "ed"}, {"alg": "EdDSA", "crit": ["exp"]},
               {"alg": "EdDSA", "jku": "https://evil.test/jwks"}, {"alg": "EdDSA", "kid": 5}, {"alg": "ES256"},
               {"alg": ["EdDSA"]}, {"alg": "EdDSA", "x5c": ["AAAA"]}, {"alg": "EdDSA", "jwk": {}}]
    for i, h in enumerate(headers):
        mode = b"\x02" if h.get("alg") != "ES256" else b"\x03"
        write("fuzz_jwt", f"signed-{i:03}", mode + json.dumps(h).encode() + b"\0" + json.dumps(variants[0]).encode())
    for i, c in enumerate(variants):
        write("fuzz_jwt", f"claims-{i:03}", b"\x02" + b'{"alg":"EdDSA","kid":"ed"}\0' + json.dumps(c).encode())
        write("fuzz_jwt", f"claims-es-{i:03}", b"\x03" + b'{"alg":"ES256","kid":"ec"}\0' + json.dumps(c).encode())
    tokens = [b64u(json.dumps(headers[0])) + "." + b64u(json.dumps(claims)) + "." + b64u(b"\1" * 64),
              "a.b", "a.b.c.d", "e30.!!.sig", "e30." + b64u("[]") + ".sig", "e30.e30.", "..", "e30=.e30.c2ln",
              b64u('{"alg":"RS256"}') + "." + b64u(json.dumps(claims)) + "." + b64u(b"\0" * 256),
              b64u('{"alg":"ES256","kid":"ec"}') + "." + b64u(json.dumps(claims)) + "." + b64u(b"\xff" * 64)]
    for i, t in enumerate(tokens):
        write("fuzz_jwt", f"token-{i:03}", b"\x01" + t.encode())
    e = b64u((65537).to_bytes(3, "big"))
    n2048 = b64u(b"\xc1" + b"\x01" * 255)
    keys = [
        {"kty": "RSA", "kid": "r1", "n": n2048, "e": e, "alg": "RS256", "use": "sig"},
        {"kty": "RSA", "kid": "small", "n": b64u(b"\xc1" + b"\x01" * 127), "e": e},
        {"kty": "EC", "crv": "P-256", "kid": "e1", "x": b64u(b"\1" * 32), "y": b64u(b"\2" * 32)},
        {"kty": "EC", "crv": "P-384", "kid": "e2", "x": b64u(b"\1" * 48), "y": b64u(b"\2" * 48)},
        {"kty": "OKP", "crv": "Ed25519", "kid": "o1", "x": b64u(b"\3" * 32)},
        {"kty": "OKP", "crv": "X25519", "kid": "o2", "x": b64u(b"\3" * 32)},
        {"kty": "oct", "kid": "h", "k": b64u(b"secret")},
        {"kty": "RSA", "n": n2048, "e": e},
        {"kty": "RSA", "kid": "enc", "n": n2048, "e": e, "use": "enc"},
        {"kty": "RSA", "kid": "ops", "n": n2048, "e": e, "key_ops": ["encrypt"]},
        {"kty": "RSA", "kid": "e0", "n": n2048, "e": "AA"},
        {"kty": "EC", "crv": "P-256", "kid": "bad", "x": "!!", "y": b64u(b"\2" * 32)},
        {"kty": "RSA", "kid": 7, "n": n2048, "e": e},
    ]
    write("fuzz_jwt", "jwks-000", b"\x00" + json.dumps({"keys": keys}).encode())
    for i, k in enumerate(keys):
        write("fuzz_jwt", f"jwks-{i + 1:03}", b"\x00" + json.dumps({"keys": [k]}).encode())
    for i, doc in enumerate(["", "[]", "{}", '{"keys":{}}', '{"keys":[1,"a",null,[]]}', "{\"keys\":[]}", "nul",
                             "[" * 5000]):
        write("fuzz_jwt", f"jwks-bad-{i:03}", b"\x00" + doc.encode())


# --- fuzz_agent_tar: an options byte, then an archive ------------------------------------------
def tar_bytes(members, fmt=tarfile.PAX_FORMAT):
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w", format=fmt) as t:
        for m in members:
            info = tarfile.TarInfo(m["name"])
            info.type = m.get("type", tarfile.REGTYPE)
            info.mode = m.get("mode", 0o644)
            info.mtime = m.get("mtime", 1700000000)
            info.linkname = m.get("link", "")
            data = m.get("data", b"")
            info.size = len(data) if info.type == tarfile.REGTYPE else 0
            t.addfile(info, io.BytesIO(data) if info.type == tarfile.REGTYPE else None)
    return buf.getvalue()


def agent_tar():
    F, D, S, H, P = tarfile.REGTYPE, tarfile.DIRTYPE, tarfile.SYMTYPE, tarfile.LNKTYPE, tarfile.FIFOTYPE
    archives = {
        "tree": [{"name": "d", "type": D, "mode": 0o755}, {"name": "d/x", "data": b"x" * 700},
                 {"name": "p" * 130, "data": b"pax"}, {"name": "d/l", "type": S, "link": "x"},
                 {"name": "d/h", "type": H, "link": "d/x"}, {"name": "fifo", "type": P}],
        "dotdot": [{"name": "../evil", "data": b"evil"}],
        "dotdot2": [{"name": "ok/../../evil", "data": b"evil"}],
        "absolute": [{"name": "/tmp/sandfort-abs", "data": b"evil"}],
        "symlink-escape": [{"name": "escape", "type": S, "link": "../../outside"},
                           {"name": "escape/pwned", "data": b"evil"}],
        "symlink-escape-victim": [{"name": "f", "type": S, "link": "../../outside/victim"},
                                  {"name": "f", "data": b"new"}],
        "symlink-dir-then-hardlink": [{"name": "s", "type": S, "link": "../../outside"},
                                      {"name": "h", "type": H, "link": "s/victim"}],
        "hardlink-out": [{"name": "hl", "type": H, "link": "../../outside/victim"}],
        "hardlink-via-symlink": [{"name": "v", "type": S, "link": "../../outside/victim"},
                                 {"name": "hl", "type": H, "link": "v"}],
        "setuid": [{"name": "suid", "data": b"#!/bin/sh\n", "mode": 0o4755}, {"name": "sgid-dir", "type": D,
                                                                               "mode": 0o2775}],
        "readonly-dir": [{"name": "ro", "type": D, "mode": 0o500}, {"name": "ro/f", "data": b"x", "mode": 0o400}],
        "long-link": [{"name": "l", "type": S, "link": "t" * 300}],
        "dir-over-file": [{"name": "a", "data": b"1"}, {"name": "a/b", "data": b"2"}],
        "file-over-dir": [{"name": "a", "type": D}, {"name": "a", "data": b"2"}],
    }
    for name, members in archives.items():
        data = tar_bytes(members)
        write("fuzz_agent_tar", f"{name}", b"\x00" + data)
        write("fuzz_agent_tar", f"{name}-pieces", b"\x4b" + data)
    write("fuzz_agent_tar", "gnu-long", b"\x00" + tar_bytes(archives["tree"], tarfile.GNU_FORMAT))
    write("fuzz_agent_tar", "ustar", b"\x02" + tar_bytes(archives["tree"][:2] + [{"name": "d/" + "q" * 60 + "/" + "r" * 90, "data": b"prefix"}], tarfile.USTAR_FORMAT))
    cut = tar_bytes(archives["tree"])
    for at in (1, 511, 512, 700, 1024 + 97, len(cut) - 1030):
        write("fuzz_agent_tar", f"cut-{at}", b"\x00" + cut[:at])
    write("fuzz_agent_tar", "zeros", b"\x00" + b"\0" * 1024)
    write("fuzz_agent_tar", "gzip", b"\x00\x1f\x8b\x08\x00" + b"\0" * 600)


# --- fuzz_api_json: body kind (0 create, 1 update, 2 exec, 3 code-run), then the body --------
def api_json():
    bodies = {
        0: [{}, {"snapshot": "sandfort/base:bookworm", "wait": True}, {"name": "a", "env": {"A": "1"},
            "labels": {"team": "x"}, "egress_allowlist": ["pypi.org", "*.pythonhosted.org"], "ttl_s": 3600,
            "idle_timeout_s": 0, "user": "root", "workdir": "/app", "public_preview": True,
            "resources": {"cpus": 1.5, "memory_mb": 512, "pids": 100},
            "volumes": [{"name": "v", "mount_path": "/data", "read_only": True}]},
            {"ttl_s": 1e300}, {"ttl_s": -1e300}, {"ttl_s": 9.5}, {"ttl_s": 9223372036854775807},
            {"ttl_s": 18446744073709551615}, {"resources": {"memory_mb": 1e19}}, {"resources": {"cpus": "1"}},
            {"resources": []}, {"resources": {"disk_mb": 10}}, {"cpus": 1}, {"env": []}, {"env": {"A": 1}},
            {"volumes": {}}, {"volumes": [1]}, {"volumes": [{"name": "v"}]}, {"labels": None}],
        1: [{"labels": {}}, {"ttl_s": None}, {"idle_timeout_s": 0}, {"egress_allowlist": []}, {"labels": []},
            {"ttl_s": 1e300}, {"name": "x"}],
        2: [{"command": "echo build; exit 7"}, {"argv": ["ls", "-l"], "cwd": "/", "env": {"A": "b"}, "stdin": "x",
            "timeout_s": 10, "binary": True}, {}, {"command": "x", "argv": ["y"]}, {"command": "true", "timeout_s": 0},
            {"command": "true", "timeout_s": 10 ** 7}, {"argv": "not-a-list"}, {"command": "x", "env": []},
            {"command": "x", "timeout_s": 1e300}, {"command": "x", "timeout_s": -9.3e18}],
        3: [{"language": "python", "code": "print(21 * 2)"}, {"language": "node", "code": "1", "argv": [1]},
            {"language": "sh", "code": "x", "timeout_s": 1e19}],
    }
    n = 0
    for kind, items in bodies.items():
        for b in items:
            write("fuzz_api_json", f"body-{n:03}", bytes([kind]) + json.dumps(b).encode())
            n += 1
    for raw in ["", "[]", "1", "nul", "{", '{"a":1,"a":2}', '{"command":"\\ud800"}', "[" * 3000, '{"x":' * 3000]:
        write("fuzz_api_json", f"body-{n:03}", b"\x02" + raw.encode())
        n += 1


# --- fuzz_http_request: piece size, then the bytes on the wire ---------------------------------
def http_request():
    body = json.dumps({"command": "echo build; exit 7"})
    wires = [
        "GET /v1/sandboxes?limit=10&cursor=abc HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer sfk_x\r\n\r\n",
        f"POST /v1/sandboxes/sbx-0123456789abcdef/process/exec HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\n\r\n{body}",
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5;ext=1\r\nhello\r\n0\r\nTrailer: x\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\nxx",
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 18446744073709551616\r\n\r\n",
        "DELETE /hello HTTP/1.1\r\nHost: x\r\n\r\n",
        "GET /hello HTTP/1.1\r\nHost: loc",
        "GET /hello HTTP/1.1\r\nHost: localhost\r\nAuthorization: Bearer " + "a" * 70000 + "\r\n\r\n",
        "GET /a%2Fb/%00/..%2f?x=%zz&y=1&x=2 HTTP/1.1\r\nHost: x\r\n\r\n",
        "PATCH /v1/sandboxes/sbx-0123456789abcdef HTTP/1.1\r\nHost: x\r\nContent-Length: 13\r\n\r\n{\"ttl_s\":1e9}",
        "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
        "GET / HTTP/1.1\nHost: x\n\n",
    ]
    for i, w in enumerate(wires):
        write("fuzz_http_request", f"wire-{i:03}", b"\x00" + w.encode())
        write("fuzz_http_request", f"wire-{i:03}-pieces", b"\x07" + w.encode())


# --- fuzz_docker_responses: parser byte, then the body; taken from the docker unit tests --------
def docker():
    import re
    unit = os.path.join(HERE, "..", "unit", "docker")
    def text(name):
        with open(os.path.join(unit, name), encoding="utf-8") as f:
            return f.read()
    raw = lambda src: re.findall(r'R"\((.*?)\)"', src, re.S)
    plain = lambda src: [bytes(m, "utf-8").decode("unicode_escape") for m in re.findall(r'"((?:[^"\\\n]|\\.)*)"', src)]
    n = 0
    def put(kind, body):
        nonlocal n
        write("fuzz_docker_responses", f"k{kind}-{n:03}", bytes([kind]) + body.encode("utf-8", "surrogateescape"))
        n += 1
    for ref in dict.fromkeys(plain(text("image_ref_test.cpp"))):
        put(0, ref)
    events = raw(text("events_test.cpp"))
    put(1, "\n".join(events) + "\n")
    for e in events + ["", "not json", "[]", "{}", '{"Type":"container"}', '{"Type":"container","Action":']:
        put(1, "\x00" + e + "\n")
    errors = text("engine_errors_test.cpp")
    for e in dict.fromkeys(raw(errors) + plain(errors)[:60]):
        put(2, e)
    for a, b in [("1.41", "1.47"), ("1.9", "1.41"), ("1.41", "1.41"), ("1.", "1.4"), ("x", "1.0"),
                 ("99999999999999999999.1", "1.1"), ("10.0.0.0/24", ""), ("fd00::/64", "")]:
        put(3, a + "\0" + b)
    for src in ("version_test.cpp", "network_test.cpp", "container_spec_test.cpp", "unix_engine_test.cpp"):
        for body in raw(text(src)):
            for kind in (4, 5, 6, 7):
                put(kind, body)
    put(7, json.dumps({"cpu_stats": {"cpu_usage": {"total_usage": 2**64 - 1}, "system_cpu_usage": 1, "online_cpus": 0},
                       "precpu_stats": {"cpu_usage": {"total_usage": 0}}, "memory_stats": {"usage": -1, "limit": 0}}))


# --- fuzz_agent_answers: answer kind, status byte, then the body --------------------------------
def agent_answers():
    results = [{"exit_code": 7, "stdout": "build\n", "stderr": "", "duration_ms": 12, "timed_out": False,
                "truncated": False, "oom_killed": False},
               {"exit_code": 0, "stdout": "", "stdout_b64": "AAEC", "stderr_b64": "", "binary": True},
               {"exit_code": 2**63}, {"exit_code": -2**63}, {"exit_code": 1.5}, {"exit_code": "0"}, {},
               {"exit_code": 0, "stdout": 5, "duration_ms": 2**64 - 1, "timed_out": "yes"}, []]
    ports = [{"items": [{"port": 8080, "address": "0.0.0.0", "family": "ipv4", "pid": 12, "process": "python3"}]},
             {"items": [{"port": 0}, {"port": 65536}, {"port": 2**40}, {"port": 22, "pid": 2**40}]},
             {"items": [{"port": "80"}]}, {"items": {}}, {"items": [1]}, {}]
    errors = [{"error": {"code": "invalid_argument", "message": "bad cwd"}}, {"error": {"message": "x" * 5000}},
              {"error": "flat"}, {"error": {"message": 5}}, []]
    n = 0
    for kind, items in ((0, results), (1, ports), (2, errors)):
        for item in items:
            write("fuzz_agent_answers", f"answer-{n:03}", bytes([kind, 50]) + json.dumps(item).encode())
            n += 1
    for raw in ["", "not json", "{", "[" * 3000]:
        write("fuzz_agent_answers", f"answer-{n:03}", bytes([n % 3, 0]) + raw.encode())
        n += 1


# --- fuzz_sse_relay: cap index, split seed, writes accepted (>= 200: byte - 200), the stream ---
def sse_relay():
    def ev(name, data):
        return f"event: {name}\ndata: {data if isinstance(data, str) else json.dumps(data)}\n\n"
    out = ev("stdout", {"data": "hello\n"})
    streams = [
        out + ev("stderr", {"data": "warn\n"}) + ev("exit", {"exit_code": 0, "timed_out": False, "duration_ms": 3}),
        out * 5 + ev("exit", {"exit_code": 1}),
        ev("stdout", {"data": "\u00e9\u20ac" * 40, "data_b64": "w6k=" * 40}) + ev("exit", {"exit_code": 0}),
        ev("error", {"error": {"code": "internal", "message": "boom"}}),
        ev("exit", "not json") + out,
        "event: exit\nevent: stdout\ndata: {\"data\": \"x\"}\n\n",
        "event: exit\rdata: {}\r\r" + out,
        "event: stdout\ndata: {\"data\":\ndata: \"split\"}\n\n",
        ev("bogus", {}) + ": comment\n\n" + out + ev("exit", {"exit_code": 0}) + ev("exit", {"exit_code": 1}) + out,
        "event: stdout\ndata: {\"data\": \"no end",
    ]
    n = 0
    for cap in (0, 1, 4, 6):
        for stream in streams:
            write("fuzz_sse_relay", f"stream-{n:03}", bytes([cap, n, n % 3 + 200 if n % 5 == 0 else 0]) + stream.encode())
            n += 1


def main():
    proxy()
    preview()
    jwt()
    agent_tar()
    api_json()
    http_request()
    docker()
    agent_answers()
    sse_relay()
    for extra in sys.argv[1:]:
        globals()[extra]()


if __name__ == "__main__":
    main()
