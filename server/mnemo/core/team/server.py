"""`mnemo team serve`: a Chroma server for the team, behind an authenticating nginx when it is reachable from the
network. The open-source Chroma server checks no credential, so:

- loopback only (127.0.0.1, ::1, localhost) and no token: Chroma alone on HOST:PORT, tokenless (only this machine
  can reach it);
- any other address, or a token, `--auth` or a TLS certificate: Chroma on 127.0.0.1 on a free port, and nginx on
  HOST:PORT checking the team token (`Authorization: Bearer <token>` or `X-Chroma-Token: <token>`; anything else
  gets 401), with TLS when a certificate is given. Without nginx this refuses to start.

Both run as child processes of `mnemo team serve` (their own session; they die with it on Linux), with their config,
pid and logs under `<data>/serve/`; SIGTERM or Ctrl-C stops nginx, then Chroma, and returns 0. The token is kept in
`<data>/team-token` (mode 0600): given (`--token`/`--token-file`), else the saved one, else generated (shown once).
"""

from __future__ import annotations

import functools
import ipaddress
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from mnemo.core import environment
from mnemo.core.errors import InvalidInput, MnemoError

TOKEN_FILE = "team-token"
SERVE_DIR = "serve"
TOKEN_RE = re.compile(r"[a-z0-9._-]{32,256}")
NGINX_HINT = ("install nginx (Debian/Ubuntu: `sudo apt-get install -y nginx`; Fedora: `sudo dnf install nginx`;"
              " macOS: `brew install nginx`) or point MNEMO_NGINX at it; or serve on 127.0.0.1 only")


def is_loopback(host: str) -> bool:
    if host.lower() == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def find_chroma() -> str | None:
    """The `chroma` CLI next to this interpreter (the venv), else on PATH."""
    beside = Path(sys.executable).parent / "chroma"
    return str(beside) if beside.exists() else shutil.which("chroma")


def find_nginx() -> str | None:
    """`MNEMO_NGINX` if set (and executable), else `nginx` on PATH or in the sbin directories."""
    forced = environment.raw("MNEMO_NGINX")
    if forced:
        return forced if os.path.isfile(forced) and os.access(forced, os.X_OK) else None
    path = os.pathsep.join([os.environ.get("PATH", ""), "/usr/sbin", "/usr/local/sbin", "/sbin"])
    return shutil.which("nginx", path=path)


def check_token(token: str) -> str:
    token = token.strip()
    if not TOKEN_RE.fullmatch(token):
        raise InvalidInput("the team token must be 32-256 characters of lowercase letters, digits, '.', '_' or '-'"
                           " (nginx compares header values case-insensitively, so capitals would add nothing)",
                           hint="let `mnemo team serve` generate one, or use `openssl rand -hex 32`")
    return token


