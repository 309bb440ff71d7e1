"""The type checker sees the one declaration everywhere: the owner's client (`DaemonService`) is a `Service` (each
operation has its declared parameters and result type, not `__getattr__`'s Any), and the core's main operations
return the result types of core/api_types/results.py that the service passes through unchanged. Checked by running
mypy (the project's settings) on a snippet that uses them."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

SNIPPET = '''
from pathlib import Path

from mnemo import api
from mnemo.core.memory import history, manage, recall, write
from mnemo.core import review
from mnemo.daemon.client import DaemonService

svc = DaemonService.open(Path("/nowhere"))
ctx: api.Ctx = {"project_id": "p"}
reveal_type(svc.recall(ctx, "q"))  # L10
reveal_type(svc.remember(ctx, "x", importance=0.9))  # L11
svc.remember(ctx, "x", colour="red")  # L12
reveal_type(recall.recall)  # L13
reveal_type(write.remember)  # L14
reveal_type(manage.list_memories)  # L15
reveal_type(history.update)  # L16
reveal_type(review.review_list)  # L17
reveal_type(manage.deprecate)  # L18
'''


@pytest.fixture(scope="module")
def mypy_lines(tmp_path_factory) -> dict[int, list[str]]:
    pytest.importorskip("mypy")
    snippet = tmp_path_factory.mktemp("typed") / "snippet.py"
    snippet.write_text(SNIPPET.lstrip())  # the "# L" comments are the line numbers
    r = subprocess.run([sys.executable, "-m", "mypy", "--config-file", str(ROOT / "pyproject.toml"), str(snippet)],
                       cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env={"MYPYPATH": str(ROOT / "server"), "PATH": "/usr/bin:/bin"})
    out: dict[int, list[str]] = {}
    for line in r.stdout.splitlines():
        m = re.match(r".*snippet\.py:(\d+): (?:note|error): (.*)", line)
        if m:
            out.setdefault(int(m.group(1)), []).append(m.group(2))
    assert out, r.stdout + r.stderr
    return out


def revealed(lines: dict[int, list[str]], n: int) -> str:
    return next(t for t in lines[n] if t.startswith("Revealed type is"))


def test_the_owner_client_is_a_service_with_declared_results(mypy_lines):
    assert "mnemo.core.api_types.results.RecallResult" in revealed(mypy_lines, 10)
    assert "mnemo.core.api_types.results.RememberResult" in revealed(mypy_lines, 11)
    # an option remember's declaration does not hold is a type error, at the call
    assert any('Unexpected keyword argument "colour" for "remember" of "Service"' in t for t in mypy_lines[12])


@pytest.mark.parametrize("line, result", [(13, "RecallResult"), (14, "RememberResult"), (15, "MemoryList"),
                                          (16, "UpdateResult"), (17, "ReviewList"), (18, "MemoryChange")])
def test_the_core_returns_the_declared_result_types(mypy_lines, line, result):
    assert f"mnemo.core.api_types.results.{result}" in revealed(mypy_lines, line).rsplit("->", 1)[1]
