"""SIGKILL the owner while it lands `remember_batch` calls (what `mnemo import` sends).

A batch is committed chunk by chunk (up to 64 notes per transaction): a kill loses at most the open chunk, whole,
and the client's retry on a fresh owner recognises the notes already committed by their content hash
(confirmations), so at the end every note of every acknowledged batch is stored exactly once, `integrity_check` is
ok after every kill, and the index replays to the store's count. Hash embedder: the kill timing, not the model,
is under test.

The kills follow the store, not the clock: a watcher reads the committed count (read-only, WAL) and kills the
owner once a random number of the batch's chunks is committed, after a random part of one chunk's time, so each
kill lands inside its call (mid-chunk or between commits) however fast or slow the machine is that day. Timers set
from an earlier batch's duration once landed after the call had finished (CI: one kill of three inside a call).
"""

from __future__ import annotations

import os
import random
import signal
import sqlite3
import threading
import time
from pathlib import Path

from _helpers import figure, owner_pid, reap_children, stop_owner
from test_crash_remember import CTX, final_index_check, note

from mnemo.core.errors import DaemonError
from mnemo.core.policy import BATCH_CHUNK
from mnemo.daemon.client import DaemonService

BATCHES, PER_BATCH = 5, 600  # 600 notes: ten chunks, so kills land between commits too
WHOLE = 2  # the first batches run whole: they time one chunk, for the kills' delay inside a chunk


def committed(db: Path) -> int:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=30)
    try:
        return int(conn.execute("SELECT count(*) FROM memories").fetchone()[0])
    finally:
        conn.close()


class Killer(threading.Thread):
    """Kill `pid` once `after` more notes than `base` are committed, `delay` seconds later (or never, if stopped)."""

    def __init__(self, db: Path, pid: int | None, base: int, after: int, delay: float) -> None:
        super().__init__(daemon=True)
        self.db, self.pid, self.base, self.after, self.delay = db, pid, base, after, delay
        self.stop = threading.Event()
        self.fired = False

    def run(self) -> None:
        while not self.stop.is_set():
            try:
                if committed(self.db) - self.base >= self.after:
                    break
            except sqlite3.Error:  # the owner is between transactions or starting: read again
                pass
            self.stop.wait(0.003)
        else:
            return
        time.sleep(self.delay)
        if self.pid and not self.stop.is_set():
            try:
                os.kill(self.pid, signal.SIGKILL)
                self.fired = True
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
        db = home / "mnemo.db"
        chunk_s = 0.0
        fired = 0
        for b in range(BATCHES):
            texts = [note(b * PER_BATCH + i, rnd) for i in range(PER_BATCH)]
            pid = owner_pid(home)
            killed = b >= WHOLE
            killer = None
            if killed:
                # once 1 to 7 of the ten chunks are committed (three or more still to land), within one chunk's time
                after = rnd.randint(1, 7 * BATCH_CHUNK)
                killer = Killer(db, pid, committed(db), after, rnd.uniform(0.0, 1.0) * chunk_s)
                killer.start()
            t0 = time.monotonic()
            try:
                for _attempt in range(6):
                    try:
                        res = svc.remember_batch(CTX, [{"text": t} for t in texts])
                        break
                    except DaemonError:  # killed twice within one call: retry like any caller
                        time.sleep(0.1)
                else:
                    raise AssertionError(f"batch {b} could not be stored after 6 attempts")
            finally:
                if killer is not None:
                    killer.stop.set()
                    killer.join()
                    fired += killer.fired
            if not killed:
                chunk_s = (time.monotonic() - t0) / (PER_BATCH / BATCH_CHUNK)
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
    assert fired == kills == BATCHES - WHOLE  # every kill landed inside its call and replaced the owner
    assert sorted(texts) == sorted(sent)  # every note once: nothing lost, nothing twice
    assert idx["equal"]