def write_private(path: Path, text: str) -> None:
    """Write a file only its owner can read (mode 0600 from the start), atomically."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(text if text.endswith("\n") else text + "\n")
    os.replace(tmp, path)


def resolve_token(data: Path, given: str | None, want: bool) -> tuple[str | None, str]:
    """(token, how): `given` wins (saved for the next start), else the saved token, else a new one when `want`.
    `how` is given | saved | generated | none."""
    path = data / TOKEN_FILE
    if given:
        token = check_token(given)
        write_private(path, token)
        return token, "given"
    if path.exists():
        try:
            return check_token(path.read_text()), "saved"
        except InvalidInput as exc:
            raise InvalidInput(f"{path} does not hold a valid team token: {exc.message}",
                               hint=f"delete {path} to have a new one generated, or pass --token") from exc
    if not want:
        return None, "none"
    token = secrets.token_hex(32)
    write_private(path, token)
    return token, "generated"


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket() as s:
        s.bind((host, 0))
        return s.getsockname()[1]


@dataclass
class ServePlan:
    data: Path
    host: str
    port: int
    token: str | None = None
    token_how: str = "none"
    tls_cert: Path | None = None
    tls_key: Path | None = None
    internal_port: int | None = None  # Chroma's port behind the proxy

    @property
    def proxied(self) -> bool:
        return self.token is not None

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"

    @property
    def serve_dir(self) -> Path:
        return self.data / SERVE_DIR

    @property
    def token_file(self) -> Path:
        return self.data / TOKEN_FILE

    def url(self, host: str | None = None) -> str:
        h = host or self.host
        if h in ("0.0.0.0", "::"):
            h = socket.gethostname()
        return f"{self.scheme}://{_bracket(h)}:{self.port}"

    def probe_url(self) -> str:
        """Where this machine reaches the public side (for the readiness check)."""
        h = {"0.0.0.0": "127.0.0.1", "::": "::1"}.get(self.host, self.host)
        return f"{self.scheme}://{_bracket(h)}:{self.port}/api/v2/heartbeat"


def _bracket(host: str) -> str:
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def plan_serve(data: Path, host: str, port: int, token: str | None = None, auth: bool = False,
               tls_cert: Path | None = None, tls_key: Path | None = None, nginx: str | None = None) -> ServePlan:
    """Decide what runs: tokenless Chroma on loopback, or Chroma behind nginx with a token (and TLS). Refuses,
    before writing anything, when the token is needed and `nginx` (its path) is None."""
    if bool(tls_cert) != bool(tls_key):
        raise InvalidInput("TLS needs both --tls-cert and --tls-key", hint="pass the certificate and its key")
    for f in (tls_cert, tls_key):
        if f is not None and not f.is_file():
            raise InvalidInput(f"{f} is not a readable file", hint="pass the PEM certificate and key files")
    if token is not None:
        token = check_token(token)
    want = auth or bool(tls_cert) or not is_loopback(host)
    if (want or token or (data / TOKEN_FILE).exists()) and nginx is None:
        why = f"serving on {host}" if not is_loopback(host) else "a team token (or TLS)"
        raise MnemoError(f"{why} needs nginx in front of Chroma to check the team token, and nginx was not found"
                         " (the open-source Chroma server checks no credential); nothing was started",
                         hint=NGINX_HINT)
    data.mkdir(parents=True, exist_ok=True)
    tok, how = resolve_token(data, token, want)
    plan = ServePlan(data, host, port, tok, how, tls_cert and tls_cert.resolve(), tls_key and tls_key.resolve())
    if plan.proxied:
        plan.internal_port = free_port()
    return plan


# -- nginx -------------------------------------------------------------------------------------------------------
def nginx_conf(plan: ServePlan) -> str:
    """The proxy's whole config: nothing from /etc/nginx is read. Every request must carry the token."""
    d = plan.serve_dir
    listen = f"{_bracket(plan.host)}:{plan.port}" + (" ssl" if plan.tls_cert else "")
    tls = (f"    ssl_certificate {plan.tls_cert};\n    ssl_certificate_key {plan.tls_key};\n"
           "    ssl_protocols TLSv1.2 TLSv1.3;\n" if plan.tls_cert else "")
    body = '{"error":"Unauthorized","message":"missing or wrong team token (send Authorization: Bearer <token>)"}'
    return f"""# generated by `mnemo team serve`; rewritten at every start. Holds the team token: mode 0600.
daemon off;
master_process on;
worker_processes 1;
pid {d / "nginx.pid"};
error_log {d / "nginx-error.log"} warn;
events {{ worker_connections 512; }}
http {{
  access_log {d / "nginx-access.log"};
  server_tokens off;
  map_hash_bucket_size 512;  # one key holds "Bearer <token>" (up to 263 bytes)
  client_body_temp_path {d / "tmp" / "body"};
  proxy_temp_path {d / "tmp" / "proxy"};
  fastcgi_temp_path {d / "tmp" / "fastcgi"};
  uwsgi_temp_path {d / "tmp" / "uwsgi"};
  scgi_temp_path {d / "tmp" / "scgi"};
  map $http_authorization $mnemo_bearer_ok {{ default 0; "Bearer {plan.token}" 1; }}
  map $http_x_chroma_token $mnemo_header_ok {{ default 0; "{plan.token}" 1; }}
  map "$mnemo_bearer_ok$mnemo_header_ok" $mnemo_denied {{ default 0; "00" 1; }}
  server {{
    listen {listen};
{tls}    client_max_body_size 256m;
    location / {{
      if ($mnemo_denied) {{
        add_header WWW-Authenticate 'Bearer realm="mnemo-team"' always;
        return 401 '{body}\\n';
      }}
      proxy_pass http://127.0.0.1:{plan.internal_port};
      proxy_http_version 1.1;
      proxy_set_header Connection "";
      proxy_set_header Host $http_host;
      proxy_set_header Authorization "";
      proxy_set_header X-Chroma-Token "";
      proxy_set_header X-Forwarded-For $proxy_add_x_forwarded_for;
      proxy_set_header X-Forwarded-Proto $scheme;
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 300s;
      proxy_send_timeout 300s;
    }}
  }}
}}
"""


