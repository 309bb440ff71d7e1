"""The core imports no editor or protocol library (DESIGN: the core never imports pygls, lsprotocol, mcp)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

CORE = Path(__file__).resolve().parents[2] / "server" / "mnemo" / "core"
FORBIDDEN = ("pygls", "lsprotocol", "mcp")


def test_core_sources_never_import_protocol_libraries():
    offenders = []
    for path in CORE.rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [node.module]
            for n in names:
                if n.split(".")[0] in FORBIDDEN:
                    offenders.append(f"{path.relative_to(CORE)}:{node.lineno} imports {n}")
    assert not offenders, offenders
    assert len(list(CORE.rglob("*.py"))) >= 10  # the scan really saw the core


def test_importing_every_core_module_loads_no_protocol_library():
    code = (
        "import importlib, pkgutil, sys, mnemo.core as c\n"
        "for m in pkgutil.walk_packages(c.__path__, 'mnemo.core.'):\n"
        "    if m.name.endswith('__main__'): continue\n"
        "    importlib.import_module(m.name)\n"
        "import mnemo.service, mnemo.daemon.client\n"
        f"bad = [n for n in sys.modules if n.split('.')[0] in {FORBIDDEN!r}]\n"
        "print(len([n for n in sys.modules if n.startswith('mnemo.core')]), bad)\n"
        "assert not bad, bad\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    loaded = int(out.stdout.split()[0])
    assert loaded >= 10
