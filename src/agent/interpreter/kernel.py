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
import math
import os
import re
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


# --- chart: E2B's result.chart, the data a matplotlib figure draws ---------------------------
# E2B's schema (types of @e2b/code-interpreter): line and scatter charts with their points, ticks and
# scales; bars with label, group and value; pie wedges; box plots (patch_artist=True); several axes
# as a "superchart"; anything else "unknown". The figure's png is always there besides.

MAX_CHART_BYTES = 4 << 20
MAX_CHART_POINTS = 100_000  # read before building: a plot of millions of points is left a png


def _number(value):
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None  # JSON has no NaN or infinity


def _unit(label):
    """'Time (s)' → 's', as E2B reads a unit from an axis label."""
    match = re.search(r"[(\[]([^()\[\]]+)[)\]]\s*$", label or "")
    return match.group(1).strip() if match else None


def _visible_label(artist):
    label = artist.get_label()
    return "" if not isinstance(label, str) or label.startswith("_") else label


class _Axis:
    """One axis of a chart: how its data values read (linear, log, dates, categories)."""

    def __init__(self, axis):
        self.axis = axis
        mapping = getattr(axis.get_units(), "_mapping", None)  # matplotlib.category's names → numbers
        converter = axis.get_converter() if hasattr(axis, "get_converter") else axis.converter
        if isinstance(mapping, dict):
            self.scale = "categorical"
            self.categories = {number: name for name, number in mapping.items()}
        elif type(converter).__module__ == "matplotlib.dates":
            self.scale = "datetime"
        else:
            self.scale = axis.get_scale()

    def value(self, v):
        if self.scale == "categorical":
            if isinstance(v, str):
                return v
            number = _number(v)
            name = self.categories.get(int(number)) if number is not None and number.is_integer() else None
            return name if name is not None else number
        if self.scale == "datetime":
            number = _number(v)
            if number is None:
                return None
            return sys.modules["matplotlib.dates"].num2date(number).replace(tzinfo=None).isoformat()
        return _number(v)

    def ticks(self):
        return [self.value(t) for t in self.axis.get_ticklocs()]

    def tick_labels(self):
        return [t.get_text() for t in self.axis.get_ticklabels()]


def _chart2d(ax, kind):
    return {"type": kind, "title": ax.get_title(), "x_label": ax.get_xlabel(), "y_label": ax.get_ylabel(),
            "x_unit": _unit(ax.get_xlabel()), "y_unit": _unit(ax.get_ylabel()), "elements": []}


def _point_chart(ax, kind, series):
    chart = _chart2d(ax, kind)
    x, y = _Axis(ax.xaxis), _Axis(ax.yaxis)
    chart.update(x_scale=x.scale, x_ticks=x.ticks(), x_tick_labels=x.tick_labels(),
                 y_scale=y.scale, y_ticks=y.ticks(), y_tick_labels=y.tick_labels())
    for label, pairs in series:
        chart["elements"].append({"label": label, "points": [[x.value(a), y.value(b)] for a, b in pairs]})
    return chart


def _is_grid_or_axis_line(line):
    return line in line.axes.get_xgridlines() or line in line.axes.get_ygridlines()


def _bar_label(axis, center):
    """A bar's label: the tick it stands at, or the nearest one when the ticks are categories or
    were placed by the code (bars of a group stand beside their tick); else its position."""
    ticks = list(zip(axis.get_ticklocs(), (t.get_text() for t in axis.get_ticklabels())))
    from matplotlib.ticker import FixedLocator
    placed = _Axis(axis).scale == "categorical" or isinstance(axis.get_major_locator(), FixedLocator)
    if ticks:
        position, text = min(ticks, key=lambda tick: abs(tick[0] - center))
        if placed or abs(position - center) < 1e-9:
            return text
    value = _Axis(axis).value(center)
    return "%g" % value if isinstance(value, float) else ("" if value is None else str(value))


def _bar_chart(ax, containers):
    chart = _chart2d(ax, "bar")
    for container in containers:
        horizontal = getattr(container, "orientation", "vertical") == "horizontal"
        group = _visible_label(container)
        for bar in container.patches:
            if horizontal:
                label, value = _bar_label(ax.yaxis, bar.get_y() + bar.get_height() / 2), bar.get_width()
            else:
                label, value = _bar_label(ax.xaxis, bar.get_x() + bar.get_width() / 2), bar.get_height()
            chart["elements"].append({"label": label, "group": group, "value": _number(value)})
    return chart


def _pie_chart(ax, wedges):
    chart = {"type": "pie", "title": ax.get_title(), "elements": []}
    for wedge in wedges:
        chart["elements"].append({"label": _visible_label(wedge),
                                  "angle": _number(abs(wedge.theta2 - wedge.theta1)),
                                  "radius": _number(wedge.r)})
    return chart


