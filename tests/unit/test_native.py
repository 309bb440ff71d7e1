"""The relation check compiled with mypyc (mnemo/native.py, scripts/build_native.py): it decides what its source
decides, a build is loaded only for the source it was made from, and `MNEMO_NATIVE=0` runs the sources."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mnemo import native

ROOT = Path(__file__).resolve().parents[2]
PAIRS = ROOT / "bench" / "data" / "conflict_pairs.jsonl"

# Every pair of the conflict benchmark at four cosines (under the gate, between, near the duplicate line, above it):
# the tokens of both notes, the features the model reads, and the decision, as JSON.
DECIDE = f"""
import json, sys
from mnemo import native
from mnemo.core.embedding.embedder import OnnxMiniLM
from mnemo.core.relation import compare, words
vocab = OnnxMiniLM(quantized=True).vocabulary()
rows = [json.loads(line) for line in open({str(PAIRS)!r})]
out = []
for r in rows:
    for cos in (0.3, 0.55, 0.74, 0.93):
        f = compare.features(r["old"], r["new"], cos, vocab)
        d = compare.decide_many([(r["old"], r["new"], cos)], None, vocab, scores=False)[0]
        out.append([compare.vector(f), sorted(f.signals), d.to_dict()])
    out.append([list(t) for t in words.tokens(r["new"])])
print(json.dumps({{"status": native.status(), "parser": compare.parser_version(), "out": out}}))
"""


def _run(code: str, **env: str) -> subprocess.CompletedProcess:
    full = {k: v for k, v in os.environ.items() if k != "MNEMO_NATIVE"}
    full["PYTHONPATH"] = str(ROOT / "server") + os.pathsep + full.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-c", code], env={**full, **env}, capture_output=True, text=True,
                          timeout=240)


def _built() -> bool:
    return all(native.compiled_of(n).exists() for n in native.MODULES) and not native.stale(native.read_manifest())


@pytest.mark.skipif(not _built(), reason="the relation check is not compiled here (scripts/build_native.py: needs "
                                         "mypy and a C compiler)")
def test_the_compiled_relation_check_decides_what_its_source_decides():
    compiled, source = _run(DECIDE), _run(DECIDE, MNEMO_NATIVE="0")
    assert compiled.returncode == 0, compiled.stderr
    assert source.returncode == 0, source.stderr
    a, b = json.loads(compiled.stdout), json.loads(source.stdout)
    assert set(a["status"].values()) == {"compiled"} and set(b["status"].values()) == {"source"}
    assert a["parser"] == b["parser"] != ""  # a stored parse is trusted by either
    assert len(a["out"]) == 5 * sum(1 for _ in PAIRS.open()) > 8000
    assert a["out"] == b["out"]


def test_mnemo_native_0_runs_the_sources_and_another_value_is_refused():
    code = "import json, mnemo.core.relation.compare, mnemo.native as n; print(json.dumps(n.status()))"
    ran = _run(code, MNEMO_NATIVE="0")
    assert ran.returncode == 0, ran.stderr
    assert set(json.loads(ran.stdout).values()) == {"source"}
    bad = _run("import mnemo", MNEMO_NATIVE="yes")
    assert bad.returncode != 0 and "MNEMO_NATIVE='yes' is not 0 or 1" in bad.stderr


def _package(tmp_path: Path, monkeypatch) -> Path:
    """A stand-in package with the first module of `MODULES` built beside its source."""
    monkeypatch.setattr(native, "PACKAGE", tmp_path)
    src = native.source_of(native.MODULES[0])
    src.parent.mkdir(parents=True)
    src.write_text("X = 1\n")
    native.compiled_of(native.MODULES[0]).write_bytes(b"\x7fELF built")
    return src


def _manifest(src: Path, **extra) -> dict:
    return {"cache_tag": sys.implementation.cache_tag, "modules": {native.MODULES[0]: native.fingerprint(src)},
            **extra}


def test_a_build_is_loaded_only_for_the_source_it_was_made_from(tmp_path, monkeypatch):
    src = _package(tmp_path, monkeypatch)
    manifest = _manifest(src)
    assert native.stale(manifest) == []  # the other module is not built: its source loads anyway
    src.write_text("X = 2\n")  # edited after the build (same size: the digest tells)
    assert native.stale(manifest) == [native.MODULES[0]]
    assert native.stale(_manifest(src)) == []  # built again
    assert native.stale(_manifest(src, cache_tag="cpython-99")) == [native.MODULES[0]]  # another interpreter
    assert native.stale({}) == [native.MODULES[0]]  # no manifest: nothing says what the build was made from


def test_a_source_sent_module_is_found_in_its_source(tmp_path, monkeypatch):
    src = _package(tmp_path, monkeypatch)
    finder = native._FromSource([native.MODULES[0]])
    spec = finder.find_spec(native.MODULES[0])
    assert spec is not None and spec.origin == str(src)
    assert finder.find_spec(native.MODULES[1]) is None and finder.find_spec("json") is None


def test_this_process_loads_what_the_guard_decided():
    """The modules this test run imported are the builds where they match their sources, else the sources."""
    import mnemo.core.relation.compare  # noqa: F401
    import mnemo.core.relation.words  # noqa: F401

    status = native.status()
    expected = "compiled" if _built() and os.environ.get("MNEMO_NATIVE", "1") != "0" else "source"
    assert set(status.values()) == {expected}, status


def test_doctor_says_how_the_relation_check_runs():
    from mnemo.core.recovery.doctor import _native_check

    got = _native_check(None)  # type: ignore[arg-type]  (it reads no store)
    assert got["name"] == "relation check" and got["status"] == "ok"
    compiled = set(native.status().values()) == {"compiled"}
    assert ("compiled with mypyc" in got["detail"]) == compiled
    assert compiled or "runs from its Python source" in got["detail"]
