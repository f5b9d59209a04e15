#!/usr/bin/env python3
"""Sandfort MCP server: Model Context Protocol over stdio, in Python with the standard library
and the Sandfort Python SDK (sdk/python: every call to sandfortd goes through it).

The SDK is found next to this file when it runs from a Sandfort checkout (../sdk/python, put
first on sys.path); a copy outside a checkout imports the installed one
(`python -m pip install /path/to/sandfort/sdk/python`).

Configure an MCP client with:

    {"mcpServers": {"sandfort": {"command": ".venv/bin/python",
                                 "args": ["mcp_server/sandfort_mcp.py"],
                                 "env": {"SANDFORT_BASE_URL": "http://127.0.0.1:8080",
                                         "SANDFORT_API_KEY": "sfk_..."}}}}

stdout carries only JSON-RPC messages (one per line); every log line goes to stderr.
See docs/mcp.md for the tools and their behaviour.
"""

import json
import os
import re
import sys
import threading
import time

SERVER_NAME = "sandfort"
SERVER_VERSION = "0.1.0"
# Newest first. The client's version is answered when it is one of these; otherwise the newest.
SUPPORTED_PROTOCOL_VERSIONS = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
DEFAULT_IMAGE = "sandfort/base:bookworm"
DEFAULT_EXEC_TIMEOUT_S = 60
DOWNLOAD_DEFAULT_MAX_BYTES = 1 << 20  # 1 MiB of text into a model's context is already a lot
DOWNLOAD_HARD_MAX_BYTES = 8 << 20
COMMAND_LOG_DEFAULT_MAX_CHARS = 64 << 10  # per stream, the newest

# JSON-RPC error codes
PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602
INTERNAL_ERROR = -32603


def log(msg):
    """Everything that is not protocol goes to stderr."""
    sys.stderr.write(f"sandfort-mcp: {msg}\n")
    sys.stderr.flush()


# --------------------------------------------------------------------------------------------
# The Python SDK (sdk/python): every call to sandfortd goes through it
# --------------------------------------------------------------------------------------------

def _sibling_sdk():
    """sdk/python of the checkout this file is in (symlinks resolved), or None."""
    root = os.path.dirname(os.path.dirname(os.path.realpath(__file__)))
    path = os.path.join(root, "sdk", "python")
    return path if os.path.isfile(os.path.join(path, "sandfort_sdk", "__init__.py")) else None


# Run from a checkout, the SDK of the same checkout is used (the two change together); a copy of
# this file outside a checkout uses the installed one (`pip install <repo>/sdk/python`).
SDK_SOURCE = _sibling_sdk()
if SDK_SOURCE is not None and SDK_SOURCE not in sys.path:
    sys.path.insert(0, SDK_SOURCE)
try:
    import sandfort_sdk as sdk
    # What this server calls beyond the SDK's first release: an older installed copy lacks it.
    if not (hasattr(sdk.Client, "sandbox") and hasattr(sdk.Client, "list_sandboxes_page")):
        raise ImportError(f"sandfort_sdk {getattr(sdk, '__version__', '?')} at "
                          f"{os.path.dirname(sdk.__file__)} is older than this server "
                          "(no Client.sandbox / Client.list_sandboxes_page)")
except ImportError as e:
    if __name__ != "__main__":
        raise
    sys.stderr.write(
        f"sandfort-mcp: cannot use the Sandfort Python SDK: {e}\n"
        "sandfort-mcp: run this file from a Sandfort checkout (it then uses sdk/python next to "
        "mcp_server/), or install the SDK of the same version into the interpreter that runs it: "
        "python -m pip install /path/to/sandfort/sdk/python\n")
    sys.exit(1)


class ToolFailure(Exception):
    """A failure reported to the model as a tool error (isError), with its text."""


class Sandfort:
    """The SDK client for the configured daemon, or why there is none (the server still starts
    without its variables, and every tool call then says what is missing)."""

    def __init__(self, base_url, api_key):
        self.base_url = (base_url or "").strip()
        self.api_key = (api_key or "").strip()
        self._client = None
        self.problem = None
        if not self.base_url:
            self.problem = "SANDFORT_BASE_URL is not set in the MCP server's environment"
        elif not self.api_key:
            self.problem = "SANDFORT_API_KEY is not set in the MCP server's environment"
        else:
            try:
                self._client = sdk.Client(self.base_url, self.api_key, timeout=60.0)
            except sdk.ConfigurationError:
                self.problem = f"SANDFORT_BASE_URL must be an http(s) URL, got {self.base_url!r}"

    def client(self):
        if self._client is None:
            raise ToolFailure(f"Sandfort error: {self.problem}")
        return self._client

    def sandbox(self, sandbox_id):
        """A handle on the sandbox (id or name) without a request: the call that uses it answers
        404 for an unknown one."""
        return self.client().sandbox(sandbox_id)

    def error_text(self, e):
        """The tool error's text for an exception of the SDK."""
        if isinstance(e, sdk.APIError):
            parts = [f"Sandfort API error {e.status}"]
            if e.code:
                parts.append(f" {e.code}")
            parts.append(f": {e.message}")
            if e.request_id:
                parts.append(f" (request_id {e.request_id})")
            advice = guardrail_advice(e)
            if advice:
                parts.append("\n" + advice)
            return "".join(parts)
        if isinstance(e, sdk.APIConnectionError):
            return f"Sandfort error: cannot reach sandfortd at {self.base_url}: {e}"
        if isinstance(e, ValueError) and not isinstance(e, sdk.SandfortError):
            # json.JSONDecodeError and the like: an answer this server cannot read.
            return f"Sandfort error: unexpected answer from sandfortd at {self.base_url}: {e}"
        return f"Sandfort error: {e}"