def _offsets(collection):
    offsets = collection.get_offsets()
    return offsets.filled(float("nan")) if hasattr(offsets, "filled") else offsets  # masked: NaN → null


def _point_count(ax):
    return sum(len(l.get_xdata()) for l in ax.get_lines()) + sum(len(c.get_offsets()) for c in ax.collections)


def _box_chart(ax, boxes):
    """Boxes drawn with patch_artist=True (vertical): quartiles from the box, the median line
    across it, whiskers and fliers on its centre line."""
    chart = _chart2d(ax, "box_and_whisker")
    lines = ax.get_lines()
    for box in boxes:
        vertices = box.get_path().vertices
        left, right = float(vertices[:, 0].min()), float(vertices[:, 0].max())
        q1, q3 = float(vertices[:, 1].min()), float(vertices[:, 1].max())
        centre = (left + right) / 2
        median, ends, outliers = None, [q1, q3], []
        for line in lines:
            xs, ys = line.get_xdata(orig=False), line.get_ydata(orig=False)
            if len(xs) == 0:
                continue
            on_centre = all(abs(float(x) - centre) < 1e-9 for x in xs)
            if on_centre and line.get_linestyle() in ("None", ""):
                outliers += [_number(y) for y in ys]
            elif on_centre and len(xs) == 2:
                ends += [float(y) for y in ys]
            elif (len(xs) == 2 and abs(float(xs[0]) - left) < 1e-9 and abs(float(xs[1]) - right) < 1e-9
                  and ys[0] == ys[1]):
                median = _number(ys[0])
        chart["elements"].append({"label": _bar_label(ax.xaxis, centre), "min": _number(min(ends)),
                                  "first_quartile": _number(q1), "median": median,
                                  "third_quartile": _number(q3), "max": _number(max(ends)),
                                  "outliers": outliers})
    return chart


def _axes_chart(ax):
    """The chart an Axes draws, in E2B's schema; "unknown" when it is not one kind E2B names."""
    from matplotlib.collections import PathCollection
    from matplotlib.container import BarContainer
    from matplotlib.patches import PathPatch, Wedge

    wedges = [p for p in ax.patches if isinstance(p, Wedge)]
    boxes = [p for p in ax.patches if isinstance(p, PathPatch)]
    bars = [c for c in ax.containers if isinstance(c, BarContainer)]
    lines = [l for l in ax.get_lines() if l.get_visible() and not _is_grid_or_axis_line(l)]
    scatters = [c for c in ax.collections if isinstance(c, PathCollection)]
    if boxes:  # a box plot's whiskers, caps, medians and fliers are lines of it, not line series
        return _box_chart(ax, boxes) if not (wedges or bars or scatters) else _unknown(ax)
    kinds = [name for name, found in (("pie", wedges), ("bar", bars), ("line", lines), ("scatter", scatters))
             if found]
    if kinds == ["pie"]:
        return _pie_chart(ax, wedges)
    if kinds == ["bar"]:
        return _bar_chart(ax, bars)
    if kinds == ["line"]:
        return _point_chart(ax, "line", [(_visible_label(l), zip(l.get_xdata(orig=False), l.get_ydata(orig=False))) for l in lines])
    if kinds == ["scatter"]:
        return _point_chart(ax, "scatter", [(_visible_label(c), _offsets(c)) for c in scatters])
    return _unknown(ax)


def _unknown(ax):
    return {"type": "unknown", "title": ax.get_title(), "elements": []}


def _figure_chart(fig):
    """The chart data of a figure (E2B's result.chart), or None when it has no axes, cannot be
    read, or would be larger than the bounds above (the png is the figure then)."""
    import warnings
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the user's output is theirs: no warnings of ours in it
            chart = _read_figure(fig)
        return chart if chart is not None and len(json.dumps(chart)) <= MAX_CHART_BYTES else None
    except Exception:
        return None


def _read_figure(fig):
    axes = [ax for ax in fig.get_axes() if ax.get_visible() and not hasattr(ax, "_colorbar")]
    if not axes or sum(_point_count(ax) for ax in axes) > MAX_CHART_POINTS:
        return None
    charts = [_axes_chart(ax) for ax in axes]
    if len(charts) == 1:
        return charts[0]
    title = fig._suptitle.get_text() if getattr(fig, "_suptitle", None) is not None else ""
    return {"type": "superchart", "title": title, "elements": charts}


def _bundle(obj):
    """The representations of obj, by E2B's result field names."""
    out = {}
    if _is_figure(obj):
        out["png"] = _figure_png(obj)  # drawn first: the chart reads tick labels of the drawn figure
        chart = _figure_chart(obj)
        if chart is not None:
            out["chart"] = chart
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
