"""``sandbox.git``: git in the sandbox through ``POST /v1/sandboxes/{id}/git/{op}`` (docs/api.md, "Git").

The sandbox's own ``git`` runs once per call. Credentials (``username`` + ``password``, or a
``token`` alone) are only accepted by clone, pull and push; the daemon hands them to that one git
command through memory and stores them nowhere (not in ``.git/config``, no credential helper,
no log or audit record). Git's failures are values (``exit_code``), invalid arguments raise
``InvalidArgumentError``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, Mapping, Optional, Sequence, Union

from ._transport import Transport, socket_timeout_for
from .models import GitBranches, GitResult, GitStatus

if TYPE_CHECKING:  # pragma: no cover
    from .sandboxes import Sandbox

__all__ = ["Git", "Author"]

#: ``{"name": "Ada", "email": "ada@example.com"}`` or ``"Ada <ada@example.com>"``.
Author = Union[str, Mapping[str, str]]

# The longest a git call may run when no timeout_s is given: the daemon's default
# exec_max_timeout_s (3600 s) plus the 60 s it waits on top.
_DEFAULT_WAIT_S = 3660.0


class Git:
    """``sandbox.git``: clone, pull, push, add, commit, checkout, branches, status. ``path`` is an
    absolute path inside the sandbox (an existing directory for everything but clone)."""

    def __init__(self, sandbox: "Sandbox") -> None:
        self._sbx = sandbox

    @property
    def _t(self) -> Transport:
        return self._sbx._t

    def _call(self, op: str, body: Dict[str, Any], extra: Mapping[str, Any]) -> Dict[str, Any]:
        body = {k: v for k, v in body.items() if v is not None}
        body.update(extra)
        timeout_s = body.get("timeout_s")
        base = self._sbx._client.timeout
        if timeout_s is not None:
            sock = socket_timeout_for(base, float(timeout_s))
        else:
            sock = None if base is None else max(base, _DEFAULT_WAIT_S)
        return self._t.call("POST", f"{self._sbx._base}/git/{op}", json_body=body, timeout=sock)

    @staticmethod
    def _creds(username: Optional[str], password: Optional[str], token: Optional[str]) -> Dict[str, Any]:
        return {"username": username, "password": password, "token": token}

    def clone(self, url: str, path: str, *, branch: Optional[str] = None, depth: Optional[int] = None,
              username: Optional[str] = None, password: Optional[str] = None, token: Optional[str] = None,
              timeout_s: Optional[int] = None, **extra: Any) -> GitResult:
        """``git clone [--branch B] [--depth N] -- URL PATH`` (leading directories created). A URL
        carrying a password is refused (``InvalidArgumentError``): pass ``password``/``token``."""
        body = {"url": url, "path": path, "branch": branch, "depth": depth, "timeout_s": timeout_s,
                **self._creds(username, password, token)}
        return GitResult.from_json(self._call("clone", body, extra))

    def pull(self, path: str, *, remote: Optional[str] = None, branch: Optional[str] = None,
             rebase: Optional[bool] = None, username: Optional[str] = None, password: Optional[str] = None,
             token: Optional[str] = None, timeout_s: Optional[int] = None, **extra: Any) -> GitResult:
        """``git pull --no-edit --no-rebase|--rebase [REMOTE [BRANCH]]`` (a ``branch`` alone means ``origin``)."""
        body = {"path": path, "remote": remote, "branch": branch, "rebase": rebase, "timeout_s": timeout_s,
                **self._creds(username, password, token)}
        return GitResult.from_json(self._call("pull", body, extra))

    def push(self, path: str, *, remote: Optional[str] = None, branch: Optional[str] = None,
             username: Optional[str] = None, password: Optional[str] = None, token: Optional[str] = None,
             timeout_s: Optional[int] = None, **extra: Any) -> GitResult:
        """``git push --set-upstream REMOTE BRANCH|HEAD`` (``origin`` and the current branch by default)."""
        body = {"path": path, "remote": remote, "branch": branch, "timeout_s": timeout_s,
                **self._creds(username, password, token)}
        return GitResult.from_json(self._call("push", body, extra))

    def add(self, path: str, files: Optional[Sequence[str]] = None, *, timeout_s: Optional[int] = None,
            **extra: Any) -> GitResult:
        """``git add -- FILES``; without ``files``, ``git add --all``."""
        body = {"path": path, "files": list(files) if files is not None else None, "timeout_s": timeout_s}
        return GitResult.from_json(self._call("add", body, extra))

    def commit(self, path: str, message: str, *, author: Optional[Author] = None,
               files: Optional[Sequence[str]] = None, timeout_s: Optional[int] = None, **extra: Any) -> GitResult:
        """``git commit --message M [-- FILES]``; ``author`` becomes author and committer. Nothing to
        commit is ``exit_code`` 1 with git's words in ``stdout``."""
        body = {"path": path, "message": message, "author": dict(author) if isinstance(author, Mapping) else author,
                "files": list(files) if files is not None else None, "timeout_s": timeout_s}
        return GitResult.from_json(self._call("commit", body, extra))

    def checkout(self, path: str, branch: str, *, create: Optional[bool] = None,
                 timeout_s: Optional[int] = None, **extra: Any) -> GitResult:
        """``git checkout BRANCH --``, or ``git checkout -b BRANCH`` with ``create=True``."""
        body = {"path": path, "branch": branch, "create": create, "timeout_s": timeout_s}
        return GitResult.from_json(self._call("checkout", body, extra))

    def branches(self, path: str, *, timeout_s: Optional[int] = None, **extra: Any) -> GitBranches:
        """The local branches (``current``, ``branches``) and ``remote_branches``."""
        return GitBranches.from_json(self._call("branches", {"path": path, "timeout_s": timeout_s}, extra))

    def status(self, path: str, *, timeout_s: Optional[int] = None, **extra: Any) -> GitStatus:
        """``git status --porcelain=v2 --branch``, parsed: ``branch``, ``commit``, ``upstream``,
        ``ahead``, ``behind``, ``files``."""
        return GitStatus.from_json(self._call("status", {"path": path, "timeout_s": timeout_s}, extra))
