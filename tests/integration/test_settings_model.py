"""The settings model (docs/reliability.md, "The settings model"), against a real owner process.

Request-shaped settings (write policy, conflict resolution, secrets mode, author) travel with each request: a client
whose environment says `confirm` gets its agent writes held in Review by an owner that was started with defaults,
over the CLI and over the MCP server the VS Code extension registers for chat agents. Store-wide settings live in
`<store>/config.json` (`mnemo config`): validated, shown by `mnemo daemon status` and `mnemo doctor`, applied by a
running owner at once (or the command says a restart is needed); a client's environment that a running owner does
not apply is reported, never silently ignored.
"""

from __future__ import annotations

import json
import os
import sys
import time
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from conftest import run_cli
from mnemo.daemon.client import DaemonService
from mnemo.daemon.paths import socket_path

HASH = {"MNEMO_EMBEDDER": "hash", "MNEMO_IDLE_TIMEOUT": "120"}
A = "The database is PostgreSQL 14 in production"
B = "The database is PostgreSQL 16 in production"  # conflicts with A (hash embedder: cosine >= 0.8)


@pytest.fixture
def owner_home(home, monkeypatch):
    """A store whose owner is started with default settings (no request-shaped variables) and stopped at the end."""
    for name in ("MNEMO_WRITE_POLICY", "MNEMO_ON_CONFLICT", "MNEMO_SECRETS", "MNEMO_USER"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MNEMO_HOME", str(home))
    yield home
    DaemonService(home, autostart=False).shutdown()
    for _ in range(100):
        if not socket_path(home).exists():
            break
        time.sleep(0.05)


def cli(home: Path, cwd: Path, *args: str, **env: str):
    return run_cli(*args, home=home, cwd=cwd, env={**HASH, **env})


def start_owner(home: Path, cwd: Path, **env: str) -> int:
    r = cli(home, cwd, "daemon", "start", "--json", **env)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["pid"]


def memories(home: Path, cwd: Path, status: str = "active") -> list[dict]:
    r = cli(home, cwd, "list", "--json", "--status", status)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)["memories"]


# -- request-shaped settings travel with the request -------------------------------------------------------------
def test_a_clients_confirm_policy_holds_its_agent_write_in_review(owner_home, git_repo):
    pid = start_owner(owner_home, git_repo)
    r = cli(owner_home, git_repo, "remember", "Payments retries use exponential backoff", "--source", "agent",
            "--json", MNEMO_WRITE_POLICY="confirm")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["status"] == "pending"
    assert [m["text"] for m in memories(owner_home, git_repo, "pending")] == ["Payments retries use exponential backoff"]
    # the same owner (not restarted) lands another client's agent write directly: the policy is the client's
    r = cli(owner_home, git_repo, "remember", "Invoices are generated nightly", "--source", "agent", "--json")
    assert json.loads(r.stdout)["status"] == "created"
    assert start_owner(owner_home, git_repo) == pid


def test_a_bad_write_policy_is_refused_not_ignored(owner_home, git_repo):
    start_owner(owner_home, git_repo)
    r = cli(owner_home, git_repo, "remember", "Invoices are generated nightly", "--source", "agent",
            MNEMO_WRITE_POLICY="confrim")
    assert r.returncode == 2
    assert "write policy 'confrim' is not one of auto, confirm" in r.stderr and "MNEMO_WRITE_POLICY" in r.stderr
    assert memories(owner_home, git_repo) == []


def test_on_conflict_secrets_and_author_travel_with_the_request(owner_home, git_repo):
    start_owner(owner_home, git_repo)
    assert cli(owner_home, git_repo, "remember", A).returncode == 0
    r = cli(owner_home, git_repo, "remember", B, "--json", MNEMO_ON_CONFLICT="keep_both", MNEMO_USER="alice")
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["status"] == "created" and res["memory"]["author"] == "alice"  # the owner's default would hold it
    assert sorted(m["text"] for m in memories(owner_home, git_repo)) == [A, B]

    secret = "the deploy token is ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    assert cli(owner_home, git_repo, "remember", secret).returncode == 2  # the default: blocked
    r = cli(owner_home, git_repo, "remember", secret, "--json", MNEMO_SECRETS="redact")
    assert r.returncode == 0, r.stderr
    stored = json.loads(r.stdout)["memory"]
    assert "ghp_" not in stored["text"] and "secret_redacted" in stored["flags"]


def test_the_mcp_server_the_extension_registers_applies_the_editors_write_policy(owner_home, git_repo):
    """vscode-extension/src/common/settings.ts `mcpEnvironment` gives the MCP server MNEMO_WRITE_POLICY from
    `mnemo.writePolicy`; here the owner was started (with defaults) by another client before the agent's write."""
    import anyio

    start_owner(owner_home, git_repo)
    env = {**os.environ, **HASH, "MNEMO_HOME": str(owner_home), "MNEMO_PROJECT_ROOT": str(git_repo),
           "MNEMO_WRITE_POLICY": "confirm"}

    async def scenario():
        async with mcp_session(git_repo, env) as s:
            res = await s.call_tool("remember", {"text": "Checkout totals are rounded half-even"})
            assert not res.is_error, res.content[0].text
            return res.content[0].text

    text = anyio.run(scenario)
    assert "Review" in text, text
    assert [m["text"] for m in memories(owner_home, git_repo, "pending")] == ["Checkout totals are rounded half-even"]
    assert memories(owner_home, git_repo) == []


