"""The team server beyond loopback (issue 13, item 14): `mnemo team serve` puts the real nginx in front of the real
Chroma and every request must carry the team token; without nginx it refuses to serve beyond loopback. All servers
bind 127.0.0.1 on free ports (a loopback server with a token, or `--auth`, runs the same proxy)."""

from __future__ import annotations

import json
import os
import shutil
import signal
import ssl
import stat
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest
from team_server import (  # noqa: F401 - fixture
    TEAM_TOKEN,
    TeamServe,
    free_port,
    http_status,
    mnemo_env,
    proxied_team_server,
    require_nginx,
)

from mnemo.core.team.address import TeamSettings

pytestmark = pytest.mark.team

HEARTBEAT = "/api/v2/heartbeat"
COLLECTIONS = "/api/v2/tenants/default_tenant/databases/default_database/collections"


def mnemo(*args: str, env: dict | None = None, timeout: float = 60, cwd=None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "mnemo", *args], capture_output=True, text=True,
                          env=env or mnemo_env(), timeout=timeout, stdin=subprocess.DEVNULL, cwd=cwd)


def test_requests_without_the_right_token_get_401(proxied_team_server):  # noqa: F811
    s = proxied_team_server
    url = s.url + HEARTBEAT
    assert s.token == TEAM_TOKEN
    assert http_status(url) == 401
    assert http_status(url, {"Authorization": "Bearer " + "0" * 52}) == 401
    assert http_status(url, {"X-Chroma-Token": "0" * 52}) == 401
    assert http_status(url, {"Authorization": f"Bearer {TEAM_TOKEN}x"}) == 401  # a prefix is not the token
    assert http_status(url, {"Authorization": TEAM_TOKEN}) == 401  # no scheme
    assert http_status(url, {"Authorization": f"Bearer {TEAM_TOKEN}"}) == 200
    assert http_status(url, {"X-Chroma-Token": TEAM_TOKEN}) == 200  # chroma's own token header

    # A write without the token is refused too, and changes nothing on the server.
    name = "intruder-" + uuid.uuid4().hex[:8]
    body = json.dumps({"name": name}).encode()
    hdr = {"Content-Type": "application/json"}
    assert http_status(s.url + COLLECTIONS, hdr, "POST", body) == 401
    assert http_status(s.url + COLLECTIONS, {**hdr, "Authorization": "Bearer wrong"}, "POST", body) == 401
    import chromadb
    from chromadb.config import Settings

    client = chromadb.HttpClient(host="127.0.0.1", port=s.port, headers=TeamSettings(s.url, TEAM_TOKEN).headers(),
                                 settings=Settings(anonymized_telemetry=False))
    assert name not in [c.name for c in client.list_collections()]
    with pytest.raises(Exception, match="401|Unauthorized"):
        chromadb.HttpClient(host="127.0.0.1", port=s.port, settings=Settings(anonymized_telemetry=False))


