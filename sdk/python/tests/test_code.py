"""sbx.code: stateful code contexts in the default image (python3, node, bash)."""

import pytest

from sandfort_sdk import CodeContext, CodeResult, InvalidArgumentError, NotFoundError


def test_a_python_run_keeps_state_and_streams(client):
    with client.create_sandbox() as sbx:
        first = sbx.code.run("x = 1")
        assert first.results == [] and first.error is None
        seen = []
        second = sbx.code.run("print('hello')\nx + 1", on_stdout=seen.append)
        assert second.text == "2"
        assert "".join(second.stdout) == "hello\n" and "".join(seen) == "hello\n"
        assert second.execution_count == first.execution_count + 1
        assert second.context_id == first.context_id

        shown = sbx.code.run("display(1, 'a')")
        assert [(r.text, r.is_main_result) for r in shown.results] == [("1", False), ("'a'", False)]
        html = sbx.code.run("class T:\n    def _repr_html_(self): return '<b>t</b>'\nT()")
        assert html.results[0].html == "<b>t</b>" and "html" in html.results[0].formats()

        failed = sbx.code.run("raise ValueError('bad')")
        assert failed.error.name == "ValueError" and failed.error.value == "bad"
        assert "ValueError: bad" in failed.error.traceback

        slow = sbx.code.run("import time\ntime.sleep(30)", timeout_s=1)
        assert slow.error.name == "TimeoutError" and slow.timed_out
        assert sbx.code.run("x").text == "1"

        events = [e.type for e in sbx.code.run_stream("print(1)\n2")]
        assert events == ["stdout", "result", "end"]


def test_contexts_js_and_bash_restart_and_delete(client):
    with client.create_sandbox() as sbx:
        js = sbx.code.create_context("js", cwd="/tmp")
        assert isinstance(js, CodeContext) and js.language == "js" and js.cwd == "/tmp"
        sbx.code.run("var n = 40", context=js)
        run = sbx.code.run("console.log(process.cwd()); n + 2", context=js.id)
        assert run.text == "42" and run.stdout == ["/tmp\n"]

        sbx.code.run("cd /tmp && V=7", language="bash")
        assert "".join(sbx.code.run("echo $PWD $V", language="bash").stdout) == "/tmp 7\n"

        assert js.id in {c.id for c in sbx.code.list_contexts()}
        assert sbx.code.restart_context(js).execution_count == 0
        assert sbx.code.run("typeof n", context=js).text == "'undefined'"
        sbx.code.delete_context(js)
        with pytest.raises(NotFoundError):
            sbx.code.get_context(js)
        with pytest.raises(NotFoundError):
            sbx.code.run("1", context=js)
        with pytest.raises(InvalidArgumentError):
            sbx.code.create_context("cobol")


def test_a_results_chart_is_kept_and_is_not_a_format():
    # The default image has no matplotlib: tests/integration/test_code_interpreter.py has figures.
    chart = {"type": "bar", "title": "t", "elements": [{"label": "a", "group": "", "value": 1}]}
    r = CodeResult.from_json({"text": "<Figure>", "png": "iVBO", "chart": chart})
    assert r.chart == chart and r.formats() == ["png"]
    assert CodeResult.from_json({"text": "x", "chart": "not an object"}).chart is None
