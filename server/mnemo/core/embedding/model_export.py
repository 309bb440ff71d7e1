"""The ONNX export of the embedding model, run once per machine in a child process (`ensure_onnx_model` in
core/embedding/model_files.py starts `python -m mnemo.core.embedding.model_export DIR`): the ONNX graph returning last_hidden_state, the
tokenizer files beside it, a check that onnxruntime reproduces torch on a padded batch, the int8 copy and its
check, the manifest last. Needs torch, onnx and transformers (at this moment only)."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path

from mnemo.core.embedding.model_files import (
    DIM,
    EXPORT_FORMAT,
    INT8_FILE,
    INT8_MIN_COSINE,
    MANIFEST_FILE,
    MAX_TOKENS,
    MODEL_ID,
    ONNX_FILE,
    OPSET,
    _gt_model_path,
    _gt_version,
    _offline_env,
)


def export_onnx(out_dir: Path) -> dict:
    """The export itself (runs in the child): ONNX graph returning last_hidden_state, tokenizer files beside it,
    and a check that onnxruntime reproduces torch on a padded batch. Writes the manifest last."""
    _offline_env()
    import torch  # heavy third-party imports: this module runs in the export's child process only
    import transformers

    transformers.logging.set_verbosity_error()
    try:
        transformers.logging.disable_progress_bar()
    except Exception:
        pass
    torch.set_num_threads(max(1, min(os.cpu_count() or 1, 4)))
    src = _gt_model_path()
    out_dir = Path(out_dir)
    _copy_tokenizer(src, out_dir)
    onnx_path = out_dir / ONNX_FILE
    wrapper, enc, args = _export_graph(src, onnx_path)
    with torch.no_grad():
        ref = wrapper(*args).numpy()
    got, diff = _run_onnx(onnx_path, args, ref)
    int8_path = out_dir / INT8_FILE
    int8_cos = _export_int8(onnx_path, int8_path, args, enc, got)
    import onnxruntime as ort

    manifest = {
        "format": EXPORT_FORMAT, "model_id": MODEL_ID, "dim": DIM, "max_tokens": MAX_TOKENS,
        "gt_version": _gt_version(), "opset": OPSET, "onnx_bytes": onnx_path.stat().st_size,
        "torch": torch.__version__, "transformers": transformers.__version__, "onnxruntime": ort.__version__,
        "max_abs_diff": diff, "int8_bytes": int8_path.stat().st_size, "int8_min_cosine": round(int8_cos, 5),
        "created": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    (out_dir / MANIFEST_FILE).write_text(json.dumps(manifest, indent=2), "utf-8")
    return manifest


def _copy_tokenizer(src: Path, out_dir: Path) -> None:
    """The tokenizer and config files of the packaged model, not its weights."""
    import shutil

    out_dir.mkdir(parents=True, exist_ok=False)
    for item in src.iterdir():
        if item.name in (".gitattributes",) or item.suffix in (".safetensors", ".bin", ".onnx", ".h5"):
            continue
        if item.is_dir():
            shutil.copytree(item, out_dir / item.name)
        else:
            shutil.copy2(item, out_dir / item.name)


NAMES = ["input_ids", "attention_mask", "token_type_ids"]


def _export_graph(src: Path, onnx_path: Path):
    """torch.onnx.export of the model (last_hidden_state, dynamic batch and sequence); returns the wrapped model,
    the check sample's encoding and the model's arguments for it."""
    import warnings

    import torch
    from transformers import AutoModel, AutoTokenizer

    model = AutoModel.from_pretrained(str(src), attn_implementation="eager")
    model.eval()

    class _LastHidden(torch.nn.Module):
        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, input_ids, attention_mask, token_type_ids):
            return self.m(input_ids=input_ids, attention_mask=attention_mask,
                          token_type_ids=token_type_ids).last_hidden_state

    wrapper = _LastHidden(model).eval()
    tok = AutoTokenizer.from_pretrained(str(src))
    sample = ["Mnemo remembers what the agent learned.", "a", "Export the embedding model once; run it without "
              "torch afterwards, padded to the longest text in the batch."]
    enc = tok(sample, padding=True, truncation=True, max_length=MAX_TOKENS, return_tensors="pt")
    args = (enc["input_ids"], enc["attention_mask"], torch.zeros_like(enc["input_ids"]))
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(wrapper, args, str(onnx_path), input_names=NAMES, output_names=["last_hidden_state"],
                          dynamic_axes={**{n: {0: "batch", 1: "sequence"} for n in NAMES},
                                        "last_hidden_state": {0: "batch", 1: "sequence"}},
                          opset_version=OPSET, do_constant_folding=True, dynamo=False)
    return wrapper, enc, args


def _session(path: Path):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.log_severity_level = 3
    return ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])


def _run_onnx(onnx_path: Path, args, ref):
    """onnxruntime's output on the sample, and its largest difference from torch's (refused above 1e-3)."""
    import numpy as np

    got = _session(onnx_path).run(None, {n: a.numpy().astype(np.int64) for n, a in zip(NAMES, args, strict=True)})[0]
    diff = float(np.max(np.abs(got - ref)))
    if not diff < 1e-3:
        raise RuntimeError(f"ONNX output differs from torch by {diff}")
    return got, diff


def _export_int8(onnx_path: Path, int8_path: Path, args, enc, got) -> float:
    """The int8 variant: dynamic quantization of the weights, per output channel (per-tensor loses too much:
    cosine ~0.96 to the float model; per channel ~0.99). Checked on the same sample, mean-pooled as at run time;
    returns the lowest cosine (refused below INT8_MIN_COSINE)."""
    import numpy as np
    from onnxruntime.quantization import QuantType, quantize_dynamic

    quantize_dynamic(str(onnx_path), str(int8_path), weight_type=QuantType.QInt8, per_channel=True)
    qgot = _session(int8_path).run(None, {n: a.numpy().astype(np.int64) for n, a in zip(NAMES, args, strict=True)})[0]
    mask = enc["attention_mask"].numpy()[:, :, None].astype(np.float32)
    pooled_f = (got * mask).sum(axis=1) / mask.sum(axis=1)
    pooled_q = (qgot * mask).sum(axis=1) / mask.sum(axis=1)
    cos = (pooled_f * pooled_q).sum(axis=1) / (np.linalg.norm(pooled_f, axis=1) * np.linalg.norm(pooled_q, axis=1))
    int8_cos = float(cos.min())
    if not int8_cos >= INT8_MIN_COSINE:
        raise RuntimeError(f"the int8 export drifts from the float model (cosine {int8_cos:.4f})")
    return int8_cos


def _main(argv: list[str] | None = None) -> int:
    """`python -m mnemo.core.embedding.model_export DIR`: export into DIR (which must not exist); the manifest, or why it
    failed, goes to stderr."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m mnemo.core.embedding.model_export DIR (use `python -m mnemo.core.embedding.embedder --prepare`)",
              file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.INFO, stream=sys.stderr, format="%(message)s")
    try:
        m = export_onnx(Path(argv[0]))
    except Exception as e:
        print(f"export failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    print(json.dumps(m), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(_main())
