"""Recall latency and remember throughput through the real owner process, at several store sizes.

For each size N the store is filled in bulk in-process (synthetic developer notes, embedded with the real model;
vectors are cached under ~/.cache/mnemo/bench so reruns skip the embedding). The fill calls the store's own
`Store.insert_memory` (the memory row, its FTS row, its vector and its change-log entry: what `write.remember`'s
plain path commits) in transactions of 5,000 with the precomputed vectors, so the store is the one the write path
would build for distinct notes, without paying the per-note checks 100,000 times. Then a real owner process is
started and measured through `DaemonService` over its Unix socket:
  - cold start on an indexed store (`cold_start_indexed`): an owner that has indexed the store (and written its
    persisted read side) is stopped, and a fresh one is spawned by a client until the first semantic answer; the
    median of 3 spawns, and whether that first answer's top 5 equals a warm answer's,
  - recall p50/p95 over 200 queries (query embedding included, limit 5, hybrid scope, docs included), the owner's
    CPU time per recall (every thread), and in the same run the limit (`limit_of`: query embedding p50 + exact numpy search p50 over the same vectors) and the
    ratio recall p50 / limit,
  - the owner's RSS and the store's bytes on disk per memory (`footprint`),
  - beside each write throughput, the owner's CPU time per write (every thread, its replay included) and the
    embedding's CPU time per text: on a busy machine these hold where wall-clock rates swing,
  - remember throughput over 200 sequential remembers (embedding, dedup/conflict checks and the commit included),
    and as its limit the model embedding the same texts one at a time in this process (`remember_limit`), with
    the ratio of the two,
  - bulk import throughput: 2,000 new notes through `remember_batch` in calls of 500 (what `mnemo import` sends,
    every check on), and as its limit the embedding alone of the same texts (batched as the owner batches them),
    in the same run, with the ratio of the two,
  - cold start after the bulk fill (the first owner, which builds every index): at the first size.

    python bench/recall_latency.py --sizes 1000,10000,100000 --json
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

from scratch import scratch_dir  # bench/ is on sys.path when run as a script

COMPONENTS = ["payments API", "auth service", "billing worker", "search indexer", "web client", "mobile app",
              "CI pipeline", "database layer", "cache", "message queue", "feature flags", "admin panel",
              "email sender", "report generator", "rate limiter", "session store", "upload handler", "scheduler",
              "metrics exporter", "config loader", "GraphQL gateway", "websocket hub", "PDF renderer", "ORM models"]
VERBS = ["requires", "must use", "should avoid", "relies on", "was migrated to", "breaks without", "caches",
         "retries with", "logs through", "validates with", "is tested with", "deploys via", "times out after"]
OBJECTS = ["idempotency keys", "exponential backoff", "structured logging", "a read replica", "Redis", "Postgres 16",
           "JWT tokens with short expiry", "pydantic models", "the blue-green deploy", "feature flag checks",
           "pytest fixtures", "a circuit breaker", "UTC timestamps", "batch inserts", "signed URLs", "OAuth2 PKCE",
           "a dead-letter queue", "snapshot tests", "type hints everywhere", "the shared HTTP client", "rate limits"]
REASONS = ["to survive retries", "after the March outage", "because the vendor requires it", "for GDPR",
           "to keep p95 low", "since the old path leaked memory", "per the architecture review", "for local dev",
           "to avoid duplicate charges", "because tests were flaky", "to cut cloud costs", "for auditability"]


def synth_notes(n: int, seed: int = 0) -> list[str]:
    rng = random.Random(seed)
    out = []
    for i in range(n):
        out.append(f"{rng.choice(COMPONENTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(REASONS)}"
                   f" (ticket {rng.randrange(10000)}-{i})")
    return out


def cached_vectors(texts: list[str], embedder, tag: str):
    import numpy as np

    cache = Path(os.environ.get("MNEMO_BENCH_CACHE", Path.home() / ".cache/mnemo/bench"))
    cache.mkdir(parents=True, exist_ok=True)
    path = cache / f"{tag}-{len(texts)}-{embedder.model_id.replace('/', '_')}.npy"
    if path.exists():
        arr = np.load(path)
        if arr.shape[0] == len(texts):
            return arr
    arr = embedder.embed(texts)
    np.save(path, arr)
    return arr


def fill_store(home: Path, n: int, embedder, ctx) -> None:
    """Bulk insert N notes with precomputed vectors straight into SQLite (the index is rebuilt by the owner), each
    with its relation-check parse when the store keeps one (`note_parses`, what `remember` stores with a note)."""
    from mnemo.core.models import Memory
    from mnemo.core.store import Store
    from mnemo.core.text import content_hash

    texts = synth_notes(n)
    vecs = cached_vectors(texts, embedder, "notes")
    from mnemo.core.relation import compare as relation

    store = Store(home / "mnemo.db")
    # the relation check's parse of each note, as `remember` stores it (a tree without `note_parses`: none)
    parser = relation.parser_version() if hasattr(store, "put_note_parses") else ""
    now = time.time()
    batch = 5000
    for start in range(0, n, batch):
        with store.write() as c:
            for i in range(start, min(n, start + batch)):
                m = Memory(id="mem-" + uuid.uuid4().hex[:20], text=texts[i], type="project", kind="fact",
                           scope="project", project_id=ctx.project_id, project_name=ctx.project_name,
                           branch=ctx.branch, importance=0.5, confirmations=1, created_at=now - i,
                           updated_at=now - i, last_accessed=now - i, access_count=0,
                           content_hash=content_hash(texts[i]), source="import", author="bench")
                store.insert_memory(c, m, vecs[i], embedder.model_id)
                if parser:  # what the remember path stores with each note (since issue 22's fifth pass)
                    store.put_note_parses(c, [(m.id, parser, relation.encoded(texts[i]))])
    if parser:
        # the bench's process is not the owner: nothing parsed here is at hand there (`write_segments` runs here)
        relation._PRIMED.clear()
        relation._parsed.cache_clear()
        relation.clause_tokens.cache_clear()
    store.close()


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


def measure(home: Path, ctx, n_queries: int, n_writes: int, cold: bool, n_bulk: int = 0) -> dict:
    from mnemo.daemon.client import DaemonService

    out: dict = {}
    svc = DaemonService(home, client_name="bench")
    t0 = time.perf_counter()
    svc.connect()
    first = svc.recall(ctx.to_dict(), "how do we make payment retries safe?", limit=5)
    if cold:
        out["cold_start_ms"] = round((time.perf_counter() - t0) * 1000, 1)
        out["cold_start_warnings"] = first["warnings"]
    # wait for the dense index to be ready and caught up (a rebuild after the bulk fill)
    t_idx = time.perf_counter()
    while True:
        st = svc.stats(ctx.to_dict())["index"]
        if st["ready"] and st["indexed_seq"] >= st["store_seq"]:
            break
        time.sleep(0.5)
    out["index_ready_s"] = round(time.perf_counter() - t_idx, 1)
    rng = random.Random(1)
    queries = [f"what does the {rng.choice(COMPONENTS)} {rng.choice(['need', 'use', 'avoid'])} for "
               f"{rng.choice(OBJECTS)}?" for _ in range(n_queries)]
    for q in queries[:10]:  # warm
        svc.recall(ctx.to_dict(), q, limit=5)
    lat = []
    cpu = owner_cpu_s(home)
    for q in queries:
        t = time.perf_counter()
        svc.recall(ctx.to_dict(), q, limit=5)
        lat.append((time.perf_counter() - t) * 1000)
    # every thread of the owner over the timed recalls (its once-a-second bookkeeping included): holds under load
    out["owner_cpu_ms_per_recall"] = round((owner_cpu_s(home) - cpu) * 1000 / len(queries), 2)
    out["recall_p50_ms"] = round(statistics.median(lat), 2)
    out["recall_p95_ms"] = round(pct(lat, 95), 2)
    out["_queries"] = queries  # for the limit, measured by main() with the same queries
    out.update(footprint(home, svc.stats(ctx.to_dict())["memories"]["project"]))
    texts = [f"bench write {uuid.uuid4().hex[:8]}: {t}" for t in synth_notes(n_writes, seed=99)]
    # one untimed write first: the owner imports its secret scanner (detect-secrets, ~0.2 s of CPU) at the first
    # note that may hold a secret ("token", "key", "auth", ...), once per process; counted in the timed writes it
    # added ~2 ms of CPU to each of 100 (issue 22, third pass)
    svc.remember(ctx.to_dict(), WARM_WRITE, on_conflict="keep_both")
    cpu = owner_cpu_s(home)
    t = time.perf_counter()
    for text in texts:
        svc.remember(ctx.to_dict(), text, on_conflict="keep_both")
    out["remember_per_s"] = round(n_writes / (time.perf_counter() - t), 1)
    time.sleep(REPLAY_SETTLE)  # the owner's replay of these writes is part of their cost
    out["owner_cpu_ms_per_remember"] = round((owner_cpu_s(home) - cpu) * 1000 / n_writes, 2)
    out.update(remember_limit(texts))
    if n_bulk:
        cpu = owner_cpu_s(home)
        out.update(measure_bulk(svc, ctx, n_bulk))
        out["owner_cpu_ms_per_bulk_note"] = round((owner_cpu_s(home) - cpu) * 1000 / n_bulk, 2)
    # the owner's size after the writes too (an import reads the whole vector file: issue 22, fifth pass)
    after = footprint(home, 1)
    if "owner_rss_mb" in after:
        out["owner_rss_after_writes_mb"] = after["owner_rss_mb"]
    svc.shutdown()
    return out


WARM_WRITE = "bench warm-up: the auth service rotates its signing key every night"


def measure_bulk(svc, ctx, n: int, batch: int = 500) -> dict:
    """The bulk path through the owner: `remember_batch` calls of `batch` new notes (what `mnemo import` sends),
    every check on; and, as the limit, the embedding alone of the same texts in this process (the same model)."""
    from mnemo.core.embedding.embedder import get_embedder

    texts = [f"bulk {i} {uuid.uuid4().hex[:6]}: {t}" for i, t in enumerate(synth_notes(n, seed=77))]
    counts: dict = {}
    t = time.perf_counter()
    for start in range(0, n, batch):
        res = svc.remember_batch(ctx.to_dict(), [{"text": x} for x in texts[start:start + batch]], source="import",
                                 on_conflict="keep_both")
        for k, v in res["counts"].items():
            counts[k] = counts.get(k, 0) + v
    bulk_s = time.perf_counter() - t
    time.sleep(REPLAY_SETTLE)
    emb = get_embedder()
    t, c = time.perf_counter(), time.process_time()
    for start in range(0, n, batch):
        emb.embed(texts[start:start + batch])
    embed_s, embed_cpu = time.perf_counter() - t, time.process_time() - c
    return {"bulk_import_per_s": round(n / bulk_s, 1), "bulk_counts": counts,
            "embed_only_per_s": round(n / embed_s, 1), "bulk_ratio_to_limit": round(embed_s / bulk_s, 2),
            "cpu_ms_per_batched_embedding": round(embed_cpu * 1000 / n, 2)}


# Wall-clock figures swing with the machine's load; CPU time per operation much less: the owner's CPU seconds (every
# thread: the request, the indexer's replay, the vector file) per write, against the CPU time of the embedding
# alone in this process.
REPLAY_SETTLE = 2.5  # seconds after a run of writes for the owner's replay of them (REPLAY_INTERVAL is 1 s)


def owner_cpu_s(home: Path) -> float:
    """The owner process's user + system CPU seconds so far (all threads)."""
    from mnemo.daemon.paths import info_path

    try:
        pid = json.loads(info_path(home).read_text())["pid"]
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, KeyError, IndexError):
        return float("nan")


