"""The userland a new sandbox offers, against a real daemon and the default image (docs/images.md):
/work is every sandbox's working directory, owned by its user, made by the agent where an image
lacks it (cold and from the warm pool), never through a link the image planted; pip, venv, npm and
a C compiler with Python's headers work offline; a failed shell command names bash, not the file
that carries it."""

import os
import re
import subprocess
import tempfile
import time
import uuid

import pytest

from sandfort_harness import Daemon

BASE_IMAGE = "sandfort/base:bookworm"


def base_image_version():
    """The version scripts/build-base-image makes now (scripts/lib.sh)."""
    lib = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "lib.sh")
    with open(lib) as f:
        return re.search(r"^SF_BASE_IMAGE_VERSION=(\d+)", f.read(), re.M).group(1)


BASE_IMAGE_VERSION = base_image_version()


def docker_cli(*args, **kw):
    return subprocess.run(["docker", *args], capture_output=True, text=True, timeout=300, **kw)


@pytest.fixture(scope="module", autouse=True)
def base_image():
    r = docker_cli("image", "inspect", "-f", '{{index .Config.Labels "io.sandfort.base-image-version"}}', BASE_IMAGE)
    assert r.returncode == 0 and r.stdout.strip() == BASE_IMAGE_VERSION, (
        f"{BASE_IMAGE} version {BASE_IMAGE_VERSION} is needed (scripts/build-base-image): {r.stdout}{r.stderr}")


def build_image(dockerfile):
    """An image of this test's own, named sandfort-test-…; the caller removes it."""
    tag = f"sandfort-test-userland-{uuid.uuid4().hex[:12]}:latest"
    with tempfile.TemporaryDirectory() as context:
        with open(os.path.join(context, "Dockerfile"), "w") as f:
            f.write(dockerfile)
        r = docker_cli("build", "-q", "-t", tag, context)
    assert r.returncode == 0, r.stdout + r.stderr
    return tag


@pytest.fixture(scope="module")
def images():
    """A custom image without /work (and WORKDIR /), and one whose /work is a dangling link."""
    made = {"no_work": build_image(f"FROM {BASE_IMAGE}\nRUN rm -rf /work\nWORKDIR /\n"),
            "linked_work": build_image(f"FROM {BASE_IMAGE}\nRUN rm -rf /work && ln -s /made-through-link /work\n"
                                       "WORKDIR /\n")}
    yield made
    for tag in made.values():
        docker_cli("image", "rm", "-f", tag)


@pytest.fixture(scope="module")
def box(member):
    """A sandbox of the default image for this module (its sessions are its own)."""
    sbx = member.create_sandbox(name="userland")
    yield sbx
    member.delete(f"/v1/sandboxes/{sbx['id']}")


def session(client, sandbox_id, command, name=None, timeout_s=120):
    path = f"/v1/sandboxes/{sandbox_id}/" + (f"sessions/{name}/exec" if name else "exec")
    r = client.post(path, {"command": command, "timeout_s": timeout_s})
    assert r.status == 200, r
    return r.json()


def sh(client, sandbox_id, command, timeout_s=120):
    return client.exec(sandbox_id, command=command, timeout_s=timeout_s)


def assert_works_in_work(client, sandbox_id, owner="root:root"):
    """/work is the directory of a one-shot exec, a session, a background command; owned by the user."""
    r = sh(client, sandbox_id, "pwd; stat -c '%U:%G %F' /work; touch /work/written")
    assert r["exit_code"] == 0 and r["stdout"] == f"/work\n{owner} directory\n", r
    assert session(client, sandbox_id, "pwd")["stdout"] == "/work\n"
    assert client.exec(sandbox_id, argv=["pwd"])["stdout"] == "/work\n"
    r = client.post(f"/v1/sandboxes/{sandbox_id}/sessions", {"name": "other"})
    assert r.status in (200, 201), r
    assert session(client, sandbox_id, "pwd", name="other")["stdout"] == "/work\n"
    commands = f"/v1/sandboxes/{sandbox_id}/commands"
    r = client.post(commands, {"command": "pwd"})
    assert r.status == 201, r
    deadline = time.time() + 30
    while client.get(f"{commands}/{r.json()['id']}").json()["state"] != "exited":
        assert time.time() < deadline
        time.sleep(0.1)
    assert client.get(f"{commands}/{r.json()['id']}/logs").json()["stdout"] == "/work\n"


def test_work_is_the_default_directory_of_every_way_in(member, box):
    assert_works_in_work(member, box["id"])


def test_a_failed_command_names_bash_not_an_internal_file(member, box):
    for name in (None, "errors"):
        if name:
            assert member.post(f"/v1/sandboxes/{box['id']}/sessions", {"name": name}).status in (200, 201)
        r = session(member, box["id"], "cd /nope", name=name)
        assert r["exit_code"] == 1
        assert r["stderr"] == "bash: line 1: cd: /nope: No such file or directory\n", r
        # A long command (beyond any argv or line limit) still runs whole, its lines counted from 1.
        long = "".join(f"x{i}=1\n" for i in range(20000)) + "cd /nope-deep\necho \"$x19999\""
        r = session(member, box["id"], long, name=name)
        assert r["stdout"] == "1\n" and r["stderr"] == \
            "bash: line 20001: cd: /nope-deep: No such file or directory\n", r["stderr"][:300]
    # A one-shot exec is /bin/sh -c (the API's word): its error names the shell, nothing internal.
    r = sh(member, box["id"], "cd /nope")
    assert r["exit_code"] == 2 and r["stderr"].startswith("/bin/sh: 1: cd:") and ".sandfort" not in r["stderr"], r


