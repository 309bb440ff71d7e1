"""The exact search of a large partition over a compact copy of its vectors (issue 22, third pass).

A float32 scan of a 100k-row partition reads 154 MB per query (~13 ms here) and keeps those pages resident in the
owner; chroma's HNSW index answers faster but holds ~400 MB more. This scan keeps the partition's rows as int8
(one scale per row: 384 bytes a row), and scores them with onnxruntime's integer matrix product (the int8 weights
prepacked once: ~1.1-1.5 ms for 100k rows on two threads), the query quantized to two rows of uint8 (its bytes and
those of their remainder, one product for both). The int8 score of a row differs from its float32 cosine by at most
`bound` (computed per query from the quantization steps), so every row whose int8 score comes within twice that
bound of the k-th best is re-scored in float32 from the vector file: the top k returned is the float32 exact scan's,
provably, not an approximation (tests/unit/test_compact_scan.py checks it on real MiniLM vectors). Typically about
a hundred rows are re-scored.

onnxruntime is the embedder's runtime, loaded in the owner anyway. The model (one `MatMulInteger` node with the
weights as an initializer) is written here as protobuf bytes: importing the `onnx` package to build it costs ~1.5 s
of CPU (ml_dtypes), more than everything else this does. The test checks the bytes with `onnx.checker`.

The product must be exact for the bound to hold. On a CPU with AVX2 but without VNNI, onnxruntime multiplies uint8 by
int8 with `vpmaddubsw`, which adds each pair of products into a saturating int16: a query byte of 255 against two
weights of 127 (64,770) is clipped to 32,767, and the score is off by far more than the bound (seen on an AMD EPYC
without VNNI: a row's product -9,412 instead of -10,979). So once per process and dimension a probe asks the kernel
the worst pair of all (every weight +/-127, every query byte at the top) and the query is quantized to 255 levels
only where that comes back exact, else to 127 (then no pair can pass 2 * 127 * 127 = 32,258: exact on either
kernel; the remainder row makes up the coarser step). A kernel that is wrong even then fails the build, and the
partition is scanned in float32 (`VectorFile.ensure_compact`).
"""

from __future__ import annotations

import functools
import mmap
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # numpy is imported where it is used (the CLI imports this module through vector_file)
    import numpy as np

# A partition with at least this many rows gets a compact scan once the vector file is checked; smaller ones are
# scanned in float32. At 10k rows the float32 scan costs ~0.6 ms of CPU, the compact one ~0.15 ms with its candidates
# re-scored from the mapped rows; at 1k both ~0.07 ms (issue 22, fourth pass: docs/benchmarks.md).
MIN_ROWS = 2000
# A partition with at least this many rows also drops its float32 pages from the owner's RSS once its compact scan
# is built (~30 MB at this size), and its candidates are re-scored through `SparseRows`; a smaller one keeps the
# mapped pages and re-scores from them (a gather from the shared mapping, nothing to drop).
TRIM_ROWS = 20000
# A partition with at least this many rows is scored on two of onnxruntime's threads (where the machine has two
# cores): 100k rows 2.0 -> 1.1 ms, 50k 0.84 -> 0.38 ms, 20k 0.17 -> 0.14 ms; no slower with both cores busy (its
# threads do not spin while they wait). docs/benchmarks.md, issue 22's seventh pass.
PARALLEL_ROWS = 20000
SLACK = 1e-4  # float32 rounding of the approximate and of the exact scores (both ~1e-6 here): far above both


