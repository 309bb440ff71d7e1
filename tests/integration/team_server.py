"""A real Chroma server for team tests: `chroma run --path <tmp> --host 127.0.0.1 --port <free>`, polled on
`/api/v2/heartbeat`, stopped with SIGTERM (or killed, to test outages). Import the fixtures into a test module:

    from team_server import ChromaServer, chroma_server  # noqa: F401
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def chroma_executable() -> str | None:
    beside = Path(sys.executable).parent / "chroma"
    return str(beside) if beside.exists() else shutil.which("chroma")


class ChromaServer:
    def __init__(self, path: Path, port: int | None = None, log: Path | None = None):
        self.path = Path(path)
        self.port = port or free_port()
        self.log = log or self.path.parent / f"chroma-{self.port}.log"
        self.proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.url}/api/v2/heartbeat", timeout=0.5) as r:
                return r.status == 200
        except OSError:
            return False

    def start(self, timeout: float = 30.0) -> ChromaServer:
        exe = chroma_executable()
        if exe is None:
            pytest.skip("the `chroma` CLI is not installed")
        self.path.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ, ANONYMIZED_TELEMETRY="False")
        with open(self.log, "ab") as logf:
            self.proc = subprocess.Popen(
                [exe, "run", "--path", str(self.path), "--host", "127.0.0.1", "--port", str(self.port)],
                stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.healthy():
                return self
            if self.proc.poll() is not None:
                raise RuntimeError(f"chroma exited with {self.proc.returncode}; see {self.log}")
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"chroma did not answer on {self.url} within {timeout:.0f} s; see {self.log}")

    def stop(self, sig: int = signal.SIGTERM) -> None:
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        self.proc = None

    def kill(self) -> None:
        """An outage: SIGKILL, no chance to flush or say goodbye."""
        self.stop(signal.SIGKILL)


@pytest.fixture(scope="session")
def chroma_server(tmp_path_factory):
    server = ChromaServer(tmp_path_factory.mktemp("chroma") / "data").start()
    yield server
    server.stop()
