"""A bench's scratch stores go when it ends (`bench/scratch.py`): left in the temporary folder, 100k stores of
~0.5 GB each filled the disk and the next CI run failed installing code-server (issue 22, ninth pass)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

BENCH = Path(__file__).resolve().parents[2] / "bench"

CHILD = """
import sys
sys.path.insert(0, {bench!r})
from scratch import scratch_dir
d = scratch_dir("mnemo-scratch-test-")
(d / "store.db").write_bytes(b"x" * 1024)
print(d)
if sys.argv[1] == "raise":
    raise SystemExit("the bench failed")
"""


def _run(tmp_path: Path, how: str, **env: str) -> tuple[Path, subprocess.CompletedProcess]:
    proc = subprocess.run([sys.executable, "-c", CHILD.format(bench=str(BENCH)), how], capture_output=True, text=True,
                          env={**os.environ, "TMPDIR": str(tmp_path), **env}, timeout=60)
    return Path(proc.stdout.strip().splitlines()[0]), proc


def test_removed_when_the_bench_ends_or_fails(tmp_path):
    for how in ("end", "raise"):
        made, proc = _run(tmp_path, how)
        assert made.parent == tmp_path and not made.exists(), (how, proc.stderr)
    assert list(tmp_path.iterdir()) == []


def test_kept_on_request_and_said_where(tmp_path):
    made, proc = _run(tmp_path, "end", MNEMO_BENCH_KEEP="1")
    assert (made / "store.db").exists()
    assert f"kept (MNEMO_BENCH_KEEP=1): {made}" in proc.stderr
