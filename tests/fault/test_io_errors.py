"""Disk full and I/O errors at the N-th write: every failure is reported, nothing acknowledged is lost, the store
reopens (SQLite's I/O-error and disk-full tests, done from outside the process).

Three ways to make the file system fail, none of which needs changes to Mnemo:
- `faultfs.so`, an LD_PRELOAD shim (compiled here from faultfs.c with the system C compiler) that fails the N-th
  write/pwrite/fsync/ftruncate on files under the store (EIO once, ENOSPC for a window of writes, ENOSPC for good);
  N is swept over a calibrated count of the writes a run makes (SQLite, WAL, chroma's files);
- a real full file system: a small tmpfs mounted for the test (needs root, as in CI), grown afterwards;
- RLIMIT_FSIZE (`ulimit -f`): the store's files may not grow past a size (EFBIG), no root needed.
A child process remembers notes and prints what its caller saw; the parent then reopens the store without faults:
`PRAGMA integrity_check`, every acknowledged memory present, the dense index back in sync.
"""

from __future__ import annotations

import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from _helpers import FULL, figure, integrity

from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.engine import Engine

HERE = Path(__file__).parent
CHILD = HERE / "_io_child.py"


@pytest.fixture(scope="module")
def faultfs(tmp_path_factory) -> Path:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        pytest.skip("no C compiler for the fault-injecting shim")
    out = tmp_path_factory.mktemp("faultfs") / "faultfs.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O2", "-o", str(out), str(HERE / "faultfs.c"), "-ldl"], check=True)
    return out


def run_child(home: Path, n: int, tag: str, *flags: str, env: dict | None = None, timeout: float = 180):
    e = dict(os.environ, MNEMO_EMBEDDER="hash", **(env or {}))
    return subprocess.run([sys.executable, str(CHILD), str(home), str(n), tag, *flags], capture_output=True,
                          text=True, timeout=timeout, env=e)


def parse(out: str) -> dict:
    acked, errs, unclean, open_err = {}, [], [], None
    for line in out.splitlines():
        parts = line.split(" ", 3)
        if parts[0] == "ACK":
            acked[parts[1]] = int(parts[2])
        elif parts[0] == "ERR":
            errs.append((int(parts[1]), parts[2]))
        elif parts[0] == "UNCLEAN":
            unclean.append(line)
        elif parts[0] == "OPEN_ERR":
            open_err = line
    return {"acked": acked, "errors": errs, "unclean": unclean, "open_err": open_err}


def verify(home: Path) -> dict:
    """Reopen without faults: integrity, the memories, the index."""
    assert integrity(home / "mnemo.db") == "ok"
    e = Engine(home, embedder=HashEmbedder())
    try:
        ids = {r[0] for r in e.store.conn().execute("SELECT id FROM memories")}
        synced = e.wait_indexed(timeout=90)
        counts = e.index.counts() if e.index is not None else {}
        want = {p: e.store.count_vectors(p) for p in e.store.parts()}
        return {"ids": ids, "index_ok": synced and counts == want}
    finally:
        e.close()


def calibrate(faultfs: Path, base: Path, n: int) -> int:
    home = base / "calibrate"
    count = base / "count"
    res = run_child(home, n, "cal", "--indexer", env={"LD_PRELOAD": str(faultfs), "FAULT_PATH": str(home),
                                                      "FAULT_COUNT_FILE": str(count)})
    assert res.returncode == 0, res.stderr
    return sum(int(line.split()[1]) for line in count.read_text().splitlines())


MODES = {  # name: (errno, span): span 0 = every write from the N-th on fails (a disk that stays full)
    "EIO once": ("EIO", 1),
    "ENOSPC for 40 writes": ("ENOSPC", 40),
    "ENOSPC for good": ("ENOSPC", 0),
}


def shim_sweep(faultfs: Path, base: Path, points: int, n: int) -> dict:
    total = calibrate(faultfs, base, n)
    rnd = random.Random(5)
    stats = {"runs": 0, "failed_calls": 0, "unclean": 0, "lost": 0, "landed_despite_error": 0, "reopen_ok": 0,
             "index_ok": 0, "recovered_in_process": 0, "windows": 0, "open_refused": 0, "db_present": 0}
    for mode, (errno_name, span) in MODES.items():
        ns = sorted(rnd.sample(range(1, total), points))
        for k, at in enumerate(ns):
            home = base / f"{errno_name}-{span}-{k}"
            res = run_child(home, n, f"r{k}", "--indexer", env={
                "LD_PRELOAD": str(faultfs), "FAULT_PATH": str(home), "FAULT_AT": str(at), "FAULT_SPAN": str(span),
                "FAULT_ERRNO": errno_name})
            assert res.returncode in (0, 3), f"{mode} at write {at}: child died\n{res.stderr[-3000:]}"
            out = parse(res.stdout)
            stats["runs"] += 1
            stats["unclean"] += len(out["unclean"])
            if out["open_err"]:
                stats["open_refused"] += 1
            stats["failed_calls"] += len(out["errors"])
            if not (home / "mnemo.db").exists():
                continue
            stats["db_present"] += 1
            v = verify(home)
            stats["reopen_ok"] += 1
            stats["index_ok"] += v["index_ok"]
            lost = [i for i in out["acked"] if i not in v["ids"]]
            stats["lost"] += len(lost)
            stats["landed_despite_error"] += len(v["ids"] - set(out["acked"]))
            if span and out["errors"]:
                stats["windows"] += 1
                last_err = max(i for i, _ in out["errors"])
                if any(i > last_err for i in out["acked"].values()) or last_err == n - 1:
                    stats["recovered_in_process"] += 1
            assert not lost, f"{mode} at write {at}: lost acknowledged writes {lost}"
            shutil.rmtree(home, ignore_errors=True)
    stats["calibrated_writes"] = total
    return stats


