"""An interactive terminal over the API's WebSocket (``GET /v1/sandboxes/{id}/pty``), with a
small RFC 6455 client of its own (standard library only).

    with sbx.pty(cols=100, rows=30) as term:
        term.send("echo hi\\n")
        print(term.read_until(b"hi"))
        term.send("exit 3\\n")
        assert term.wait() == 3
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import ssl
import struct
import threading
import time
from typing import Any, Dict, List, Optional, Tuple, Union

from ._transport import USER_AGENT, Transport
from .errors import APIConnectionError, AuthenticationError, SandfortError, error_from_response

__all__ = ["PtySession"]

_GUID = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
OP_CONT, OP_TEXT, OP_BIN, OP_CLOSE, OP_PING, OP_PONG = 0x0, 0x1, 0x2, 0x8, 0x9, 0xA


class PtySession:
    """A terminal in the sandbox. Binary frames are terminal bytes; the server's
    ``{"type":"exit","exit_code"}`` sets :attr:`exit_code` before it closes."""

    def __init__(self, sock: socket.socket, buffered: bytes) -> None:
        self._sock = sock
        self._buf = buffered
        self._send_lock = threading.Lock()
        self._fragments: List[bytes] = []
        self._frag_op = 0
        self.closed = False
        self.exit_code: Optional[int] = None
        self.errors: List[str] = []

    # --- opening ------------------------------------------------------------------------------
    @classmethod
    def open(cls, transport: Transport, sandbox_id: str, *, cols: int = 80, rows: int = 24,
             command: Optional[str] = None, cwd: Optional[str] = None,
             timeout: Optional[float] = 30.0) -> "PtySession":
        query: Dict[str, Any] = {"cols": cols, "rows": rows, "command": command, "cwd": cwd}
        target = transport.url(f"/v1/sandboxes/{sandbox_id}/pty", query)
        try:
            return cls._open(transport, target, timeout)
        except AuthenticationError:
            if transport.token_provider is None:
                raise
        return cls._open(transport, target, timeout)  # a refused token: the provider's next one

    @classmethod
    def _open(cls, transport: Transport, target: str, timeout: Optional[float]) -> "PtySession":
        token = transport.bearer()
        try:
            raw = socket.create_connection((transport.host, transport.port), timeout=timeout)
            sock: socket.socket = raw
            if transport.scheme == "https":
                sock = ssl.create_default_context().wrap_socket(raw, server_hostname=transport.host)
        except OSError as e:
            raise APIConnectionError(f"pty: cannot connect: {e}") from e
        key = base64.b64encode(os.urandom(16)).decode()
        default_port = 443 if transport.scheme == "https" else 80
        host = transport.host if transport.port == default_port else f"{transport.host}:{transport.port}"
        head = (f"GET {target} HTTP/1.1\r\nHost: {host}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
                f"Authorization: Bearer {token}\r\nUser-Agent: {USER_AGENT}\r\n\r\n")
        try:
            sock.sendall(head.encode("latin-1"))
            data = b""
            while b"\r\n\r\n" not in data:
                chunk = sock.recv(65536)
                if not chunk:
                    raise APIConnectionError("pty: the connection closed during the handshake")
                data += chunk
                if len(data) > 65536:
                    raise APIConnectionError("pty: handshake answer too long")
            head_bytes, rest = data.split(b"\r\n\r\n", 1)
            lines = head_bytes.decode("latin-1").split("\r\n")
            status = int(lines[0].split()[1])
            headers: Dict[str, str] = {}
            for line in lines[1:]:
                name, _, value = line.partition(":")
                headers[name.strip()] = value.strip()
            lower = {k.lower(): v for k, v in headers.items()}
            if status != 101:
                length = int(lower.get("content-length", "0") or 0)
                while len(rest) < length:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    rest += chunk
                raise error_from_response(status, headers, rest[:length] if length else rest)
            expected = base64.b64encode(hashlib.sha1(key.encode() + _GUID).digest()).decode()
            if lower.get("sec-websocket-accept") != expected:
                raise APIConnectionError("pty: bad Sec-WebSocket-Accept")
        except BaseException:
            sock.close()
            raise
        sock.settimeout(None)
        return cls(sock, rest)

    # --- frames -------------------------------------------------------------------------------
    def _send_frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        head = bytes([0x80 | opcode])
        if n < 126:
            head += bytes([0x80 | n])
        elif n < 65536:
            head += bytes([0x80 | 126]) + struct.pack("!H", n)
        else:
            head += bytes([0x80 | 127]) + struct.pack("!Q", n)
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        with self._send_lock:
            try:
                self._sock.sendall(head + mask + masked)
            except OSError as e:
                raise APIConnectionError(f"pty: send failed: {e}") from e

    def _read_exact(self, n: int, deadline: Optional[float]) -> Optional[bytes]:
        while len(self._buf) < n:
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0:
                    raise TimeoutError("pty: no data in time")
                self._sock.settimeout(left)
            else:
                self._sock.settimeout(None)
            try:
                chunk = self._sock.recv(65536)
            except socket.timeout:
                raise TimeoutError("pty: no data in time") from None
            except OSError:
                chunk = b""
            if not chunk:
                return None
            self._buf += chunk
        out, self._buf = self._buf[:n], self._buf[n:]
        return out

    def _read_frame(self, deadline: Optional[float]) -> Optional[Tuple[int, bool, bytes]]:
        h = self._read_exact(2, deadline)
        if h is None:
            return None
        fin, opcode, masked, n = bool(h[0] & 0x80), h[0] & 0x0F, bool(h[1] & 0x80), h[1] & 0x7F
        if n == 126:
            ext = self._read_exact(2, deadline)
            if ext is None:
                return None
            n = struct.unpack("!H", ext)[0]
        elif n == 127:
            ext = self._read_exact(8, deadline)
            if ext is None:
                return None
            n = struct.unpack("!Q", ext)[0]
        mask = self._read_exact(4, deadline) if masked else b""
        payload = self._read_exact(n, deadline) if n else b""
        if payload is None or mask is None:
            return None
        if masked:
            payload = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        return opcode, fin, payload

    # --- public -------------------------------------------------------------------------------
    def send(self, data: Union[str, bytes]) -> None:
        """Types ``data`` into the terminal (a str is UTF-8 encoded)."""
        self._send_frame(OP_BIN, data.encode("utf-8") if isinstance(data, str) else bytes(data))

    def resize(self, cols: int, rows: int) -> None:
        self._send_frame(OP_TEXT, json.dumps({"type": "resize", "cols": cols, "rows": rows}).encode())

    def recv(self, timeout: Optional[float] = None) -> Optional[bytes]:
        """The next piece of terminal output; None once the terminal has closed. Raises
        TimeoutError when nothing came within ``timeout`` seconds."""
        deadline = None if timeout is None else time.monotonic() + timeout
        while not self.closed:
            frame = self._read_frame(deadline)
            if frame is None:
                self._finish()
                return None
            opcode, fin, payload = frame
            if opcode == OP_CONT:
                self._fragments.append(payload)
                if not fin:
                    continue
                opcode, payload = self._frag_op, b"".join(self._fragments)
                self._fragments = []
            elif opcode in (OP_TEXT, OP_BIN) and not fin:
                self._frag_op, self._fragments = opcode, [payload]
                continue
            if opcode == OP_BIN:
                return payload
            if opcode == OP_TEXT:
                self._control(payload)
            elif opcode == OP_PING:
                self._send_frame(OP_PONG, payload)
            elif opcode == OP_CLOSE:
                try:
                    self._send_frame(OP_CLOSE, payload[:2])
                except SandfortError:
                    pass
                self._finish()
                return None
        return None

    def _control(self, payload: bytes) -> None:
        try:
            msg = json.loads(payload)
        except ValueError:
            return
        if not isinstance(msg, dict):
            return
        if msg.get("type") == "exit":
            self.exit_code = msg.get("exit_code")
        elif msg.get("type") == "error":
            self.errors.append(str(msg.get("message", "")))

    def read_until(self, needle: Union[str, bytes], timeout: float = 30.0) -> bytes:
        """Reads output until ``needle`` appears; returns everything read. TimeoutError otherwise."""
        want = needle.encode("utf-8") if isinstance(needle, str) else needle
        deadline = time.monotonic() + timeout
        seen = b""
        while want not in seen:
            try:
                chunk = self.recv(timeout=max(0.0, deadline - time.monotonic()))
            except TimeoutError:
                raise TimeoutError(f"pty: {needle!r} did not appear in {timeout} s; output: {seen[-500:]!r}") from None
            if chunk is None:
                raise SandfortError(f"pty closed before {needle!r} appeared; output: {seen[-500:]!r}")
            seen += chunk
        return seen

    def wait(self, timeout: float = 30.0) -> Optional[int]:
        """Reads (and drops) output until the terminal closes; returns the exit code."""
        deadline = time.monotonic() + timeout
        while self.recv(timeout=max(0.0, deadline - time.monotonic())) is not None:
            pass
        return self.exit_code

    def _finish(self) -> None:
        self.closed = True
        try:
            self._sock.close()
        except OSError:
            pass

    def close(self) -> None:
        """Closes the terminal (the daemon then ends the program's session)."""
        if not self.closed:
            try:
                self._send_frame(OP_CLOSE, struct.pack("!H", 1000))
            except SandfortError:
                pass
            self._finish()

    def __enter__(self) -> "PtySession":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()