class CompactScan:
    """The int8 copy of rows [start, start + n) of a vector file, scored by one onnxruntime session (`build`)."""

    def __init__(self, weights_t: np.ndarray, scales: np.ndarray, row_l1: np.ndarray, start: int):
        """`weights_t`: the int8 rows transposed (dim x n), handed to onnxruntime without a copy (an external
        initializer) and prepacked by it once; `scales`: float32 per row (row ~= scale * int8 row); `row_l1`: the L1
        norm of each dequantized row (the largest bounds what the query's quantization can move any score; each
        row's, its own score: `candidates`)."""
        import numpy as np

        dim, n = weights_t.shape
        self.start, self.n, self.dim = start, n, dim
        self.scales = np.ascontiguousarray(scales, dtype=np.float32)
        self.max_scale = float(self.scales.max()) if n else 0.0
        self.row_l1 = np.ascontiguousarray(row_l1, dtype=np.float32)
        self.max_l1 = float(self.row_l1.max()) if n else 0.0
        self._weights = np.ascontiguousarray(weights_t, dtype=np.int8)  # must outlive the session
        threads = min(2, os.cpu_count() or 1) if n >= PARALLEL_ROWS else 1
        self._session, self._value = _session_over(self._weights, threads)
        self.levels = query_levels(dim)  # the query's top byte: 255 where the kernel's product is exact, else 127

    def approx(self, q: np.ndarray) -> tuple[np.ndarray, float]:
        """(approximate cosines of every row, the bound on their error) for the float32 query `q` (`_approx`)."""
        scores, bound, _half_l1, _q_err = self._approx(q)
        return scores, bound

    def _approx(self, q: np.ndarray) -> tuple[np.ndarray, float, float, float]:
        """(approximate cosines of every row, the bound on their error, half the query's L1 norm, the largest error
        of its quantization: a row of scale `s` and dequantized L1 norm `l1` scores within `s * half_l1 + q_err *
        l1 + SLACK` of its cosine) for the float32 query `q`. The query is quantized twice, around the zero point
        `levels // 2`: its bytes, then the bytes of what they left over (a step `2 * (levels // 2)` times finer);
        both rows are scored by one product, which reads the weights once (as fast as one row), and the query's
        part of the error all but vanishes: the bound is about half of a one-row query's, and so are the
        candidates re-scored (100k rows, k = 40: ~200 -> ~90; issue 22, seventh pass)."""
        import numpy as np

        half = self.levels // 2
        q64 = np.asarray(q, dtype=np.float64)
        peak = float(np.abs(q64).max()) if q64.size else 0.0
        if peak == 0.0:
            return np.zeros(self.n, dtype=np.float32), SLACK, 0.0, 0.0
        step = peak / half
        first = np.clip(np.round(q64 / step), -half, half)
        rest = q64 - first * step  # within step / 2 of zero
        fine = step / (2 * half)
        second = np.clip(np.round(rest / fine), -half, half)
        q_err = float(np.abs(rest - second * fine).max())  # |q - q'|_inf, q' = step * first + fine * second
        qq = (np.stack([first, second]) + half).astype(np.uint8)
        y = self._session.run(None, {"q": qq, "z": np.array(half, dtype=np.uint8)})[0]
        scores = (y[0].astype(np.float32) * np.float32(step) + y[1].astype(np.float32) * np.float32(fine)) \
            * self.scales
        # |v.q - s*v8.q'| <= |(v - s*v8).q| + |s*v8.(q - q')| <= (s/2)*|q|_1 + |q - q'|_inf * |s*v8|_1
        half_l1 = float(np.abs(q64).sum()) / 2
        bound = self.max_scale * half_l1 + q_err * self.max_l1 + SLACK
        return scores, bound, half_l1, q_err

    def candidates(self, q: np.ndarray, want: int, masked: np.ndarray | None = None) -> np.ndarray:
        """Row offsets (within the partition), in row order, that hold the float32 top `want` of the rows not
        `masked` (a write's changed rows). First every such row whose approximate score is within 2 * bound of
        the `want`-th best of theirs. Proof: the `want` best approximate rows all score >= kth - bound exactly, so
        the `want`-th best exact score is >= kth - bound; a row of the exact top `want` then scores >= kth - 2 *
        bound approximately. Then, of those, each held to its own bound instead of the largest row's (its scale
        and L1 norm: `_approx`): a row of the exact top `want` has an upper bound at least the `want`-th best of
        the rows' lower bounds, which the rows left out before cannot change (they are under the `want`-th best
        approximate score less the largest bound, and so under that `want`-th best). At 100k rows, k = 40, over
        200 write-like queries: 67 rows re-scored (p90 85) instead of 92 (p90 129; issue 22, eleventh pass)."""
        import numpy as np

        if want >= self.n:
            return np.arange(self.n)
        scores, bound, half_l1, q_err = self._approx(q)
        if masked is not None:
            scores[masked] = -np.inf
        rows = np.flatnonzero(scores >= kth_best(scores, want) - 2 * bound)
        if len(rows) <= want:
            return rows
        got = scores[rows]
        own = self.scales[rows] * np.float32(half_l1) + self.row_l1[rows] * np.float32(q_err) + np.float32(SLACK)
        return rows[got + own >= kth_best(got - own, want)]


