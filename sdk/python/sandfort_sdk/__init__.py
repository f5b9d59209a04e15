"""Sandfort Python SDK (standard library only).

    from sandfort_sdk import Client
    client = Client()                      # SANDFORT_BASE_URL / SANDFORT_API_KEY
    with client.create_sandbox() as sbx:   # deleted on exit
        r = sbx.process_exec("echo hi; exit 7")
        assert r.exit_code == 7            # a value, not an exception
"""

from .audit import (Audit, AuditCheckpoint, AuditEvent, AuditEventPage, AuditPublicKey, AuditVerifyReport,
                    verify_chain)
from .client import Client
from .code import Code, CodeEvent, CodeRunStream
from .commands import Command
from .errors import (APIConnectionError, APIError, AuthenticationError, ConfigurationError, ConflictError,
                     ImageNotAllowedError, InsufficientStorageError, InternalServerError, InvalidArgumentError,
                     NotFoundError,
                     PayloadTooLargeError,
                     PermissionDeniedError, QuotaExceededError, RateLimitedError, RuntimeNotAllowedError, SandfortError,
                     SessionRestartedWarning, StreamError, UnavailableError, HostFullError)
from .events import EventStream, LifecycleEvent
from .files import DirectoryWatch, FileSystem
from .git import Git
from .guardrails import Limits, LimitsUsage, OrgLimits, OrgStop, StopAllReport
from .models import (ApiKey, ArchiveResult, CommandInfo, CommandLogs, ExecResult, FileInfo, GitBranch,
                     CodeContext, CodeError, CodeResult, Execution,
                     GitBranches, GitFileStatus, GitResult, GitStatus, Metrics,
                     Organization, PortInfo, PreviewLink, Resources, SandboxInfo, SessionInfo, Snapshot,
                     StreamEvent, UploadResult, Volume, WatchEvent, WhoAmI)
from ._transport import ExecStream, TokenProvider
from .processes import Process
from .pty import PtySession
from .sandboxes import Sandbox, SandboxPage
from .secrets import Secret, Secrets
from .sessions import Session
from . import webhooks
from .webhooks import Webhook, WebhookDelivery, WebhookDeliveryPage, Webhooks, WebhookSignatureError

__version__ = "0.1.0"

__all__ = [
    "Client", "Code", "CodeEvent", "CodeRunStream", "CodeContext", "CodeResult", "CodeError", "Execution",
    "Sandbox", "SandboxPage", "Process", "Session", "Command", "FileSystem", "DirectoryWatch", "WatchEvent", "Git", "ExecStream", "PtySession",
    "TokenProvider",
    "SandfortError", "ConfigurationError", "APIConnectionError", "StreamError", "APIError", "SessionRestartedWarning",
    "InvalidArgumentError", "AuthenticationError", "PermissionDeniedError", "NotFoundError", "ConflictError",
    "PayloadTooLargeError", "QuotaExceededError", "RateLimitedError", "InternalServerError", "UnavailableError",
    "ImageNotAllowedError", "RuntimeNotAllowedError", "InsufficientStorageError", "HostFullError",
    "OrgLimits", "Limits", "LimitsUsage", "OrgStop", "StopAllReport",
    "ApiKey", "ArchiveResult", "CommandInfo", "CommandLogs", "ExecResult", "FileInfo", "Metrics",
    "GitResult", "GitStatus", "GitFileStatus", "GitBranches", "GitBranch",
    "Organization", "PortInfo", "PreviewLink", "Resources", "SandboxInfo", "SessionInfo", "Snapshot", "StreamEvent",
    "UploadResult", "Volume", "WhoAmI", "Audit", "AuditEvent", "AuditEventPage", "AuditCheckpoint", "AuditPublicKey",
    "AuditVerifyReport", "verify_chain", "EventStream", "LifecycleEvent", "Secret", "Secrets", "Webhook", "Webhooks",
    "WebhookDelivery", "WebhookDeliveryPage", "WebhookSignatureError", "webhooks", "__version__",
]
