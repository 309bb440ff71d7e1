"""A benchmark's scratch folder, removed when the benchmark ends.

Benchmarks build stores of up to 100k memories (~0.5 GB each); left in the temporary folder, a few runs fill the
disk, and whatever runs next on the machine (an `npm install`, a test run) fails for want of space. Every bench
takes its folders from here: they are removed at exit, normal or by an exception, unless `MNEMO_BENCH_KEEP=1`
(then the path is printed to stderr, to look at the store afterwards).
"""

from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from pathlib import Path

_made: list[Path] = []


def scratch_dir(prefix: str) -> Path:
    """A new empty folder under the temporary folder, removed at exit (see the module docstring)."""
    path = Path(tempfile.mkdtemp(prefix=prefix))
    if not _made:
        atexit.register(_remove_all)
    _made.append(path)
    return path


def _remove_all() -> None:
    keep = os.environ.get("MNEMO_BENCH_KEEP", "0") == "1"
    for path in _made:
        if keep:
            print(f"kept (MNEMO_BENCH_KEEP=1): {path}", file=sys.stderr)
        else:
            shutil.rmtree(path, ignore_errors=True)