def kth_best(scores: np.ndarray, k: int, stride: int = 16) -> float:
    """The `k`-th largest of `scores` (1 <= k <= len), as `np.partition(scores, n - k)[n - k]` finds it, without
    partitioning every score: the `k`-th largest of every `stride`-th score is a floor (at least `k` scores reach
    it), so only the scores at or above it are partitioned (~`k * stride` of them). At 100k scores, profiled in a
    write: ~0.5 -> ~0.2 ms (issue 22, tenth pass)."""
    import numpy as np

    n = len(scores)
    sample = scores[::stride]
    if len(sample) <= k or n < 4 * stride * k:
        return float(np.partition(scores, n - k)[n - k])
    floor = np.partition(sample, len(sample) - k)[len(sample) - k]
    above = scores[scores >= floor]
    return float(np.partition(above, len(above) - k)[len(above) - k])


def _session_over(weights_t: np.ndarray, threads: int = 1):
    """An onnxruntime session of `matmul_integer_model` over the int8 `weights_t` (dim x n), as `CompactScan` makes
    it, on `threads` intra-op threads (the product is integer: the same result on any number)."""
    import onnxruntime as ort

    dim, n = weights_t.shape
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    # a waiting thread sleeps instead of spinning: no core burnt between queries, none taken from the embedder
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    so.log_severity_level = 3
    value = ort.OrtValue.ortvalue_from_numpy(weights_t)
    so.add_external_initializers(["W"], [value])
    return ort.InferenceSession(matmul_integer_model(dim, n), so, providers=["CPUExecutionProvider"]), value