def remember_limit(texts: list[str]) -> dict:
    """The limit of sequential remembers: the model embedding the same texts one at a time, in this process."""
    from mnemo.core.embedding.embedder import get_embedder

    emb = get_embedder()
    emb.embed(["warm up"])
    t, c = time.perf_counter(), time.process_time()
    for x in texts:
        emb.embed([x])
    return {"embed_one_per_s": round(len(texts) / (time.perf_counter() - t), 1),
            "cpu_ms_per_embedding": round((time.process_time() - c) * 1000 / len(texts), 2)}
# -- the read half of issue 17: cold start on an indexed store, the limit, RSS, bytes on disk -----------------
COLD_QUERY = "how do we make payment retries safe?"


def _wait_indexed(svc, ctx) -> None:
    while True:
        st = svc.stats(ctx.to_dict())["index"]
        if st["ready"] and st["indexed_seq"] >= st["store_seq"]:
            return
        time.sleep(0.2)


def cold_start_indexed(home: Path, ctx, runs: int = 3) -> dict:
    """Spawn an owner on a store it has fully indexed before (the owner exits after 15 idle minutes, so this is
    what a user meets many times a day) and time spawn -> first semantic answer; compare its top 5 with a warm
    answer to the same query. The median of `runs` spawns."""
    from mnemo.daemon.client import DaemonService

    svc = DaemonService(home, client_name="bench")
    svc.connect()
    _wait_indexed(svc, ctx)
    warm = [c["item_id"] for c in svc.recall(ctx.to_dict(), COLD_QUERY, limit=5)["cards"]]
    svc.shutdown()
    times, same, warnings = [], True, []
    for _ in range(runs):
        _wait_stopped(home)
        svc = DaemonService(home, client_name="bench")
        t0 = time.perf_counter()
        svc.connect()
        first = svc.recall(ctx.to_dict(), COLD_QUERY, limit=5)
        times.append((time.perf_counter() - t0) * 1000)
        same = same and [c["item_id"] for c in first["cards"]] == warm
        warnings = first["warnings"]
        _wait_indexed(svc, ctx)
        svc.shutdown()
    _wait_stopped(home)
    return {"cold_start_indexed_ms": round(statistics.median(times), 1),
            "cold_start_indexed_all_ms": [round(t, 1) for t in times],
            "cold_first_top5_same_as_warm": same, "cold_first_warnings": warnings}