def write_nginx_conf(plan: ServePlan) -> Path:
    (plan.serve_dir / "tmp").mkdir(parents=True, exist_ok=True)
    path = plan.serve_dir / "nginx.conf"
    write_private(path, nginx_conf(plan))  # 0600: it holds the token
    return path


def nginx_argv(exe: str, plan: ServePlan, conf: Path, test: bool = False) -> list[str]:
    argv = [exe, "-p", f"{plan.serve_dir}/", "-c", str(conf)]
    if _nginx_has_e(exe):  # 1.19.5+: the early error log goes to our file, not /var/log/nginx
        argv += ["-e", str(plan.serve_dir / "nginx-error.log")]
    return argv + (["-t", "-q"] if test else [])


def _nginx_has_e(exe: str) -> bool:
    try:
        out = subprocess.run([exe, "-v"], capture_output=True, text=True, timeout=10).stderr
    except (OSError, subprocess.SubprocessError):
        return False
    m = re.search(r"nginx/(\d+)\.(\d+)\.(\d+)", out)
    return m is not None and tuple(int(x) for x in m.groups()) >= (1, 19, 5)


# -- the two processes -------------------------------------------------------------------------------------------
class ServeFailed(MnemoError):
    """Chroma or nginx would not start or stopped; `details["log_tail"]` holds the end of its log."""

    code = "team_serve_failed"


@functools.cache
def _libc():
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        return ctypes.CDLL(None, use_errno=True)
    except OSError:
        return None


def _die_with_parent_hook():
    """For Popen's preexec_fn: PR_SET_PDEATHSIG, so a SIGKILLed `mnemo team serve` leaves no server behind."""
    libc = _libc()  # loaded here, in the parent: the hook itself only makes the system call
    return (lambda: libc.prctl(1, signal.SIGTERM)) if libc is not None else None


_ESCAPES = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?|\x1b.?|[\x00-\x08\x0b-\x1f\x7f]")


