#!/usr/bin/env python3
"""An agent loop with the Python SDK: write code into a sandbox, run it, read the exit code and
stderr, "fix" it, run again, until it passes.

No model is needed: the "model" is a scripted list of attempts, the first one buggy. A real agent
would send the task and the last stderr to its model and get the next attempt back; the loop
around it is the same.

    export SANDFORT_BASE_URL=http://127.0.0.1:8080 SANDFORT_API_KEY=sfk_...
    python3 examples/python/agent_loop.py

Exit status 0 when an attempt passed, 1 when every attempt failed.
"""

import os
import sys

try:
    from sandfort_sdk import Client
except ImportError:  # not installed (pip install ./sdk/python): use the repository's copy
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "sdk", "python"))
    from sandfort_sdk import Client

TASK = "Write stats.py: print the mean and the median of [3, 1, 4, 1, 5, 9, 2, 6] as 'mean=3.875 median=3.5'."

# The tests the agent's code must pass, run inside the sandbox after each attempt.
TEST = '''\
import subprocess, sys
out = subprocess.run([sys.executable, "stats.py"], capture_output=True, text=True)
sys.stderr.write(out.stderr)
assert out.returncode == 0, "stats.py exited %d" % out.returncode
assert out.stdout.strip() == "mean=3.875 median=3.5", "unexpected output: %r" % out.stdout
print("tests passed")
'''


class ScriptedModel:
    """Stands in for an LLM: hands out the next attempt, given the feedback of the last one."""

    ATTEMPTS = [
        # 1: a NameError (a typo in a variable name).
        "data = [3, 1, 4, 1, 5, 9, 2, 6]\n"
        "mean = sum(data) / len(dta)\n"
        "print(f'mean={mean} median=?')\n",
        # 2: runs, but the median of an even-length list is wrong (and the list is not sorted).
        "data = [3, 1, 4, 1, 5, 9, 2, 6]\n"
        "mean = sum(data) / len(data)\n"
        "median = data[len(data) // 2]\n"
        "print(f'mean={mean} median={median}')\n",
        # 3: correct.
        "import statistics\n"
        "data = [3, 1, 4, 1, 5, 9, 2, 6]\n"
        "print(f'mean={statistics.mean(data)} median={statistics.median(data)}')\n",
    ]

    def __init__(self):
        self.turn = 0

    def next_attempt(self, task, feedback):
        if self.turn >= len(self.ATTEMPTS):
            return None
        code = self.ATTEMPTS[self.turn]
        self.turn += 1
        return code


def main():
    client = Client()  # SANDFORT_BASE_URL / SANDFORT_API_KEY
    model = ScriptedModel()
    print(f"task: {TASK}")
    with client.create_sandbox(workdir="/work", labels={"example": "agent-loop"}) as sbx:  # deleted at the end
        print(f"sandbox {sbx.id} is {sbx.state}")
        sbx.fs.upload_file("/work/test_stats.py", TEST)
        feedback = None
        attempt = 0
        while True:
            code = model.next_attempt(TASK, feedback)
            if code is None:
                print(f"FAILED: no attempt passed after {attempt} tries")
                return 1
            attempt += 1
            sbx.fs.upload_file("/work/stats.py", code)
            r = sbx.process.exec("python3 test_stats.py", cwd="/work", timeout_s=30)
            errors = [line for line in r.stderr.splitlines() if "Error" in line] or r.stderr.splitlines() or [""]
            print(f"attempt {attempt}: exit_code={r.exit_code}" + (f" stderr: {errors[0].strip()}" if not r.ok else ""))
            if r.ok:
                out = sbx.process.exec("python3 stats.py", cwd="/work").stdout.strip()
                print(f"attempt {attempt} passed: {out}")
                print(f"PASSED after {attempt} attempts")
                return 0
            feedback = {"exit_code": r.exit_code, "stderr": r.stderr}


if __name__ == "__main__":
    sys.exit(main())