def guardrail_advice(e):
    """What a model should do about the organization's guardrails, which it cannot change:
    without this it tends to retry the same call."""
    if e.code == "quota_exceeded":
        return ("The organization's quota is used up. Delete sandboxes you no longer need "
                "(list_sandboxes, then delete_sandbox) and try again; if none can go, tell the "
                "user the quota must be raised by the operator.")
    if e.code == "image_not_allowed":
        return ("The organization may not use this image. Omit image to use the default one, "
                "or use an image its policy allows; ask the user which.")
    if e.code == "runtime_not_allowed":
        return ("The organization's policy requires another runtime (the message lists the ones it "
                "allows). Create the sandbox without runtime to get an allowed one, or with a runtime "
                "the message lists; retrying the same runtime will not help.")
    if e.code == "conflict" and "kill switch" in (e.message or ""):
        return ("The organization's kill switch is on: no sandbox can be created or started "
                "until an administrator lifts it. Do not retry; tell the user.")
    if e.code == "insufficient_storage":
        return ("The Sandfort host's disk is full: nothing was changed. Reads, stops and deletes still "
                "work; delete sandboxes you no longer need, and tell the user the operator must free "
                "space. Do not retry the same call at once.")
    if e.code == "rate_limited":
        wait = f"{e.retry_after:g} s" if e.retry_after is not None else "a moment"
        return f"Too many requests: wait {wait} before calling again."
    if e.code == "unavailable" and "gVisor" in (e.message or ""):
        return ("This Sandfort server does not offer gVisor sandboxes (its operator has not set "
                "gVisor up). Retrying will not help: create the sandbox without runtime (runc, a "
                "container on the host's kernel) if that isolation is acceptable for the code, "
                "otherwise tell the user.")
    if e.code == "host_full":
        return ("The host has no memory left for another sandbox (nothing was made). Delete or stop "
                "sandboxes you no longer need (list_sandboxes, then delete_sandbox) and try again, "
                "or ask for less memory; if none can go, tell the user the host is full.")
    return None


# --------------------------------------------------------------------------------------------
# Argument validation (the subset of JSON Schema the tools below use)
# --------------------------------------------------------------------------------------------

class ArgumentError(Exception):
    pass


_TYPES = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
}


def validate(value, schema, where):
    t = schema.get("type")
    if t and not _TYPES[t](value):
        raise ArgumentError(f"{where} must be of type {t}")
    if "enum" in schema and value not in schema["enum"]:
        raise ArgumentError(f"{where} must be one of {', '.join(map(str, schema['enum']))}")
    if t in ("integer", "number"):
        if "minimum" in schema and value < schema["minimum"]:
            raise ArgumentError(f"{where} must be >= {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            raise ArgumentError(f"{where} must be <= {schema['maximum']}")
    if t == "string":
        if "minLength" in schema and len(value) < schema["minLength"]:
            raise ArgumentError(f"{where} must not be empty" if schema["minLength"] == 1
                                else f"{where} must be at least {schema['minLength']} characters")
        if "pattern" in schema and not re.search(schema["pattern"], value):
            raise ArgumentError(f"{where} must match {schema['pattern']}")
    if t == "array" and "items" in schema:
        for i, item in enumerate(value):
            validate(item, schema["items"], f"{where}[{i}]")
    if t == "object":
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in value:
                raise ArgumentError(f"missing required argument {where}.{key}"
                                    if where != "arguments" else
                                    f"missing required argument '{key}'")
        for key, item in value.items():
            sub = f"'{key}'" if where == "arguments" else f"{where}.{key}"
            if key in props:
                validate(item, props[key], sub)
            else:
                extra = schema.get("additionalProperties", True)
                if extra is False:
                    raise ArgumentError(f"unknown argument {sub}")
                if isinstance(extra, dict):
                    validate(item, extra, sub)


# --------------------------------------------------------------------------------------------
# Tools
# --------------------------------------------------------------------------------------------

SANDBOX_ID = {"type": "string", "minLength": 1,
              "description": "The sandbox's id (sbx-…) or its name."}
STRING_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
TIMEOUT = {"type": "integer", "minimum": 1, "maximum": 3600,
           "description": f"Seconds before the whole process group is killed (default "
                          f"{DEFAULT_EXEC_TIMEOUT_S}); a timeout gives exit_code 124 and timed_out "
                          f"true. The daemon caps it at its exec_max_timeout_s."}

EXEC_OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "exit_code": {"type": "integer"},
        "stdout": {"type": "string"},
        "stderr": {"type": "string"},
        "timed_out": {"type": "boolean"},
        "truncated": {"type": "boolean"},
        "duration_ms": {"type": "integer"},
    },
    "required": ["exit_code", "stdout", "stderr", "timed_out", "truncated"],
}

SANDBOX_OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": ["string", "null"]},
        "state": {"type": "string"},
        "snapshot": {"type": "string"},
        # Not an enum: a daemon newer than this server may name a runtime it does not know.
        "runtime": {"type": "string", "description": "runc or gvisor."},
        "ttl_s": {"type": ["integer", "null"]},
        "idle_timeout_s": {"type": ["integer", "null"]},
    },
    "required": ["id", "state"],
}


def _sandbox_summary(s):
    keys = ("id", "name", "state", "snapshot", "runtime", "created_at", "expires_at", "ttl_s", "idle_timeout_s",
            "resources", "egress_allowlist", "labels", "env_keys", "volumes", "preview_url_template",
            "error_message")
    return {k: s[k] for k in keys if k in s}


