"""The exact search of a large partition over a compact copy of its vectors (issue 22, third pass).

A float32 scan of a 100k-row partition reads 154 MB per query (~13 ms here) and keeps those pages resident in the
owner; chroma's HNSW index answers faster but holds ~400 MB more. This scan keeps the partition's rows as int8
(one scale per row: 384 bytes a row), and scores them with onnxruntime's integer matrix product (the int8 weights
prepacked once: ~1.1-1.5 ms for 100k rows on two threads), the query quantized to two rows of uint8 (its bytes and
those of their remainder, one product for both). The int8 score of a row differs from its float32 cosine by at most
`bound` (computed per query from the quantization steps), so every row whose int8 score comes within twice that
bound of the k-th best is re-scored in float32 from the vector file: the top k returned is the float32 exact scan's,
provably, not an approximation (tests/unit/test_compact_scan.py checks it on real MiniLM vectors). Typically about
a hundred rows are re-scored. A partition of `SCREEN_ROWS` rows or more is screened first (`CompactScan`): the
session then scores a few coordinates of every row in a basis of their own, and only the rows that screen cannot
rule out get their int8 score, each then held to its own error bound instead of the largest row's: fewer
candidates, still every row of the float32 top k.

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
# The head (`CompactScan`): the fewest coordinates, in steps of `HEAD_STEP`, that hold `HEAD_ENERGY` of the rows'
# energy, found on about `SAMPLE_ROWS` rows; none when more than `HEAD_MAX` of the dimension would be needed (the
# rows' rests would be read for too many rows to save the product's bytes).
HEAD_ENERGY = 0.95
HEAD_STEP = 16
HEAD_MAX = 0.5
SAMPLE_ROWS = 8192
# A partition screened by default: from this many rows. At 100k rows the int8 product streams 38 MB per query and
# evicts the embedder's weights from the cache: in a write, right after the note's embedding, the candidates cost
# ~1.7 ms screened against ~2.5 ms; at 50k rows both ~1.5-1.6 ms, at 30k and 10k the screen costs more than it
# saves (~1.3 against ~1.1, ~1.0 against ~0.65 ms). docs/benchmarks.md, issue 22's eleventh pass.
SCREEN_ROWS = 60000
# What a row's rest norm is padded by, squared (its norm found as what the head leaves of the row's: float32
# products; the basis turned in float32 is orthonormal to ~1e-7 an entry): ~0.0002 on a rest of 0.2.
REST_SLACK = 1e-4
# The rows and the query turned by the basis in float32: its columns orthonormal to ~1e-7 an entry, the turned
# head's dot product off from the true one by ~2e-5 at most at 384 dimensions, its float32 rounding ~1e-6; this is
# ten times that.
ROTATED = 2e-4
SLACK = 1e-4  # float32 rounding of the approximate and of the exact scores (both ~1e-6 here): far above both


class CompactScan:
    """The int8 copy of rows [start, start + n) of a vector file, scored by one onnxruntime session (`build`).

    With a head (`head_basis`), the session does not score the int8 rows themselves. It scores a screen: the rows
    in a basis of their own (the eigenvectors of their second moment, by decreasing energy), cut to the first `h`
    coordinates and quantized on their own. MiniLM's vectors are far from isotropic: over 100k of the bench's notes
    96% of the energy lies in 64 coordinates of 384; over 24k real texts (MetaTool's requests, LoCoMo, the rule
    files' paragraphs) 95% in ~220. A row's screen score, plus the error of its quantization, plus what its other
    coordinates can add (Cauchy-Schwarz, from the row's `rest_norm` and the query's), plus the int8 score's own
    bound, is at least its int8 score (`candidates`): only the rows whose bound reaches the k-th best int8 score
    get the int8 score, from their rows (`rows`, kept row by row), and each is then held to its own bound, not the
    largest row's: the candidates are those of scoring every row (`approx`) that still could be in the float32 top
    k by their own bound, from a sixth to a half of the bytes read (issue 22, eleventh pass: at 100k rows the
    product is memory-bound). Without a head that saves enough, the session scores the int8 rows."""

    def __init__(self, weights_t: np.ndarray | None, scales: np.ndarray, max_l1: float, start: int,
                 screen: tuple | None = None):
        """`weights_t`: the int8 rows transposed (dim x n), handed to onnxruntime without a copy (an external
        initializer) and prepacked by it once; `scales`: float32 per row (row ~= scale * int8 row); `max_l1`: the
        largest L1 norm of a dequantized row (it bounds what the query's quantization can move a score); `screen`
        (then `weights_t` is None): (the int8 rows, n x dim; the head's basis vectors, dim x h float32, orthonormal
        columns; the int8 head coordinates of the rows in it, h x n, for the session; their scales; their `max_l1`;
        the L2 norm of each row's other coordinates, rounded up)."""
        import numpy as np

        n = len(scales)
        dim = weights_t.shape[0] if weights_t is not None else screen[0].shape[1]  # type: ignore[index]
        self.start, self.n, self.dim = start, n, dim
        self.scales = np.ascontiguousarray(scales, dtype=np.float32)
        self.max_scale = float(self.scales.max()) if n else 0.0
        self.max_l1 = float(max_l1)
        threads = min(2, os.cpu_count() or 1) if n >= PARALLEL_ROWS else 1
        if screen is None:
            assert weights_t is not None
            self.rows = None
            self.basis = None
            self.head = dim
            self._weights = np.ascontiguousarray(weights_t, dtype=np.int8)  # must outlive the session
        else:
            rows, basis, head_t, head_scales, head_l1, rest_norm = screen
            self.rows = np.ascontiguousarray(rows, dtype=np.int8)
            self.basis = np.ascontiguousarray(basis, dtype=np.float32)
            self.head = head_t.shape[0]
            self.head_scales = np.ascontiguousarray(head_scales, dtype=np.float32)
            self.head_max_scale = float(self.head_scales.max()) if n else 0.0
            self.head_l1 = float(head_l1)
            self.rest_norm = np.ascontiguousarray(rest_norm, dtype=np.float32)
            # each row's dequantized L1 norm (its own bound in `candidates`)
            self.row_l1 = (np.abs(self.rows).sum(axis=1, dtype=np.int32) * self.scales).astype(np.float32)
            self._weights = np.ascontiguousarray(head_t, dtype=np.int8)
        self._session, self._value = _session_over(self._weights, threads)
        self.levels = query_levels(self._weights.shape[0])  # the query's top byte: 255 where exact, else 127

    def _quantized(self, q64: np.ndarray, max_scale: float, max_l1: float):
        """The float64 query `q64` quantized twice around the zero point `levels // 2`: its levels, then those of
        what they left over (a step `2 * (levels // 2)` times finer). Returns (the two rows of levels (2 x len,
        float64 integers), step, fine step, the bound on the error of a score of rows of these scales, half the
        query's L1 norm, the largest error of its quantization), or None for a zero query: a row of scale `s` and
        dequantized L1 norm `l1` scores within `s * half_l1 + q_err * l1 + SLACK` of its cosine."""
        import numpy as np

        half = self.levels // 2
        peak = float(np.abs(q64).max()) if q64.size else 0.0
        if peak == 0.0:
            return None
        step = peak / half
        first = np.clip(np.round(q64 / step), -half, half)
        rest = q64 - first * step  # within step / 2 of zero
        fine = step / (2 * half)
        second = np.clip(np.round(rest / fine), -half, half)
        q_err = float(np.abs(rest - second * fine).max())  # |q - q'|_inf, q' = step * first + fine * second
        # |v.q - s*v8.q'| <= |(v - s*v8).q| + |s*v8.(q - q')| <= (s/2)*|q|_1 + |q - q'|_inf * |s*v8|_1
        half_l1 = float(np.abs(q64).sum()) / 2
        bound = max_scale * half_l1 + q_err * max_l1 + SLACK
        return np.stack([first, second]), step, fine, bound, half_l1, q_err

    def _product(self, levels) -> np.ndarray:
        """The session's integer products (2 x n, int32) for two rows of levels: one call, the weights read once."""
        import numpy as np

        half = self.levels // 2
        qq = (levels + half).astype(np.uint8)
        return self._session.run(None, {"q": qq, "z": np.array(half, dtype=np.uint8)})[0]

    @staticmethod
    def _scores(y, step: float, fine: float, scales) -> np.ndarray:
        import numpy as np

        return (y[0].astype(np.float32) * np.float32(step) + y[1].astype(np.float32) * np.float32(fine)) * scales

    def _at(self, rows, levels, step: float, fine: float) -> np.ndarray:
        """The int8 scores of `rows` from their int8 rows: the same integers as the session's (in float32, exact:
        every partial sum an integer under 2^24, at most 127 * 127 * dim), then the same float32 arithmetic: the
        same scores to the bit."""
        import numpy as np

        assert self.rows is not None
        y = levels.astype(np.float32) @ self.rows[rows].astype(np.float32).T  # (2, len(rows))
        return self._scores(y, step, fine, self.scales[rows])

    def approx(self, q: np.ndarray) -> tuple[np.ndarray, float]:
        """(approximate cosines of every row, the bound on their error) for the float32 query `q`. The query is
        quantized twice (`_quantized`); both rows are scored by one product, which reads the weights once (as fast
        as one row), and the query's part of the error all but vanishes: the bound is about half of a one-row
        query's, and so are the candidates re-scored (100k rows, k = 40: ~200 -> ~90; issue 22, seventh pass)."""
        import numpy as np

        quant = self._quantized(np.asarray(q, dtype=np.float64), self.max_scale, self.max_l1)
        if quant is None:
            return np.zeros(self.n, dtype=np.float32), SLACK
        levels, step, fine, bound = quant[:4]
        if self.rows is None:
            return self._scores(self._product(levels), step, fine, self.scales), bound
        return self._at(np.arange(self.n), levels, step, fine), bound

    def candidates(self, q: np.ndarray, want: int, masked: np.ndarray | None = None) -> np.ndarray:
        """Row offsets (within the partition) that hold the float32 top `want` of the rows not `masked`: every such
        row whose approximate score (`approx`) is within 2 * bound of the `want`-th best of theirs. Proof: the
        `want` best approximate rows all score >= kth - bound exactly, so the `want`-th best exact score is >= kth -
        bound; a row of the exact top `want` then scores >= kth - 2 * bound approximately. With a screen, the same
        rows from the approximate scores of fewer: a row's `upper` score is at least its approximate one; the
        `want` rows best by it give a floor under the `want`-th best approximate score; a row whose upper score
        stays under that floor less 2 * bound is not a candidate, and the `want`-th best approximate score of the
        others is the `want`-th best of all."""
        import numpy as np

        if want >= self.n:
            return np.arange(self.n)
        q64 = np.asarray(q, dtype=np.float64)
        quant = self._quantized(q64, self.max_scale, self.max_l1)
        if quant is None:  # every approximate score 0
            scores = np.zeros(self.n, dtype=np.float32)
            if masked is not None:
                scores[masked] = -np.inf
            return np.flatnonzero(scores >= kth_best(scores, want) - 2 * SLACK)
        levels, step, fine, bound, half_l1, q_err = quant
        if self.rows is None:
            scores = self._scores(self._product(levels), step, fine, self.scales)
            if masked is not None:
                scores[masked] = -np.inf
            return np.flatnonzero(scores >= kth_best(scores, want) - 2 * bound)
        upper, unit, offset = self._upper(q64, bound)  # a row's upper score: unit * upper + offset
        if masked is not None:
            upper[masked] = -np.inf
        top = np.flatnonzero(upper >= kth_best(upper, want))  # `want` rows or more (ties), none masked
        floor = kth_best(self._at(top, levels, step, fine), want)
        # unit * upper + offset >= floor - 2 * bound, with room for the float32 rounding of `upper` (a relative
        # 1e-6 of the unit's ~1e5 steps)
        rows = np.flatnonzero(upper >= (floor - 2 * bound - offset - SLACK) / unit)
        scores = self._at(rows, levels, step, fine)
        # of those, each row's own bound (`_quantized`) instead of the largest row's: a row of the exact top `want`
        # scores at least the `want`-th best of the rows' lower bounds, and so does its upper bound (~92 -> ~67
        # rows re-scored at 100k, k = 40); the rows left out above are under that too (it is at least the
        # `want`-th best approximate score less the largest bound)
        own = self.scales[rows] * np.float32(half_l1) + self.row_l1[rows] * np.float32(q_err) + np.float32(SLACK)
        return rows[scores + own >= kth_best(scores - own, want)]

    def _upper(self, q64, bound: float) -> tuple[np.ndarray, float, float]:
        """(per row, at least its approximate score, as `fine * upper + offset`; fine; offset): its screen score,
        plus the screen's quantization bound, plus what its other coordinates can add (|row's rest|_2 |query's
        rest|_2), plus the approximate score's own `bound`, plus `ROTATED`. In the screen's finest step, so that the
        pass over every row is one multiply and one add: each pass over 100k rows costs ~15-30 us in a write."""
        import numpy as np

        assert self.basis is not None
        head = np.asarray(q64, dtype=np.float32) @ self.basis
        h64 = head.astype(np.float64)
        reach = float(np.sqrt(max(float(q64 @ q64) - float(h64 @ h64), 0.0) + REST_SLACK))
        quant = self._quantized(h64, self.head_max_scale, self.head_l1)
        if quant is None:
            return np.zeros(self.n, dtype=np.float32), 1.0, reach * float(self.rest_norm.max()) + SLACK + bound + ROTATED
        levels, _step, fine, h_bound = quant[:4]
        y = self._product(levels)
        half = self.levels // 2
        # |2 * half * y0 + y1| <= (2 * half + 1) * half * 127 * h: under 2^31 up to h = 1,040 at 127 levels
        combined = y[0] if (2 * half + 1) * half * 127 * self.head < 2**31 else y[0].astype(np.int64)
        combined *= 2 * half
        combined += y[1]
        upper = combined.astype(np.float32)
        upper *= self.head_scales
        upper += np.multiply(self.rest_norm, np.float32(reach / fine))
        return upper, fine, h_bound + bound + ROTATED


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


def build(read_rows, start: int, n: int, dim: int, chunk: int = 1024, head: int | None = None) -> CompactScan:
    """A `CompactScan` of rows [start, start + n), read in chunks by `read_rows(a, b)` (float32, b - a x dim), with
    the screen of `head_basis` where the partition has `SCREEN_ROWS` rows or more (`head`: a screen of that size
    from the same basis whatever the rows; `dim`: no screen)."""
    import numpy as np

    basis, h = None, dim
    if (head is None and n >= SCREEN_ROWS) or (head is not None and head < dim):
        basis, h = head_basis(read_rows, start, n, dim, chunk)
        if head is not None:
            h = min(dim, head)
    turn = np.ascontiguousarray(basis[:, :h], dtype=np.float32) \
        if basis is not None and h < dim and (head is not None or h <= HEAD_MAX * dim) else None
    rows8 = np.empty((n, dim), dtype=np.int8) if turn is not None else None
    weights_t = None if turn is not None else np.empty((dim, n), dtype=np.int8)
    scales = np.empty(n, dtype=np.float32)
    head_t = np.empty((h, n), dtype=np.int8) if turn is not None else None
    head_scales = np.empty(n, dtype=np.float32)
    rest_norm = np.empty(n, dtype=np.float32)
    max_l1 = head_l1 = 0.0
    for a in range(0, n, chunk):
        b = min(n, a + chunk)
        x = np.asarray(read_rows(start + a, start + b), dtype=np.float32)
        rows, s = quantize(x)
        if rows8 is not None:
            rows8[a:b] = rows
        else:
            weights_t[:, a:b] = rows.T  # type: ignore[index]
        scales[a:b] = s
        max_l1 = max(max_l1, float((np.abs(rows).sum(axis=1, dtype=np.int64) * s).max()))
        if turn is not None:
            turned = x @ turn  # the head's coordinates only: the rest's norm is what the head leaves of the row's
            hq, hs = quantize(turned)
            head_t[:, a:b] = hq.T  # type: ignore[index]
            head_scales[a:b] = hs
            head_l1 = max(head_l1, float((np.abs(hq).sum(axis=1, dtype=np.int64) * hs).max()))
            left = np.einsum("ij,ij->i", x, x, dtype=np.float64) - np.einsum("ij,ij->i", turned, turned,
                                                                              dtype=np.float64)
            rest_norm[a:b] = np.sqrt(np.maximum(left, 0.0) + REST_SLACK)
    screen = (rows8, turn, head_t, head_scales, head_l1, rest_norm) if turn is not None else None
    return CompactScan(weights_t, scales, max_l1, start, screen)


def head_basis(read_rows, start: int, n: int, dim: int, chunk: int = 1024) -> tuple[np.ndarray | None, int]:
    """(the eigenvectors of the rows' second moment as columns, by decreasing eigenvalue; the fewest of them, in
    steps of `HEAD_STEP`, that hold `HEAD_ENERGY` of the rows' energy), from about `SAMPLE_ROWS` rows (whole chunks,
    evenly spread); (None, dim) for rows of no energy. The second moment, not the covariance: cosines are
    uncentred. `build` screens with that head when it is at most `HEAD_MAX` of the dimension."""
    import numpy as np

    every = max(1, -(-n // SAMPLE_ROWS)) * chunk
    moment = np.zeros((dim, dim), dtype=np.float64)
    for a in range(0, n, every):
        x = np.asarray(read_rows(start + a, start + min(n, a + chunk)), dtype=np.float32)
        moment += (x.T @ x).astype(np.float64)
    energy, vectors = np.linalg.eigh(moment)
    order = np.argsort(energy)[::-1]
    energy, vectors = np.clip(energy[order], 0, None), vectors[:, order]
    total = float(energy.sum())
    if total <= 0:
        return None, dim
    held = np.cumsum(energy) / total
    h = int(np.searchsorted(held, HEAD_ENERGY)) + 1
    h = min(dim, -(-h // HEAD_STEP) * HEAD_STEP)
    return np.ascontiguousarray(vectors), h


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
           "head_basis", "kth_best", "matmul_integer_model", "quantize", "query_levels"]
