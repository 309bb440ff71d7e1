"""A snapshot merge killed by SIGKILL at many points leaves the store exactly as before or exactly as after.

The merge runs in a child process (`_merge_child.py`) over a copy of one template store; it is killed after k
records were written inside the transaction (every k in the slow sweep, a spread by default), just before COMMIT,
just after COMMIT, and by a timer at random moments. The store is then reopened and compared, row by row, with the
state before the merge and the state after an uninterrupted merge (minus wall-clock timestamps).
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

from conftest import store_dump
from mnemo.core import sharing
from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.engine import Engine
from mnemo.core.memory.write import remember
from mnemo.core.models import Context

CHILD = Path(__file__).with_name("_merge_child.py")
CTX = Context(project_id="git-sigkill", project_name="sigkill", root=None, branch="main", default_branch="main")
N_REMOTE = 240
FULL = os.environ.get("MNEMO_FULL") == "1"


def _words(i: int, salt: str) -> str:
    rnd = random.Random(f"{salt}{i}")
    return " ".join(f"{rnd.choice('bcdfghklmnprstvz')}{rnd.randrange(10**6):06d}" for _ in range(5))


def _memory(d: dict) -> dict:
    prov = json.loads(d["provenance"])
    if "imported_from" in prov:
        prov["imported_from"].pop("imported_at", None)
    d["provenance"] = prov
    return d


def normalized_dump(db: Path) -> dict:
    return store_dump(db, _memory, tombstone_reason=False)


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """A template store (local memories, some to be replaced), a snapshot (new, duplicate and conflicting records),
    the state before, and the state after an uninterrupted merge."""
    base = tmp_path_factory.mktemp("sigkill")
    emb = HashEmbedder()
    remote = Engine(base / "remote", embedder=emb, start_indexer=False)
    local = Engine(base / "template", embedder=emb, start_indexer=False)
    try:
        shared = []
        for i in range(N_REMOTE):
            r = remember(remote, CTX, _words(i, "r"), kind="fact")["memory"]
            if i % 4 == 0:
                shared.append(r["id"])
        # the local side knows some of the same memories; half of those it changed (conflicts), half not (dups)
        p0 = base / "first.mnemo"
        sharing.export_snapshot(remote, CTX, str(p0), branches=None)
        snap = sharing.read_snapshot(p0)
        keep = set(shared)
        sub = [r for r in snap.records if r["id"] in keep]
        for k, rec in enumerate(sub):
            m = sharing._remote_memory(rec, snap, CTX, time.time())
            vec = emb.embed([m.text])[0]
            if k % 2:
                from dataclasses import replace

                from mnemo.core.text import content_hash
                text = _words(k, "local")
                m = replace(m, text=text, content_hash=content_hash(text), updated_at=m.updated_at - 100)
                vec = emb.embed([text])[0]
            with local.store.write() as c:
                local.store.insert_memory(c, m, vec, emb.model_id)
        for i in range(20):
            remember(local, CTX, _words(i, "own"))
        snapshot = base / "remote.mnemo"
        sharing.export_snapshot(remote, CTX, str(snapshot))
    finally:
        remote.close()
        local.close()
    template = base / "template"
    before = normalized_dump(template / "mnemo.db")
    after_home = base / "after"
    shutil.copytree(template, after_home)
    res = run_child(after_home, snapshot, "none", "0")
    assert res.returncode == 0, res.stderr
    after = normalized_dump(after_home / "mnemo.db")
    summary = json.loads(res.stdout.split("DONE ", 1)[1])
    assert summary["replaced"] > 0 and summary["imported"] > 0 and summary["conflicts"] > 0
    writes = summary["imported"] + summary["replaced"]
    assert before != after
    return {"base": base, "template": template, "snapshot": snapshot, "before": before, "after": after,
            "writes": writes}


def run_child(home: Path, snapshot: Path, mode: str, arg: str, strategy: str = "remote_wins"):
    env = dict(os.environ, MNEMO_EMBEDDER="hash")
    return subprocess.run([sys.executable, str(CHILD), str(home), str(snapshot), json.dumps(CTX.to_dict()),
                           strategy, mode, arg], capture_output=True, text=True, timeout=120, env=env)


def kill_and_check(world, mode: str, arg: str, n: int) -> str:
    home = world["base"] / f"run-{mode}-{arg}-{n}"
    shutil.copytree(world["template"], home)
    res = run_child(home, world["snapshot"], mode, arg)
    killed = res.returncode == -signal.SIGKILL
    assert killed or res.returncode == 0, res.stderr
    state = normalized_dump(home / "mnemo.db")
    if state == world["before"]:
        outcome = "before"
    elif state == world["after"]:
        outcome = "after"
    else:
        pytest.fail(f"{mode} {arg}: the store is neither as before nor as after the merge")
    # the reopened store is usable: the engine opens it and recall works
    e = Engine(home, embedder=HashEmbedder(), start_indexer=False)
    try:
        assert e.store.integrity_check() == "ok"
    finally:
        e.close()
    shutil.rmtree(home, ignore_errors=True)
    return outcome


def kill_points(writes: int, full: bool) -> list[tuple[str, str]]:
    if full:
        ks = list(range(0, writes + 1))
    else:
        ks = sorted({0, 1, writes // 3, writes // 2, writes - 1, writes})
    pts = [("after_n", str(k)) for k in ks] + [("before_commit", "0"), ("after_commit", "0")]
    rnd = random.Random(7)
    pts += [("timer", f"{rnd.uniform(0.0, 1.5):.3f}") for _ in range(40 if full else 4)]
    return pts


def _sweep(world, full: bool) -> None:
    outcomes: dict[str, list[str]] = {}
    for n, (mode, arg) in enumerate(kill_points(world["writes"], full)):
        outcomes.setdefault(kill_and_check(world, mode, arg, n), []).append(f"{mode}:{arg}")
    # inside the transaction -> before; after COMMIT -> after
    assert "before_commit:0" in outcomes["before"] and "after_commit:0" in outcomes["after"]
    assert all(not p.startswith("after_n") or p == f"after_n:{world['writes']}" for p in outcomes.get("after", []))
    print(f"kill points: {sum(len(v) for v in outcomes.values())} "
          f"(before {len(outcomes.get('before', []))}, after {len(outcomes.get('after', []))})")


def test_merge_killed_at_a_spread_of_points_is_before_or_after(world):
    _sweep(world, full=False)


@pytest.mark.slow
def test_merge_killed_at_every_record_is_before_or_after(world):
    _sweep(world, full=True)
