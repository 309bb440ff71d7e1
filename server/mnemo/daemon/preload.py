"""The owner's first step (issue 22, third pass): start loading the embedding model in a thread before the main
thread imports the owner's modules and opens the store, so the first answer waits for whichever of the two ends
last instead of both in turn (on this 2-core box the model is ~250 ms of CPU, the owner's imports and store ~150 ms).

Only the parsing of `python -m mnemo daemon run [--home H] [--idle-timeout S] [--warm ROOT]` and the standard
library are imported here: `python -m mnemo` reads this before anything else of the owner.
"""

from __future__ import annotations

import threading
from pathlib import Path


def owner_args(argv: list[str]) -> dict[str, str] | None:
    """The options of `daemon run` as {"--home": ..., "--idle-timeout": ..., "--warm": ...}; None for anything else
    (the CLI then handles it, and its errors, as before)."""
    opts: dict[str, str] = {}
    it = iter(argv)
    for arg in it:
        name, eq, val = arg.partition("=")
        if name not in ("--home", "--idle-timeout", "--warm") or name in opts:
            return None
        if not eq:
            nxt = next(it, None)
            if nxt is None or nxt.startswith("-"):
                return None
            val = nxt
        opts[name] = val
    if "--idle-timeout" in opts:
        try:
            float(opts["--idle-timeout"])
        except ValueError:
            return None
    return opts


def start_model(argv: list[str]) -> threading.Thread | None:
    """Load the store's configured embedder in a background thread (`get_embedder()`: the very instance the engine
    asks for later, built once). Any failure is left to the engine, which loads it again and reports why."""
    opts = owner_args(argv)
    if opts is None:
        return None
    try:
        import numpy  # noqa: F401 - in this thread first: two threads importing numpy at once can see it half-made

        from mnemo.core import store_settings
        from mnemo.core.embedding.embedder import get_embedder

        store_settings.bind(Path(opts["--home"]) if opts.get("--home") else store_settings.default_home())
    except Exception:  # noqa: BLE001 - the owner's own start reports any problem
        return None

    def load() -> None:
        try:
            get_embedder()
        except Exception:  # noqa: BLE001 - the engine's background thread loads it again and logs the error
            pass

    t = threading.Thread(target=load, name="mnemo-model", daemon=True)
    t.start()
    return t


__all__ = ["owner_args", "start_model"]
