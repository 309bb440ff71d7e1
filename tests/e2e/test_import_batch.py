"""The bulk path end to end, with the real model and a real owner process: `mnemo import FILE.jsonl` through the
CLI (bad lines reported with their numbers, nothing lost, a second import confirms instead of copying) and the
MCP `remember_batch` tool through the official SDK client."""

from __future__ import annotations

import json
import os
from pathlib import Path

import anyio
import pytest
from test_mcp_stdio import MEM_ID, call, call_error, mcp_session

from conftest import git, run_cli
from mnemo.daemon.client import DaemonService

LINES = [
    json.dumps({"text": "payments API requires idempotency keys on every POST", "kind": "decision",
                "tags": ["payments"]}),
    "",
    "{not json",
    json.dumps({"text": "database migrations run with alembic; never edit an applied migration",
                "importance": 0.9}),
    json.dumps({"note": "the field is called text"}),
    json.dumps({"text": "HTTP client retries 3 times with exponential backoff"}),
    json.dumps({"text": "HTTP client retries 5 times with exponential backoff"}),
    json.dumps({"text": "aws key AKIAIOSFODNN7EXAMPLE for the uploads bucket"}),
    json.dumps({"text": "the frontend keeps server state in React Query", "type": "reference"}),
]


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    r = tmp_path / "shop"
    r.mkdir()
    git(r, "init", "-q", "-b", "main")
    git(r, "commit", "-q", "--allow-empty", "-m", "init")
    return r


@pytest.fixture
def store(tmp_path: Path):
    s = tmp_path / "store"
    yield s
    DaemonService(s, autostart=False).shutdown()


ENV = {"HF_HUB_OFFLINE": "1", "MNEMO_IDLE_TIMEOUT": "120", "MNEMO_MIN_CONFIDENCE": "0"}


def test_cli_import_of_a_jsonl_file(repo, store, tmp_path):
    notes = tmp_path / "notes.jsonl"
    notes.write_text("\n".join(LINES) + "\n")
    r = run_cli("import", str(notes), "--json", home=store, cwd=repo, env=ENV)
    assert r.returncode == 1, r.stderr  # some lines refused
    rep = json.loads(r.stdout)
    assert rep["lines"] == 8 and rep["stopped"] is None
    assert [(e["line"], e["message"].split(" (")[0]) for e in rep["errors"]] == [
        (3, "not valid JSON"), (5, "unknown field(s) 'note'"), (8, "refused to remember: text looks like it holds a "
                                                                  "secret")]
    assert all(e["hint"] for e in rep["errors"])
    assert [(i["line"], i["status"]) for i in rep["items"]] == [(1, "created"), (4, "created"), (6, "created"),
                                                               (7, "conflict"), (9, "created")]
    assert rep["counts"] == {"created": 4, "conflict": 1, "error": 3}

    r = run_cli("recall", "how do I change the database schema safely?", "--json", home=store, cwd=repo, env=ENV)
    top = json.loads(r.stdout)["cards"][0]
    assert top["item_id"] == rep["items"][1]["id"] and top["imported_from"] == {"source": "notes.jsonl", "line": 4}

    # the human form: a summary, then each refused line with its number; importing again copies nothing
    r = run_cli("import", str(notes), home=store, cwd=repo, env=ENV)
    assert r.returncode == 1
    assert "imported 5 of 8 notes from" in r.stdout and "5 confirmed (already known)" in r.stdout, r.stdout
    assert "line 3: not valid JSON" in r.stderr and "line 8: refused to remember" in r.stderr
    r = run_cli("stats", "--json", home=store, cwd=repo, env=ENV)
    st = json.loads(r.stdout)
    assert st["memories"]["project"] == 5 and st["by_status"] == {"active": 4, "pending": 1}

    r = run_cli("import", str(tmp_path / "missing.jsonl"), home=store, cwd=repo, env=ENV)
    assert r.returncode == 2 and "no such file" in r.stderr


def test_mcp_remember_batch(repo, store, tmp_path):
    from mnemo.core.embedding.embedder import default_cache_dir

    fake_home = tmp_path / "user-home"
    fake_home.mkdir()
    env = {**ENV, "MNEMO_HOME": str(store), "HOME": str(fake_home), "MNEMO_USER": "agent-one",
           "MNEMO_MODEL_CACHE": str(default_cache_dir()), "ANONYMIZED_TELEMETRY": "False"}
    if os.environ.get("PYTHONPATH"):
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]

    async def scenario():
        async with mcp_session(repo, env) as s:
            tool = {t.name: t for t in (await s.list_tools()).tools}["remember_batch"]
            assert tool.input_schema["properties"]["notes"]["maxItems"] == 1000
            out = await call(s, "remember_batch", notes=[
                {"text": "payments API requires idempotency keys on every POST", "kind": "decision"},
                {"text": "payments API requires idempotency keys on every POST"},
                {"text": "aws key AKIAIOSFODNN7EXAMPLE for the uploads bucket"},
                {"text": "CI caches pip wheels keyed on the lock file hash", "tags": ["ci"], "importance": 0.7}])
            lines = out.splitlines()
            assert lines[0].startswith("1. created mem-") and lines[1].startswith("2. confirmed mem-")
            assert lines[2].startswith("3. error · refused to remember") and lines[3].startswith("   hint: ")
            assert lines[4].startswith("4. created mem-") and lines[-1] == "4 notes: 1 confirmed, 2 created, 1 error"
            first = MEM_ID.search(lines[0]).group(1)
            assert first in await call(s, "recall", query="retrying a POST safely")
            text = await call_error(s, "remember_batch", notes=[{"text": "x", "project": "other"}])
            assert "project" in text and "pydantic" not in text
            assert "project shop" in await call(s, "stats")  # still serving

    anyio.run(scenario)
