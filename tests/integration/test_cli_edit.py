"""`mnemo edit`, `mnemo history`, `mnemo forget` + `mnemo restore`, the filters of `recall` and `list`, tags in
`mnemo stats`: the real CLI in subprocesses over a real owner process (issue 15, part A)."""

from __future__ import annotations

import json
import os

from conftest import run_cli
from mnemo.daemon.client import DaemonService


def test_edit_history_forget_restore_filters(tmp_path, git_repo):
    store = tmp_path / "store"
    env = {**os.environ, "MNEMO_EMBEDDER": "hash", "MNEMO_IDLE_TIMEOUT": "120"}
    try:
        _scenario(store, env, git_repo)
    finally:
        DaemonService(store, autostart=False).shutdown()


def _scenario(store, env, git_repo) -> None:

    def cli(*args: str, ok: bool = True):
        r = run_cli(*args, home=store, cwd=git_repo, env=env)
        assert (r.returncode == 0) == ok, (args, r.stdout, r.stderr)
        return r

    def js(*args: str):
        return json.loads(cli(*args, "--json").stdout)

    mid = js("remember", "the nightly export runs at 01:00", "--tag", "ops", "--kind", "fact")["memory"]["id"]
    other = js("remember", "exports are written to S3 as parquet", "--tag", "ops", "--tag", "data")["memory"]["id"]
    r = cli("edit", mid, "--text", "the nightly export runs at 02:00", "--tags", "ops,cron", "--kind", "decision",
            "--reason", "moved after the backup window")
    assert "edited (version 2)" in r.stdout and mid in r.stdout
    hist = cli("history", mid).stdout
    assert "v1" in hist and "created" in hist and "the nightly export runs at 01:00" in hist
    assert "v2 (current)" in hist and "moved after the backup window" in hist

    assert [m["id"] for m in js("list", "--search", "nightly export")["memories"]] == [mid]
    assert [m["id"] for m in js("list", "--tag", "data")["memories"]] == [other]
    assert js("list", "--until", "2000-01-01")["memories"] == []
    cards = js("recall", "export", "--tag", "cron", "--min-confidence", "0")["cards"]
    assert [c["item_id"] for c in cards] == [mid]
    assert js("stats")["tags"] == {"ops": 2, "cron": 1, "data": 1}

    bad = cli("list", "--source", "robot", ok=False)
    assert "unknown source 'robot'" in bad.stderr and "agent, user, import, docs" in bad.stderr
    bad = cli("recall", "export", "--since", "yesterday-ish", ok=False)
    assert "not a time" in bad.stderr

    r = cli("forget", mid)
    assert f"mnemo restore {mid}" in r.stdout
    assert [m["id"] for m in js("list")["memories"]] == [other]
    assert js("restore", mid)["status"] == "restored"
    back = js("list", "--search", "nightly")["memories"]
    assert [(m["id"], m["text"], m["tags"]) for m in back] == [(mid, "the nightly export runs at 02:00",
                                                                ["ops", "cron"])]
    assert len(js("history", mid)["versions"]) == 2