def limit_of(texts: list[str], queries: list[str], embedder, k: int = 50) -> dict:
    """The limit of a recall over these vectors, measured in this run: the query embedding p50 (the owner's model)
    plus an exact top-k search p50 (numpy float32 product, the faster of BLAS and einsum, + argpartition) over the
    same vectors."""
    import numpy as np

    mat = np.ascontiguousarray(cached_vectors(texts, embedder, "notes"), dtype=np.float32)
    emb, search = [], []
    for q in queries:
        t = time.perf_counter()
        qv = embedder.embed([q])[0]
        emb.append((time.perf_counter() - t) * 1000)
        best = float("inf")
        for blas in (True, False):  # BLAS (threaded), or einsum's own loop (one thread)
            t = time.perf_counter()
            sims = mat @ qv if blas else np.einsum("ij,j->i", mat, qv)
            np.argpartition(-sims, k - 1)[:k]
            best = min(best, (time.perf_counter() - t) * 1000)
        search.append(best)
    e, s = statistics.median(emb), statistics.median(search)
    return {"embed_p50_ms": round(e, 2), "exact_search_p50_ms": round(s, 2), "limit_ms": round(e + s, 2)}


def footprint(home: Path, n: int) -> dict:
    """The owner's resident memory now and at its peak, and the store's bytes on disk per memory (SQLite with its
    WAL, chroma, the persisted read side under cache/; logs and backups left out)."""
    from mnemo.daemon.paths import info_path

    out: dict = {}
    try:
        pid = json.loads(info_path(home).read_text())["pid"]
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith(("VmRSS:", "VmHWM:")):
                out["owner_rss_mb" if line.startswith("VmRSS") else "owner_peak_rss_mb"] = round(
                    int(line.split()[1]) / 1024, 1)
    except (OSError, ValueError, KeyError):
        pass

    def size(p: Path) -> int:
        return sum(f.stat().st_size for f in p.rglob("*") if f.is_file()) if p.is_dir() else (
            p.stat().st_size if p.exists() else 0)

    parts = {"sqlite": sum(size(home / f"mnemo.db{s}") for s in ("", "-wal", "-shm")),
             "chroma": size(home / "chroma"), "cache": size(home / "cache")}
    out["disk_bytes_per_memory"] = {k: round(v / n) for k, v in parts.items()}
    out["disk_bytes_per_memory"]["total"] = round(sum(parts.values()) / n)
    return out