def tool_create_sandbox(sf, a):
    if "image" in a and "snapshot" in a:
        raise ToolFailure("Invalid arguments for create_sandbox: give image or snapshot, not both")
    fields = {key: a[key] for key in ("name", "env", "labels", "ttl_s", "idle_timeout_s",
                                      "egress_allowlist", "workdir", "volumes", "runtime") if key in a}
    resources = {k: a[k] for k in ("cpus", "memory_mb") if k in a}
    if resources:
        fields["resources"] = resources
    # Waits until started; creating may pull an image: the SDK allows it 600 s.
    sbx = sf.client().create_sandbox(a.get("snapshot") or a.get("image") or DEFAULT_IMAGE,
                                     wait=True, timeout=600, **fields)
    s = sbx.info.raw
    summary = _sandbox_summary(s)
    text = (f"Created sandbox {s.get('id')}"
            + (f" (name {s['name']})" if s.get("name") else "")
            + f" from {s.get('snapshot')}, runtime {s.get('runtime')}, state {s.get('state')}.\n"
            + "Use its id as sandbox_id in the other tools; delete it with delete_sandbox "
              "when done.\n" + json.dumps(summary, indent=2))
    return text, summary


# What a delete tool answers, and how a client should treat it: for good, and safe to repeat.
DELETED_OUTPUT_SCHEMA = {"type": "object", "properties": {"deleted": {"type": "string"}}, "required": ["deleted"]}
DELETE_ANNOTATIONS = {"readOnlyHint": False, "destructiveHint": True, "idempotentHint": True, "openWorldHint": False}

SNAPSHOT_OUTPUT_SCHEMA = {
    "type": "object",
    "properties": {
        "id": {"type": "string"},
        "name": {"type": "string"},
        "size_bytes": {"type": "integer"},
        "source_sandbox_id": {"type": "string"},
        "state": {"type": "string"},
        "created_at": {"type": "string"},
    },
    "required": ["id", "name", "state"],
}


def tool_create_snapshot(sf, a):
    # Docker commits the container's filesystem (the sandbox is paused meanwhile): the SDK
    # allows it 600 s.
    s = sf.client().create_snapshot(a["sandbox_id"], a["name"]).raw
    keys = ("id", "name", "size_bytes", "source_sandbox_id", "state", "created_at")
    summary = {k: s[k] for k in keys if k in s}
    text = (f"Created snapshot {s.get('name')} ({s.get('id')}, {s.get('size_bytes')} bytes) of "
            f"sandbox {s.get('source_sandbox_id')}.\n"
            f"create_sandbox with snapshot={s.get('name')} starts a new sandbox with its files and "
            "installed packages (not its running processes or memory).\n"
            + json.dumps(summary, indent=2))
    return text, summary


def _exec_result(r):
    out = {
        "exit_code": int(r.get("exit_code", -1)),
        "stdout": r.get("stdout", ""),
        "stderr": r.get("stderr", ""),
        "timed_out": bool(r.get("timed_out", False)),
        "truncated": bool(r.get("truncated", False)),
    }
    if isinstance(r.get("duration_ms"), int):
        out["duration_ms"] = r["duration_ms"]
    lines = [f"exit_code: {out['exit_code']}"]
    if out["timed_out"]:
        lines.append("timed_out: true (the process group was killed)")
    if out["truncated"]:
        lines.append("truncated: true (output beyond the cap was dropped)")
    lines.append("stdout:" + ("\n" + out["stdout"] if out["stdout"] else " (empty)"))
    lines.append("stderr:" + ("\n" + out["stderr"] if out["stderr"] else " (empty)"))
    return "\n".join(lines), out


def _timeout_s(a):
    # The SDK's socket waits timeout_s + 30 s (60 + 30 when absent).
    return int(a["timeout_s"]) if "timeout_s" in a else None


def tool_run_command(sf, a):
    r = sf.sandbox(a["sandbox_id"]).process.exec(
        a["command"], cwd=a.get("cwd"), env=a.get("env"), stdin=a.get("stdin"),
        timeout_s=_timeout_s(a))
    return _exec_result(r.raw)


def tool_run_code(sf, a):
    r = sf.sandbox(a["sandbox_id"]).process.code_run(
        a.get("language", "python"), a["code"], argv=a.get("argv"), env=a.get("env"),
        timeout_s=_timeout_s(a))
    return _exec_result(r.raw)


def tool_upload_text_file(sf, a):
    data = a["content"].encode("utf-8")
    up = sf.sandbox(a["sandbox_id"]).fs.upload_file(a["path"], data, mode=a.get("mode"))
    info = up.raw if isinstance(up.raw, dict) else {}
    result = {"path": info.get("path", a["path"]), "size": info.get("size", len(data))}
    if info.get("mode") is not None:
        result["mode"] = info["mode"]
    text = f"Wrote {result['size']} bytes to {result['path']}" + (
        f" (mode {result['mode']})" if "mode" in result else "") + "."
    return text, result


def _utf8_prefix(data):
    """Decodes data as UTF-8, allowing a character cut at the very end (truncation)."""
    for cut in range(0, 4):
        try:
            return data[:len(data) - cut].decode("utf-8")
        except UnicodeDecodeError as e:
            if e.start < len(data) - 4:
                raise
    return data.decode("utf-8")


def tool_download_text_file(sf, a):
    max_bytes = int(a.get("max_bytes", DOWNLOAD_DEFAULT_MAX_BYTES))
    # One byte more than we keep tells whether the file is longer; the rest is not transferred.
    payload = sf.sandbox(a["sandbox_id"]).fs.download_file(a["path"], max_bytes=max_bytes + 1)
    truncated = len(payload) > max_bytes
    payload = payload[:max_bytes]
    try:
        content = _utf8_prefix(payload) if truncated else payload.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolFailure(f"{a['path']} is not UTF-8 text ({len(payload)} bytes read); "
                          "download_text_file only returns text files")
    result = {"path": a["path"], "content": content, "size": len(payload),
              "truncated": truncated}
    return content, result


def tool_list_sandboxes(sf, a):
    page = sf.client().list_sandboxes_page(
        state=a.get("state"), labels=a.get("label"),
        limit=int(a["limit"]) if "limit" in a else None, cursor=a.get("cursor"))
    items = [_sandbox_summary(s.info.raw) for s in page.items]
    result = {"sandboxes": items, "next_cursor": page.next_cursor}
    if not items:
        text = "No sandboxes."
    else:
        lines = [f"{len(items)} sandbox(es):"]
        for s in items:
            lines.append(f"- {s.get('id')}  state={s.get('state')}  name={s.get('name') or '-'}"
                         f"  image={s.get('snapshot')}  runtime={s.get('runtime')}"
                         f"  created_at={s.get('created_at')}")
        text = "\n".join(lines)
    if result["next_cursor"]:
        text += f"\nMore: call again with cursor={result['next_cursor']}"
    return text, result


