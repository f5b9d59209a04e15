"""``sandbox.code``: stateful code contexts (docs/api.md, "Code interpreter").

A context is one long-lived interpreter — ``python``, ``js`` (node) or ``bash`` — whose state
carries over between runs, as in a notebook::

    sbx.code.run("x = 1")
    assert sbx.code.run("x + 1").text == "2"

A run streams ``stdout``/``stderr`` as produced, then its results (``display()`` and the value
of the last expression; matplotlib figures as PNG, DataFrames as HTML), an error if the code
raised (a value in :attr:`Execution.error`, never an exception) and ``end``. Without a context a
run goes to the default context of its language (``python`` by default)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Callable, Dict, Iterator, List, Mapping, Optional, Union

from ._resource import clean, seg
from ._transport import Response, Transport, iter_sse, socket_timeout_for
from .errors import StreamError
from .models import CodeContext, CodeError, CodeResult, Execution

if TYPE_CHECKING:  # pragma: no cover
    from .sandboxes import Sandbox

__all__ = ["Code", "CodeEvent", "CodeRunStream"]

# The daemon's default timeout of a run (docs/api.md).
_DEFAULT_RUN_S = 300.0


class CodeEvent:
    """One event of a run: ``type`` is ``stdout``, ``stderr`` (``text``), ``result`` (``result``),
    ``error`` (``error``) or ``end`` (``execution``, the whole run)."""

    def __init__(self, type: str, text: Optional[str] = None, result: Optional[CodeResult] = None,
                 error: Optional[CodeError] = None, execution: Optional[Execution] = None,
                 payload: Optional[Dict[str, Any]] = None) -> None:
        self.type = type
        self.text = text
        self.result = result
        self.error = error
        self.execution = execution
        self.payload = payload or {}

    def __repr__(self) -> str:
        return f"CodeEvent(type={self.type!r})"


class CodeRunStream:
    """An iterator of :class:`CodeEvent` over one run; :meth:`wait` reads to the end and returns
    the :class:`Execution`. Leaving early (``close()``) disconnects, which interrupts the run."""

    def __init__(self, resp: Response, on_stdout: Optional[Callable[[str], None]] = None,
                 on_stderr: Optional[Callable[[str], None]] = None,
                 on_result: Optional[Callable[[CodeResult], None]] = None,
                 on_error: Optional[Callable[[CodeError], None]] = None) -> None:
        self._resp = resp
        self._events = iter_sse(resp)
        self._on_stdout, self._on_stderr = on_stdout, on_stderr
        self._on_result, self._on_error = on_result, on_error
        self.execution = Execution()
        self.done = False
        self.request_id = resp.request_id

    def __iter__(self) -> Iterator[CodeEvent]:
        return self

    def __next__(self) -> CodeEvent:
        if self.done:
            raise StopIteration
        try:
            name, data = next(self._events)
        except StopIteration:
            raise StreamError("the run's stream ended without an end event") from None
        try:
            payload = json.loads(data) if data else {}
        except ValueError:
            payload = {}
        if not isinstance(payload, dict):
            payload = {}
        ex = self.execution
        if name in ("stdout", "stderr"):
            text = str(payload.get("text", ""))
            (ex.stdout if name == "stdout" else ex.stderr).append(text)
            cb = self._on_stdout if name == "stdout" else self._on_stderr
            if cb is not None:
                cb(text)
            return CodeEvent(name, text=text, payload=payload)
        if name == "result":
            result = CodeResult.from_json(payload)
            ex.results.append(result)
            if self._on_result is not None:
                self._on_result(result)
            return CodeEvent(name, result=result, payload=payload)
        if name == "error":
            ex.error = CodeError.from_json(payload)
            if self._on_error is not None:
                self._on_error(ex.error)
            return CodeEvent(name, error=ex.error, payload=payload)
        if name == "end":
            ex.context_id = payload.get("context_id")
            ex.execution_count = payload.get("execution_count")
            ex.timed_out = bool(payload.get("timed_out"))
            ex.truncated = bool(payload.get("truncated"))
            ex.restarted = bool(payload.get("restarted"))
            ex.duration_ms = payload.get("duration_ms")
            self.done = True
            self.close()
            return CodeEvent(name, execution=ex, payload=payload)
        if name == "failure":
            self.close()
            err = payload.get("error", {})
            msg = err.get("message", data) if isinstance(err, dict) else data
            raise StreamError(f"the run failed: {msg} (request_id={self.request_id})")
        return CodeEvent(name, payload=payload)

    def wait(self) -> Execution:
        for _ in self:
            pass
        return self.execution

    def close(self) -> None:
        self._resp.close()

    def __enter__(self) -> "CodeRunStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


ContextRef = Union[str, CodeContext]


class Code:
    """``sandbox.code``: code contexts and runs."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sbx = sandbox

    @property
    def _t(self) -> Transport:
        return self._sbx._t

    @property
    def _base(self) -> str:
        return f"{self._sbx._base}/code"

    def create_context(self, language: str = "python", *, cwd: Optional[str] = None,
                       env: Optional[Mapping[str, str]] = None) -> CodeContext:
        """Starts an interpreter (ready when this returns). ``language``: ``python``, ``js``, ``bash``."""
        body = clean({"language": language, "cwd": cwd, "env": dict(env) if env is not None else None})
        return CodeContext.from_json(self._t.call("POST", f"{self._base}/contexts", json_body=body))

    def list_contexts(self) -> List[CodeContext]:
        return [CodeContext.from_json(c) for c in self._t.call("GET", f"{self._base}/contexts")["items"]]

    def get_context(self, context: ContextRef) -> CodeContext:
        return CodeContext.from_json(self._t.call("GET", f"{self._base}/contexts/{seg(_id(context))}"))

    def delete_context(self, context: ContextRef) -> None:
        """Kills the interpreter and everything it started."""
        self._t.call("DELETE", f"{self._base}/contexts/{seg(_id(context))}")

    def restart_context(self, context: ContextRef) -> CodeContext:
        """A fresh interpreter: the context's state and execution count are reset."""
        return CodeContext.from_json(self._t.call("POST", f"{self._base}/contexts/{seg(_id(context))}/restart",
                                                  json_body={}))

    def run_stream(self, code: str, *, language: Optional[str] = None, context: Optional[ContextRef] = None,
                   env: Optional[Mapping[str, str]] = None, timeout_s: Optional[float] = None,
                   on_stdout: Optional[Callable[[str], None]] = None,
                   on_stderr: Optional[Callable[[str], None]] = None,
                   on_result: Optional[Callable[[CodeResult], None]] = None,
                   on_error: Optional[Callable[[CodeError], None]] = None) -> CodeRunStream:
        """Starts a run and returns its events as an iterator (:class:`CodeRunStream`)."""
        body = clean({"code": code, "language": language,
                      "context_id": _id(context) if context is not None else None,
                      "env": dict(env) if env is not None else None, "timeout_s": timeout_s})
        wait = timeout_s if timeout_s is not None else _DEFAULT_RUN_S
        resp = self._t.open("POST", f"{self._base}/run", json_body=body, headers={"Accept": "text/event-stream"},
                            timeout=socket_timeout_for(self._sbx._client.timeout, wait))
        return CodeRunStream(resp, on_stdout, on_stderr, on_result, on_error)

    def run(self, code: str, *, language: Optional[str] = None, context: Optional[ContextRef] = None,
            env: Optional[Mapping[str, str]] = None, timeout_s: Optional[float] = None,
            on_stdout: Optional[Callable[[str], None]] = None,
            on_stderr: Optional[Callable[[str], None]] = None,
            on_result: Optional[Callable[[CodeResult], None]] = None,
            on_error: Optional[Callable[[CodeError], None]] = None) -> Execution:
        """Runs ``code`` in ``context`` (or the default context of ``language``, ``python`` when
        neither is given) and returns the :class:`Execution`; the callbacks see each event as it
        arrives. An exception in the code is ``Execution.error``, not raised."""
        return self.run_stream(code, language=language, context=context, env=env, timeout_s=timeout_s,
                               on_stdout=on_stdout, on_stderr=on_stderr, on_result=on_result,
                               on_error=on_error).wait()


def _id(context: ContextRef) -> str:
    return context.id if isinstance(context, CodeContext) else str(context)
