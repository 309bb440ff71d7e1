"""Compile the relation check (mnemo/native.py `MODULES`) with mypyc, beside its sources, and record what was built.

    python scripts/build_native.py          # build what is missing or out of date (scripts/setup.sh runs this)
    python scripts/build_native.py --clean  # remove the builds: the sources run

Each module is compiled on its own from a copy of the package (the source tree gets only the extension modules and
`server/mnemo/_native.json`), then imported in a fresh interpreter to check it loads. Without mypyc or a C compiler
nothing is built and the sources run, as before: this never fails the setup. mypyc comes with mypy
(`pip install mypy`)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SERVER = ROOT / "server"
sys.path.insert(0, str(SERVER))

from mnemo import native  # noqa: E402


def _built_files(name: str) -> list[Path]:
    """The extension modules a build of `name` leaves beside its source (the module and its `__mypyc` library)."""
    src = native.source_of(name)
    return sorted(src.parent.glob(f"{src.stem}.*.so")) + sorted(src.parent.glob(f"{src.stem}__mypyc.*.so")) + \
        sorted(src.parent.glob(f"{src.stem}.*.pyd")) + sorted(src.parent.glob(f"{src.stem}__mypyc.*.pyd"))


def clean() -> None:
    for name in native.MODULES:
        for f in _built_files(name):
            f.unlink()
    native.MANIFEST.unlink(missing_ok=True)


def _compile(name: str, work: Path) -> list[Path]:
    """Compile module `name` in the copy of the package at `work`; returns the extension files made there."""
    rel = native.source_of(name).relative_to(SERVER)
    env = {k: v for k, v in os.environ.items() if k != "MNEMO_NATIVE"}
    proc = subprocess.run([sys.executable, "-m", "mypyc", "--ignore-missing-imports", str(rel)], cwd=work, env=env,
                          capture_output=True, text=True)
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-5:])
        raise RuntimeError(f"mypyc failed for {name}:\n{tail}")
    stem = (work / rel).stem
    made = [p for p in (work / rel).parent.iterdir() if p.suffix in (".so", ".pyd")
            and (p.name.startswith(stem + ".") or p.name.startswith(stem + "__mypyc."))]
    if not made:
        raise RuntimeError(f"mypyc made no extension module for {name}")
    return made


def _loads() -> str | None:
    """Whether the built modules import, as built, in a fresh interpreter (None) or why not."""
    code = ("import importlib, sys, mnemo.native as n; [importlib.import_module(m) for m in n.MODULES]; "
            "sys.exit(', '.join(m for m, s in n.status().items() if s != 'compiled') or None)")
    env = {k: v for k, v in os.environ.items() if k != "MNEMO_NATIVE"}
    env["PYTHONPATH"] = str(SERVER) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["exit " + str(proc.returncode)])[-1]
    return None


def build() -> int:
    manifest = native.read_manifest()
    todo = [n for n in native.MODULES if not native.compiled_of(n).exists() or n in native.stale(manifest)]
    if not todo:
        print("==> the relation check is compiled and up to date (mnemo/native.py)")
        return 0
    try:
        import mypyc  # noqa: F401
    except ImportError:
        print("==> the relation check runs from source: no mypyc here (pip install mypy, then run "
              "scripts/build_native.py)")
        return 0
    if shutil.which(os.environ.get("CC", "cc")) is None and shutil.which("gcc") is None:
        print("==> the relation check runs from source: no C compiler here")
        return 0
    clean()
    record: dict = {"cache_tag": sys.implementation.cache_tag, "modules": {}}
    with tempfile.TemporaryDirectory(prefix="mnemo-native-") as tmp:
        done = []
        for name in native.MODULES:
            work = Path(tmp) / name
            shutil.copytree(SERVER / "mnemo", work / "mnemo", ignore=shutil.ignore_patterns("__pycache__", "*.so"))
            try:
                made = _compile(name, work)
            except RuntimeError as exc:
                print(f"==> the relation check runs from source: {exc}")
                clean()
                return 0
            dest = native.source_of(name).parent
            for f in made:
                shutil.copy2(f, dest / f.name)
            record["modules"][name] = native.fingerprint(native.source_of(name))
            done.append(name)
    native.MANIFEST.write_text(json.dumps(record, indent=1) + "\n")
    why = _loads()
    if why is not None:
        print(f"==> the relation check runs from source: the build does not load ({why})")
        clean()
        return 0
    print(f"==> compiled with mypyc: {', '.join(done)}")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--clean", action="store_true", help="remove the builds (the sources run)")
    args = ap.parse_args()
    if args.clean:
        clean()
        print("==> removed the compiled relation check: the sources run")
        return 0
    return build()


if __name__ == "__main__":
    sys.exit(main())