def tool_delete_sandbox(sf, a):
    sf.client().delete(a["sandbox_id"])
    return f"Deleted sandbox {a['sandbox_id']}.", {"deleted": a["sandbox_id"]}


def _snapshot_summary(snap):
    keys = ("id", "name", "size_bytes", "source_sandbox_id", "state", "created_at")
    return {k: snap.raw[k] for k in keys if k in snap.raw}


def tool_list_snapshots(sf, a):
    items = [_snapshot_summary(snap) for snap in sf.client().list_snapshots()]
    if not items:
        text = "No snapshots. create_snapshot saves a sandbox's filesystem as one."
    else:
        lines = [f"{len(items)} snapshot(s):"]
        for snap in items:
            lines.append(f"- {snap.get('name')}  id={snap.get('id')}  size_bytes={snap.get('size_bytes')}"
                         f"  source={snap.get('source_sandbox_id')}  created_at={snap.get('created_at')}")
        text = "\n".join(lines)
    return text, {"snapshots": items}


def tool_delete_snapshot(sf, a):
    sf.client().delete_snapshot(a["name"])
    return (f"Deleted snapshot {a['name']}: new sandboxes can no longer start from it.",
            {"deleted": a["name"]})


def tool_get_preview_link(sf, a):
    sbx = sf.sandbox(a["sandbox_id"])
    port = int(a["port"])
    link = sbx.preview_link(port)
    listeners = [p for p in sbx.ports() if p.port == port]
    previewable = any(p.previewable for p in listeners)
    result = {"port": port, "url": link.url, "token": link.token, "link": link.url_with_token,
              "listening": bool(listeners), "previewable": previewable}
    text = f"Preview link of port {port}: {link.url_with_token}\n"
    if link.token:
        text += ("It carries the sandbox's preview token: hand it to the user as is (a browser opening it "
                 "gets a cookie). From code, request the url with the header X-Sandfort-Preview-Token: "
                 f"{link.token}\n")
    else:
        text += "The sandbox's previews are public: no token is needed.\n"
    if not listeners:
        text += (f"Nothing listens on port {port} in the sandbox yet: start the server first (start_command), "
                 "listening on 0.0.0.0; until then the link answers 502.")
    elif not previewable:
        text += (f"The server on port {port} listens on loopback only: the preview cannot reach it. "
                 "Restart it listening on 0.0.0.0.")
    return text.rstrip("\n"), result


def _command_summary(info):
    out = {"id": info.id, "state": info.state}
    for key in ("pid", "command", "exit_code", "started_at", "ended_at"):
        if getattr(info, key) is not None:
            out[key] = getattr(info, key)
    return out


def tool_start_command(sf, a):
    cmd = sf.sandbox(a["sandbox_id"]).process.start(a["command"], cwd=a.get("cwd"), env=a.get("env"))
    result = _command_summary(cmd.info)
    text = (f"Started background command {cmd.id} (pid {cmd.info.pid}) in sandbox {a['sandbox_id']}; it keeps "
            "running after this call. read_command_log with this command_id shows its output and whether it "
            "has exited.\n" + json.dumps(result, indent=2))
    return text, result


def _tail(text, max_chars):
    """The newest max_chars characters: the end of a log is what tells how it is going."""
    return (text[-max_chars:], True) if len(text) > max_chars else (text, False)


def tool_read_command_log(sf, a):
    cmd = sf.sandbox(a["sandbox_id"]).process.get_command(a["command_id"])
    logs = cmd.logs()
    max_chars = int(a.get("max_chars", COMMAND_LOG_DEFAULT_MAX_CHARS))
    stdout, cut_out = _tail(logs.stdout, max_chars)
    stderr, cut_err = _tail(logs.stderr, max_chars)
    result = dict(_command_summary(cmd.info), stdout=stdout, stderr=stderr,
                  dropped_bytes=logs.dropped_bytes, truncated=cut_out or cut_err)
    state = (f"exited with exit_code {cmd.info.exit_code}" if cmd.info.state == "exited"
             else f"{cmd.info.state} (call again later for more output)")
    lines = [f"command {cmd.id}: {state}"]
    if result["truncated"]:
        lines.append(f"(only the last {max_chars} characters of each stream are shown)")
    lines.append("stdout:" + ("\n" + stdout if stdout else " (empty)"))
    lines.append("stderr:" + ("\n" + stderr if stderr else " (empty)"))
    return "\n".join(lines), result


