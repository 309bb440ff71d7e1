"""The relation check compiled to C (mypyc), and the guard that loads a compiled module only for its own source.

Every write compares the new note with up to ten neighbours (core/relation/compare.py: tokens, word diffs, the
conflict model): pure Python, ~1.2 ms of a write and of every note of an import. `scripts/build_native.py` (run by
`scripts/setup.sh`) compiles the modules of `MODULES` with mypyc into extension modules beside their sources; the
same code, typed as it is, run as C: ~40% less CPU for the check (~0.4 ms a write), the same decisions (tests/unit/test_native.py
compares them on every pair of bench/data/conflict_pairs.jsonl). Where no compiler or no mypyc is at hand, nothing
is built and the sources run, as before.

An extension module beside its source is what Python imports first. So that an edited source is never shadowed by
a stale build, the build writes a manifest (`_native.json`: the interpreter it was built for, and per module its
source's size, time and SHA-256); `install` (called when the `mnemo` package is imported, before any of these
modules) sends every module whose source no longer matches, or every one with `MNEMO_NATIVE=0`, to its source.
Stdlib only, and cheap: a stat per module, a hash only when a source's size or time moved.
"""

from __future__ import annotations

import hashlib
import importlib.abc
import importlib.machinery
import importlib.util
import json
import sys
from pathlib import Path

from mnemo.core import environment

MODULES = ("mnemo.core.relation.words", "mnemo.core.relation.compare")
PACKAGE = Path(__file__).resolve().parent
MANIFEST = PACKAGE / "_native.json"


def source_of(name: str) -> Path:
    """The source file of module `name` (a module of `MODULES`)."""
    return PACKAGE.joinpath(*name.split(".")[1:]).with_suffix(".py")


def compiled_of(name: str) -> Path:
    """Where this interpreter would find module `name` compiled (beside its source)."""
    src = source_of(name)
    return src.with_name(src.stem + importlib.machinery.EXTENSION_SUFFIXES[0])


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def fingerprint(path: Path) -> dict:
    """What the manifest records of a source: its size and time (the quick check) and its SHA-256 (the real one)."""
    st = path.stat()
    return {"size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha256": digest(path)}


def _matches(path: Path, recorded: dict | None) -> bool:
    if not isinstance(recorded, dict):
        return False
    try:
        st = path.stat()
        if st.st_size == recorded.get("size") and st.st_mtime_ns == recorded.get("mtime_ns"):
            return True
        return digest(path) == recorded.get("sha256")
    except OSError:
        return False


def read_manifest(path: Path = MANIFEST) -> dict:
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def stale(manifest: dict, names: tuple[str, ...] = MODULES) -> list[str]:
    """The modules of `names` built beside their source that must not be loaded from that build: the manifest is
    missing, made for another interpreter, or records another source than the one there now."""
    out = []
    same_python = manifest.get("cache_tag") == sys.implementation.cache_tag
    recorded = manifest.get("modules")
    modules: dict = recorded if isinstance(recorded, dict) else {}
    for name in names:
        if not compiled_of(name).exists():
            continue  # not built: the source is what loads anyway
        if not same_python or not _matches(source_of(name), modules.get(name)):
            out.append(name)
    return out


class _FromSource(importlib.abc.MetaPathFinder):
    """Finds the modules it names in their source files (ahead of the extension modules beside them)."""

    def __init__(self, names: list[str]):
        self.names = frozenset(names)

    def find_spec(self, fullname, path=None, target=None):
        if fullname not in self.names:
            return None
        return importlib.util.spec_from_file_location(fullname, source_of(fullname))


def mode() -> str:
    """`MNEMO_NATIVE`: "1" (the default: a build that matches its source is used) or "0" (the sources always)."""
    value = (environment.raw("MNEMO_NATIVE") or "1").strip()
    if value not in ("0", "1"):
        raise RuntimeError(f"MNEMO_NATIVE={value!r} is not 0 or 1: set MNEMO_NATIVE=0 to run the relation check "
                           "from its Python source, or unset it")
    return value


def install() -> list[str]:
    """Send the modules that must run from source there (before any is imported); returns their names."""
    names = [n for n in MODULES if compiled_of(n).exists()] if mode() == "0" else stale(read_manifest())
    if names and not any(isinstance(f, _FromSource) for f in sys.meta_path):
        sys.meta_path.insert(0, _FromSource(names))
    return names


def status() -> dict[str, str]:
    """Per module of `MODULES`: "compiled" or "source", as loaded in this process (or as it would load)."""
    out = {}
    for name in MODULES:
        mod = sys.modules.get(name)
        if mod is not None:
            loaded = str(getattr(mod, "__file__", "") or "")
            out[name] = "source" if loaded.endswith(".py") else "compiled"
        else:
            routed = any(isinstance(f, _FromSource) and name in f.names for f in sys.meta_path)
            out[name] = "compiled" if compiled_of(name).exists() and not routed else "source"
    return out
