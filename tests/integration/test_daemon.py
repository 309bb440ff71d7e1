"""The owner process: CLI through it, concurrent writers, SIGKILL mid-write, version handshake, idle exit."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import run_cli
from mnemo.core.identity import detect_context
from mnemo.daemon.client import DaemonService
from mnemo.daemon.paths import info_path, socket_path

WRITER = Path(__file__).with_name("_writer.py")
HASH_ENV = {"MNEMO_EMBEDDER": "hash"}


@pytest.fixture
def owner_home(home, monkeypatch):
    """A store whose owner (started by whichever client comes first) is stopped at teardown."""
    monkeypatch.setenv("MNEMO_HOME", str(home))
    yield home
    DaemonService(home, autostart=False).shutdown()
    for _ in range(100):
        if not socket_path(home).exists():
            break
        time.sleep(0.05)


def start_writer(home: Path, root: Path, tag: str, n: int, env: dict | None = None) -> subprocess.Popen:
    e = dict(os.environ, MNEMO_HOME=str(home), **(env or {}))
    return subprocess.Popen([sys.executable, str(WRITER), str(home), str(root), tag, str(n)], env=e,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def wait_caught_up(svc: DaemonService, ctx: dict, timeout: float = 60) -> dict:
    deadline = time.time() + timeout
    while time.time() < deadline:
        st = svc.stats(ctx)
        if st["index"]["ready"] and st["index"]["indexed_seq"] >= st["index"]["store_seq"]:
            return st
        time.sleep(0.1)
    raise AssertionError(f"index did not catch up: {st['index']}")


def assert_all_findable(home: Path, ctx: dict, acked: dict[str, str]) -> None:
    """Every acknowledged memory exists exactly once and a vector query for its own text returns it first."""
    svc = DaemonService(home)
    try:
        wait_caught_up(svc, ctx)  # the dense index has replayed everything: recall uses chroma, not the tail scan
        listed = svc.list_memories(ctx, limit=100000)["memories"]
        texts = [m["text"] for m in listed]
        assert len(texts) == len(set(texts)), "duplicate memories"
        by_id = {m["id"]: m for m in listed}
        missing = [i for i in acked if i not in by_id]
        assert not missing, f"lost {len(missing)} acknowledged writes"
        unfindable = []
        for mem_id in acked:
            res = svc.recall(ctx, by_id[mem_id]["text"], limit=1, include_docs=False, scope="project")
            if not res["cards"] or res["cards"][0]["item_id"] != mem_id:
                unfindable.append(mem_id)
            assert not any("exact scan" in w for w in res["warnings"])
        assert not unfindable, f"{len(unfindable)} acknowledged memories unfindable by a vector query"
    finally:
        svc.close()


def test_cli_remember_then_recall_returns_it_first(owner_home, git_repo):
    r = run_cli("remember", "payments API requires idempotency keys on every POST", "--type", "project",
                home=owner_home, cwd=git_repo)
    assert r.returncode == 0, r.stderr
    assert "remembered" in r.stdout
    for text in ("The CI runs on two cores", "Use structlog for logging in services",
                 "Front-end state lives in a Redux store"):
        assert run_cli("remember", text, home=owner_home, cwd=git_repo).returncode == 0
    r = run_cli("recall", "how do I make POST requests safe to retry?", "--json", home=owner_home, cwd=git_repo)
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    card = out["cards"][0]
    assert card["compressed_summary"] == "payments API requires idempotency keys on every POST"
    for field in ("scope", "project_id", "project_name", "source_kind", "item_id", "block_id", "source_path", "title",
                  "heading_path", "updated_at", "score", "confidence", "confidence_state", "compressed_summary",
                  "key_points", "can_hydrate"):
        assert field in card
    assert card["scope"] == "project" and card["project_name"] == "payments" and card["source_kind"] == "note"
    assert card["branch"] == "main" and card["type"] == "project"
    # human output too
    r = run_cli("recall", "how do I make POST requests safe to retry?", home=owner_home, cwd=git_repo)
    assert "idempotency" in r.stdout and "project" in r.stdout


@pytest.mark.parametrize("writers", [2, 8])
def test_concurrent_writers_lose_nothing(owner_home, git_repo, writers):
    n = 40 if writers == 2 else 25
    procs = [start_writer(owner_home, git_repo, f"w{k}", n, HASH_ENV) for k in range(writers)]
    acked: dict[str, str] = {}
    owners = set()
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        for line in out.splitlines():
            if line.startswith("ACK"):
                _, mem_id, i, status = line.split()
                assert status == "created"
                acked[mem_id] = i
            elif line.startswith("OWNER"):
                owners.add(line.split()[1])
    assert len(acked) == writers * n
    assert len(owners) == 1, "all clients share one owner process"
    assert_all_findable(owner_home, detect_context(git_repo).to_dict(), acked)


def test_sigkill_owner_mid_write_loses_no_acknowledged_write(owner_home, git_repo):
    p = start_writer(owner_home, git_repo, "k", 150, HASH_ENV)
    acked: dict[str, str] = {}
    first_owner = None
    killed = 0
    for line in p.stdout:
        if line.startswith("OWNER"):
            first_owner = int(line.split()[1])
        elif line.startswith("ACK"):
            _, mem_id, i, _status = line.split()
            acked[mem_id] = i
            if int(i) in (40, 100):  # kill the current owner twice in the middle of the loop
                pid = json.loads(info_path(owner_home).read_text())["pid"]
                os.kill(pid, signal.SIGKILL)
                killed += 1
    p.wait(timeout=120)
    assert p.returncode == 0, p.stderr.read()
    assert killed == 2 and first_owner
    assert len(set(acked.values())) == 150  # every note acknowledged (a retried one may be a confirmation)
    new_pid = json.loads(info_path(owner_home).read_text())["pid"]
    assert new_pid != first_owner
    assert_all_findable(owner_home, detect_context(git_repo).to_dict(), acked)


def test_owner_of_another_version_gives_clear_error_and_changes_nothing(home, git_repo):
    code = ("import sys, mnemo; mnemo.PROTOCOL_VERSION = 999\n"
            "from mnemo.daemon.server import run_owner\n"
            "sys.exit(run_owner(__import__('pathlib').Path(sys.argv[1]), idle_timeout=60))")
    env = dict(os.environ, MNEMO_EMBEDDER="hash")
    old = subprocess.Popen([sys.executable, "-c", code, str(home)], env=env, stderr=subprocess.DEVNULL)
    try:
        for _ in range(200):
            if socket_path(home).exists():
                break
            time.sleep(0.05)
        r = run_cli("remember", "should not be stored", home=home, cwd=git_repo)
        assert r.returncode == 2
        assert "protocol 999" in r.stderr and "mnemo daemon stop" in r.stderr
        r = run_cli("recall", "anything", "--json", home=home, cwd=git_repo)
        err = json.loads(r.stdout)["error"]
        assert err["type"] == "VersionMismatch" and str(old.pid) in err["hint"]
    finally:
        old.terminate()
        old.wait(timeout=30)
    import sqlite3

    conn = sqlite3.connect(home / "mnemo.db")
    assert conn.execute("SELECT COUNT(*) FROM memories").fetchone()[0] == 0


def test_socket_is_user_only_status_stop_and_idle_exit(home, git_repo):
    env = {"MNEMO_IDLE_TIMEOUT": "2", **HASH_ENV}
    r = run_cli("daemon", "start", "--json", home=home, cwd=git_repo, env=env)
    assert r.returncode == 0, r.stderr
    pid = json.loads(r.stdout)["pid"]
    mode = stat.S_IMODE(os.stat(socket_path(home)).st_mode)
    assert mode == 0o600
    st = json.loads(run_cli("daemon", "status", "--json", home=home, cwd=git_repo).stdout)
    assert st["running"] and st["pid"] == pid
    deadline = time.time() + 30
    while time.time() < deadline and socket_path(home).exists():
        time.sleep(0.2)
    assert not socket_path(home).exists(), "owner did not exit when idle"
    with pytest.raises(ProcessLookupError):
        for _ in range(50):
            os.kill(pid, 0)
            time.sleep(0.1)
    # stop: explicit
    r = run_cli("daemon", "start", "--json", home=home, cwd=git_repo, env=HASH_ENV)
    r = run_cli("daemon", "stop", "--json", home=home, cwd=git_repo)
    assert json.loads(r.stdout)["stopped"]
    assert not json.loads(run_cli("daemon", "status", "--json", home=home, cwd=git_repo).stdout)["running"]


def test_store_held_in_process_gives_a_clear_error(home, hash_embedder, monkeypatch):
    from mnemo.core.engine import Engine
    from mnemo.core.errors import DaemonError
    from mnemo.daemon import client

    monkeypatch.setattr(client, "START_TIMEOUT", 2.0)
    holder = Engine(home, embedder=hash_embedder)  # like `mnemo --no-daemon` in another terminal
    try:
        started = time.time()
        with pytest.raises(DaemonError) as exc:
            DaemonService(home).connect()
        assert "does not answer" in exc.value.message and "--no-daemon" in exc.value.hint
        assert time.time() - started < 10
        assert not socket_path(home).exists()  # no owner was started behind the holder's back
    finally:
        holder.close()


def test_owner_refuses_arguments_a_method_does_not_take_naming_the_accepted_ones(owner_home, git_repo, monkeypatch):
    from mnemo.core.errors import InvalidInput

    monkeypatch.setenv("MNEMO_EMBEDDER", "hash")
    ctx = detect_context(git_repo).to_dict()
    svc = DaemonService(owner_home)
    try:
        svc.connect()
        with svc._lock:  # straight onto the wire, past the client's own check (an older or foreign client)
            with pytest.raises(InvalidInput) as err:
                svc._request("recall", {"ctx": ctx, "query": "retries", "lmit": 3})
            assert "recall does not take `lmit`" in err.value.message
            assert err.value.hint.startswith("recall takes: ctx (required), query (required), scope, limit")
            with pytest.raises(InvalidInput, match="does not take `progress`"):  # a callable never crosses
                svc._request("index_docs", {"ctx": ctx, "progress": 1})
            with pytest.raises(InvalidInput, match="stats does not report progress"):
                svc._request("stats", {"ctx": ctx}, progress=lambda _p: None)
            with pytest.raises(InvalidInput, match="missing a required argument: 'text'"):
                svc._request("remember", {"ctx": ctx})
        assert svc.list_memories(ctx)["total"] == 0  # nothing was stored; the connection still serves
    finally:
        svc.close()


def test_owner_starts_without_the_cli(owner_home, git_repo, monkeypatch):
    """Issue 22: `python -m mnemo daemon run` (what a client spawns) goes straight to the owner, without building
    the CLI's parser of every command (its modules cost ~0.2 s of CPU on every cold start); the owner it starts
    serves as before, and any other argument still goes through the CLI."""
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")  # the owner's stderr is its log: it lists what it imported
    svc = DaemonService(owner_home, client_name="test")
    try:
        svc.connect()
        ctx = detect_context(git_repo).to_dict()
        assert svc.remember(ctx, "the owner starts without the CLI's modules")["status"] in ("created", "stored")
        assert svc.recall(ctx, "owner starts without the CLI")["cards"]
    finally:
        svc.shutdown()
    from mnemo.daemon.paths import log_path

    imported = [line.rsplit("|", 1)[-1].strip() for line in log_path(owner_home).read_text().splitlines()
                if line.startswith("import time:")]
    assert "mnemo.daemon.server" in imported
    assert not [m for m in imported if m.startswith("mnemo.cli")], "the owner imported the CLI"
    monkeypatch.delenv("PYTHONPROFILEIMPORTTIME")
    r = run_cli("daemon", "run", "--bogus", home=owner_home, cwd=git_repo)
    assert r.returncode == 2 and "--bogus" in r.stderr  # the CLI's own error for what the fast path does not take
