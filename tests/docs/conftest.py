"""Fixtures of the doc-block tests: one daemon and one DocSession per doc file, opened at its first
block and closed when the blocks of the next file start (tests run in document order)."""

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(os.path.dirname(HERE), "integration"))

from doc_blocks import DocSession  # noqa: E402
from sandfort_harness import Daemon  # noqa: E402


class Sessions:
    def __init__(self):
        self.current = None  # (path, daemon, DocSession)

    def get(self, path):
        if self.current and self.current[0] == path:
            return self.current[2]
        self.close()
        daemon = Daemon({"log_level": "warn"})
        try:
            daemon.start()
            session = DocSession(path, daemon)
        except BaseException:
            daemon.cleanup()
            raise
        self.current = (path, daemon, session)
        return session

    def daemon_log(self):
        return self.current[1].log() if self.current else ""

    def close(self):
        if self.current is None:
            return
        _, daemon, session = self.current
        self.current = None
        try:
            session.close()
        finally:
            daemon.stop()
            daemon.cleanup()


@pytest.fixture(scope="session")
def doc_sessions():
    sessions = Sessions()
    yield sessions
    sessions.close()


def pytest_terminal_summary(terminalreporter):
    from doc_blocks import not_run_blocks
    blocks = not_run_blocks()
    if blocks:
        terminalreporter.section("doc blocks not run (their marker's reason)")
        for b in blocks:
            terminalreporter.write_line(f"{b.id} ```{b.lang}: {b.not_run}")
