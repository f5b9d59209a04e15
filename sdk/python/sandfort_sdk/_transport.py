"""HTTP over the standard library (``http.client``): one connection per call, so a Client may be
shared between threads."""

from __future__ import annotations

import base64
import http.client
import json
import socket
import ssl
from typing import Any, BinaryIO, Callable, Dict, Iterable, Iterator, Mapping, Optional, Tuple, Union
from urllib.parse import quote, urlencode, urlsplit

from .errors import APIConnectionError, ConfigurationError, StreamError, error_from_response
from .models import ExecResult, StreamEvent

__all__ = ["Transport", "Response", "Body", "TokenProvider"]

Body = Union[bytes, bytearray, memoryview, BinaryIO, Iterable[bytes], None]
TokenProvider = Callable[[], str]
USER_AGENT = "sandfort-sdk-python/0.1.0"


class Response:
    """An open HTTP answer; ``close()`` it (or use ``with``) when not read to the end."""

    def __init__(self, conn: http.client.HTTPConnection, resp: http.client.HTTPResponse) -> None:
        self._conn = conn
        self.raw = resp
        self.status = resp.status
        self.headers: Dict[str, str] = {k: v for k, v in resp.getheaders()}

    @property
    def request_id(self) -> Optional[str]:
        return self.raw.getheader("X-Request-Id")

    def read(self) -> bytes:
        try:
            return self.raw.read()
        except (OSError, http.client.HTTPException) as e:
            raise APIConnectionError(f"reading the answer failed: {e}") from e
        finally:
            self.close()

    def json(self) -> Any:
        body = self.read()
        return json.loads(body) if body else None

    def iter_bytes(self, size: int = 65536) -> Iterator[bytes]:
        try:
            while True:
                chunk = self.raw.read1(size) if hasattr(self.raw, "read1") else self.raw.read(size)
                if not chunk:
                    return
                yield chunk
        except (OSError, http.client.HTTPException) as e:
            raise APIConnectionError(f"reading the answer failed: {e}") from e
        finally:
            self.close()

    def close(self) -> None:
        try:
            self.raw.close()
        finally:
            self._conn.close()

    def shutdown(self) -> None:
        """Ends the connection under a read another thread is blocked in (it sees the end)."""
        sock = getattr(self._conn, "sock", None)
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def __enter__(self) -> "Response":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class Transport:
    """``api_key`` or ``token_provider`` (a callable returning a bearer token, called for every
    request) authenticates each request. With a provider, a 401 answer means the daemon did
    nothing: the provider is asked once more and the request sent again, once."""

    def __init__(self, base_url: str, api_key: Optional[str], timeout: float,
                 token_provider: Optional[TokenProvider] = None) -> None:
        parts = urlsplit(base_url.rstrip("/"))
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(f"base_url must be http(s)://host[:port], got {base_url!r}")
        self.base_url = base_url.rstrip("/")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.prefix = parts.path.rstrip("/")
        self.api_key = api_key
        self.token_provider = token_provider
        self.timeout = timeout

    def bearer(self) -> str:
        """The token for the next request: the API key, or what the provider returns now."""
        if self.token_provider is None:
            return self.api_key or ""
        token = self.token_provider()
        if not isinstance(token, str) or not token:
            raise ConfigurationError(f"token_provider returned {type(token).__name__} {token!r:.40}, "
                                     "not a non-empty string")
        return token

    def connect(self, timeout: Optional[float]) -> http.client.HTTPConnection:
        if self.scheme == "https":
            return http.client.HTTPSConnection(self.host, self.port, timeout=timeout,
                                               context=ssl.create_default_context())
        return http.client.HTTPConnection(self.host, self.port, timeout=timeout)

    def url(self, path: str, query: Optional[Mapping[str, Any]] = None) -> str:
        target = self.prefix + path
        if query:
            q = {k: ("true" if v is True else "false" if v is False else v)
                 for k, v in query.items() if v is not None}
            if q:
                target += "?" + urlencode(q, quote_via=quote)
        return target

    def open(self, method: str, path: str, *, query: Optional[Mapping[str, Any]] = None,
             json_body: Any = None, body: Body = None, headers: Optional[Mapping[str, str]] = None,
             timeout: Optional[float] = -1.0) -> Response:
        """Sends a request and returns the open answer; raises the typed APIError on >= 400."""
        h: Dict[str, str] = {"User-Agent": USER_AGENT, "Accept": "application/json"}
        data: Any = body
        if json_body is not None:
            data = json.dumps(json_body).encode("utf-8")
            h["Content-Type"] = "application/json"
        elif body is not None and "Content-Type" not in (headers or {}):
            h["Content-Type"] = "application/octet-stream"
        h.update(headers or {})
        if isinstance(data, (bytearray, memoryview)):
            data = bytes(data)
        rewind = _rewinder(data)
        status, out, raw = self._send(method, path, query, data, h, timeout)
        if status == 401 and self.token_provider is not None and rewind is not None:
            rewind()
            status, out, raw = self._send(method, path, query, data, h, timeout)
        if status >= 400:
            raise error_from_response(status, out.headers, raw)
        return out

    def _send(self, method: str, path: str, query: Optional[Mapping[str, Any]], data: Any,
              headers: Dict[str, str], timeout: Optional[float]) -> Tuple[int, Response, bytes]:
        """One exchange: (status, the open answer, and for >= 400 its body, already read)."""
        h = dict(headers)
        h["Authorization"] = f"Bearer {self.bearer()}"
        conn = self.connect(self.timeout if timeout == -1.0 else timeout)
        try:
            encode_chunked = False
            if data is not None and not isinstance(data, bytes) and "Content-Length" not in h:
                if not hasattr(data, "read"):
                    encode_chunked = True
                    h["Transfer-Encoding"] = "chunked"
            conn.request(method, self.url(path, query), body=data, headers=h, encode_chunked=encode_chunked)
            resp = conn.getresponse()
        except (OSError, http.client.HTTPException) as e:
            conn.close()
            raise APIConnectionError(f"{method} {path}: {e}") from e
        out = Response(conn, resp)
        raw = b""
        if resp.status >= 400:
            try:
                raw = resp.read()
            except (OSError, http.client.HTTPException):
                raw = b""
            out.close()
        return resp.status, out, raw

    def call(self, method: str, path: str, **kw: Any) -> Any:
        """A JSON call: the decoded answer (None for 204)."""
        return self.open(method, path, **kw).json()