@asynccontextmanager
async def mcp_session(cwd: Path, env: dict):
    from mcp import ClientSession, StdioServerParameters, stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "mnemo", "mcp"], env=env, cwd=str(cwd))
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60) as session:
                await session.initialize()
                yield session


# -- store-wide settings: one place, validated, shown, applied ---------------------------------------------------
def test_config_set_validates_and_names_what_is_accepted(home, git_repo):
    r = cli(home, git_repo, "config", "set", "half_life_hour", "12")
    assert r.returncode == 2 and "unknown setting 'half_life_hour'" in r.stderr and "half_life_hours" in r.stderr
    r = cli(home, git_repo, "config", "set", "hot_max", "1.5")
    assert r.returncode == 2 and "hot_max takes a whole number from 0 to 10000" in r.stderr
    r = cli(home, git_repo, "config", "set", "embedder", "gpt")
    assert r.returncode == 2 and "one of onnx, onnx-int8, torch, hash" in r.stderr
    assert not (home / "config.json").exists()  # nothing was written
    assert cli(home, git_repo, "config", "set", "half_life_hours", "12").returncode == 0
    r = cli(home, git_repo, "config", "get", "half_life_hours", "--json")
    got = json.loads(r.stdout)
    assert got["value"] == 12.0 and got["source"] == "file" and got["default"] == 168.0
    # the environment overrides it for this process, and says so
    r = cli(home, git_repo, "config", "get", "half_life_hours", MNEMO_HALF_LIFE_HOURS="5")
    assert r.stdout.strip() == "5" and "MNEMO_HALF_LIFE_HOURS=5 is set in this environment" in r.stderr


def test_a_running_owner_applies_a_live_setting_at_once(owner_home, git_repo):
    pid = start_owner(owner_home, git_repo)
    r = cli(owner_home, git_repo, "config", "set", "half_life_hours", "12")
    assert r.returncode == 0 and f"applied by the running owner (pid {pid})" in r.stdout, r.stdout
    status = json.loads(cli(owner_home, git_repo, "daemon", "status", "--json").stdout)
    assert status["settings"]["half_life_hours"]["value"] == 12.0
    assert status["settings"]["half_life_hours"]["source"] == "owner file"
    # a restart-only setting says so
    r = cli(owner_home, git_repo, "config", "set", "embed_threads", "2")
    assert "applies it at its next start" in r.stdout and "mnemo daemon stop" in r.stdout
    # this owner was started with MNEMO_IDLE_TIMEOUT=120 in its environment: that overrides the store, and says so
    r = cli(owner_home, git_repo, "config", "set", "idle_timeout", "1")
    assert "has MNEMO_IDLE_TIMEOUT in its environment, which overrides the stored value" in r.stdout, r.stdout
    DaemonService(owner_home, autostart=False).shutdown()
    cli(owner_home, git_repo, "config", "set", "idle_timeout", "600")
    start_owner(owner_home, git_repo, MNEMO_IDLE_TIMEOUT="")  # no override: the store's value
    # the idle timeout is re-read by the running owner: it exits on its own once idle
    r = cli(owner_home, git_repo, "config", "set", "idle_timeout", "1", MNEMO_IDLE_TIMEOUT="")
    assert "applied by the running owner" in r.stdout, r.stdout
    deadline = time.time() + 20
    while time.time() < deadline and socket_path(owner_home).exists():
        time.sleep(0.2)
    assert not socket_path(owner_home).exists(), "the owner ignored the new idle_timeout"


def test_a_clients_store_wide_env_that_the_owner_does_not_apply_is_reported(owner_home, git_repo):
    pid = start_owner(owner_home, git_repo)
    r = cli(owner_home, git_repo, "stats", MNEMO_HALF_LIFE_HOURS="5", MNEMO_MAX_TEXT_CHARS="50000")
    assert r.returncode == 0, r.stderr
    assert (f"MNEMO_HALF_LIFE_HOURS=5 in this environment is not applied: the running owner (pid {pid}) uses "
            "half_life_hours = 168; `mnemo config set half_life_hours 5`") in r.stderr
    assert "MNEMO_MAX_TEXT_CHARS in this environment is not applied" in r.stderr
    doctor = json.loads(cli(owner_home, git_repo, "doctor", "--json", MNEMO_HALF_LIFE_HOURS="5").stdout)
    check = next(c for c in doctor["checks"] if c["name"] == "settings")
    assert check["status"] == "warn" and "MNEMO_HALF_LIFE_HOURS=5" in check["detail"]
    # without the mismatch the doctor shows the stored values and this environment's request settings
    cli(owner_home, git_repo, "config", "set", "backup_keep", "3")
    doctor = json.loads(cli(owner_home, git_repo, "doctor", "--json", MNEMO_WRITE_POLICY="confirm").stdout)
    check = next(c for c in doctor["checks"] if c["name"] == "settings")
    assert check["status"] == "ok" and "backup_keep=3" in check["detail"] and "write_policy=confirm" in check["detail"]