def exact_at(levels: int, dim: int) -> bool:
    """Whether onnxruntime's integer product is exact for query bytes up to `levels` on this CPU: the worst case of
    every pair of products (all weights +127 in one column, -127 in the next; every query byte `levels`; the zero
    point 0 and halfway), against the exact sums. A kernel that saturates pairs of products (AVX2 without VNNI) fails at 255."""
    import numpy as np

    weights_t = np.empty((dim, 16), dtype=np.int8)
    weights_t[:, 0::2], weights_t[:, 1::2] = 127, -127
    session, _value = _session_over(weights_t)  # `_value` holds the weights while the session runs
    q = np.full((1, dim), levels, dtype=np.uint8)
    for zero in (0, levels // 2):  # the zero point too: a query's is anywhere in 0..levels
        y = session.run(None, {"q": q, "z": np.array(zero, dtype=np.uint8)})[0][0]
        if not np.array_equal(y.astype(np.int64), ((q.astype(np.int64) - zero) @ weights_t.astype(np.int64))[0]):
            return False
    return True


@functools.lru_cache(maxsize=8)
def query_levels(dim: int) -> int:
    """The top byte of a quantized query (`CompactScan.approx`): 255 where the product is exact for every byte (VNNI,
    AVX-512, ARM), else 127, which no saturating pair can overflow (module docstring). Probed once per process and
    dimension; a kernel wrong at 127 too is refused (`build` fails: the partition is scanned in float32)."""
    if exact_at(255, dim):
        return 255
    if exact_at(127, dim):
        return 127
    raise RuntimeError("onnxruntime's integer product is not exact on this CPU")


def build(read_rows, start: int, n: int, dim: int, chunk: int = 1024) -> CompactScan:
    """A `CompactScan` of rows [start, start + n), read in chunks by `read_rows(a, b)` (float32, b - a x dim)."""
    import numpy as np

    weights_t = np.empty((dim, n), dtype=np.int8)
    scales = np.empty(n, dtype=np.float32)
    row_l1 = np.empty(n, dtype=np.float32)
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        rows, s = quantize(read_rows(start + a, start + b))
        weights_t[:, a:b] = rows.T
        scales[a:b] = s
        row_l1[a:b] = np.abs(rows).sum(axis=1, dtype=np.int64) * s
    return CompactScan(weights_t, scales, row_l1, start)


def quantize(rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Symmetric int8 rows, one scale each (the row's largest magnitude maps to 127)."""
    import numpy as np

    peak = np.abs(rows).max(axis=1)
    scales = np.where(peak > 0, peak / 127.0, 1.0).astype(np.float32)
    q = np.clip(np.round(rows / scales[:, None]), -127, 127).astype(np.int8)
    return q, scales


# -- the model, as protobuf bytes (onnx.proto3: ModelProto, GraphProto, NodeProto, TensorProto, ValueInfoProto) --
_UINT8, _INT8, _INT32 = 2, 3, 6
_EXTERNAL = 1  # TensorProto.DataLocation


def _varint(v: int) -> bytes:
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _field(num: int, payload: bytes) -> bytes:  # length-delimited (wire type 2)
    return _varint(num << 3 | 2) + _varint(len(payload)) + payload


def _int(num: int, v: int) -> bytes:  # varint (wire type 0)
    return _varint(num << 3) + _varint(v)


def _value_info(name: str, elem: int, dims: list[int | str]) -> bytes:
    shape = b"".join(_field(1, _int(1, d) if isinstance(d, int) else _field(2, d.encode())) for d in dims)
    tensor_type = _int(1, elem) + _field(2, shape)
    return _field(1, name.encode()) + _field(2, _field(1, tensor_type))


def matmul_integer_model(dim: int, n: int) -> bytes:
    """An ONNX model computing Y[m, n] = MatMulInteger(q[m, dim] uint8, W[dim, n] int8, z uint8 scalar), W an
    initializer whose data the session is given in memory (`add_external_initializers`): no copy of the weights
    in the model, none parsed (a 38 MB model at 100k rows cost ~1 s and ~100 MB more at the owner's peak)."""
    node = (_field(1, b"q") + _field(1, b"W") + _field(1, b"z") + _field(2, b"Y") + _field(3, b"scan")
            + _field(4, b"MatMulInteger"))
    external = _field(1, b"location") + _field(2, b"in-memory")  # StringStringEntryProto
    tensor = _int(1, dim) + _int(1, n) + _int(2, _INT8) + _field(8, b"W") + _field(13, external) + _int(14, _EXTERNAL)
    graph = (_field(1, node) + _field(2, b"compact_scan") + _field(5, tensor)
             + _field(11, _value_info("q", _UINT8, ["m", dim])) + _field(11, _value_info("z", _UINT8, []))
             + _field(12, _value_info("Y", _INT32, ["m", n])))
    opset = _field(1, b"") + _int(2, 13)
    return _int(1, 8) + _field(2, b"mnemo") + _field(7, graph) + _field(8, opset)


class SparseRows:
    """Random rows of a vector file's float32 matrix, read through a private mapping advised `MADV_RANDOM` (a fault
    maps the one page it needs, not its neighbours) whose pages are dropped again after every read: a compact
    scan's candidates are gathered by one numpy call, and none stays in the owner's RSS. 200 random rows of 100k,
    dropped after each read: ~0.24 ms, against ~0.44 ms for one pread per row (issue 22, seventh pass). Safe from several threads: a page dropped
    under another reader is read again from the page cache."""

    def __init__(self, fd: int, data_at: int, count: int, dim: int):
        import numpy as np

        self._mm = mmap.mmap(fd, data_at + count * dim * 4, prot=mmap.PROT_READ)
        self._advise(mmap.MADV_RANDOM)
        self._arr = np.frombuffer(self._mm, dtype=np.float32, count=count * dim, offset=data_at).reshape(count, dim)

    def _advise(self, what: int) -> None:
        try:
            self._mm.madvise(what)
        except (OSError, ValueError, AttributeError):  # advice only: a platform without it reads the same rows
            pass

    def read(self, rows: np.ndarray) -> np.ndarray:
        """The float32 rows `rows`, a copy."""
        out = self._arr[rows]
        self._advise(mmap.MADV_DONTNEED)
        return out


__all__ = ["MIN_ROWS", "PARALLEL_ROWS", "TRIM_ROWS", "CompactScan", "SparseRows", "build", "exact_at",
           "matmul_integer_model", "quantize", "query_levels"]
