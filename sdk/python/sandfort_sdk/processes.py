"""``sandbox.process``: one-off commands and code runs, each a fresh process, their result a value
(a non-zero exit is ``exit_code``, never raised) or a stream of output; the session calls
(``sessions.py``) and the background-command calls (``commands.py``) are mixed in."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Dict, Mapping, Optional, Sequence, Union

from ._resource import clean
from ._transport import ExecStream, OutputCallback, Transport, socket_timeout_for
from .commands import CommandsMixin
from .models import ExecResult
from .sessions import SessionsMixin

if TYPE_CHECKING:  # pragma: no cover
    from .sandboxes import Sandbox

__all__ = ["Process"]


class Process(SessionsMixin, CommandsMixin):
    """``sandbox.process``: one-off commands, code runs, sessions and background commands."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sbx = sandbox

    @property
    def _t(self) -> Transport:
        return self._sbx._t

    def _run(self, path: str, body: Dict[str, Any], timeout_s: Optional[float],
             on_stdout: Optional[OutputCallback], on_stderr: Optional[OutputCallback]) -> ExecResult:
        sock_timeout = socket_timeout_for(self._sbx._client.timeout, timeout_s)
        if on_stdout is None and on_stderr is None:
            return ExecResult.from_json(self._t.call("POST", path, json_body=body, timeout=sock_timeout))
        return self._stream(path, body, timeout_s, on_stdout, on_stderr).wait()

    def _stream(self, path: str, body: Dict[str, Any], timeout_s: Optional[float],
                on_stdout: Optional[OutputCallback] = None,
                on_stderr: Optional[OutputCallback] = None,
                on_exit: Optional[Callable[[ExecResult], None]] = None) -> ExecStream:
        resp = self._t.open("POST", path, json_body=body, headers={"Accept": "text/event-stream"},
                            timeout=socket_timeout_for(self._sbx._client.timeout, timeout_s))
        return ExecStream(resp, on_stdout, on_stderr, on_exit)

    @staticmethod
    def _exec_body(command: Optional[str], argv: Optional[Sequence[str]], cwd: Optional[str],
                   env: Optional[Mapping[str, str]], stdin: Optional[Union[str, bytes]],
                   timeout_s: Optional[float], binary: bool) -> Dict[str, Any]:
        if (command is None) == (argv is None):
            raise ValueError("give exactly one of command and argv")
        if isinstance(stdin, bytes):
            stdin = stdin.decode("utf-8")
        return clean({"command": command, "argv": list(argv) if argv is not None else None, "cwd": cwd,
                      "env": dict(env) if env is not None else None, "stdin": stdin,
                      "timeout_s": timeout_s, "binary": True if binary else None})

    @staticmethod
    def _code_body(language: str, code: str, argv: Optional[Sequence[str]], env: Optional[Mapping[str, str]],
                   timeout_s: Optional[float]) -> Dict[str, Any]:
        return clean({"language": language, "code": code, "argv": list(argv) if argv is not None else None,
                      "env": dict(env) if env is not None else None, "timeout_s": timeout_s})

    def exec(self, command: Optional[str] = None, *, argv: Optional[Sequence[str]] = None,
             cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
             stdin: Optional[Union[str, bytes]] = None, timeout_s: Optional[float] = None,
             binary: bool = False, on_stdout: Optional[OutputCallback] = None,
             on_stderr: Optional[OutputCallback] = None) -> ExecResult:
        """Runs ``command`` (``/bin/sh -c``) or ``argv`` in a fresh process. A non-zero exit is
        returned in ``exit_code``, never raised. With ``on_stdout``/``on_stderr`` the output is
        streamed to the callbacks as it is produced and the full result still returned."""
        body = self._exec_body(command, argv, cwd, env, stdin, timeout_s, binary)
        return self._run(f"{self._sbx._base}/process/exec", body, timeout_s, on_stdout, on_stderr)

    def exec_stream(self, command: Optional[str] = None, *, argv: Optional[Sequence[str]] = None,
                    cwd: Optional[str] = None, env: Optional[Mapping[str, str]] = None,
                    stdin: Optional[Union[str, bytes]] = None, timeout_s: Optional[float] = None,
                    binary: bool = False) -> ExecStream:
        """Like :meth:`exec` but returns an iterator of :class:`StreamEvent` (the last is ``exit``)."""
        body = self._exec_body(command, argv, cwd, env, stdin, timeout_s, binary)
        return self._stream(f"{self._sbx._base}/process/exec", body, timeout_s)

    def code_run(self, language: str, code: str, *, argv: Optional[Sequence[str]] = None,
                 env: Optional[Mapping[str, str]] = None, timeout_s: Optional[float] = None,
                 on_stdout: Optional[OutputCallback] = None,
                 on_stderr: Optional[OutputCallback] = None) -> ExecResult:
        """Runs ``code`` with ``python`` (python3 -c), ``node``, ``bash`` or ``sh``."""
        body = self._code_body(language, code, argv, env, timeout_s)
        return self._run(f"{self._sbx._base}/process/code-run", body, timeout_s, on_stdout, on_stderr)

    def code_run_stream(self, language: str, code: str, *, argv: Optional[Sequence[str]] = None,
                        env: Optional[Mapping[str, str]] = None,
                        timeout_s: Optional[float] = None) -> ExecStream:
        body = self._code_body(language, code, argv, env, timeout_s)
        return self._stream(f"{self._sbx._base}/process/code-run", body, timeout_s)