def test_pip_venv_and_npm(member, box):
    r = sh(member, box["id"], "python3 -m pip --version && python3 -m venv /work/venv && "
                                  "/work/venv/bin/pip --version && npm --version")
    assert r["exit_code"] == 0, r
    lines = r["stdout"].splitlines()
    assert lines[0].startswith("pip ") and lines[1].startswith("pip ") and "/work/venv/" in lines[1], r
    assert lines[2][0].isdigit(), r
    r = session(member, box["id"], "mkdir -p /work/app && cd /work/app && npm init -y >/dev/null && "
                                       "node -p 'require(\"./package.json\").name'")
    assert r["exit_code"] == 0 and r["stdout"] == "app\n", r


def test_a_c_extension_builds_and_imports_offline(member, box):
    """A compiler, make and Python's headers: pip builds a C extension with no index, and installs
    it into the system Python as on a machine of one's own (no PEP 668 refusal)."""
    setup_py = ("from setuptools import setup, Extension\n"
                "setup(name='sfhello', version='1.0', ext_modules=[Extension('sfhello', ['sfhello.c'])])\n")
    source = ("#define PY_SSIZE_T_CLEAN\n#include <Python.h>\n"
              "static PyObject *add(PyObject *self, PyObject *args) {\n"
              "  long a, b; if (!PyArg_ParseTuple(args, \"ll\", &a, &b)) return NULL;\n"
              "  return PyLong_FromLong(a + b);\n}\n"
              "static PyMethodDef methods[] = {{\"add\", add, METH_VARARGS, NULL}, {NULL, NULL, 0, NULL}};\n"
              "static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, \"sfhello\", NULL, -1, methods};\n"
              "PyMODINIT_FUNC PyInit_sfhello(void) { return PyModule_Create(&module); }\n")
    for name, text in (("setup.py", setup_py), ("sfhello.c", source)):
        r = member.request("PUT", f"/v1/sandboxes/{box['id']}/files?path=/work/pkg/{name}", raw=text.encode())
        assert r.status in (200, 201, 204), r
    r = session(member, box["id"], "pip install --no-index --no-build-isolation /work/pkg >/work/pip.log 2>&1; "
                                       "s=$?; [ $s = 0 ] || tail -20 /work/pip.log; "
                                       "cd / && python -c 'import sfhello; print(sfhello.add(40, 2))'",
                timeout_s=300)
    assert r["exit_code"] == 0 and r["stdout"].endswith("42\n"), r


def test_an_image_without_work_gets_it_cold(member, images):
    box = member.create_sandbox(snapshot=images["no_work"])
    try:
        assert_works_in_work(member, box["id"])
    finally:
        member.delete(f"/v1/sandboxes/{box['id']}")
    # The create's own workdir wins, made when missing.
    box = member.create_sandbox(snapshot=images["no_work"], workdir="/srv/app")
    try:
        assert sh(member, box["id"], "pwd")["stdout"] == "/srv/app\n"
        assert session(member, box["id"], "pwd")["stdout"] == "/srv/app\n"
    finally:
        member.delete(f"/v1/sandboxes/{box['id']}")


@pytest.mark.parametrize("image", ["default", "no_work", "linked_work"])
def test_another_user_owns_work_and_works_there(member, images, image):
    """The agent, as `nobody`, could not take over the image's root-owned /work nor make one under
    a root-owned /: the engine puts it there before the start, owned by the user; a link the
    image planted at /work is replaced, not followed."""
    spec = {"user": "nobody"} if image == "default" else {"user": "nobody", "snapshot": images[image]}
    box = member.create_sandbox(**spec)
    try:
        assert_works_in_work(member, box["id"], owner="nobody:nogroup")
        r = sh(member, box["id"], "test -e /made-through-link && echo made || echo not-made")
        assert r["stdout"] == "not-made\n", r
    finally:
        member.delete(f"/v1/sandboxes/{box['id']}")


def test_a_link_the_image_planted_is_not_made_through(member, images):
    box = member.create_sandbox(snapshot=images["linked_work"])
    try:
        r = sh(member, box["id"], "pwd; test -e /made-through-link && echo made || echo not-made")
        # Nothing made through the link; the sandbox starts where the image said.
        assert r["stdout"] == "/\nnot-made\n", r
    finally:
        member.delete(f"/v1/sandboxes/{box['id']}")


def test_a_pooled_sandbox_of_an_image_without_work_gets_it(images):
    d = Daemon({"pools": [{"image": images["no_work"], "size": 1}]}).start()
    try:
        admin = d.admin()
        deadline = time.time() + 120
        while admin.get("/v1/pool").json()["pools"][0]["ready"] < 1:
            assert time.time() < deadline, admin.get("/v1/pool").json()
            time.sleep(0.2)
        r = admin.post("/v1/sandboxes", {"snapshot": images["no_work"]})
        assert r.status == 201, r
        box = r.json()
        try:
            assert_works_in_work(admin, box["id"])
        finally:
            admin.delete(f"/v1/sandboxes/{box['id']}")
        assert admin.get("/v1/pool").json()["pools"][0]["claims"] == 1
    finally:
        d.stop()
        d.cleanup()
