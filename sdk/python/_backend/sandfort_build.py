"""A minimal PEP 517 build backend in the standard library only, so that
``pip install ./sdk/python`` works offline, with no setuptools or wheel to fetch.
It builds a pure-Python wheel of the ``sandfort_sdk`` package (and a plain sdist)."""

import base64
import hashlib
import io
import os
import tarfile
import zipfile

NAME = "sandfort_sdk"
DIST = "sandfort_sdk"
VERSION = "0.1.0"
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TAG = "py3-none-any"


def _metadata():
    readme = ""
    path = os.path.join(ROOT, "README.md")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            readme = f.read()
    return ("Metadata-Version: 2.1\n"
            "Name: sandfort-sdk\n"
            f"Version: {VERSION}\n"
            "Summary: Python SDK for Sandfort, a self-hosted sandbox platform for AI agents\n"
            "Requires-Python: >=3.9\n"
            "Classifier: Programming Language :: Python :: 3\n"
            "Classifier: Typing :: Typed\n"
            "Description-Content-Type: text/markdown\n\n" + readme)


def _package_files():
    base = os.path.join(ROOT, NAME)
    for dirpath, dirnames, filenames in os.walk(base):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for fn in sorted(filenames):
            if fn.endswith((".py", ".typed")):
                full = os.path.join(dirpath, fn)
                yield full, os.path.relpath(full, ROOT).replace(os.sep, "/")


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{arcname},sha256={digest},{len(data)}"


def _write_wheel(wheel_directory, files):
    dist_info = f"{DIST}-{VERSION}.dist-info"
    filename = f"{DIST}-{VERSION}-{TAG}.whl"
    records = []
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w", zipfile.ZIP_DEFLATED) as zf:
        def add(arcname, data):
            zf.writestr(zipfile.ZipInfo(arcname, date_time=(2020, 1, 1, 0, 0, 0)), data)
            records.append(_record_line(arcname, data))
        for arcname, data in files:
            add(arcname, data)
        add(f"{dist_info}/METADATA", _metadata().encode("utf-8"))
        add(f"{dist_info}/WHEEL", (f"Wheel-Version: 1.0\nGenerator: sandfort_build\n"
                                    f"Root-Is-Purelib: true\nTag: {TAG}\n").encode())
        add(f"{dist_info}/top_level.txt", f"{NAME}\n".encode())
        records.append(f"{dist_info}/RECORD,,")
        zf.writestr(zipfile.ZipInfo(f"{dist_info}/RECORD", date_time=(2020, 1, 1, 0, 0, 0)),
                    "\n".join(records) + "\n")
    return filename


def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    files = []
    for full, arcname in _package_files():
        with open(full, "rb") as f:
            files.append((arcname, f.read()))
    return _write_wheel(wheel_directory, files)


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """An editable install: a .pth file pointing at the source tree."""
    return _write_wheel(wheel_directory, [(f"{DIST}_editable.pth", (ROOT + "\n").encode())])


def build_sdist(sdist_directory, config_settings=None):
    stem = f"{DIST}-{VERSION}"
    filename = stem + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, filename), "w:gz", format=tarfile.PAX_FORMAT) as tar:
        for rel in ("pyproject.toml", "README.md", "_backend/sandfort_build.py"):
            if os.path.exists(os.path.join(ROOT, rel)):
                tar.add(os.path.join(ROOT, rel), arcname=f"{stem}/{rel}")
        for full, arcname in _package_files():
            tar.add(full, arcname=f"{stem}/{arcname}")
        info = tarfile.TarInfo(f"{stem}/PKG-INFO")
        data = _metadata().encode("utf-8")
        info.size = len(data)
        tar.addfile(info, io.BytesIO(data))
    return filename
