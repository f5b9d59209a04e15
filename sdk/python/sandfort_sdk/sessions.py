"""Sessions: persistent shells in a sandbox (``sandbox.process.create_session`` /
``sandbox.process.session``), whose cwd, exported variables, functions and jobs persist between
calls."""

from __future__ import annotations

import warnings
from typing import TYPE_CHECKING, List, Optional

from ._resource import clean, seg
from ._transport import ExecStream, OutputCallback
from .errors import SessionRestartedWarning
from .models import ExecResult, SessionInfo

if TYPE_CHECKING:  # pragma: no cover
    from .sandboxes import Sandbox

__all__ = ["SessionsMixin", "Session"]


class SessionsMixin:
    """The session calls of ``sandbox.process``."""

    _sbx: "Sandbox"

    def create_session(self, name: str) -> "Session":
        info = SessionInfo.from_json(self._sbx._t.call("POST", f"{self._sbx._base}/sessions", json_body={"name": name}))
        return Session(self._sbx, name, info)

    def session(self, name: str = "default") -> "Session":
        """A handle on an existing session (``default`` always exists) without a call."""
        return Session(self._sbx, name)

    def list_sessions(self) -> List[SessionInfo]:
        return [SessionInfo.from_json(s) for s in self._sbx._t.call("GET", f"{self._sbx._base}/sessions")["items"]]

    def delete_session(self, name: str) -> None:
        self._sbx._t.call("DELETE", f"{self._sbx._base}/sessions/{seg(name)}")


class Session:
    """A persistent shell: cwd, exported variables, functions and jobs persist between calls."""

    def __init__(self, sandbox: "Sandbox", name: str, info: Optional[SessionInfo] = None) -> None:
        self._sbx = sandbox
        self.name = name
        self.info = info

    def __repr__(self) -> str:
        return f"Session(name={self.name!r}, sandbox={self._sbx.id!r})"

    @property
    def _path(self) -> str:
        return f"{self._sbx._base}/sessions/{seg(self.name)}/exec"

    def exec(self, command: str, *, timeout_s: Optional[float] = None,
             on_stdout: Optional[OutputCallback] = None,
             on_stderr: Optional[OutputCallback] = None) -> ExecResult:
        """Runs ``command`` in this shell. ``exit N`` ends the shell: the result has
        ``session_restarted`` and a :class:`SessionRestartedWarning` is issued."""
        body = clean({"command": command, "timeout_s": timeout_s})
        result = self._sbx.process._run(self._path, body, timeout_s, on_stdout, on_stderr)
        self._warn_if_restarted(result, stacklevel=3)
        return result

    def exec_stream(self, command: str, *, timeout_s: Optional[float] = None) -> ExecStream:
        body = clean({"command": command, "timeout_s": timeout_s})
        return self._sbx.process._stream(self._path, body, timeout_s,
                                         on_exit=lambda r: self._warn_if_restarted(r, stacklevel=4))

    def _warn_if_restarted(self, result: ExecResult, stacklevel: int) -> None:
        # The shell's state is what a session is for: losing it must not pass unnoticed.
        if result.session_restarted:
            warnings.warn(f"the shell of session {self.name!r} in {self._sbx.id} was restarted (a command ended it, "
                          "e.g. `exit`): the working directory, variables and background jobs of earlier commands "
                          "are gone", SessionRestartedWarning, stacklevel=stacklevel)

    def delete(self) -> None:
        """Ends the shell and every job it started."""
        self._sbx.process.delete_session(self.name)
