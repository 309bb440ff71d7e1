"""Per-stage timings of one operation, written to a file in a bench run only (`MNEMO_TRACE_FILE`), never to stdout.

    st = trace.stages("lsp.hover")   # a no-op object when MNEMO_TRACE_FILE is unset (the normal case)
    ...; st.mark("parse")            # the time since the previous mark (or the start), under "parse"
    st.done(owner_calls=1)           # one JSON line: {"op", "pid", "thread", "t", "total_ms", "cpu_ms", "stages"}

`cpu_ms` is the calling thread's CPU time over the operation (`time.thread_time`). The language server and the
owner it starts both append to the same file (the owner inherits the variable; each line is one `O_APPEND` write),
so `bench/lsp_latency.py --trace` can put a hover's stages in both processes side by side. Stdlib only.
"""

from __future__ import annotations

import json
import os
import threading
import time
from typing import Any

from mnemo.core import environment

_fd: int | None = None
_lock = threading.Lock()
_local = threading.local()  # the operation this thread is timing (`begin` / `current`)


def _path() -> str:
    return environment.text("MNEMO_TRACE_FILE")


class _Off:
    __slots__ = ()

    def mark(self, name: str) -> None:
        pass

    def note(self, key: str, value: Any) -> None:
        pass

    def done(self, **extra: Any) -> None:
        pass


OFF = _Off()


class Stages:
    __slots__ = ("op", "t0", "last", "cpu0", "marks", "notes")

    def __init__(self, op: str, t0: float | None = None) -> None:
        self.op = op
        self.t0 = self.last = time.perf_counter() if t0 is None else t0
        self.cpu0 = time.thread_time()
        self.marks: list[tuple[str, float]] = []
        self.notes: dict[str, Any] = {}

    def mark(self, name: str) -> None:
        now = time.perf_counter()
        self.marks.append((name, round((now - self.last) * 1000, 3)))
        self.last = now

    def note(self, key: str, value: Any) -> None:
        """A fact about this operation, written with its line (e.g. whether a cache answered)."""
        self.notes[key] = value

    def done(self, **extra: Any) -> None:
        now = time.perf_counter()
        stages: dict[str, float] = {}
        for name, ms in self.marks:
            stages[name] = round(stages.get(name, 0.0) + ms, 3)
        line = {"op": self.op, "pid": os.getpid(), "thread": threading.current_thread().name, "t": time.time(),
                "total_ms": round((now - self.t0) * 1000, 3),
                "cpu_ms": round((time.thread_time() - self.cpu0) * 1000, 3), "stages": stages, **self.notes, **extra}
        write(line)


def enabled() -> bool:
    return bool(_path())


def stages(op: str, t0: float | None = None) -> Stages | _Off:
    """A timer of `op`'s stages (from `t0`, a `time.perf_counter()` value, default now) when MNEMO_TRACE_FILE is
    set, else the shared no-op."""
    return Stages(op, t0) if _path() else OFF


def begin(op: str) -> Stages | _Off:
    """`stages(op)`, also made this thread's current operation (so the code it calls can `current().mark(...)`)."""
    st = stages(op)
    _local.current = st
    return st


def current() -> Stages | _Off:
    """The operation this thread is timing (`begin`), else the no-op."""
    return getattr(_local, "current", OFF)


def end(st: Stages | _Off, **extra: Any) -> None:
    """`st.done(**extra)`, and this thread times nothing any more."""
    _local.current = OFF
    st.done(**extra)


def write(record: dict[str, Any]) -> None:
    global _fd
    path = _path()
    if not path:
        return
    data = (json.dumps(record, default=str) + "\n").encode()
    with _lock:
        if _fd is None:
            _fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.write(_fd, data)


__all__ = ["OFF", "Stages", "begin", "current", "enabled", "end", "stages", "write"]
