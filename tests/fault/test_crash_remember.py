"""SIGKILL the owner at random moments while a client remembers thousands of notes (SQLite's crash tests, for us).

The test process is the client: it remembers distinct notes through the owner (`DaemonService`, which retries a
call once on a fresh owner when the connection breaks) while a timer SIGKILLs the current owner at a random delay,
so kills land anywhere: in the request, the embedding, the SQLite transaction, the chroma indexer, between calls.
After every kill the next owner must open the store (integrity_check ok through `doctor`, index in sync). At the
end: every acknowledged note is there exactly once, none twice, `PRAGMA integrity_check` is ok, and the dense index
count equals the store count after at most one rebuild.

Fast (default): 400 notes, 5 kills. Full (MNEMO_FULL=1): 5,000 notes, 55 kills.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

import pytest
from _helpers import figure, integrity, owner_pid, reap_children, stop_owner

from mnemo.core.errors import DaemonError
from mnemo.core.models import Context
from mnemo.daemon.client import DaemonService

CTX = Context(project_id="git-crash", project_name="crash", branch="main", default_branch="main").to_dict()


def note(i: int, rnd: random.Random) -> str:
    # distinct random words: no two notes are near-duplicates, so conflict detection stays out of the way
    return " ".join(f"{rnd.getrandbits(40):010x}" for _ in range(6)) + f" n{i}"


def run(home, n_notes: int, n_kills: int, seed: int) -> dict:
    rnd = random.Random(seed)
    svc = DaemonService(home, client_name="crash-test")
    acked: dict[str, str] = {}  # text -> id
    statuses = {"created": 0, "confirmed": 0}
    kills, restarts, checks, rebuild_max = 0, [], 0, 0
    kill_at = sorted(rnd.sample(range(20, n_notes - 60), n_kills))  # room at the end for deferred kills
    timer: threading.Timer | None = None
    killed = threading.Event()
    armed = threading.Event()  # one kill in flight at a time, each one checked before the next is armed
    killed_at = [0.0]
    missed = [0]

    def kill():
        pid = owner_pid(home)
        try:
            if pid:
                os.kill(pid, signal.SIGKILL)
                killed_at[0] = time.monotonic()
                killed.set()
            else:
                missed[0] += 1
        except ProcessLookupError:  # the owner is being replaced right now: try again a little later
            missed[0] += 1
        finally:
            armed.clear()

    def check_after_kill():
        nonlocal kills, checks, rebuild_max
        killed.clear()
        kills += 1
        svc.stats(CTX)  # the next call reaches the new owner
        restarts.append(time.monotonic() - killed_at[0])
        reap_children()
        doc = svc.doctor(CTX)  # the new owner opened the store: integrity ok, index in sync
        by = {c["name"]: c for c in doc["checks"]}
        assert by["store"]["status"] == "ok", by["store"]
        assert by["index"]["status"] == "ok", by["index"]
        st = svc.stats(CTX)["index"]
        rebuild_max = max(rebuild_max, st["rebuilds"])
        assert st["rebuilds"] <= 1, st
        checks += 1

    try:
        i = 0
        while i < n_notes:
            if kill_at and i >= kill_at[0] and not armed.is_set() and not killed.is_set():
                kill_at.pop(0)
                armed.set()
                timer = threading.Timer(rnd.uniform(0.0, 0.12), kill)  # lands inside one of the next calls
                timer.start()
            if missed[0]:
                missed[0] -= 1
                kill_at.insert(0, min(i + 3, n_notes - 6))
            text = note(i, rnd)
            for _attempt in range(6):
                try:
                    r = svc.remember(CTX, text)
                    break
                except DaemonError:  # the owner died twice in one call: the client retries like any caller would
                    time.sleep(0.1)
            else:
                raise AssertionError(f"note {i} could not be stored after 6 attempts")
            acked[text] = r["memory"]["id"]
            statuses[r["status"]] = statuses.get(r["status"], 0) + 1
            i += 1
            if killed.is_set():
                check_after_kill()
        while armed.is_set():  # a kill still in flight at the end is waited for, then checked like the others
            time.sleep(0.05)
        if killed.is_set():
            check_after_kill()
        listed = svc.list_memories(CTX, limit=100000)["memories"]
        st = svc.stats(CTX)
    finally:
        if timer is not None:
            timer.cancel()
        svc.close()
        stop_owner(home)
        reap_children()
    texts = [m["text"] for m in listed]
    by_text = {m["text"]: m["id"] for m in listed}
    lost = [t for t in acked if t not in by_text]
    dups = len(texts) - len(set(texts))
    wrong_id = [t for t, mid in acked.items() if by_text.get(t) not in (None, mid)]
    return {"acked": len(acked), "stored": len(listed), "lost": len(lost), "duplicates": dups,
            "wrong_id": len(wrong_id), "kills": kills, "checks": checks, "restart_s": restarts,
            "statuses": statuses, "rebuild_max": rebuild_max, "index": st["index"]}


def final_index_check(home) -> dict:
    """Open the store in-process after the last kill: integrity, then the index replays to the store's count."""
    from mnemo.core.embedding.embedder import HashEmbedder
    from mnemo.core.engine import Engine

    assert integrity(home / "mnemo.db") == "ok"
    e = Engine(home, embedder=HashEmbedder())
    try:
        assert e.wait_indexed(timeout=120)
        counts = e.index.counts()
        want = {p: e.store.count_vectors(p) for p in e.store.parts()}
        return {"rebuilds": e.index.rebuilds, "index": sum(counts.values()), "store": sum(want.values()),
                "equal": counts == want}
    finally:
        e.close()


def _crash_sweep(home, monkeypatch, n_notes, n_kills, label):
    monkeypatch.setenv("MNEMO_EMBEDDER", "hash")
    monkeypatch.setenv("MNEMO_HOME", str(home))
    t0 = time.monotonic()
    res = run(home, n_notes, n_kills, seed=1234 + n_notes)
    took = time.monotonic() - t0
    idx = final_index_check(home)
    name = f"test_crash_remember[{label}]"
    figure(name, "acknowledged writes", res["acked"], kills=res["kills"])
    figure(name, "acknowledged writes lost", res["lost"])
    figure(name, "duplicates", res["duplicates"])
    figure(name, "store opened after every kill", f"{res['checks']}/{res['kills']}")
    figure(name, "max index rebuilds per owner start", res["rebuild_max"])
    figure(name, "final index count = store count", f"{idx['index']} = {idx['store']}", rebuilds=idx["rebuilds"])
    r = sorted(res["restart_s"])
    figure(name, "kill -> next answer from a new owner (median / max)",
           f"{r[len(r) // 2]:.2f} / {r[-1]:.2f}", unit="s")
    figure(name, "retried notes recognised as confirmations", res["statuses"].get("confirmed", 0))
    figure(name, "run time", f"{took:.0f}", unit="s")
    assert res["kills"] == n_kills
    assert res["lost"] == 0 and res["duplicates"] == 0 and res["wrong_id"] == 0
    assert res["stored"] == n_notes == res["acked"]
    assert res["checks"] == res["kills"]
    assert idx["equal"] and idx["rebuilds"] <= 1


def test_sigkill_owner_during_remembers(home, monkeypatch):
    _crash_sweep(home, monkeypatch, 400, 5, "fast")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_sigkill_owner_at_55_points_during_5000_remembers(home, monkeypatch):
    _crash_sweep(home, monkeypatch, 5000, 55, "full")
