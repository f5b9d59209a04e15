"""Typed exceptions for Sandfort API errors.

Every HTTP error answer of the API (``{"error": {"code", "message", "request_id"}}``) is raised
as a subclass of :class:`APIError` carrying ``status``, ``code``, ``message`` and ``request_id``.
A command that exits non-zero is *not* an error: it is an ``ExecResult`` with that exit code.
"""

from __future__ import annotations

import json
from typing import Dict, Mapping, Optional, Type


class SandfortError(Exception):
    """Base class of every exception raised by this SDK."""


class ConfigurationError(SandfortError, ValueError):
    """The client lacks a base URL or an API key."""


class APIConnectionError(SandfortError):
    """The daemon could not be reached, or the connection broke mid-answer."""


class StreamError(SandfortError):
    """A stream ended without its final ``exit`` event, or sent ``event: error``."""


class SessionRestartedWarning(UserWarning):
    """A session's shell ended (``exit`` in a command, or it was killed) and a fresh one took its
    place: the working directory, variables and background jobs of earlier commands are gone.
    Issued with :mod:`warnings` by ``Session.exec``/``exec_stream`` when the result has
    ``session_restarted``; ``warnings.simplefilter("error", SessionRestartedWarning)`` makes it
    an exception, ``"ignore"`` silences it."""


class APIError(SandfortError):
    """An HTTP error answered by the API."""

    def __init__(self, status: int, code: str, message: str, request_id: Optional[str],
                 retry_after: Optional[float] = None) -> None:
        super().__init__(f"{status} {code}: {message} (request_id={request_id})")
        self.status = status
        self.code = code
        self.message = message
        self.request_id = request_id
        self.retry_after = retry_after


class InvalidArgumentError(APIError):
    """400 ``invalid_argument``."""


class AuthenticationError(APIError):
    """401 ``unauthenticated``: missing, unknown, revoked or expired key."""


class PermissionDeniedError(APIError):
    """403 ``permission_denied``: the key's role does not allow the call."""


class NotFoundError(APIError):
    """404 ``not_found`` (also: another organization's resource)."""


class ConflictError(APIError):
    """409 ``conflict``: e.g. the sandbox is not started, a name is taken."""


class PayloadTooLargeError(APIError):
    """413 ``payload_too_large``."""


class ImageNotAllowedError(PermissionDeniedError):
    """403 ``image_not_allowed``: the image is outside the organization's image policy
    (``allowed_images`` of :meth:`Client.org_limits`)."""


class RuntimeNotAllowedError(PermissionDeniedError):
    """403 ``runtime_not_allowed``: a create or start on a runtime outside the organization's
    runtime policy (``allowed_runtimes`` of :meth:`Client.org_limits`; the message lists them). A
    create that names no runtime gets an allowed one."""


class QuotaExceededError(APIError):
    """429 ``quota_exceeded``: an organization's quota of sandboxes, CPUs or memory is used up (the
    message names the quota, its limit and the use; deleting or stopping sandboxes makes room),
    or the sandbox's disk is full."""


class RateLimitedError(APIError):
    """429 ``rate_limited``; ``retry_after`` holds the ``Retry-After`` seconds when sent."""


class InternalServerError(APIError):
    """500 ``internal``."""


class UnavailableError(APIError):
    """503 ``unavailable``: Docker or a registry cannot be reached."""


class InsufficientStorageError(APIError):
    """507 ``insufficient_storage``: the daemon's state disk is full, so nothing was changed. Reads,
    deletes and stops still work (deleting sandboxes, snapshots or volumes frees space); retry
    once space returns."""


class HostFullError(UnavailableError):
    """503 ``host_full``: the host's memory cannot hold the sandbox being created or started
    beside the ones already running (every organization's). Nothing was made; retry after
    sandboxes are stopped or deleted, or ask for less ``memory_mb``."""


_BY_CODE: Dict[str, Type[APIError]] = {
    "invalid_argument": InvalidArgumentError,
    "unauthenticated": AuthenticationError,
    "permission_denied": PermissionDeniedError,
    "image_not_allowed": ImageNotAllowedError,
    "runtime_not_allowed": RuntimeNotAllowedError,
    "not_found": NotFoundError,
    "conflict": ConflictError,
    "payload_too_large": PayloadTooLargeError,
    "quota_exceeded": QuotaExceededError,
    "rate_limited": RateLimitedError,
    "internal": InternalServerError,
    "unavailable": UnavailableError,
    "insufficient_storage": InsufficientStorageError,
    "host_full": HostFullError,
}

_BY_STATUS: Dict[int, Type[APIError]] = {
    400: InvalidArgumentError, 401: AuthenticationError, 403: PermissionDeniedError,
    404: NotFoundError, 409: ConflictError, 413: PayloadTooLargeError, 429: RateLimitedError,
    500: InternalServerError, 503: UnavailableError, 507: InsufficientStorageError,
}


def error_from_response(status: int, headers: Mapping[str, str], body: bytes) -> APIError:
    """Builds the typed exception for an error answer (tolerates bodies that are not JSON)."""
    lower = {k.lower(): v for k, v in headers.items()}
    request_id = lower.get("x-request-id")
    code = ""
    message = body.decode("utf-8", "replace").strip()[:500] or f"HTTP {status}"
    try:
        err = json.loads(body)["error"]
        code = str(err.get("code") or "")
        message = str(err.get("message") or message)
        request_id = err.get("request_id") or request_id
    except (ValueError, KeyError, TypeError, AttributeError):
        pass
    cls = _BY_CODE.get(code) or _BY_STATUS.get(status) or APIError
    if not code:
        code = {v: k for k, v in _BY_CODE.items()}.get(cls, "unknown")
    retry_after: Optional[float] = None
    if "retry-after" in lower:
        try:
            retry_after = float(lower["retry-after"])
        except ValueError:
            retry_after = None
    return cls(status, code, message, request_id, retry_after)
