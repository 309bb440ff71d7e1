"""SIGKILL during the multi-record operations: snapshot merge, decay, promote, branch delete, branch merge.

Each operation runs in a child process over a copy of one template store and is killed just before its k-th SQL
statement inside the write transaction (every k in the full run, a spread by default; the counter is SQLite's
trace hook on the connection), right after it returned, and by a timer at random moments. The reopened store must
be exactly as before or exactly as after an uninterrupted run (compared row by row, wall-clock fields aside), and
pass `PRAGMA integrity_check`.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from _helpers import figure

from conftest import store_dump
from mnemo.core import sharing
from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.engine import Engine
from mnemo.core.memory.write import remember
from mnemo.core.models import Context

CHILD = Path(__file__).with_name("_ops_child.py")
MAIN = Context(project_id="git-ops", project_name="ops", root=None, branch="main", default_branch="main")
FEATURE = Context(project_id="git-ops", project_name="ops", root=None, branch="feature/x", default_branch="main")
OPS = ("merge", "decay", "promote", "branch_delete", "branch_merge")


def words(i: int, salt: str) -> str:
    rnd = random.Random(f"{salt}{i}")
    return " ".join(f"{rnd.choice('bcdfghklmnprstvz')}{rnd.randrange(10**6):06d}" for _ in range(5))


def _drop_times(obj):
    if isinstance(obj, dict):
        return {k: _drop_times(v) for k, v in obj.items() if not k.endswith("_at")}
    if isinstance(obj, list):
        return [_drop_times(v) for v in obj]
    return obj


def _memory(d: dict) -> dict:
    d.pop("updated_at")
    d["provenance"] = _drop_times(json.loads(d["provenance"]))
    return d


def dump(db: Path) -> dict:
    return store_dump(db, _memory)


def run_child(home: Path, op: str, mode: str, arg: str, snapshot: Path) -> subprocess.CompletedProcess:
    env = dict(os.environ, MNEMO_EMBEDDER="hash")
    return subprocess.run([sys.executable, str(CHILD), str(home), op, mode, arg, str(snapshot)],
                          capture_output=True, text=True, timeout=120, env=env)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A template store: main and feature/x memories, old ones (decay), a snapshot with new, duplicate and
    conflicting records (merge), and for each op the state before and after an uninterrupted run."""
    base = tmp_path_factory.mktemp("ops")
    emb = HashEmbedder()
    remote = Engine(base / "remote", embedder=emb, start_indexer=False)
    tpl = Engine(base / "template", embedder=emb, start_indexer=False)
    try:
        shared = []
        for i in range(60):
            r = remember(remote, MAIN, words(i, "r"))["memory"]
            if i % 3 == 0:
                shared.append(r["id"])
        p0 = base / "first.mnemo"
        sharing.export_snapshot(remote, MAIN, str(p0))
        snap = sharing.read_snapshot(p0)
        from dataclasses import replace

        from mnemo.core.text import content_hash
        for k, rec in enumerate([r for r in snap.records if r["id"] in set(shared)]):
            m = sharing._remote_memory(rec, snap, MAIN, time.time())
            if k % 2:
                text = words(k, "local")
                m = replace(m, text=text, content_hash=content_hash(text))
            with tpl.store.write() as c:
                tpl.store.insert_memory(c, m, emb.embed([m.text])[0], emb.model_id)
        ids = [remember(tpl, MAIN, words(i, "main"), importance=0.3)["memory"]["id"] for i in range(40)]
        for i in range(30):
            remember(tpl, FEATURE, words(i, "feat"))
        (base / "template" / "target.json").write_text(json.dumps({"promote": ids[7]}))
        snapshot = base / "remote.mnemo"
        sharing.export_snapshot(remote, MAIN, str(snapshot))
    finally:
        remote.close()
        tpl.close()
    template = base / "template"
    before = dump(template / "mnemo.db")
    after, statements = {}, {}
    for op in OPS:
        h = base / f"after-{op}"
        shutil.copytree(template, h)
        res = run_child(h, op, "none", "0", snapshot)
        assert res.returncode == 0, res.stderr
        info = json.loads(res.stdout.split("DONE ", 1)[1])
        assert info["transactions"] == 1, f"{op} ran {info['transactions']} write transactions"
        statements[op] = info["statements"]
        after[op] = dump(h / "mnemo.db")
        assert after[op] != before, f"{op} changed nothing"
    return {"base": base, "template": template, "snapshot": snapshot, "before": before, "after": after,
            "statements": statements}


def kill_points(n: int, full: bool) -> list[tuple[str, str]]:
    if full:  # every statement of the short operations; ~120 points spread over the long ones
        ks = list(range(1, n + 1)) if n <= 120 else sorted({*range(1, 11), *range(n - 9, n + 1),
                                                             *(1 + i * (n - 1) // 100 for i in range(101))})
    else:
        ks = sorted({1, n // 3, (2 * n) // 3, n})
    pts = [("stmt", str(k)) for k in ks if k >= 1] + [("after", "0")]
    rnd = random.Random(11)
    pts += [("timer", f"{rnd.uniform(0.0, 0.6):.3f}") for _ in range(20 if full else 2)]
    return pts


def sweep(world, op: str, full: bool) -> dict:
    outcomes = {"before": 0, "after": 0}
    n = world["statements"][op]
    for i, (mode, arg) in enumerate(kill_points(n, full)):
        home = world["base"] / f"run-{op}-{i}"
        shutil.copytree(world["template"], home)
        res = run_child(home, op, mode, arg, world["snapshot"])
        assert res.returncode in (0, -signal.SIGKILL), res.stderr
        state = dump(home / "mnemo.db")
        if state == world["before"]:
            outcome = "before"
        elif state == world["after"][op]:
            outcome = "after"
        else:
            pytest.fail(f"{op} killed at {mode} {arg}: the store is neither as before nor as after")
        if mode == "stmt" and int(arg) < n:
            assert outcome == "before", f"{op}: killed inside the transaction but the change is there"
        if mode == "after":
            assert outcome == "after"
        outcomes[outcome] += 1
        shutil.rmtree(home, ignore_errors=True)
    return outcomes


@pytest.mark.parametrize("op", OPS)
def test_killed_operation_is_all_or_nothing(world, op):
    out = sweep(world, op, full=False)
    figure(f"test_crash_ops[{op}]", "kill points (before / after / other)",
           f"{out['before'] + out['after']} ({out['before']} / {out['after']} / 0)",
           statements=world["statements"][op])


@pytest.mark.slow
@pytest.mark.timeout(1200)
@pytest.mark.parametrize("op", OPS)
def test_killed_operation_at_every_statement_is_all_or_nothing(world, op):
    out = sweep(world, op, full=True)
    figure(f"test_crash_ops_full[{op}]", "kill points (before / after / other)",
           f"{out['before'] + out['after']} ({out['before']} / {out['after']} / 0)",
           statements=world["statements"][op])