def _wait_stopped(home: Path, timeout: float = 60.0) -> None:
    from mnemo.daemon.client import owner_lock_free

    deadline = time.time() + timeout
    while not owner_lock_free(home) and time.time() < deadline:
        time.sleep(0.05)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", default="1000,10000,100000")
    ap.add_argument("--queries", type=int, default=200)
    ap.add_argument("--writes", type=int, default=200)
    ap.add_argument("--bulk", type=int, default=2000, help="notes sent through remember_batch per size (0: none)")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--no-cold", dest="cold", action="store_false",
                    help="skip the cold start on an indexed store (three owner spawns per size)")
    args = ap.parse_args()
    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.models import Context

    embedder = get_embedder()
    ctx = Context(project_id="bench-project", project_name="bench", root=None, branch="main", default_branch="main")
    results = {}
    for i, n in enumerate(int(s) for s in args.sizes.split(",")):
        home = scratch_dir(f"mnemo-lat-{n}-")
        t = time.perf_counter()
        fill_store(home, n, embedder, ctx)
        fill_s = time.perf_counter() - t
        r = cold_start_indexed(home, ctx) if args.cold else {}
        r.update(measure(home, ctx, args.queries, args.writes, cold=(i == 0), n_bulk=args.bulk))
        r.update(limit_of(synth_notes(n), r.pop("_queries"), embedder))
        r["ratio_to_limit_p50"] = round(r["recall_p50_ms"] / r["limit_ms"], 2)
        r["ratio_to_limit_p95"] = round(r["recall_p95_ms"] / r["limit_ms"], 2)
        r["remember_ratio_to_limit"] = round(r["remember_per_s"] / r["embed_one_per_s"], 2)
        r["remember_cpu_ratio"] = round(r["cpu_ms_per_embedding"] / r["owner_cpu_ms_per_remember"], 2)
        if "owner_cpu_ms_per_bulk_note" in r:
            r["bulk_cpu_ratio"] = round(r["cpu_ms_per_batched_embedding"] / r["owner_cpu_ms_per_bulk_note"], 2)
        r["load_avg_1m"] = round(os.getloadavg()[0], 2)
        r["fill_s"] = round(fill_s, 1)
        results[str(n)] = r
        print(f"{n}: {r}", file=sys.stderr)
    summary = {k: {key: v[key] for key in ("cold_start_indexed_ms", "cold_first_top5_same_as_warm", "recall_p50_ms",
                                           "recall_p95_ms", "owner_cpu_ms_per_recall", "embed_p50_ms", "exact_search_p50_ms", "limit_ms",
                                           "ratio_to_limit_p50", "ratio_to_limit_p95", "remember_per_s",
                                           "embed_one_per_s", "remember_ratio_to_limit",
                                           "owner_cpu_ms_per_remember", "cpu_ms_per_embedding", "remember_cpu_ratio",
                                           "bulk_import_per_s", "embed_only_per_s", "bulk_ratio_to_limit",
                                           "owner_cpu_ms_per_bulk_note", "cpu_ms_per_batched_embedding",
                                           "bulk_cpu_ratio", "owner_rss_mb", "owner_rss_after_writes_mb",
                                           "owner_peak_rss_mb", "disk_bytes_per_memory", "load_avg_1m") if key in v}
               for k, v in results.items()}
    summary["load_avg_1m"] = round(os.getloadavg()[0], 2)
    summary["embedder"] = embedder.model_id
    first = results[next(iter(results))]
    if "cold_start_ms" in first:
        summary["cold_start_ms"] = first["cold_start_ms"]
    print(json.dumps({"detail": results}), file=sys.stderr)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