def _rewinder(data: Any) -> Optional[Callable[[], None]]:
    """How to send ``data`` again after a 401: nothing to do for bytes, seek back for a seekable
    file; None when it cannot be sent twice (an iterator, a pipe)."""
    if data is None or isinstance(data, bytes):
        return lambda: None
    if hasattr(data, "seek") and hasattr(data, "tell"):
        try:
            if data.seekable() if hasattr(data, "seekable") else True:
                start = data.tell()
                return lambda: data.seek(start)
        except (OSError, ValueError):
            return None
    return None


def iter_sse(resp: Response) -> Iterator[Tuple[str, str]]:
    """(event, data) pairs of a text/event-stream answer, as they arrive."""
    event, data = "message", []  # type: str, list
    try:
        while True:
            try:
                line = resp.raw.readline()
            except (OSError, http.client.HTTPException) as e:
                raise APIConnectionError(f"the event stream broke: {e}") from e
            if not line:
                if data:
                    yield event, "\n".join(data)
                return
            text = line.decode("utf-8", "replace").rstrip("\r\n")
            if text == "":
                if data:
                    yield event, "\n".join(data)
                event, data = "message", []
            elif text.startswith(":"):
                continue
            else:
                name, _, value = text.partition(":")
                if value.startswith(" "):
                    value = value[1:]
                if name == "event":
                    event = value
                elif name == "data":
                    data.append(value)
    finally:
        resp.close()


OutputCallback = Callable[[str], None]


class ExecStream:
    """An iterator of :class:`StreamEvent` over a streamed command.

    Iterate it (or call :meth:`wait`) to the end; ``result`` then holds the :class:`ExecResult`
    with everything streamed. Leaving early (``close()``, ``break`` inside ``with``) disconnects,
    and the daemon then kills the command.
    """

    def __init__(self, resp: Response, on_stdout: Optional[OutputCallback] = None,
                 on_stderr: Optional[OutputCallback] = None,
                 on_exit: Optional[Callable[[ExecResult], None]] = None) -> None:
        self._resp = resp
        self._on_exit = on_exit
        self._events = iter_sse(resp)
        self._on_stdout = on_stdout
        self._on_stderr = on_stderr
        self._stdout: list = []
        self._stderr: list = []
        self._stdout_b: list = []
        self._stderr_b: list = []
        self.result: Optional[ExecResult] = None
        self.request_id = resp.request_id

    def __iter__(self) -> "ExecStream":
        return self

    def __next__(self) -> StreamEvent:
        if self.result is not None:
            raise StopIteration
        try:
            name, data = next(self._events)
        except StopIteration:
            raise StreamError("the stream ended without an exit event") from None
        try:
            payload = json.loads(data) if data else {}
        except ValueError:
            payload = {"data": data}
        if not isinstance(payload, dict):
            payload = {"data": str(payload)}
        if name in ("stdout", "stderr"):
            chunk = payload.get("data", "")
            raw = base64.b64decode(payload["data_b64"]) if isinstance(payload.get("data_b64"), str) else None
            (self._stdout if name == "stdout" else self._stderr).append(chunk)
            if raw is not None:
                (self._stdout_b if name == "stdout" else self._stderr_b).append(raw)
            cb = self._on_stdout if name == "stdout" else self._on_stderr
            if cb is not None:
                cb(chunk)
            return StreamEvent(type=name, data=chunk, data_bytes=raw, payload=payload)
        if name == "exit":
            d = dict(payload)
            d.setdefault("stdout", "".join(self._stdout))
            d.setdefault("stderr", "".join(self._stderr))
            result = ExecResult.from_json(d)
            if self._stdout_b or self._stderr_b:
                result.stdout_bytes = b"".join(self._stdout_b)
                result.stderr_bytes = b"".join(self._stderr_b)
            self.result = result
            self.close()
            if self._on_exit is not None:
                self._on_exit(result)
            return StreamEvent(type="exit", result=result, payload=payload)
        if name == "error":
            self.close()
            err = payload.get("error", payload)
            msg = err.get("message", data) if isinstance(err, dict) else data
            raise StreamError(f"stream error: {msg} (request_id={self.request_id})")
        return StreamEvent(type=name, data=str(payload.get("data", "")), payload=payload)

    def wait(self) -> ExecResult:
        """Reads to the end (calling the callbacks) and returns the result."""
        for _ in self:
            pass
        assert self.result is not None
        return self.result

    def close(self) -> None:
        self._resp.close()

    def __enter__(self) -> "ExecStream":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def socket_timeout_for(base: Optional[float], timeout_s: Optional[float]) -> Optional[float]:
    """A read timeout long enough for a command allowed to run ``timeout_s`` seconds."""
    if base is None:
        return None
    return max(base, (timeout_s if timeout_s is not None else 60) + 30)


