"""A real Chroma server for team tests: `chroma run --path <tmp> --host 127.0.0.1 --port <free>`, polled on
`/api/v2/heartbeat`, stopped with SIGTERM (or killed, to test outages); and `mnemo team serve` itself with a token
(Chroma behind the real nginx, on 127.0.0.1 free ports). Import the fixtures into a test module:

    from team_server import ChromaServer, chroma_server, proxied_team_server  # noqa: F401
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
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


def require_nginx() -> str:
    """nginx's path. When it is missing and this is a Debian/Ubuntu machine where we are root, install it from the
    distribution (as scripts/test.sh does); skip with the reason only when that is impossible."""
    from mnemo.core.team.server import find_nginx

    exe = find_nginx()
    if exe is not None:
        return exe
    if os.environ.get("MNEMO_NGINX"):
        pytest.skip(f"MNEMO_NGINX={os.environ['MNEMO_NGINX']} is not an executable")
    apt = shutil.which("apt-get")
    if apt is None or os.geteuid() != 0:
        pytest.skip("nginx is not installed and cannot be installed here (needs apt-get as root): "
                    "`sudo apt-get install -y nginx`; scripts/test.sh (CI) installs it")
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive")
    log = ""
    for cmd in ([apt, "install", "-y", "-q", "--no-install-recommends", "nginx"],
                [apt, "update", "-q"], [apt, "install", "-y", "-q", "--no-install-recommends", "nginx"]):
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
        log = (r.stdout + r.stderr)[-800:]
        if find_nginx() is not None:
            return str(find_nginx())
    pytest.skip(f"nginx is not installed and `apt-get install nginx` failed: {log}")


def mnemo_env(**extra: str) -> dict[str, str]:
    """The environment for a `python -m mnemo` child: this checkout's code first."""
    src = str(Path(__file__).resolve().parents[2] / "server")
    path = os.pathsep.join(p for p in (src, os.environ.get("PYTHONPATH", "")) if p)
    return dict(os.environ, PYTHONPATH=path, ANONYMIZED_TELEMETRY="False", **extra)


def http_status(url: str, headers: dict[str, str] | None = None, method: str = "GET", body: bytes | None = None,
                context=None) -> int:
    req = urllib.request.Request(url, data=body, headers=headers or {}, method=method)
    try:
        with urllib.request.urlopen(req, timeout=5, context=context) as r:
            return r.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except (urllib.error.URLError, ConnectionError):
        return 0  # nothing answers


class TeamServe:
    """`python -m mnemo team serve --host 127.0.0.1 --port <free> ...` as a child process (what a user runs)."""

    def __init__(self, path: Path, *args: str, port: int | None = None, env: dict[str, str] | None = None):
        self.path = Path(path)
        self.port = port or free_port()
        self.args = list(args)
        self.env = env or mnemo_env()
        self.proc: subprocess.Popen | None = None
        self.out = self.path.parent / f"serve-{self.port}.out"
        self.err = self.path.parent / f"serve-{self.port}.err"

    @property
    def scheme(self) -> str:
        return "https" if "--tls-cert" in self.args else "http"

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    @property
    def token(self) -> str:
        return (self.path / "team-token").read_text().strip()

    def argv(self) -> list[str]:
        return [sys.executable, "-m", "mnemo", "team", "serve", "--path", str(self.path), "--host", "127.0.0.1",
                "--port", str(self.port), "--json", *self.args]

    def start(self, timeout: float = 60.0) -> TeamServe:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.out, "wb") as out, open(self.err, "wb") as err:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=out, stderr=err,
                                         env=self.env, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:  # ready = the JSON announcement is out (after both answered)
            if self.proc.poll() is not None:
                raise RuntimeError(f"mnemo team serve exited with {self.proc.returncode}: {self.stderr()}")
            if self.out.exists() and self.out.read_text().rstrip().endswith("}"):
                return self
            time.sleep(0.1)
        self.stop()
        raise RuntimeError(f"mnemo team serve was not ready within {timeout:.0f} s: {self.stderr()}")

    def announcement(self) -> dict:
        import json

        return json.loads(self.out.read_text())

    def stderr(self) -> str:
        return self.err.read_text(errors="replace") if self.err.exists() else ""

    def children(self) -> list[int]:
        assert self.proc is not None
        try:
            return [int(x) for x in Path(f"/proc/{self.proc.pid}/task/{self.proc.pid}/children").read_text().split()]
        except OSError:
            return []

    def stop(self, sig: int = signal.SIGTERM) -> int | None:
        if self.proc is None:
            return None
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
            try:
                self.proc.wait(timeout=40)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        rc, self.proc = self.proc.returncode, None
        return rc


TEAM_TOKEN = "t0ken-for-the-tests-" + "0123456789abcdef" * 2


@pytest.fixture(scope="session")
def proxied_team_server(tmp_path_factory):
    """`mnemo team serve --token ...`: nginx on a free 127.0.0.1 port checks the token, Chroma behind it."""
    require_nginx()
    server = TeamServe(tmp_path_factory.mktemp("team-serve") / "data", "--token", TEAM_TOKEN).start()
    yield server
    server.stop()