def test_connect_takes_the_token_and_refuses_a_wrong_one(tmp_path, proxied_team_server):  # noqa: F811
    home = tmp_path / "store"
    env = mnemo_env(MNEMO_HOME=str(home))
    for var in ("MNEMO_TEAM_URL", "MNEMO_TEAM_TOKEN", "MNEMO_TEAM_CA"):
        env.pop(var, None)
    bad = mnemo("team", "connect", proxied_team_server.url, "--token", "wrong", "--json", env=env)
    assert bad.returncode != 0 and "refused" in bad.stdout, bad.stdout + bad.stderr
    assert not (home / "team.json").exists()  # nothing saved
    token_file = tmp_path / "token"
    token_file.write_text(TEAM_TOKEN + "\n")
    ok = mnemo("team", "connect", proxied_team_server.url, "--token-file", str(token_file), "--json", env=env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert json.loads(ok.stdout)["reachable"] is True
    assert stat.S_IMODE((home / "team.json").stat().st_mode) == 0o600
    st = mnemo("team", "status", "--json", env=dict(env, MNEMO_EMBEDDER="hash"), timeout=120)
    assert st.returncode == 0 and json.loads(st.stdout)["reachable"] is True, st.stdout + st.stderr
    mnemo("daemon", "stop", env=env)


def test_serving_beyond_loopback_without_nginx_refuses(tmp_path):
    """Today's bug: `--host 0.0.0.0` started Chroma on every interface with no credential check."""
    port = free_port()
    data = tmp_path / "srv"
    proc = subprocess.Popen([sys.executable, "-m", "mnemo", "team", "serve", "--path", str(data), "--host",
                             "0.0.0.0", "--port", str(port)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=mnemo_env(MNEMO_NGINX=str(tmp_path / "no-nginx")),
                            start_new_session=True)
    try:
        out, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, 9)
        proc.communicate()
        pytest.fail("`mnemo team serve --host 0.0.0.0` without nginx kept running (it serves with no token)")
    assert proc.returncode != 0
    assert "nginx" in err and "token" in err and "apt-get install -y nginx" in err, err
    assert not (data / "team-token").exists() and not (data / "chroma.sqlite3").exists()  # nothing started
    assert http_status(f"http://127.0.0.1:{port}{HEARTBEAT}") == 0  # nothing listens


def test_auth_generates_a_token_once_and_stops_cleanly(tmp_path):
    require_nginx()
    data = tmp_path / "srv"
    server = TeamServe(data, "--auth").start()
    try:
        info = server.announcement()
        token = info["new_token"]
        assert info["proxied"] is True and info["token"] == "generated" and len(token) == 64
        assert (data / "team-token").read_text().strip() == token
        assert stat.S_IMODE((data / "team-token").stat().st_mode) == 0o600
        assert stat.S_IMODE((data / "serve" / "nginx.conf").stat().st_mode) == 0o600
        assert http_status(server.url + HEARTBEAT) == 401
        assert http_status(server.url + HEARTBEAT, {"Authorization": f"Bearer {token}"}) == 200
        children = server.children()
        assert len(children) == 2, children  # chroma and the nginx master
    finally:
        rc = server.stop()
    assert rc == 0, server.stderr()
    assert "team server stopped" in server.stderr()
    assert all(not _alive(pid) for pid in children), children
    assert http_status(server.url + HEARTBEAT) == 0  # nothing listens any more

    # The next start keeps the token (members need no new setting) and does not print it again.
    again = TeamServe(data, port=server.port).start()
    try:
        info = again.announcement()
        assert info["token"] == "saved" and "new_token" not in info and token not in again.stderr()
        assert http_status(again.url + HEARTBEAT, {"X-Chroma-Token": token}) == 200
        assert http_status(again.url + HEARTBEAT) == 401
        children = again.children()
        assert len(children) == 2, children
    finally:
        again.stop(signal.SIGKILL)  # no chance to clean up: the children still go with it (PR_SET_PDEATHSIG)
    assert _wait(lambda: not any(_alive(pid) for pid in children), 20), children
    assert http_status(again.url + HEARTBEAT) == 0


def test_a_child_that_dies_takes_the_server_down(tmp_path):
    require_nginx()
    server = TeamServe(tmp_path / "srv", "--token", TEAM_TOKEN).start()
    children = server.children()
    chroma = [p for p in children if "chroma" in Path(f"/proc/{p}/cmdline").read_text()]
    assert len(chroma) == 1 and len(children) == 2, children
    os.kill(chroma[0], signal.SIGKILL)  # Chroma dies: nginx alone would answer 502 forever
    assert server.proc.wait(timeout=30) != 0
    err, out = server.stderr(), server.out.read_text()
    error = json.loads(out[out.index('{\n  "error"'):])["error"]  # --json: the announcement, then the error
    assert "chroma stopped unexpectedly" in error["message"] and "chroma.log" in error["hint"], out
    assert "Saving data to" in err and "\x1b" not in err  # chroma's log tail, coloured lines as plain text
    assert _wait(lambda: not any(_alive(pid) for pid in children), 20), children
    assert http_status(server.url + HEARTBEAT) == 0


def test_tls_with_a_ca_certificate(tmp_path):
    require_nginx()
    openssl = shutil.which("openssl")
    if openssl is None:
        pytest.skip("the openssl command is needed to make a test certificate (apt-get install openssl)")
    cert, key = tmp_path / "cert.pem", tmp_path / "key.pem"
    subprocess.run([openssl, "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out",
                    str(cert), "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True)
    server = TeamServe(tmp_path / "srv", "--token", TEAM_TOKEN, "--tls-cert", str(cert), "--tls-key",
                       str(key)).start()
    try:
        assert server.url.startswith("https://")
        ctx = ssl.create_default_context(cafile=str(cert))
        assert http_status(server.url + HEARTBEAT, context=ctx) == 401
        assert http_status(server.url + HEARTBEAT, {"Authorization": f"Bearer {TEAM_TOKEN}"}, context=ctx) == 200
        env = mnemo_env(MNEMO_HOME=str(tmp_path / "store"))
        for var in ("MNEMO_TEAM_URL", "MNEMO_TEAM_TOKEN", "MNEMO_TEAM_CA"):
            env.pop(var, None)
        untrusted = mnemo("team", "connect", server.url, "--token", TEAM_TOKEN, "--json", env=env)
        assert json.loads(untrusted.stdout)["reachable"] is False  # a self-signed cert is not trusted by default
        ok = mnemo("team", "connect", server.url, "--token", TEAM_TOKEN, "--ca-cert", str(cert), "--json", env=env)
        assert ok.returncode == 0 and json.loads(ok.stdout)["reachable"] is True, ok.stdout + ok.stderr
        saved = json.loads((tmp_path / "store" / "team.json").read_text())
        assert saved["ca_cert"] == str(cert.resolve())
        # The owner's chromadb client goes through TLS with that CA: a promotion lands on the server.
        ctx_user = dict(env, MNEMO_EMBEDDER="hash", MNEMO_USER="tess")
        repo = tmp_path / "repo"
        repo.mkdir()
        rem = mnemo("remember", "the ledger rounds half-even", "--json", env=ctx_user, timeout=120, cwd=repo)
        assert rem.returncode == 0, rem.stdout + rem.stderr
        mid = json.loads(rem.stdout)["memory"]["id"]
        pro = mnemo("promote", mid, "--to", "team", "--json", env=ctx_user, timeout=120, cwd=repo)
        assert pro.returncode == 0 and json.loads(pro.stdout)["status"] == "promoted", pro.stdout + pro.stderr
        mnemo("daemon", "stop", env=env)
    finally:
        assert server.stop() == 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False



def _wait(pred, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.1)
    return pred()
