"""``sandbox.fs``: files inside the sandbox (absolute paths): whole files and tars streamed both
ways, listing, stat, mkdir, move and remove, and watching a directory."""

from __future__ import annotations

import json
import os
import tarfile
import tempfile
import threading
from typing import TYPE_CHECKING, Any, BinaryIO, Callable, Iterator, List, Optional, Union

from ._resource import clean
from ._transport import Response, Transport, iter_sse
from .errors import NotFoundError, SandfortError, StreamError
from .models import ArchiveResult, FileInfo, UploadResult, WatchEvent

if TYPE_CHECKING:  # pragma: no cover
    from .sandboxes import Sandbox

__all__ = ["FileSystem", "FileData", "PathLike", "DirectoryWatch"]

PathLike = Union[str, "os.PathLike[str]"]
FileData = Union[bytes, bytearray, memoryview, str, BinaryIO, "os.PathLike[str]"]


class FileSystem:
    """``sandbox.fs``: files inside the sandbox (absolute paths)."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sbx = sandbox

    @property
    def _t(self) -> Transport:
        return self._sbx._t

    @property
    def _base(self) -> str:
        return f"{self._sbx._base}/files"

    def _big_timeout(self) -> Optional[float]:
        t = self._sbx._client.timeout
        return None if t is None else max(t, 600)

    def upload_file(self, path: str, data: FileData, *, mode: Optional[Union[int, str]] = None) -> UploadResult:
        """Writes ``data`` to ``path`` (parents created, atomic rename). ``data`` is ``bytes``,
        a ``str`` (the *content*, encoded as UTF-8), a binary file object (streamed) or an
        ``os.PathLike`` naming a local file to send. ``mode`` is an int (``0o755``) or ``"0755"``."""
        mode_s = (format(mode, "04o") if isinstance(mode, int) else mode) if mode is not None else None
        q = clean({"path": path, "mode": mode_s})
        if isinstance(data, os.PathLike):
            with open(os.fspath(data), "rb") as f:
                size = os.fstat(f.fileno()).st_size
                return UploadResult.from_json(self._t.call("PUT", self._base, query=q, body=f,
                                                           headers={"Content-Length": str(size)},
                                                           timeout=self._big_timeout()))
        if isinstance(data, str):
            data = data.encode("utf-8")
        return UploadResult.from_json(self._t.call("PUT", self._base, query=q, body=data,  # type: ignore[arg-type]
                                                   timeout=self._big_timeout()))

    write_file = upload_file

    def download_file(self, path: str, dest: Optional[Union[BinaryIO, "os.PathLike[str]"]] = None, *,
                      max_bytes: Optional[int] = None) -> Optional[bytes]:
        """Returns the file's bytes; with ``dest`` (a binary file object or a local path) streams
        into it instead and returns None. ``max_bytes``: read at most that many bytes (the first
        ones) and close the connection, so the rest is never transferred; to learn whether the
        file was longer, ask for one byte more than you keep."""
        if max_bytes is not None and (isinstance(max_bytes, bool) or not isinstance(max_bytes, int) or max_bytes < 0):
            raise ValueError(f"max_bytes must be an int >= 0, got {max_bytes!r}")
        resp = self._t.open("GET", self._base, query={"path": path}, timeout=self._big_timeout())
        if dest is None:
            if max_bytes is None:
                return resp.read()
            return b"".join(_limited(resp, max_bytes))
        if isinstance(dest, os.PathLike):
            with open(os.fspath(dest), "wb") as f:
                for chunk in _limited(resp, max_bytes):
                    f.write(chunk)
        else:
            for chunk in _limited(resp, max_bytes):
                dest.write(chunk)
        return None

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        data = self.download_file(path)
        assert data is not None
        return data.decode(encoding)

    def list_files(self, path: str) -> List[FileInfo]:
        return [FileInfo.from_json(i) for i in self._t.call("GET", f"{self._base}/list", query={"path": path})["items"]]

    def stat(self, path: str) -> FileInfo:
        return FileInfo.from_json(self._t.call("GET", f"{self._base}/stat", query={"path": path}))

    def exists(self, path: str) -> bool:
        try:
            self.stat(path)
            return True
        except NotFoundError:
            return False

    def mkdir(self, path: str, *, parents: bool = False, mode: Optional[Union[int, str]] = None) -> FileInfo:
        mode_s = (format(mode, "04o") if isinstance(mode, int) else mode) if mode is not None else None
        body = clean({"path": path, "parents": parents or None, "mode": mode_s})
        return FileInfo.from_json(self._t.call("POST", f"{self._base}/mkdir", json_body=body))

    def move(self, src: str, dst: str, *, overwrite: bool = False) -> FileInfo:
        body = {"from": src, "to": dst, "overwrite": overwrite}
        return FileInfo.from_json(self._t.call("POST", f"{self._base}/move", json_body=body))

    def remove(self, path: str, *, recursive: bool = False) -> None:
        self._t.call("DELETE", self._base, query=clean({"path": path, "recursive": recursive or None}))

    delete = remove

    def upload_archive(self, path: str, tar: Union[bytes, BinaryIO]) -> ArchiveResult:
        """Extracts a tar (bytes or a binary file object) into ``path``."""
        return ArchiveResult.from_json(self._t.call("PUT", f"{self._base}/archive", query={"path": path},
                                                    body=tar, headers={"Content-Type": "application/x-tar"},
                                                    timeout=self._big_timeout()))

    def download_archive(self, path: str, dest: Optional[BinaryIO] = None) -> Optional[bytes]:
        """A tar of ``path``: its bytes, or streamed into ``dest``."""
        resp = self._t.open("GET", f"{self._base}/archive", query={"path": path}, timeout=self._big_timeout())
        if dest is None:
            return resp.read()
        for chunk in resp.iter_bytes():
            dest.write(chunk)
        return None

    def watch(self, path: str, *, recursive: bool = False, include_entry: bool = False,
              on_event: Optional[Callable[[WatchEvent], None]] = None) -> "DirectoryWatch":
        """Watches the directory ``path``: returns once the watch is in place (a change made
        after that is seen) a :class:`DirectoryWatch`, an iterator of :class:`WatchEvent` that
        ends with the watch. With ``on_event``, a thread calls it for every event instead.
        ``recursive`` watches the whole tree (new subdirectories included); ``include_entry``
        adds the file's :class:`FileInfo` to create/write/chmod events. ``stop()`` (or leaving a
        ``with`` block) ends it. A missing path raises :class:`NotFoundError`, a file
        :class:`InvalidArgumentError`, too many watches in the sandbox
        :class:`QuotaExceededError`."""
        q = clean({"path": path, "recursive": "true" if recursive else None,
                   "include_entry": "true" if include_entry else None})
        # No read deadline: a quiet watch sends a keep-alive every 15 s, and lasts until stopped.
        resp = self._t.open("GET", f"{self._base}/watch", query=q, headers={"Accept": "text/event-stream"},
                            timeout=None)
        return DirectoryWatch(resp, on_event)

    def upload_dir(self, local_dir: PathLike, remote_dir: str) -> ArchiveResult:
        """Sends the contents of ``local_dir`` into ``remote_dir`` as one tar (spooled to disk
        past 32 MiB, so big trees are not held in memory)."""
        local = os.fspath(local_dir)
        if not os.path.isdir(local):
            raise NotADirectoryError(local)
        with tempfile.SpooledTemporaryFile(max_size=32 << 20) as spool:
            with tarfile.open(fileobj=spool, mode="w", format=tarfile.PAX_FORMAT) as tar:
                for entry in sorted(os.listdir(local)):
                    tar.add(os.path.join(local, entry), arcname=entry)
            size = spool.tell()
            spool.seek(0)
            return ArchiveResult.from_json(self._t.call(
                "PUT", f"{self._base}/archive", query={"path": remote_dir}, body=spool,  # type: ignore[arg-type]
                headers={"Content-Type": "application/x-tar", "Content-Length": str(size)},
                timeout=self._big_timeout()))

    def download_dir(self, remote_dir: str, local_dir: PathLike) -> List[str]:
        """Fetches ``remote_dir`` as a tar and extracts it under ``local_dir`` (created). Entries
        that would land outside ``local_dir``, device files and links pointing out are refused
        (:class:`SandfortError`). Returns the extracted member names."""
        local = os.path.abspath(os.fspath(local_dir))
        os.makedirs(local, exist_ok=True)
        with tempfile.SpooledTemporaryFile(max_size=32 << 20) as spool:
            self.download_archive(remote_dir, spool)  # type: ignore[arg-type]
            spool.seek(0)
            with tarfile.open(fileobj=spool, mode="r:") as tar:  # type: ignore[call-overload]
                members = tar.getmembers()
                names = [_check_member(m, local) for m in members]
                if hasattr(tarfile, "data_filter"):
                    tar.extractall(local, members=members, filter="data")
                else:  # pragma: no cover - Python < 3.11.4 without extraction filters
                    tar.extractall(local, members=members)
        return names


class DirectoryWatch:
    """A running directory watch (``sandbox.fs.watch``): iterate it for :class:`WatchEvent`
    objects, or give ``on_event`` and let its thread call you. ``stop()`` ends it (from any
    thread); so does leaving a ``with`` block. ``path``, ``recursive`` and ``directories`` (how
    many are watched) come from the daemon's ``start`` event."""

    def __init__(self, resp: Response, on_event: Optional[Callable[[WatchEvent], None]] = None) -> None:
        self._resp = resp
        self._events = iter_sse(resp)
        self._stopped = False
        self.request_id = resp.request_id
        name, data = self._next_raw()
        if name != "start":
            self._resp.close()
            raise StreamError(f"the watch began with {name!r}, not a start event")
        start = json.loads(data)
        self.path: str = start.get("path", "")
        self.recursive: bool = bool(start.get("recursive", False))
        self.directories: int = int(start.get("directories") or 0)
        self._thread: Optional[threading.Thread] = None
        self.error: Optional[BaseException] = None
        if on_event is not None:
            self._thread = threading.Thread(target=self._run, args=(on_event,), daemon=True,
                                            name=f"sandfort-watch {self.path}")
            self._thread.start()

    def _next_raw(self) -> "tuple[str, str]":
        try:
            return next(self._events)
        except StopIteration:
            raise StreamError("the watch's stream ended before it started") from None

    def _run(self, on_event: Callable[[WatchEvent], None]) -> None:
        try:
            for e in self:
                on_event(e)
        except BaseException as e:  # reported through .error; a stop() is not an error
            if not self._stopped:
                self.error = e

    def __iter__(self) -> "DirectoryWatch":
        return self

    def __next__(self) -> WatchEvent:
        while True:
            if self._stopped:
                raise StopIteration
            try:
                name, data = next(self._events)
            except StopIteration:
                self._stopped = True
                raise
            except Exception:
                if self._stopped:  # stop() ended the connection under the read
                    raise StopIteration from None
                raise
            try:
                payload = json.loads(data) if data else {}
            except ValueError:
                continue
            if not isinstance(payload, dict):
                continue
            payload.setdefault("type", name)
            event = WatchEvent.from_json(payload)
            if event.type == "end":
                self._stopped = True
                self._resp.close()
            return event

    def stop(self) -> None:
        """Ends the watch: the daemon and the sandbox's agent let it go at once."""
        self._stopped = True
        self._resp.shutdown()  # wakes a read blocked in another thread
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(timeout=5)
        self._resp.close()

    close = stop

    def __enter__(self) -> "DirectoryWatch":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def _limited(resp: Any, max_bytes: Optional[int]) -> Iterator[bytes]:
    """The answer's chunks, stopping (and closing it) after ``max_bytes`` bytes."""
    if max_bytes is None:
        yield from resp.iter_bytes()
        return
    left = max_bytes
    chunks = resp.iter_bytes()
    try:
        while left > 0:
            try:
                chunk = next(chunks)
            except StopIteration:
                return
            if len(chunk) > left:
                chunk = chunk[:left]
            left -= len(chunk)
            yield chunk
    finally:
        chunks.close()
        resp.close()


def _check_member(m: tarfile.TarInfo, root: str) -> str:
    target = os.path.realpath(os.path.join(root, m.name))
    if not (target == root or target.startswith(root + os.sep)) or os.path.isabs(m.name):
        raise SandfortError(f"tar entry {m.name!r} would land outside {root}")
    if m.isdev():
        raise SandfortError(f"tar entry {m.name!r} is a device")
    if m.issym() or m.islnk():
        base = os.path.dirname(target) if m.issym() else root
        link = os.path.realpath(os.path.join(base, m.linkname))
        if os.path.isabs(m.linkname) or not (link == root or link.startswith(root + os.sep)):
            raise SandfortError(f"tar link {m.name!r} -> {m.linkname!r} points outside {root}")
    return m.name

