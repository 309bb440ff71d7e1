"""The owner's first step (daemon/preload.py, issue 22 third pass): `python -m mnemo daemon run` starts loading
the store's configured embedder in a thread before it imports the owner, and the engine then gets that very
instance; any other argument list is left to the CLI and loads nothing."""

from __future__ import annotations

import json
import subprocess
import sys

from mnemo.daemon.preload import owner_args


def test_owner_args_are_the_daemon_runs_only():
    assert owner_args([]) == {}
    assert owner_args(["--home", "/x", "--idle-timeout=5", "--warm", "/r"]) == {
        "--home": "/x", "--idle-timeout": "5", "--warm": "/r"}
    for bad in (["--home"], ["--home", "--warm", "/r"], ["--idle-timeout", "soon"], ["--help"], ["--home", "a",
                                                                                                  "--home", "b"]):
        assert owner_args(bad) is None


def test_the_preloaded_model_is_the_one_the_engine_uses(tmp_path):
    """In a fresh process: start_model loads the store's configured embedder (its `embedder` setting, read from
    that store's config.json) in a thread named mnemo-model; the engine's `get_embedder()` returns that instance,
    built once."""
    home = tmp_path / "store"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({"embedder": "hash"}))
    code = f"""
import sys, threading
from mnemo.daemon.preload import start_model
from mnemo.core.embedding import embedder as E
built = []
orig = E._build
E._build = lambda kind: built.append(kind) or orig(kind)
t = start_model(["--home", {str(home)!r}])
assert t is not None and t.name == "mnemo-model"
t.join(30)
inst = E._instances.get("hash")
assert inst is not None, E._instances
from mnemo.core.engine import Engine
e = Engine({str(home)!r})
try:
    assert e.embedder is inst and built == ["hash"], built
finally:
    e.close()
assert start_model(["--verbose"]) is None
print("ok")
"""
    env = {k: v for k, v in __import__("os").environ.items() if k != "MNEMO_EMBEDDER"}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