TOOLS = [
    {
        "name": "create_sandbox",
        "title": "Create sandbox",
        "description": (
            "Create a new isolated Linux sandbox (a container) and wait until it is ready. "
            f"The default image {DEFAULT_IMAGE} has python3, node and bash. Returns the sandbox "
            "id to pass as sandbox_id to the other tools. The sandbox runs until delete_sandbox, "
            "ttl_s or idle_timeout_s ends it; it has no network access unless egress_allowlist "
            "allows hosts. runtime gvisor gives it a kernel of its own for stronger isolation. "
            "The organization's quotas, image policy and runtime policy may refuse it."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "image": {"type": "string", "minLength": 1,
                          "description": f"Image reference (default {DEFAULT_IMAGE})."},
                "snapshot": {"type": "string", "minLength": 1,
                             "description": "A snapshot of the organization (name or id, made "
                                            "with create_snapshot) to start from instead of an "
                                            "image: its files and installed packages are there, "
                                            "no process runs. Not together with image."},
                "name": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$",
                         "description": "Optional unique name (1-63 of A-Za-z0-9_.-, not "
                                        "starting with sbx-); usable instead of the id."},
                "env": dict(STRING_MAP, description="Environment variables for every process."),
                "labels": dict(STRING_MAP, description="Labels (key/value) for filtering."),
                "ttl_s": {"type": "integer", "minimum": 1, "maximum": 2592000,
                          "description": "Stop the sandbox automatically after this many "
                                         "seconds (it is deleted a while later)."},
                "idle_timeout_s": {"type": "integer", "minimum": 0, "maximum": 2592000,
                                   "description": "Stop the sandbox after this many seconds in "
                                                  "which no tool used it (0: never; default: "
                                                  "the server's, typically 1800). A stopped "
                                                  "sandbox is deleted a while later."},
                "egress_allowlist": {"type": "array", "items": {"type": "string"},
                                     "description": "Hosts the sandbox may reach through its "
                                                    "proxy: 'example.com', '*.example.com' or "
                                                    "'*'. Empty (default): no egress."},
                "cpus": {"type": "number", "description": "CPU limit (e.g. 1.0)."},
                "memory_mb": {"type": "integer", "minimum": 64,
                              "description": "Memory limit in MiB."},
                "workdir": {"type": "string", "description": "Absolute default working "
                                                              "directory."},
                "runtime": {"type": "string", "enum": ["runc", "gvisor"],
                            "description": "What the sandbox runs under. runc: a container on the "
                                           "host's kernel, the fastest. gvisor: a separate kernel "
                                           "(gVisor), stronger isolation, slower syscalls; no "
                                           "network interface, egress through the proxy only "
                                           "(egress_allowlist applies as with runc). Choose it "
                                           "when the user asks for stronger isolation. With older "
                                           "gVisor releases (Debian's) ls and stat fail there with "
                                           "'Invalid argument': list files with find or python3. "
                                           "Default: "
                                           "the server's default_runtime (usually runc), or one "
                                           "the organization's policy allows; a server without "
                                           "gVisor refuses it."},
                "volumes": {"type": "array", "maxItems": 8,
                            "items": {"type": "object",
                                      "properties": {
                                          "name": {"type": "string", "minLength": 1,
                                                   "description": "A volume of the organization "
                                                                  "(made by an operator: `sandfort "
                                                                  "volume create NAME`)."},
                                          "mount_path": {"type": "string", "minLength": 1,
                                                         "description": "Absolute path inside the "
                                                                        "sandbox, e.g. /data."},
                                          "read_only": {"type": "boolean",
                                                        "description": "Mount read-only (default "
                                                                       "false)."},
                                      },
                                      "required": ["name", "mount_path"],
                                      "additionalProperties": False},
                            "description": "Named volumes to mount: what the sandbox writes there "
                                           "stays for the next sandbox that mounts the volume."},
            },
            "additionalProperties": False,
        },
        "outputSchema": SANDBOX_OUTPUT_SCHEMA,
        "annotations": {"readOnlyHint": False, "destructiveHint": False,
                        "idempotentHint": False, "openWorldHint": False},
        "handler": tool_create_sandbox,
    },
    {
        "name": "run_command",
        "title": "Run shell command",
        "description": (
            "Run a shell command in a sandbox (as /bin/sh -c COMMAND, a fresh process each "
            "call: cd and exported variables do not carry over; use cwd, env or '&&'). Waits "
            "for it to finish and returns exit_code, stdout and stderr. A command that fails "
            "(non-zero exit_code) is a normal result, not an error."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": SANDBOX_ID,
                "command": {"type": "string", "minLength": 1,
                            "description": "The shell command line, e.g. 'ls -la /tmp'."},
                "cwd": {"type": "string", "description": "Absolute working directory."},
                "env": dict(STRING_MAP, description="Extra environment variables."),
                "stdin": {"type": "string", "description": "Text written to the command's "
                                                           "stdin (default: none, EOF)."},
                "timeout_s": TIMEOUT,
            },
            "required": ["sandbox_id", "command"],
            "additionalProperties": False,
        },
        "outputSchema": EXEC_OUTPUT_SCHEMA,
        "annotations": {"readOnlyHint": False, "destructiveHint": True,
                        "idempotentHint": False, "openWorldHint": False},
        "handler": tool_run_command,
    },
    {
        "name": "run_code",
        "title": "Run code",
        "description": (
            "Run a snippet of code in a sandbox: python (python3 -c), node (node -e), bash or "
            "sh. Returns exit_code, stdout and stderr; an exception or non-zero exit is a "
            "normal result with its exit_code. Print what you want to see."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": SANDBOX_ID,
                "code": {"type": "string", "minLength": 1, "description": "The source code."},
                "language": {"type": "string", "enum": ["python", "node", "bash", "sh"],
                             "default": "python", "description": "Default python."},
                "argv": {"type": "array", "items": {"type": "string"},
                         "description": "Arguments: sys.argv[1:] / process.argv[1:] / $1…"},
                "env": dict(STRING_MAP, description="Extra environment variables."),
                "timeout_s": TIMEOUT,
            },
            "required": ["sandbox_id", "code"],
            "additionalProperties": False,
        },
        "outputSchema": EXEC_OUTPUT_SCHEMA,
        "annotations": {"readOnlyHint": False, "destructiveHint": True,
                        "idempotentHint": False, "openWorldHint": False},
        "handler": tool_run_code,
    },
    {
        "name": "upload_text_file",
        "title": "Write text file",
        "description": (
            "Write a UTF-8 text file into a sandbox at an absolute path, creating parent "
            "directories and replacing any existing file."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": SANDBOX_ID,
                "path": {"type": "string", "pattern": "^/",
                         "description": "Absolute path in the sandbox, e.g. /tmp/app/main.py."},
                "content": {"type": "string", "description": "The file's text."},
                "mode": {"type": "string", "pattern": "^0?[0-7]{3}$",
                         "description": "Octal permissions (default 0644), e.g. 0755."},
            },
            "required": ["sandbox_id", "path", "content"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "size": {"type": "integer"},
                           "mode": {"type": "string"}},
            "required": ["path", "size"],
        },
        "annotations": {"readOnlyHint": False, "destructiveHint": True,
                        "idempotentHint": True, "openWorldHint": False},
        "handler": tool_upload_text_file,
    },
    {
        "name": "download_text_file",
        "title": "Read text file",
        "description": (
            "Read a UTF-8 text file from a sandbox (absolute path). Returns its content; files "
            "longer than max_bytes are cut (truncated: true). Binary files are refused."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": SANDBOX_ID,
                "path": {"type": "string", "pattern": "^/",
                         "description": "Absolute path in the sandbox."},
                "max_bytes": {"type": "integer", "minimum": 1,
                              "maximum": DOWNLOAD_HARD_MAX_BYTES,
                              "description": f"Read at most this many bytes (default "
                                             f"{DOWNLOAD_DEFAULT_MAX_BYTES})."},
            },
            "required": ["sandbox_id", "path"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "content": {"type": "string"},
                           "size": {"type": "integer"}, "truncated": {"type": "boolean"}},
            "required": ["path", "content", "size", "truncated"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
        "handler": tool_download_text_file,
    },
    {
        "name": "list_sandboxes",
        "title": "List sandboxes",
        "description": "List this organization's sandboxes with their id, name, state and image.",
        "inputSchema": {
            "type": "object",
            "properties": {
                "state": {"type": "string",
                          "enum": ["creating", "pulling", "started", "paused", "stopped", "error"],
                          "description": "Only sandboxes in this state."},
                "label": {"type": "string",
                          "description": "Only sandboxes with these labels: 'k:v' or "
                                         "'k:v,k2:v2'."},
                "limit": {"type": "integer", "minimum": 1, "maximum": 1000,
                          "description": "Page size (default 100)."},
                "cursor": {"type": "string", "description": "next_cursor of a previous call."},
            },
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"sandboxes": {"type": "array", "items": SANDBOX_OUTPUT_SCHEMA},
                           "next_cursor": {"type": ["string", "null"]}},
            "required": ["sandboxes"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
        "handler": tool_list_sandboxes,
    },
    {
        "name": "delete_sandbox",
        "title": "Delete sandbox",
        "description": ("Delete a sandbox: its container, files and preview URLs are gone for "
                        "good."),
        "inputSchema": {
            "type": "object",
            "properties": {"sandbox_id": SANDBOX_ID},
            "required": ["sandbox_id"],
            "additionalProperties": False,
        },
        "outputSchema": DELETED_OUTPUT_SCHEMA,
        "annotations": DELETE_ANNOTATIONS,
        "handler": tool_delete_sandbox,
    },
    {
        "name": "create_snapshot",
        "title": "Snapshot sandbox",
        "description": (
            "Save a sandbox's filesystem (files written, packages installed) as a named snapshot "
            "of the organization; create_sandbox with snapshot=NAME then starts new sandboxes "
            "from it. Running processes, memory and mounted volumes are not saved. The sandbox "
            "must be started, paused or stopped; a running one keeps running."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": SANDBOX_ID,
                "name": {"type": "string", "pattern": r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$",
                         "description": "The snapshot's name, unique in the organization (1-63 "
                                        "of A-Za-z0-9_.-, not starting with snap-)."},
            },
            "required": ["sandbox_id", "name"],
            "additionalProperties": False,
        },
        "outputSchema": SNAPSHOT_OUTPUT_SCHEMA,
        "annotations": {"readOnlyHint": False, "destructiveHint": False,
                        "idempotentHint": False, "openWorldHint": False},
        "handler": tool_create_snapshot,
    },
    {
        "name": "list_snapshots",
        "title": "List snapshots",
        "description": ("List the organization's snapshots (made with create_snapshot): name, id, size "
                        "and the sandbox each was made from. create_sandbox with snapshot=NAME starts "
                        "from one."),
        "inputSchema": {"type": "object", "properties": {}, "additionalProperties": False},
        "outputSchema": {
            "type": "object",
            "properties": {"snapshots": {"type": "array", "items": SNAPSHOT_OUTPUT_SCHEMA}},
            "required": ["snapshots"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
        "handler": tool_list_snapshots,
    },
    {
        "name": "delete_snapshot",
        "title": "Delete snapshot",
        "description": ("Delete a snapshot of the organization for good. Refused (conflict) while a "
                        "sandbox created from it still exists: delete those sandboxes first."),
        "inputSchema": {
            "type": "object",
            "properties": {"name": {"type": "string", "minLength": 1,
                                    "description": "The snapshot's name or id (snap-…)."}},
            "required": ["name"],
            "additionalProperties": False,
        },
        "outputSchema": DELETED_OUTPUT_SCHEMA,
        "annotations": DELETE_ANNOTATIONS,
        "handler": tool_delete_snapshot,
    },
    {
        "name": "get_preview_link",
        "title": "Preview link of a port",
        "description": (
            "The link at which a server listening on a port inside a sandbox can be opened from "
            "outside (a web app, an API): hand `link` to the user. It carries the sandbox's preview "
            "token unless the sandbox's previews are public. Also says whether something listens on "
            "that port yet (a server must listen on 0.0.0.0, not 127.0.0.1, to be previewed)."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": SANDBOX_ID,
                "port": {"type": "integer", "minimum": 1, "maximum": 65535,
                         "description": "The port the server listens on inside the sandbox, e.g. 8080."},
            },
            "required": ["sandbox_id", "port"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"port": {"type": "integer"}, "url": {"type": "string"},
                           "token": {"type": ["string", "null"]}, "link": {"type": "string"},
                           "listening": {"type": "boolean"}, "previewable": {"type": "boolean"}},
            "required": ["port", "url", "link", "listening", "previewable"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
        "handler": tool_get_preview_link,
    },
    {
        "name": "start_command",
        "title": "Start background command",
        "description": (
            "Start a long-running shell command in a sandbox in the background (a server, a build, a "
            "watcher) and return at once with its command id; it keeps running after the call. Use "
            "read_command_log to see its output and whether it exited. For a command that finishes "
            "quickly use run_command instead."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": SANDBOX_ID,
                "command": {"type": "string", "minLength": 1,
                            "description": "The shell command line (/bin/sh -c), e.g. "
                                           "'python3 -m http.server 8080'."},
                "cwd": {"type": "string", "description": "Absolute working directory."},
                "env": dict(STRING_MAP, description="Extra environment variables."),
            },
            "required": ["sandbox_id", "command"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "state": {"type": "string"}, "pid": {"type": "integer"},
                           "command": {"type": "string"}, "started_at": {"type": "string"}},
            "required": ["id", "state"],
        },
        "annotations": {"readOnlyHint": False, "destructiveHint": True,
                        "idempotentHint": False, "openWorldHint": False},
        "handler": tool_start_command,
    },
    {
        "name": "read_command_log",
        "title": "Read background command's log",
        "description": (
            "The output so far of a background command started with start_command (stdout and "
            "stderr, the newest part when long), and its state: running, or exited with its "
            "exit_code. Call it again to see more as the command goes on. Exited commands are "
            "forgotten 10 minutes after they end."),
        "inputSchema": {
            "type": "object",
            "properties": {
                "sandbox_id": SANDBOX_ID,
                "command_id": {"type": "string", "minLength": 1,
                               "description": "The id start_command returned (cmd-…)."},
                "max_chars": {"type": "integer", "minimum": 1, "maximum": 1 << 20,
                              "description": f"Show at most the last this many characters of each "
                                             f"stream (default {COMMAND_LOG_DEFAULT_MAX_CHARS})."},
            },
            "required": ["sandbox_id", "command_id"],
            "additionalProperties": False,
        },
        "outputSchema": {
            "type": "object",
            "properties": {"id": {"type": "string"}, "state": {"type": "string"},
                           "exit_code": {"type": ["integer", "null"]}, "stdout": {"type": "string"},
                           "stderr": {"type": "string"}, "dropped_bytes": {"type": "integer"},
                           "truncated": {"type": "boolean"}},
            "required": ["id", "state", "stdout", "stderr", "truncated"],
        },
        "annotations": {"readOnlyHint": True, "openWorldHint": False},
        "handler": tool_read_command_log,
    },
]
TOOLS_BY_NAME = {t["name"]: t for t in TOOLS}


# --------------------------------------------------------------------------------------------
# JSON-RPC / MCP
# --------------------------------------------------------------------------------------------

class RpcError(Exception):
    def __init__(self, code, message, data=None):
        super().__init__(message)
        self.code = code
        self.message = message
        self.data = data


def _version_at_least(version, other):
    return version >= other  # ISO dates compare as strings


class Server:
    def __init__(self, sandfort, out=None):
        self.sandfort = sandfort
        self.out = out or sys.stdout
        self.write_lock = threading.Lock()
        self.protocol_version = SUPPORTED_PROTOCOL_VERSIONS[0]
        self.cancelled = set()
        self.cancel_lock = threading.Lock()
        self.workers = []

    # -- output ------------------------------------------------------------------------------
    def send(self, msg):
        line = json.dumps(msg, ensure_ascii=False, separators=(",", ":"))
        with self.write_lock:
            self.out.write(line + "\n")
            self.out.flush()

    @staticmethod
    def error_response(id_, code, message, data=None):
        err = {"code": code, "message": message}
        if data is not None:
            err["data"] = data
        return {"jsonrpc": "2.0", "id": id_, "error": err}

    # -- input -------------------------------------------------------------------------------
    def handle_line(self, line):
        line = line.strip()
        if not line:
            return
        try:
            msg = json.loads(line)
        except ValueError as e:
            self.send(self.error_response(None, PARSE_ERROR, f"Parse error: {e}"))
            return
        if isinstance(msg, list):  # JSON-RPC batch (allowed by 2025-03-26)
            if not msg:
                self.send(self.error_response(None, INVALID_REQUEST, "Invalid Request: empty batch"))
                return
            responses = [r for r in (self.dispatch(m, inline=True) for m in msg) if r]
            if responses:
                self.send(responses)
            return
        response = self.dispatch(msg, inline=False)
        if response:
            self.send(response)

    def dispatch(self, msg, inline):
        """Returns a response to send now, or None (notification, a response to us, or a
        request handed to a worker thread, which sends its own answer)."""
        if not isinstance(msg, dict) or msg.get("jsonrpc") != "2.0":
            return self.error_response(msg.get("id") if isinstance(msg, dict) else None,
                                       INVALID_REQUEST, "Invalid Request: not JSON-RPC 2.0")
        method = msg.get("method")
        has_id = "id" in msg
        id_ = msg.get("id")
        if method is None:
            if "result" in msg or "error" in msg:
                return None  # a response to a request we never send; ignore
            return self.error_response(id_, INVALID_REQUEST, "Invalid Request: no method")
        if not isinstance(method, str) or (has_id and not isinstance(id_, (str, int))):
            return self.error_response(id_ if isinstance(id_, (str, int)) else None,
                                       INVALID_REQUEST, "Invalid Request")
        params = msg.get("params", {})
        if params is None:
            params = {}
        if not has_id:
            self.notification(method, params)
            return None
        if not isinstance(params, dict):
            return self.error_response(id_, INVALID_PARAMS, "Invalid params: must be an object")
        if method == "tools/call" and not inline:
            # Tool calls can take minutes: run them beside the reader so that pings and
            # cancellations are still answered.
            t = threading.Thread(target=self._worker, args=(id_, method, params), daemon=True)
            self.workers.append(t)
            t.start()
            return None
        return self.respond(id_, method, params)

    def _worker(self, id_, method, params):
        response = self.respond(id_, method, params)
        with self.cancel_lock:
            if id_ in self.cancelled:
                self.cancelled.discard(id_)
                return  # cancelled: the spec says not to answer
        self.send(response)

    def respond(self, id_, method, params):
        try:
            result = self.call(method, params)
            return {"jsonrpc": "2.0", "id": id_, "result": result}
        except RpcError as e:
            return self.error_response(id_, e.code, e.message, e.data)
        except Exception as e:  # a bug of ours: answer it, log it, keep serving
            log(f"internal error in {method}: {type(e).__name__}: {e}")
            return self.error_response(id_, INTERNAL_ERROR, f"Internal error: {e}")

    def notification(self, method, params):
        if method == "notifications/cancelled" and isinstance(params, dict):
            rid = params.get("requestId")
            if isinstance(rid, (str, int)):
                with self.cancel_lock:
                    self.cancelled.add(rid)
            return
        # notifications/initialized and anything else: nothing to do.

    # -- methods -----------------------------------------------------------------------------
    def call(self, method, params):
        if method == "initialize":
            return self.initialize(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            return {"tools": self.tool_list()}
        if method == "tools/call":
            return self.tools_call(params)
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")

    def initialize(self, params):
        requested = params.get("protocolVersion")
        if not isinstance(requested, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: protocolVersion must be a string")
        if requested in SUPPORTED_PROTOCOL_VERSIONS:
            self.protocol_version = requested
        else:
            self.protocol_version = SUPPORTED_PROTOCOL_VERSIONS[0]
        client = params.get("clientInfo") or {}
        log(f"initialize from {client.get('name', '?')} {client.get('version', '')}: "
            f"requested {requested}, using {self.protocol_version}")
        return {
            "protocolVersion": self.protocol_version,
            "capabilities": {"tools": {"listChanged": False}},
            "serverInfo": {"name": SERVER_NAME, "title": "Sandfort", "version": SERVER_VERSION},
            "instructions": (
                "Sandfort runs code in isolated Linux sandboxes. create_sandbox first and use "
                "the returned id as sandbox_id; run_command / run_code execute and return "
                "exit_code, stdout and stderr (a non-zero exit_code is a normal result); "
                "upload_text_file / download_text_file move text files; create_snapshot saves "
                "a sandbox's files for create_sandbox(snapshot=…); start_command runs a server "
                "or build in the background and read_command_log shows its output; "
                "get_preview_link gives the link to a port to hand to the user; delete_sandbox "
                "(and delete_snapshot) when done."),
        }

    def _structured(self):
        return _version_at_least(self.protocol_version, "2025-06-18")

    def tool_list(self):
        tools = []
        for t in TOOLS:
            d = {k: v for k, v in t.items() if k != "handler"}
            if not self._structured():
                d.pop("outputSchema", None)
                d.pop("title", None)
            tools.append(d)
        return tools

    def tools_call(self, params):
        name = params.get("name")
        if not isinstance(name, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: 'name' must be a string")
        tool = TOOLS_BY_NAME.get(name)
        if tool is None:
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
        args = params.get("arguments", {})
        if args is None:
            args = {}
        if not isinstance(args, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: 'arguments' must be an object")
        try:
            validate(args, tool["inputSchema"], "arguments")
        except ArgumentError as e:
            # 2025-11-25 asks for input validation errors as tool execution errors (so the model
            # can correct itself); earlier versions list them as protocol errors.
            if _version_at_least(self.protocol_version, "2025-11-25"):
                return self.tool_error(f"Invalid arguments for {name}: {e}")
            raise RpcError(INVALID_PARAMS, f"Invalid arguments for {name}: {e}")
        started = time.monotonic()
        try:
            text, structured = tool["handler"](self.sandfort, args)
        except ToolFailure as e:
            log(f"{name}: {e}")
            return self.tool_error(str(e))
        except (sdk.SandfortError, ValueError) as e:
            # The SDK's errors: the API's answers (APIError and its subclasses), sandfortd out of
            # reach (APIConnectionError), a broken stream; ValueError: an answer that is not JSON.
            text = self.sandfort.error_text(e)
            log(f"{name}: {text}")
            return self.tool_error(text)
        log(f"{name}: ok in {time.monotonic() - started:.2f}s")
        result = {"content": [{"type": "text", "text": text}], "isError": False}
        if self._structured() and structured is not None:
            result["structuredContent"] = structured
        return result

    @staticmethod
    def tool_error(text):
        return {"content": [{"type": "text", "text": text}], "isError": True}

    # -- main loop ---------------------------------------------------------------------------
    def serve(self, inp=None):
        inp = inp or sys.stdin
        for line in inp:
            self.handle_line(line)
        # stdin closed: let running tool calls finish so their answers are not lost.
        for t in self.workers:
            t.join(timeout=5)


def main():
    # The protocol is UTF-8 JSON lines whatever the locale says.
    stdin = open(sys.stdin.fileno(), "r", encoding="utf-8", errors="replace", newline="\n",
                 closefd=False)
    stdout = open(sys.stdout.fileno(), "w", encoding="utf-8", newline="\n", closefd=False)
    sys.stdout = sys.stderr  # a stray print() must never corrupt the protocol stream
    sandfort = Sandfort(os.environ.get("SANDFORT_BASE_URL"), os.environ.get("SANDFORT_API_KEY"))
    where = f"sandfort_sdk {getattr(sdk, '__version__', '?')} from {os.path.dirname(sdk.__file__)}"
    if sandfort.problem:
        log(f"warning: {sandfort.problem}; tool calls will fail ({where})")
    else:
        log(f"serving over stdio; Sandfort at {sandfort.base_url} ({where})")
    try:
        Server(sandfort, out=stdout).serve(stdin)
    except KeyboardInterrupt:
        pass
    except BrokenPipeError:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
