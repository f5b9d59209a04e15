#!/usr/bin/env python3
"""A real MCP client call against the Sandfort MCP server, with nothing but the standard library.

It reads the client configuration in mcp_config.json (the same JSON Claude Desktop, Claude Code
or Cursor take), spawns the server it names over stdio exactly as such a client does, and speaks
MCP to it: initialize, notifications/initialized, tools/list, then tools/call create_sandbox,
run_command, run_code, upload_text_file/download_text_file, and delete_sandbox.

    export SANDFORT_BASE_URL=http://127.0.0.1:8080 SANDFORT_API_KEY=sfk_...
    python3 examples/mcp/mcp_client.py [--config examples/mcp/mcp_config.json]

SANDFORT_BASE_URL / SANDFORT_API_KEY from the environment replace the placeholders of the
configuration. The server starts in the repository's root (the configuration's paths are relative
to it); when its `command` (`.venv/bin/python`, see docs/mcp.md) does not exist there, this
interpreter is used instead. Exit 0 when every step worked.
"""

import argparse
import json
import os
import queue
import subprocess
import sys
import threading

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
PROTOCOL = "2025-06-18"


class StdioClient:
    """JSON-RPC 2.0 over a child's stdin/stdout, one message per line (the MCP stdio transport)."""

    def __init__(self, command, args, env, cwd):
        self.proc = subprocess.Popen([command, *args], cwd=cwd, env=env, stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
        self.next_id = 0
        self.messages = queue.Queue()
        self.stderr = []
        threading.Thread(target=self._read, daemon=True).start()
        threading.Thread(target=lambda: self.stderr.extend(self.proc.stderr), daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.messages.put(json.loads(line))
        self.messages.put(None)

    def notify(self, method, params=None):
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params=None, timeout=660):
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params or {}}
        self.proc.stdin.write(json.dumps(msg) + "\n")
        self.proc.stdin.flush()
        while True:
            answer = self.messages.get(timeout=timeout)
            if answer is None:
                raise RuntimeError("the server closed stdout:\n" + "".join(self.stderr))
            if answer.get("id") == self.next_id:
                if "error" in answer:
                    raise RuntimeError(f"{method}: JSON-RPC error {answer['error']}")
                return answer["result"]
            # anything else (a notification or a request from the server) is not needed here

    def call_tool(self, name, arguments):
        result = self.request("tools/call", {"name": name, "arguments": arguments})
        text = "\n".join(c.get("text", "") for c in result.get("content", []) if c.get("type") == "text")
        if result.get("isError"):
            raise RuntimeError(f"tool {name} failed: {text}")
        return result.get("structuredContent"), text

    def close(self):
        self.proc.stdin.close()  # the server exits when stdin closes
        try:
            return self.proc.wait(15)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", default=os.path.join(HERE, "mcp_config.json"))
    args = parser.parse_args()
    server = json.load(open(args.config))["mcpServers"]["sandfort"]
    env = dict(os.environ)
    env.update(server.get("env", {}))
    for name in ("SANDFORT_BASE_URL", "SANDFORT_API_KEY"):  # the environment wins over placeholders
        if os.environ.get(name):
            env[name] = os.environ[name]
    command = server["command"]
    if not os.path.isabs(command) and not os.path.exists(os.path.join(REPO, command)):
        print(f"note: {command} not found in {REPO} (python3 -m venv .venv makes it); using {sys.executable}")
        command = sys.executable
    print(f"spawning: {command} {' '.join(server['args'])} (cwd {REPO})")
    client = StdioClient(command, server["args"], env, REPO)
    sandbox_id = None
    try:
        init = client.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {},
                                             "clientInfo": {"name": "sandfort-example-client", "version": "1.0"}})
        client.notify("notifications/initialized")
        print(f"initialize: server {init['serverInfo']['name']} {init['serverInfo'].get('version', '')}, "
              f"protocol {init['protocolVersion']}")
        tools = [t["name"] for t in client.request("tools/list")["tools"]]
        print(f"tools/list: {', '.join(sorted(tools))}")
        for needed in ("create_sandbox", "run_command", "run_code", "delete_sandbox"):
            assert needed in tools, f"tool {needed} missing"

        sbx, _ = client.call_tool("create_sandbox", {"labels": {"example": "mcp"}})
        sandbox_id = sbx["id"]
        print(f"create_sandbox: {sandbox_id} {sbx['state']}")
        assert sbx["state"] == "started"

        r, text = client.call_tool("run_command", {"sandbox_id": sandbox_id, "command": "echo hello from $(hostname); exit 3"})
        print(f"run_command: exit_code={r['exit_code']} stdout={r['stdout']!r}")
        assert r["exit_code"] == 3 and r["stdout"].startswith("hello from")

        r, _ = client.call_tool("run_code", {"sandbox_id": sandbox_id, "language": "python", "code": "print(21 * 2)"})
        print(f"run_code: exit_code={r['exit_code']} stdout={r['stdout']!r}")
        assert r["exit_code"] == 0 and r["stdout"] == "42\n"

        client.call_tool("upload_text_file", {"sandbox_id": sandbox_id, "path": "/tmp/note.txt", "content": "über\n"})
        r, _ = client.call_tool("download_text_file", {"sandbox_id": sandbox_id, "path": "/tmp/note.txt"})
        print(f"upload_text_file + download_text_file: {r['content']!r}")
        assert r["content"] == "über\n"

        r, _ = client.call_tool("delete_sandbox", {"sandbox_id": sandbox_id})
        print(f"delete_sandbox: {r}")
        sandbox_id = None
        print("MCP example OK")
        return 0
    finally:
        if sandbox_id:
            try:
                client.call_tool("delete_sandbox", {"sandbox_id": sandbox_id})
            except Exception as e:  # noqa: BLE001 - best effort on the way out
                print(f"cleanup: {e}", file=sys.stderr)
        status = client.close()
        if status not in (0, None):
            print(f"server exited {status}:\n" + "".join(client.stderr), file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