def report_shim(name: str, s: dict) -> None:
    figure(name, "runs (fault at a random write of the calibrated count)", s["runs"],
           writes_per_run=s["calibrated_writes"])
    figure(name, "failed calls reported to the caller", s["failed_calls"], unclean=s["unclean"])
    figure(name, "acknowledged writes lost", s["lost"])
    figure(name, "store reopened (integrity ok)", f"{s['reopen_ok']}/{s['db_present']}",
           refused_to_open_while_failing=s["open_refused"])
    figure(name, "index back in sync after reopen", f"{s['index_ok']}/{s['reopen_ok']}")
    figure(name, "writes succeed again after a fault window (same process)",
           f"{s['recovered_in_process']}/{s['windows']}")
    figure(name, "reported failed but stored (fsync-gate; a retry is a confirmation)", s["landed_despite_error"])


def check_shim(s: dict) -> None:
    assert s["lost"] == 0 and s["unclean"] == 0
    assert s["reopen_ok"] == s["db_present"]
    assert s["index_ok"] == s["reopen_ok"]
    assert s["recovered_in_process"] == s["windows"]


def test_nth_write_fails_via_fault_injecting_shim(faultfs, tmp_path):
    s = shim_sweep(faultfs, tmp_path, points=2, n=12)
    report_shim("test_io_errors[shim]", s)
    check_shim(s)


@pytest.mark.slow
def test_nth_write_fails_at_many_points(faultfs, tmp_path):
    s = shim_sweep(faultfs, tmp_path, points=20, n=40)
    report_shim("test_io_errors[shim, full]", s)
    check_shim(s)


def _mount_tmpfs(path: Path, size: str) -> bool:
    path.mkdir(parents=True, exist_ok=True)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size},mode=0700", "tmpfs", str(path)],
                       capture_output=True)
    return r.returncode == 0


def test_real_disk_full_on_a_small_tmpfs(tmp_path):
    mnt = tmp_path / "tiny"
    if os.geteuid() != 0 or not _mount_tmpfs(mnt, "4m"):
        pytest.skip("mounting a tmpfs needs root (CI runs as root); the shim and RLIMIT_FSIZE tests still run")
    try:
        home = mnt / "store"
        res = run_child(home, 400 if FULL else 120, "full", "--indexer", "--big")
        assert res.returncode in (0, 3), res.stderr[-3000:]
        out = parse(res.stdout)
        assert out["errors"], "the disk never filled up"
        assert not out["unclean"], out["unclean"][:3]
        first_err = min(i for i, _ in out["errors"])
        kinds = sorted({k for _, k in out["errors"]})
        # the store still opens and reads on the full disk
        assert integrity(home / "mnemo.db") == "ok"
        e = Engine(home, embedder=HashEmbedder(), start_indexer=False)
        try:
            have = {r[0] for r in e.store.conn().execute("SELECT id FROM memories")}
        finally:
            e.close()
        lost_full = [i for i in out["acked"] if i not in have]
        # space comes back: the same store takes writes again
        subprocess.run(["mount", "-o", "remount,size=64m", str(mnt)], check=True)
        res2 = run_child(home, 20, "after")
        out2 = parse(res2.stdout)
        v = verify(home)
        lost = [i for i in out["acked"] if i not in v["ids"]]
        name = "test_io_errors[tmpfs 4 MiB]"
        figure(name, "notes acknowledged before the disk was full", len(out["acked"]), first_failure=first_err)
        figure(name, "failed calls reported", len(out["errors"]), kinds="/".join(kinds))
        figure(name, "acknowledged writes lost (on the full disk / after growing it)", f"{len(lost_full)} / {len(lost)}")
        figure(name, "writes after space came back", f"{len(out2['acked'])}/20", index_in_sync=v["index_ok"])
        assert not lost_full and not lost
        assert len(out2["acked"]) == 20 and v["index_ok"]
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True)


def test_file_size_limit_rlimit_fsize(tmp_path):
    home = tmp_path / "store"
    res = run_child(home, 120, "fsize", "--fsize", "300000")
    assert res.returncode == 0, res.stderr[-3000:]
    out = parse(res.stdout)
    assert out["errors"] and not out["unclean"]
    v = verify(home)
    lost = [i for i in out["acked"] if i not in v["ids"]]
    res2 = run_child(home, 10, "after")  # no limit: writes again
    out2 = parse(res2.stdout)
    name = "test_io_errors[RLIMIT_FSIZE]"
    figure(name, "notes acknowledged / failed calls reported", f"{len(out['acked'])} / {len(out['errors'])}")
    figure(name, "acknowledged writes lost", len(lost))
    figure(name, "writes after the limit is lifted", f"{len(out2['acked'])}/10")
    assert not lost and len(out2["acked"]) == 10 and v["index_ok"]
