"""SIGKILL the owner while it lands `remember_batch` calls (what `mnemo import` sends).

A batch is committed chunk by chunk (up to 64 notes per transaction): a kill loses at most the open chunk, whole,
and the client's retry on a fresh owner recognises the notes already committed by their content hash
(confirmations), so at the end every note of every acknowledged batch is stored exactly once, `integrity_check` is
ok after every kill, and the index replays to the store's count. Hash embedder: the kill timing, not the model,
is under test.
"""

from __future__ import annotations

import os
import random
import signal
import threading
import time

from _helpers import figure, owner_pid, reap_children, stop_owner
from test_crash_remember import CTX, final_index_check, note

from mnemo.core.errors import DaemonError
from mnemo.daemon.client import DaemonService

BATCHES, PER_BATCH = 5, 600  # 600 notes: ten chunks, so kills land between commits too
# The first batches run whole; the last of them times the kills of the others. Not the first alone: a fresh owner's
# first batch varies with what the owner does beside it as it starts, and timers set from it once landed after two
# of the three later batches had finished (CI: one kill inside a call).
WHOLE = 2


def kill(pid: int | None) -> None:
    if pid:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_sigkill_owner_during_batches(home, monkeypatch):
    monkeypatch.setenv("MNEMO_EMBEDDER", "hash")
    monkeypatch.setenv("MNEMO_HOME", str(home))
    rnd = random.Random(4321)
    svc = DaemonService(home, client_name="crash-batch")
    sent: list[str] = []
    kills = 0
    statuses: dict[str, int] = {}
    try:
        svc.stats(CTX)  # an owner is up before the first timer
        took = 0.0
        for b in range(BATCHES):
            texts = [note(b * PER_BATCH + i, rnd) for i in range(PER_BATCH)]
            pid = owner_pid(home)
            # the first batches run whole (the last one's time sets the timers); the others are killed 25-85% of the
            # way in
            killed = b >= WHOLE
            timer = threading.Timer(rnd.uniform(0.25, 0.85) * took if killed else 3600, kill, (pid,))
            if killed:
                timer.start()
            t0 = time.monotonic()
            for _attempt in range(6):
                try:
                    res = svc.remember_batch(CTX, [{"text": t} for t in texts])
                    break
                except DaemonError:  # killed twice within one call: retry like any caller
                    time.sleep(0.1)
            else:
                raise AssertionError(f"batch {b} could not be stored after 6 attempts")
            if killed:
                timer.join()
            else:
                took = time.monotonic() - t0
            kills += owner_pid(home) != pid
            assert {it["status"] for it in res["items"]} <= {"created", "confirmed"}
            for it in res["items"]:
                statuses[it["status"]] = statuses.get(it["status"], 0) + 1
            sent += texts
            reap_children()
            by = {c["name"]: c for c in svc.doctor(CTX)["checks"]}
            assert by["store"]["status"] == "ok", by["store"]
        listed = svc.list_memories(CTX, limit=100000)["memories"]
    finally:
        svc.close()
        stop_owner(home)
        reap_children()
    texts = [m["text"] for m in listed]
    idx = final_index_check(home)
    name = "test_crash_batch"
    figure(name, "notes in acknowledged batches", len(sent), kills=kills)
    figure(name, "lost", len(set(sent) - set(texts)))
    figure(name, "duplicates", len(texts) - len(set(texts)))
    figure(name, "retried notes recognised as confirmations", statuses.get("confirmed", 0))
    assert kills >= 2  # the timers landed inside the calls
    assert sorted(texts) == sorted(sent)  # every note once: nothing lost, nothing twice
    assert idx["equal"]
