"""Background commands in a sandbox (``sandbox.process.start``): started at once, their output
kept (newest 1 MiB per stream) to read, follow, feed and signal later."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, List, Mapping, Optional, Union

from ._resource import clean, seg
from ._transport import ExecStream, OutputCallback
from .models import CommandInfo, CommandLogs

if TYPE_CHECKING:  # pragma: no cover
    from .sandboxes import Sandbox

__all__ = ["CommandsMixin", "Command"]


class CommandsMixin:
    """The background-command calls of ``sandbox.process``."""

    _sbx: "Sandbox"

    def start(self, command: str, *, cwd: Optional[str] = None,
              env: Optional[Mapping[str, str]] = None) -> "Command":
        """Starts a background command and returns at once."""
        body = clean({"command": command, "cwd": cwd, "env": dict(env) if env is not None else None})
        info = CommandInfo.from_json(self._sbx._t.call("POST", f"{self._sbx._base}/commands", json_body=body))
        return Command(self._sbx, info)

    start_command = start

    def get_command(self, command_id: str) -> "Command":
        info = CommandInfo.from_json(self._sbx._t.call("GET", f"{self._sbx._base}/commands/{seg(command_id)}"))
        return Command(self._sbx, info)

    def list_commands(self) -> List[CommandInfo]:
        data = self._sbx._t.call("GET", f"{self._sbx._base}/commands")
        items = data["items"] if isinstance(data, dict) else data
        return [CommandInfo.from_json(c) for c in items]


class Command:
    """A background command started with ``sandbox.process.start``."""

    def __init__(self, sandbox: "Sandbox", info: CommandInfo) -> None:
        self._sbx = sandbox
        self.info = info

    def __repr__(self) -> str:
        return f"Command(id={self.id!r}, state={self.info.state!r})"

    @property
    def id(self) -> str:
        return self.info.id

    @property
    def _path(self) -> str:
        return f"{self._sbx._base}/commands/{seg(self.id)}"

    @property
    def exit_code(self) -> Optional[int]:
        return self.info.exit_code

    def refresh(self) -> CommandInfo:
        self.info = CommandInfo.from_json(self._sbx._t.call("GET", self._path))
        return self.info

    def logs(self) -> CommandLogs:
        """The buffered output so far (newest 1 MiB per stream)."""
        return CommandLogs.from_json(self._sbx._t.call("GET", f"{self._path}/logs"))

    def follow(self, on_stdout: Optional[OutputCallback] = None,
               on_stderr: Optional[OutputCallback] = None, timeout: Optional[float] = None) -> ExecStream:
        """Streams the logs: what is buffered, then new output, then ``exit``. Iterate it, or call
        ``.wait()`` for the result (its exit code is the command's)."""
        resp = self._sbx._t.open("GET", f"{self._path}/logs", query={"follow": True},
                                 headers={"Accept": "text/event-stream"}, timeout=timeout)
        return ExecStream(resp, on_stdout, on_stderr)

    def send_stdin(self, data: Union[str, bytes], *, eof: bool = False) -> None:
        raw = data.encode("utf-8") if isinstance(data, str) else bytes(data)
        self._sbx._t.call("POST", f"{self._path}/stdin", body=raw, query={"eof": True} if eof else None)

    def close_stdin(self) -> None:
        self.send_stdin(b"", eof=True)

    def kill(self, signal: Union[str, int] = "TERM") -> None:
        """Sends ``signal`` to its process group; an exited command raises ConflictError."""
        self._sbx._t.call("POST", f"{self._path}/kill", json_body={"signal": signal})

    def wait(self, timeout: float = 60.0, interval: float = 0.2) -> CommandInfo:
        """Polls until the command has exited; raises TimeoutError after ``timeout`` seconds."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.refresh()
            if info.state != "running":
                return info
            if time.monotonic() >= deadline:
                raise TimeoutError(f"command {self.id} still running after {timeout} s")
            time.sleep(interval)
