# The Python kernel of a code context (src/agent/interpreter/kernel.hpp has the protocol).
# sandfort-agent carries this file in its binary and writes it into the sandbox when it starts
# a context, so any image with python3 has a stateful interpreter; matplotlib and pandas are
# used when the image has them, never required. Standard library only.
import ast
import base64
import builtins
import io
import json
import linecache
import os
import signal
import sys
import traceback
import types

REQUESTS, EVENTS = 3, 4
if sys.path and sys.path[0] == os.path.dirname(os.path.abspath(__file__)):
    sys.path[0] = ""  # imports look in the working directory, as in a notebook, not beside the kernel
for fd in (REQUESTS, EVENTS):
    os.set_inheritable(fd, False)  # a program the code starts does not get the protocol
_events = os.fdopen(EVENTS, "w", encoding="utf-8", errors="replace", buffering=1)
_requests = os.fdopen(REQUESTS, "r", encoding="utf-8", errors="replace")
sys.stdin = open(os.devnull)
for stream in (sys.stdout, sys.stderr):
    stream.reconfigure(line_buffering=True, errors="backslashreplace")
signal.signal(signal.SIGINT, signal.default_int_handler)
os.environ.setdefault("MPLBACKEND", "Agg")


def _send(event):
    sys.stdout.flush()
    sys.stderr.flush()
    _events.write(json.dumps(event) + "\n")


MIME_FIELDS = (("text/html", "html"), ("text/markdown", "markdown"), ("image/svg+xml", "svg"),
               ("image/png", "png"), ("image/jpeg", "jpeg"), ("application/pdf", "pdf"),
               ("text/latex", "latex"), ("application/json", "json"),
               ("application/javascript", "javascript"))
REPR_METHODS = (("_repr_html_", "html"), ("_repr_markdown_", "markdown"), ("_repr_svg_", "svg"),
                ("_repr_png_", "png"), ("_repr_jpeg_", "jpeg"), ("_repr_pdf_", "pdf"),
                ("_repr_latex_", "latex"), ("_repr_json_", "json"),
                ("_repr_javascript_", "javascript"))


def _as_text(field, value):
    if isinstance(value, (bytes, bytearray)):
        return base64.b64encode(bytes(value)).decode("ascii")
    if field == "json" and not isinstance(value, str):
        return value
    return str(value)


def _is_figure(obj):
    module = type(obj).__module__ or ""
    return module.startswith("matplotlib.") and type(obj).__name__ == "Figure"


def _figure_png(fig):
    buf = io.BytesIO()
    fig.savefig(buf, format="png", bbox_inches="tight")
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _bundle(obj):
    """The representations of obj, by E2B's result field names."""
    out = {}
    if _is_figure(obj):
        out["png"] = _figure_png(obj)
    method = getattr(obj, "_repr_mimebundle_", None)
    if callable(method):
        try:
            bundle = method()
            data = bundle[0] if isinstance(bundle, tuple) else bundle
            for mime, field in MIME_FIELDS:
                if data and mime in data:
                    out[field] = _as_text(field, data[mime])
            if data and "text/plain" in data:
                out["text"] = str(data["text/plain"])
        except Exception:
            pass
    for name, field in REPR_METHODS:
        if field in out or isinstance(obj, type):
            continue
        method = getattr(obj, name, None)
        if callable(method):
            try:
                value = method()
            except Exception:
                continue
            if isinstance(value, tuple):
                value = value[0]
            if value is not None:
                out[field] = _as_text(field, value)
    if "text" not in out:
        out["text"] = repr(obj)
    return out


def display(*objs):
    """Shows each object as a result of its own (as a notebook's display())."""
    for obj in objs:
        result = _bundle(obj)
        result.update(type="result", is_main_result=False)
        _send(result)
        if _is_figure(obj):
            _close_figure(obj)


def _close_figure(fig):
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is not None:
        pyplot.close(fig)


def _show_figures(*args, **kwargs):
    pyplot = sys.modules.get("matplotlib.pyplot")
    if pyplot is None:
        return
    for number in pyplot.get_fignums():
        display(pyplot.figure(number))


def _patch_pyplot(module):
    if getattr(module, "_sandfort_patched", False):
        return
    module.show = _show_figures
    module._sandfort_patched = True


class _PyplotHook:
    """Patches matplotlib.pyplot.show when the code imports pyplot: a figure shown is a result."""

    def find_spec(self, name, path=None, target=None):
        if name != "matplotlib.pyplot":
            return None
        sys.meta_path.remove(self)
        try:
            import importlib.util
            spec = importlib.util.find_spec(name)
        finally:
            sys.meta_path.insert(0, self)
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        original = loader.exec_module

        def exec_module(module):
            original(module)
            _patch_pyplot(module)

        loader.exec_module = exec_module
        return spec


sys.meta_path.insert(0, _PyplotHook())

namespace = {"__name__": "__main__", "__builtins__": builtins, "display": display}
sys.modules["__main__"] = types.ModuleType("__main__")
sys.modules["__main__"].__dict__.update(namespace)
namespace = sys.modules["__main__"].__dict__
_loop = None


def _run_code(code_obj):
    global _loop
    value = eval(code_obj, namespace)
    if isinstance(value, types.CoroutineType) and code_obj.co_flags & 0x80:  # CO_COROUTINE
        import asyncio
        if _loop is None:
            _loop = asyncio.new_event_loop()
        value = _loop.run_until_complete(value)
    return value


def _compile(source, filename, mode):
    return compile(source, filename, mode, flags=ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)


def execute(source, number):
    filename = "<cell %d>" % number
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    tree = ast.parse(source, filename, "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
    if tree.body:
        _run_code(_compile(tree, filename, "exec"))
    value = _run_code(_compile(last, filename, "eval")) if last is not None else None
    if value is not None:
        builtins._ = value
        result = _bundle(value)
        if _is_figure(value):
            _close_figure(value)
        result.update(type="result", is_main_result=True)
        _send(result)
    _show_figures()  # figures drawn and not shown yet: as a notebook shows them at the cell's end


def _error(exc):
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    # The kernel's own frames are not the user's: keep the header and the frames of cells.
    kept, skipping = [], False
    for line in lines:
        if line.startswith('  File "') and not line.startswith('  File "<cell '):
            skipping = True
            continue
        if skipping and line.startswith("    "):
            continue
        skipping = False
        kept.append(line)
    _send({"type": "error", "name": type(exc).__name__, "value": str(exc), "traceback": "".join(kept)})


def main():
    _send({"type": "ready", "pid": os.getpid()})
    number = 0
    while True:
        try:
            line = _requests.readline()
        except KeyboardInterrupt:  # an interrupt that came after the run it was meant for
            continue
        if not line:
            return
        request = json.loads(line)
        number += 1
        saved = {}
        for key, value in (request.get("env") or {}).items():
            saved[key] = os.environ.get(key)
            os.environ[key] = value
        try:
            execute(request["code"], number)
        except KeyboardInterrupt as exc:
            _error(exc)
        except BaseException as exc:  # SystemExit too: the context lives on, as in a notebook
            _error(exc)
        finally:
            for key, value in saved.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value
        try:
            _send({"type": "done"})
        except KeyboardInterrupt:
            _send({"type": "done"})


main()
