"""Secrets in the fields beside a note (issue 21, item 2), over the real CLI, the real MCP server (the SDK client)
and a real owner: an edit's reason, a deprecation's reason (CLI and MCP), a forget's reason, an anchor's symbol
and a Markdown entry's branch go through the note's policy (refused by default, redacted under
MNEMO_SECRETS=redact), `mnemo history` never prints one, and `mnemo index` redacts a token found in a README in
the stored block and says so."""

from __future__ import annotations

import json
import os
import sys

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from conftest import git, run_cli
from mnemo.daemon.client import DaemonService

AWS = "AKIAZ3MQ7RTXW2PLK9VD"
GHP = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"


@pytest.fixture
def env(tmp_path, git_repo):
    store = tmp_path / "store"
    e = {**os.environ, "MNEMO_HOME": str(store), "MNEMO_EMBEDDER": "hash", "MNEMO_IDLE_TIMEOUT": "120",
         "MNEMO_PROJECT_ROOT": str(git_repo), "MNEMO_MIN_CONFIDENCE": "0"}
    e.pop("MNEMO_SECRETS", None)
    yield e
    DaemonService(store, autostart=False).shutdown()


def cli(env, repo, *args, secrets: str | None = None):
    e = dict(env, **({"MNEMO_SECRETS": secrets} if secrets else {}))
    r = run_cli(*args, "--json", home=e["MNEMO_HOME"], cwd=repo, env=e)
    return r, (json.loads(r.stdout) if r.stdout.strip() else {})


def everything(env, repo, mid: str) -> str:
    """What the CLI shows of a memory: its history and its row (deprecated ones included)."""
    _r, hist = cli(env, repo, "history", mid)
    _r, listed = cli(env, repo, "list", "--deprecated", "--status", "active")
    return json.dumps(hist) + json.dumps(listed)


def test_reasons_and_symbols_follow_the_secrets_policy(env, git_repo):
    r, made = cli(env, git_repo, "remember", "the billing worker reads its key from the vault")
    assert r.returncode == 0, r.stderr
    mid = made["memory"]["id"]

    # block (the default): refused, nothing stored, the secret not echoed
    for args in (("edit", mid, "--importance", "0.6", "--reason", f"rotated key {AWS}"),
                 ("deprecate", mid, "--reason", f"old token {GHP}"),
                 ("forget", mid, "--reason", f"old token {GHP}")):
        r, out = cli(env, git_repo, *args)
        assert r.returncode != 0 and out["error"]["code"] == "secret_detected", (args, r.stdout, r.stderr)
        assert AWS not in r.stdout + r.stderr and GHP not in r.stdout + r.stderr
    shown = everything(env, git_repo, mid)
    assert AWS not in shown and GHP not in shown and '"importance": 0.6' not in shown
    assert '"deprecated": false' in shown

    # redact: the change lands, the secret does not
    r, out = cli(env, git_repo, "edit", mid, "--importance", "0.6", "--reason", f"rotated key {AWS}", secrets="redact")
    assert r.returncode == 0, r.stdout + r.stderr
    r, out = cli(env, git_repo, "deprecate", mid, "--reason", f"old token {GHP}", secrets="redact")
    assert r.returncode == 0 and out["memory"]["deprecated"], r.stdout + r.stderr
    shown = everything(env, git_repo, mid)
    assert AWS not in shown and GHP not in shown
    assert "rotated key [REDACTED" in shown and "old token [REDACTED" in shown
    human = run_cli("history", mid, home=env["MNEMO_HOME"], cwd=git_repo, env=env).stdout
    assert AWS not in human and "[REDACTED" in human


def test_mcp_deprecate_reason_is_screened(env, git_repo):
    r, made = cli(env, git_repo, "remember", "the webhook signing secret lives in the vault")
    mid = made["memory"]["id"]

    async def scenario(extra: dict) -> str:
        params = StdioServerParameters(command=sys.executable, args=["-m", "mnemo", "mcp"], env={**env, **extra},
                                       cwd=str(git_repo))
        with open(os.devnull, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=60) as s:
                    await s.initialize()
                    res = await s.call_tool("deprecate", {"memory_id": mid, "reason": f"old token {GHP}"})
                    return ("ERROR " if res.is_error else "") + res.content[0].text

    refused = anyio.run(scenario, {})
    assert refused.startswith("ERROR") and "secret" in refused and GHP not in refused, refused
    assert '"deprecated": false' in everything(env, git_repo, mid)
    done = anyio.run(scenario, {"MNEMO_SECRETS": "redact"})
    assert not done.startswith("ERROR"), done
    shown = everything(env, git_repo, mid)
    assert GHP not in shown and "old token [REDACTED" in shown and '"deprecated": true' in shown


def test_anchor_symbol_is_screened(env, git_repo):
    (git_repo / "pay.py").write_text(f"def charge(amount):\n    return amount\n\n\ndef {GHP}():\n    pass\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "pay")
    r, made = cli(env, git_repo, "remember", "charges are idempotent")
    mid = made["memory"]["id"]
    r, out = cli(env, git_repo, "anchor", mid, "--file", "pay.py", "--symbol", GHP)
    assert r.returncode != 0 and out["error"]["code"] == "secret_detected", r.stdout + r.stderr
    assert GHP not in everything(env, git_repo, mid)
    r, out = cli(env, git_repo, "anchor", mid, "--file", "pay.py", "--symbol", GHP, secrets="redact")
    assert r.returncode == 0, r.stdout + r.stderr
    assert GHP not in everything(env, git_repo, mid)


def test_index_redacts_a_token_in_a_readme(env, git_repo):
    (git_repo / "README.md").write_text(
        "# Payments\n\nThe payments service.\n\n## Deploy\n\n"
        f"Deploy with the token {GHP} from the CI settings.\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "readme")
    human = run_cli("index", home=env["MNEMO_HOME"], cwd=git_repo, env=env)
    assert human.returncode == 0, human.stdout + human.stderr
    assert "redacted" in human.stdout and "README.md:7" in human.stdout and GHP not in human.stdout
    r, res = cli(env, git_repo, "recall", "deploy token CI settings")
    assert r.returncode == 0 and GHP not in r.stdout, r.stdout
    assert "[REDACTED" in r.stdout  # the block is found, its token replaced
    with open(git_repo / "README.md", "a") as f:
        f.write(f"\nThe staging token is {GHP[:-1]}X.\n")
    r, out = cli(env, git_repo, "index")
    assert r.returncode == 0 and [(s["path"], s["line"]) for s in out["secrets"]] == [("README.md", 7),
                                                                                     ("README.md", 9)], out
    assert GHP[:20] not in r.stdout
