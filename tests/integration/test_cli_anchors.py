"""`mnemo anchor` / `mnemo unanchor` through the real CLI and owner process: the symbol's hash is read from the
file, a changed symbol marks the memory stale in recall, and bad input is refused with what to do."""

from __future__ import annotations

import json

import pytest

from conftest import git, run_cli
from mnemo.daemon.client import DaemonService

ENV = {"MNEMO_EMBEDDER": "hash", "MNEMO_MIN_CONFIDENCE": "0"}
SOURCE = "class Pay:\n    def charge(self, amount):\n        return amount\n\n\ndef refund(x):\n    return -x\n"


@pytest.fixture
def cli(home, git_repo):
    (git_repo / "pay.py").write_text(SOURCE)
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "pay")

    def run(*args, json_out=True, ok=True):
        r = run_cli(*args, *(["--json"] if json_out else []), home=home, cwd=git_repo, env=ENV)
        if ok:
            assert r.returncode == 0, r.stderr + r.stdout
        return json.loads(r.stdout) if json_out and ok and r.stdout.strip() else r

    yield run
    DaemonService(home, autostart=False).shutdown()


def test_anchor_and_unanchor(cli, git_repo, home):
    mid = cli("remember", "charge must be idempotent: retries reuse the key")["memory"]["id"]
    anchors = cli("anchor", mid, "--file", "pay.py", "--symbol", "charge")["memory"]["anchors"]
    assert [(a["path"], a["symbol"], a["start_line"], a["end_line"]) for a in anchors] == \
        [("pay.py", "Pay.charge", 1, 2)] and len(anchors[0]["hash"]) == 64
    at_line = cli("anchor", mid, "--file", str(git_repo / "pay.py"), "--line", "7")["memory"]["anchors"]
    assert {a["symbol"] for a in at_line} == {"Pay.charge", "refund"}  # the symbol around line 7
    human = cli("anchor", mid, "--file", "pay.py", "--symbol", "Pay.charge", json_out=False).stdout
    assert "anchored" in human and "pay.py › Pay.charge (lines 2-3)" in human

    bad = cli("anchor", mid, "--file", "pay.py", "--symbol", "nope", json_out=False, ok=False)
    assert bad.returncode == 2 and "no symbol 'nope'" in bad.stderr and "Pay.charge, refund" in bad.stderr
    bad = cli("anchor", mid, "--file", "pay.py", "--line", "99", json_out=False, ok=False)
    assert bad.returncode == 2 and "pay.py has 7 lines" in bad.stderr
    bad = cli("anchor", mid, "--file", "../elsewhere.py", json_out=False, ok=False)
    assert bad.returncode == 2 and "outside the project" in bad.stderr

    r = cli("recall", "charge idempotent retries")
    assert [c["stale"] for c in r["cards"] if c["item_id"] == mid] == [False]
    # the code changes outside any editor (an agent, vim, a pull): recall checks the anchors as it reads them
    (git_repo / "pay.py").write_text(SOURCE.replace("return amount", "return amount * 100").replace("-x", "-2 * x"))
    r = cli("recall", "charge idempotent retries")
    assert [c["stale"] for c in r["cards"] if c["item_id"] == mid] == [True]
    assert "STALE: code changed since this was written" in cli("recall", "charge idempotent", json_out=False).stdout
    assert "[stale: code changed]" in cli("list", json_out=False).stdout
    assert "stale" in cli("review", "--json", json_out=False).stdout

    left = cli("unanchor", mid, "--file", "pay.py", "--symbol", "refund")["memory"]["anchors"]
    assert [a["symbol"] for a in left] == ["Pay.charge"]
    assert cli("unanchor", mid)["memory"]["anchors"] == []
    again = cli("unanchor", mid, json_out=False, ok=False)
    assert again.returncode == 2 and "has no anchor" in again.stderr
    lone = cli("unanchor", mid, "--symbol", "refund", json_out=False, ok=False)
    assert lone.returncode == 2 and "--symbol needs --file" in lone.stderr
