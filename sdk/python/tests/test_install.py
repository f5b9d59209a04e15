"""`pip install ./sdk/python` into a fresh venv works offline (the build backend is in-tree,
standard library only), and the installed package carries py.typed and works."""

import os
import subprocess
import sys

SDK = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_pip_install_into_a_fresh_venv(tmp_path, env):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "--no-index", SDK], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    code = ("import os, sandfort_sdk as s; d = os.path.dirname(s.__file__);"
            "assert d.startswith(os.environ['VENV']), d;"
            "assert os.path.exists(os.path.join(d, 'py.typed'));"
            "print(s.__version__, s.Client().whoami().role)")
    out = subprocess.run([py, "-c", code], capture_output=True, text=True, cwd=str(tmp_path),
                         env=dict(os.environ, VENV=str(venv), SANDFORT_BASE_URL=env["url"],
                                  SANDFORT_API_KEY=env["key"]))
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["0.1.0", "admin"]