def log_tail(path: Path, lines: int = 15) -> str:
    """The end of a child's log as plain text: its colours and any other terminal control sequence removed."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(_ESCAPES.sub("", text).splitlines()[-lines:])


def check_port_free(host: str, port: int) -> None:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host.strip("[]"), port))
        except OSError as exc:
            raise InvalidInput(f"cannot listen on {_bracket(host)}:{port}: {exc.strerror}",
                               hint="pick another --port, or stop what is using it") from exc


class TeamServer:
    """Chroma (and nginx in front of it when the plan has a token) as child processes of this one."""

    def __init__(self, plan: ServePlan, chroma: str, nginx: str | None = None):
        self.plan = plan
        self.exe = {"chroma": chroma, "nginx": nginx}
        self.procs: dict[str, subprocess.Popen] = {}
        self.logs = {"chroma": plan.serve_dir / "chroma.log", "nginx": plan.serve_dir / "nginx-error.log"}

    def start(self, timeout: float = 60.0, stop: threading.Event | None = None) -> None:
        """Start Chroma, then nginx, each once the previous answers; returns early when `stop` is set."""
        plan = self.plan
        plan.serve_dir.mkdir(parents=True, exist_ok=True)
        check_port_free(plan.host, plan.port)
        conf = None
        if plan.proxied:
            conf = write_nginx_conf(plan)
            self._nginx_config_test(conf)
        host, port = ("127.0.0.1", plan.internal_port) if plan.proxied else (plan.host, plan.port)
        try:
            self._spawn("chroma", [str(self.exe["chroma"]), "run", "--path", str(plan.data), "--host", host,
                                   "--port", str(port)])
            self._wait_ready("chroma", f"http://{_bracket(host)}:{port}/api/v2/heartbeat", None, timeout, stop)
            if conf is not None and not (stop and stop.is_set()):
                self._spawn("nginx", nginx_argv(str(self.exe["nginx"]), plan, conf))
                self._wait_ready("nginx", plan.probe_url(), {"Authorization": f"Bearer {plan.token}"}, timeout,
                                 stop)
        except BaseException:
            self.stop()
            raise

    def _nginx_config_test(self, conf: Path) -> None:
        exe = self.exe["nginx"]
        if exe is None:
            raise MnemoError("nginx is needed to check the team token and was not found", hint=NGINX_HINT)
        r = subprocess.run(nginx_argv(exe, self.plan, conf, test=True), capture_output=True, text=True,
                           timeout=30, stdin=subprocess.DEVNULL)
        if r.returncode != 0:
            raise ServeFailed(f"nginx refused the generated config {conf}", hint=f"see {self.logs['nginx']}",
                              log_tail=(r.stderr or r.stdout)[-2000:])

    def _spawn(self, name: str, argv: list[str]) -> None:
        env = dict(os.environ, ANONYMIZED_TELEMETRY="False")
        with open(self.logs[name], "ab") as logf:
            self.procs[name] = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=logf, stderr=logf, env=env,
                                                start_new_session=True, preexec_fn=_die_with_parent_hook())

    def _wait_ready(self, name: str, url: str, headers: dict | None, timeout: float,
                    stop: threading.Event | None) -> None:
        import httpx

        proc = self.procs[name]
        deadline = time.monotonic() + timeout
        status = None
        while time.monotonic() < deadline and not (stop and stop.is_set()):
            if proc.poll() is not None:
                raise ServeFailed(f"{name} exited with code {proc.returncode} while starting",
                                  hint=f"see {self.logs[name]}", log_tail=log_tail(self.logs[name]))
            try:
                status = httpx.get(url, headers=headers, verify=False, timeout=1.0).status_code
                if status == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        if stop and stop.is_set():
            return
        raise ServeFailed(f"{name} did not answer on {url} within {timeout:.0f} s (last status {status})",
                          hint=f"see {self.logs[name]}", log_tail=log_tail(self.logs[name]))

    def wait(self, stop: threading.Event, poll: float = 0.5) -> str | None:
        """Block until `stop` is set (None) or a child exits (its name)."""
        while not stop.wait(poll):
            for name, proc in self.procs.items():
                if proc.poll() is not None:
                    return name
        return None

    def stop(self) -> None:
        """nginx first (graceful SIGQUIT), then Chroma (SIGTERM); each is killed if it does not exit in time."""
        for name, sig, grace in (("nginx", signal.SIGQUIT, 10.0), ("chroma", signal.SIGTERM, 20.0)):
            proc = self.procs.pop(name, None)
            if proc is None or proc.poll() is not None:
                continue
            proc.send_signal(sig)
            try:
                proc.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=5)
