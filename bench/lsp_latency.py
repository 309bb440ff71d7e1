"""Language server latency: the real `python -m mnemo lsp` driven by a real LSP client (pytest-lsp's) over stdio,
against an owner process holding N memories (real model) and this repository's skills.

    python bench/lsp_latency.py --memories 10000 --json

Set-up (not timed): N synthetic developer notes are bulk-inserted with real embeddings into a fresh store (vectors
cached under ~/.cache/mnemo/bench), 40 of them anchored to functions of `server/mnemo/core/engine.py`; the owner is
started and its dense index built. Timed, from the client's side of the pipe:
  - initialize_ms: spawning `python -m mnemo lsp` until the `initialize` answer (imports included). The server
    answers it before pygls is loaded (mnemo/lsp/preinit.py); `--init-reps` more short sessions give its median
    and, with MNEMO_LSP_PREINIT=0, the median without that pre-handshake (pygls answering after its import);
  - first_hover_ms_after_spawn: spawning until the answer to a hover sent right after `initialized` + `didOpen`:
    it waits for pygls' import and the owner connection, which the pre-handshake does not speed up (a hover asked
    while the owner link is first made waits for it, so the answer has content);
  - first_hover_with_content_ms_owner_running / _owner_not_running: the same on a spot that has content when warm,
    in fresh sessions (median of 3), with the owner already up and with no owner (the server starts it);
    `first_hover_answered_early_*` says, per session, whether the pre-handshake answered it while pygls loaded
    (mnemo/lsp/early_hover.py: "answered") or gave it to pygls ("stepped aside: ...");
  - open_pass_s: after the files open, the language server's background pass (parse, one code lens recall per
    symbol) is let finish (no owner call for 1.5 s) before anything below is timed;
  - hover p50/p95 (warm) over `--hovers` definitions (the names of functions, methods and classes) of engine.py and
    ten more modules (`HOVER_FILES`): a quiet hover answers only there (issue 20), so each timed hover is a new
    symbol and query: one `hover_context` call to the owner (recall + anchors + skills unless cached;
    `owner_calls_in_timed_hovers` counts them); `owner_cpu_ms_per_hover` / `lsp_cpu_ms_per_hover`: the CPU
    time each process spent over the timed hovers, per hover (the figure that holds still on a loaded box);
  - code_lens p95 over `--lenses` `textDocument/codeLens` requests on engine.py (caches warm);
  - lsp_rss_mb: the language server process's resident memory at the end (the model lives in the owner);
  - with `--trace FILE` (MNEMO_TRACE_FILE for both processes), `stages`: per stage of the timed hovers, p50/p95 in
    ms: in the language server (`lsp.hover`: read, dispatch, code_at, workspace, owner, markdown, answer,
    respond), the owner (`owner.request:hover_context`: decode, arguments, notice, context, recall, anchored,
    fresh, encode, send; `query_embedded`: how many found their query's vector ready) and, for a call through the
    thread pool, the client's side (`client.request:*`: encode, wait, decode).
The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import time
import uuid
from pathlib import Path

from scratch import scratch_dir  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
TARGET = REPO / "server" / "mnemo" / "core" / "engine.py"

COMPONENTS = ["payments API", "auth service", "billing worker", "search indexer", "web client", "engine",
              "CI pipeline", "database layer", "cache", "message queue", "feature flags", "recall", "store",
              "indexer thread", "owner process", "markdown docs", "skills engine", "snapshot export"]
VERBS = ["requires", "must use", "should avoid", "relies on", "was migrated to", "breaks without", "caches",
         "retries with", "logs through", "validates with", "is tested with", "times out after"]
OBJECTS = ["idempotency keys", "exponential backoff", "structured logging", "a read replica", "WAL mode",
           "content hashes for dedup", "pydantic models", "the owner lock", "batch inserts", "UTC timestamps",
           "a circuit breaker", "the change log", "FTS5 bm25", "type hints everywhere", "the shared HTTP client"]
REASONS = ["to survive retries", "after the March outage", "for GDPR", "to keep p95 low", "for auditability",
           "since the old path leaked memory", "per the architecture review", "because tests were flaky"]


def synth_notes(n: int, seed: int = 7) -> list[str]:
    rng = random.Random(seed)
    return [f"{rng.choice(COMPONENTS)} {rng.choice(VERBS)} {rng.choice(OBJECTS)} {rng.choice(REASONS)} (note {i})"
            for i in range(n)]


def fill_store(home: Path, n: int, ctx) -> dict:
    """Bulk insert (straight into SQLite, before any owner runs); anchors 40 notes to engine.py's functions."""
    from mnemo.core.embedding.embedder import get_embedder
    from mnemo.core.files import code_symbols as cc
    from mnemo.core.models import Memory
    from mnemo.core.store import Store
    from mnemo.core.text import content_hash

    embedder = get_embedder()
    texts = synth_notes(n)
    from recall_latency import cached_vectors  # bench/ is on sys.path when run as a script

    vecs = cached_vectors(texts, embedder, "lsp-notes")
    source = TARGET.read_text()
    syms = [s for s in cc.symbols(cc.parse_document(source, "python")) if s.kind in ("function", "method")]
    rel = TARGET.relative_to(REPO).as_posix()
    rng = random.Random(3)
    anchored = {rng.randrange(n): rng.choice(syms) for _ in range(40)}
    store = Store(home / "mnemo.db")
    now = time.time()
    for start in range(0, n, 5000):
        with store.write() as c:
            for i in range(start, min(n, start + 5000)):
                sym = anchored.get(i)
                m = Memory(id="mem-" + uuid.uuid4().hex[:20], text=texts[i], type="project", kind="fact",
                           scope="project", project_id=ctx.project_id, project_name=ctx.project_name,
                           branch=ctx.branch, importance=0.5, confirmations=1, created_at=now - i,
                           updated_at=now - i, last_accessed=now - i, access_count=0,
                           content_hash=content_hash(texts[i]), source="import", author="bench",
                           anchors=[sym.anchor(rel)] if sym else [])
                store.insert_memory(c, m, vecs[i], embedder.model_id)
    store.close()
    return {"anchored": len(anchored), "symbols": len(syms)}


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


HOVER_FILES = [TARGET, *(REPO / "server" / "mnemo" / f for f in (
    "core/memory/recall.py", "core/memory/write.py", "core/indexes/dense.py", "core/memory/manage.py", "core/indexes/vector_file.py",
    "core/relation/compare.py", "core/memory/neighbours.py", "core/indexes/keyword.py", "service.py", "core/store/__init__.py"))]


def hover_positions(sources: dict[str, str], count: int) -> list[tuple[str, int, int]]:
    """(uri, line, col) on the names of definitions (functions, methods, classes), where a hover answers (a quiet
    hover, issue 20: not on the identifiers of a body), spread over `HOVER_FILES`; the first is in engine.py."""
    from mnemo.core.files import code_symbols as cc

    spots = []
    for uri, source in sources.items():
        for sym in cc.symbols(cc.parse_document(source, "python")):
            if sym.kind in ("function", "method", "class"):
                spots.append((uri, sym.name_line, sym.name_col + 1))
    first = spots[0]
    rng = random.Random(11)
    rng.shuffle(spots)
    spots.remove(first)
    return [first, *spots][:count]


def cpu_ms(pid: int | None) -> float | None:
    """User + system CPU time of process `pid` so far (all threads), in ms; None when unknown."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            fields = fh.read().rsplit(b")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) * 1000 / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def rss_mb(pid: int) -> tuple[float, float]:
    cur = peak = 0.0
    with open(f"/proc/{pid}/status", encoding="ascii") as fh:
        for line in fh:
            if line.startswith("VmRSS:"):
                cur = int(line.split()[1]) / 1024
            elif line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024
    return round(cur, 1), round(peak, 1)


def client_factory():
    """pytest-lsp's client with Mnemo's converter, keeping the `mnemo/stateChanged` notifications (`.states`)."""
    from pytest_lsp.client import LanguageClient, register_lsp_features

    from mnemo.lsp.jsonrpc import converter_factory

    c = LanguageClient(converter_factory=converter_factory)
    register_lsp_features(c)
    c.states = []

    @c.feature("mnemo/stateChanged")
    def _state(ls, params):
        c.states.append(params)

    return c


def initialize_params():
    """What the bench's client sends: this repository as the workspace, docs not indexed at start."""
    from lsprotocol import types as t

    return t.InitializeParams(
        capabilities=t.ClientCapabilities(), root_uri=REPO.as_uri(),
        workspace_folders=[t.WorkspaceFolder(uri=REPO.as_uri(), name=REPO.name)],
        initialization_options={"docs": {"indexOnStartup": False}})


async def drive(home: Path, hovers: int, lenses: int, init_reps: int, trace_file: Path | None = None) -> dict:
    from lsprotocol import types as t
    from pytest_lsp import ClientServerConfig

    env = dict(os.environ, MNEMO_HOME=str(home), MNEMO_IDLE_TIMEOUT="120", HF_HUB_OFFLINE="1",
               MNEMO_USER_SKILLS=str(home / "user-skills"))
    if trace_file:  # both processes append their stages (the owner the language server starts inherits it)
        env["MNEMO_TRACE_FILE"] = str(trace_file)
    else:
        env.pop("MNEMO_TRACE_FILE", None)
    env.pop("MNEMO_EMBEDDER", None)
    env.pop("MNEMO_LSP_PREINIT", None)

    def config(**extra: str) -> ClientServerConfig:
        return ClientServerConfig(server_command=[sys.executable, "-m", "mnemo", "lsp"], server_env={**env, **extra},
                                  client_factory=client_factory)

    init_params = initialize_params()
    source = TARGET.read_text()
    uri = TARGET.as_uri()
    sources = {f.as_uri(): f.read_text() for f in HOVER_FILES if f.is_file()}
    spots = hover_positions(sources, hovers + 20)
    out: dict = {}
    t0 = time.perf_counter()
    client = await config().start()
    await client.initialize_session(init_params)
    out["initialize_ms"] = round((time.perf_counter() - t0) * 1000, 1)
    # what an editor does next: open the file, hover (answered once pygls is loaded; empty until the owner link is up)
    client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
        uri=uri, language_id="python", version=1, text=source)))
    first = await client.text_document_hover_async(t.HoverParams(
        text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=spots[0][1], character=spots[0][2])))
    out["first_hover_ms_after_spawn"] = round((time.perf_counter() - t0) * 1000, 1)
    out["first_hover_has_content"] = first is not None
    try:
        while not any(s.get("state") == "ready" for s in client.states):
            if time.perf_counter() - t0 > 180:
                raise RuntimeError(f"the server never became ready: {client.states[-1:]}")
            await asyncio.sleep(0.1)
        out["ready_s"] = round(time.perf_counter() - t0, 2)
        t_idx = time.perf_counter()
        while True:
            stats = await client.protocol.send_request_async("mnemo/stats", {})
            idx = stats["index"]
            if idx["ready"] and idx["indexed_seq"] >= idx["store_seq"]:
                break
            if time.perf_counter() - t_idx > 600:
                raise RuntimeError(f"the dense index never caught up: {idx}")
            await asyncio.sleep(0.5)
        out["index_ready_s"] = round(time.perf_counter() - t_idx, 1)
        out["store_memories"] = stats["memories"]["project"]
        for u, text in sources.items():
            if u != uri:
                client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
                    uri=u, language_id="python", version=1, text=text)))
        shown = 0

        async def one_hover(u: str, line: int, col: int) -> float:
            nonlocal shown
            ts = time.perf_counter()
            res = await client.text_document_hover_async(t.HoverParams(
                text_document=t.TextDocumentIdentifier(uri=u), position=t.Position(line=line, character=col)))
            shown += res is not None
            if res is not None and "content_spot" not in out and u == uri:
                out["content_spot"] = (line, col)
            return (time.perf_counter() - ts) * 1000

        out["open_pass_s"] = await settle(client)  # what an editor runs when files open: parse, the lens pass
        for u, line, col in spots[:20]:  # warm-up: skills cache, anchor index, parse
            await one_hover(u, line, col)
        shown = 0
        # which hovers ask the owner a query not seen before (the server caches recall answers for 15 s)
        from mnemo.core.files import code_symbols as cc

        parsed = {u: cc.parse_document(text, "python") for u, text in sources.items()}

        def query_at(u: str, ln: int, cl: int) -> str:  # the hover's query on a definition (hover.py)
            code = cc.context_at(sources[u], ln, cl, "python", parsed=parsed[u])[0]
            return cc.symbol_query(code.symbol) if code.symbol is not None else code.query()

        seen = {query_at(u, ln, cl) for u, ln, cl in spots[:20]}
        st = await client.protocol.send_request_async("mnemo/status", {})
        calls_before = st["lsp"].get("ownerCalls")
        pids = {"owner": (st.get("owner") or {}).get("pid"), "lsp": client._server.pid}
        cpu_before = {k: cpu_ms(p) for k, p in pids.items()}
        lat, fresh, fresh_queries = [], [], []
        timed_from = time.time()
        for u, line, col in spots[20:]:
            q = query_at(u, line, col)
            ms = await one_hover(u, line, col)
            lat.append(ms)
            if q not in seen:
                seen.add(q)
                fresh.append(ms)
                fresh_queries.append(q)
        timed_until = time.time()
        if trace_file:
            out["stages"] = trace_summary(trace_file, timed_from, timed_until)
        for k, p in pids.items():  # CPU per timed hover (stable under load, unlike the wall clock)
            now, was = cpu_ms(p), cpu_before[k]
            if now is not None and was is not None:
                out[f"{k}_cpu_ms_per_hover"] = round((now - was) / len(lat), 2)
        out["hover_p50_ms"] = round(statistics.median(lat), 2)
        out["hover_p95_ms"] = round(pct(lat, 95), 2)
        out["hovers"] = len(lat)
        out["hovers_with_content"] = shown
        out["hover_new_query_p50_ms"] = round(statistics.median(fresh), 2) if fresh else None
        out["hover_new_query_p95_ms"] = round(pct(fresh, 95), 2) if fresh else None
        out["hovers_with_new_query"] = len(fresh)
        calls_after = (await client.protocol.send_request_async("mnemo/status", {}))["lsp"].get("ownerCalls")
        if calls_before is not None and calls_after is not None:  # what the timed hovers asked of the owner
            out["owner_calls_in_timed_hovers"] = {k: v - calls_before.get(k, 0) for k, v in calls_after.items()
                                                  if v != calls_before.get(k, 0)}
        # the same new queries straight to the owner (no language server): what the owner's recall costs
        from mnemo.core.identity import detect_context
        from mnemo.daemon.client import DaemonService

        direct = DaemonService(home, autostart=False, client_name="bench")
        ctx = detect_context(REPO).to_dict()
        owner_lat = []
        for q in fresh_queries:
            ts = time.perf_counter()
            await asyncio.to_thread(direct.recall, ctx, q + " ", limit=6, include_docs=False, min_confidence=0.35)
            owner_lat.append((time.perf_counter() - ts) * 1000)
        direct.close()
        if owner_lat:
            out["owner_recall_p50_ms"] = round(statistics.median(owner_lat), 2)
            out["owner_recall_p95_ms"] = round(pct(owner_lat, 95), 2)
        params = t.CodeLensParams(text_document=t.TextDocumentIdentifier(uri=uri))
        first = await client.text_document_code_lens_async(params)
        await asyncio.sleep(3)  # let the background relevance pass run once
        lens_lat = []
        for _ in range(lenses):
            ts = time.perf_counter()
            result = await client.text_document_code_lens_async(params)
            lens_lat.append((time.perf_counter() - ts) * 1000)
        out["code_lens_p50_ms"] = round(statistics.median(lens_lat), 2)
        out["code_lens_p95_ms"] = round(pct(lens_lat, 95), 2)
        out["code_lenses"] = len(result or first or [])
        if result:
            resolved = await client.code_lens_resolve_async(result[0])
            out["code_lens_example"] = resolved.command.title if resolved.command else None
        status = await client.protocol.send_request_async("mnemo/status", {})
        out["heavy_modules_in_lsp"] = status["lsp"]["heavyModules"]
        out["recall_cache"] = status["lsp"].get("recallCache")
        out["active_skills"] = status["activeSkillCount"]
        out["lsp_rss_mb"], out["lsp_peak_rss_mb"] = rss_mb(client._server.pid)
        out["preinit"] = status["lsp"].get("preinit")
    finally:
        try:
            await asyncio.wait_for(client.shutdown_session(), 10)
        except Exception:  # noqa: BLE001
            pass
        await client.stop()
    # initialize alone, with and without the pre-handshake, alternated (the owner is up: sessions are short)
    samples: dict[str, list[float]] = {"1": [], "0": []}
    server_side: list[float | None] = []
    for _ in range(init_reps):
        for mode in ("1", "0"):
            ts = time.perf_counter()
            c = await config(MNEMO_LSP_PREINIT=mode).start()
            await c.initialize_session(init_params)
            samples[mode].append(round((time.perf_counter() - ts) * 1000, 1))
            if mode == "1":  # the same moment on the server's clock (spawn cost on the client's side excluded)
                st = await c.protocol.send_request_async("mnemo/status", {})
                server_side.append(st["lsp"]["preinit"].get("answeredAfterMs"))
            try:
                await asyncio.wait_for(c.shutdown_session(), 10)
            except Exception:  # noqa: BLE001
                pass
            await c.stop()
    if init_reps:
        out["initialize_ms_median"] = round(statistics.median(samples["1"]), 1)
        out["initialize_ms_without_preinit_median"] = round(statistics.median(samples["0"]), 1)
        out["initialize_ms_samples"] = samples["1"]
        out["initialize_ms_without_preinit_samples"] = samples["0"]
        out["initialize_answered_after_ms_server_side"] = server_side
    if "content_spot" in out:
        out.update(await first_hover_sessions(config, init_params, uri, source, out["content_spot"], home))
    return out


def trace_summary(path: Path, since: float, until: float) -> dict:
    """Per operation (`lsp.hover`, the owner's `hover_context`, the language server's side of that call) and stage:
    p50 / p95 in ms, from the `MNEMO_TRACE_FILE` lines written while the timed hovers ran."""
    ops: dict[str, list[dict]] = {}
    for line in path.read_text().splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if not since <= rec.get("t", 0) <= until + 1:
            continue
        op = rec["op"] + (f":{rec['method']}" if "method" in rec else "")
        ops.setdefault(op, []).append(rec)
    out = {}
    for op, recs in sorted(ops.items()):
        names = list(dict.fromkeys(k for r in recs for k in r["stages"]))
        row = {"n": len(recs)}
        for key in ("total_ms", "cpu_ms"):
            vals = [r[key] for r in recs]
            row[key] = [round(statistics.median(vals), 3), round(pct(vals, 95), 3)]
        row["stages"] = {n: [round(statistics.median(v), 3), round(pct(v, 95), 3)]
                         for n in names for v in [[r["stages"].get(n, 0.0) for r in recs]]}
        if any("embedded" in r for r in recs):  # the owner had the query's embedding (the lens pass asked it)
            row["query_embedded"] = sum(1 for r in recs if r.get("embedded"))
        out[op] = row
    return out


async def settle(client, quiet_s: float = 1.5, limit_s: float = 120) -> float:
    """Wait until the language server's background work on the opened documents (the code lens relevance pass:
    one recall per symbol) has stopped calling the owner for `quiet_s`; the seconds it took. The timed hovers then
    measure a hover, not a hover queued behind a few hundred background recalls (the first and second passes timed
    hovers while that pass still ran)."""
    t0 = time.perf_counter()
    last, since = None, time.perf_counter()
    while time.perf_counter() - t0 < limit_s:
        calls = (await client.protocol.send_request_async("mnemo/status", {}))["lsp"].get("ownerCalls")
        if calls != last:
            last, since = calls, time.perf_counter()
        elif time.perf_counter() - since >= quiet_s:
            break
        await asyncio.sleep(0.25)
    return round(time.perf_counter() - t0 - quiet_s, 1)


async def first_hover_sessions(config, init_params, uri: str, source: str, spot: tuple[int, int], home: Path,
                               reps: int = 3) -> dict:
    """Spawn -> the first hover WITH content (a spot that has content when warm), as an editor does it: spawn,
    initialize, didOpen, hover; with the owner already running, and with no owner (the language server starts
    it). The median of `reps` sessions each."""
    from lsprotocol import types as t

    from mnemo.daemon.client import DaemonService, owner_lock_free

    out: dict = {}
    for mode in ("owner_running", "owner_not_running"):
        times, content, early = [], [], []
        for _ in range(reps):
            if mode == "owner_running":
                await asyncio.to_thread(DaemonService(home, client_name="bench").connect)
            else:
                await asyncio.to_thread(DaemonService(home, autostart=False).shutdown)
                while not owner_lock_free(home):
                    await asyncio.sleep(0.05)
            ts = time.perf_counter()
            c = await config().start()
            await c.initialize_session(init_params)
            c.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
                uri=uri, language_id="python", version=1, text=source)))
            res = await c.text_document_hover_async(t.HoverParams(
                text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=spot[0], character=spot[1])))
            times.append(round((time.perf_counter() - ts) * 1000, 1))
            content.append(res is not None)
            st = await c.protocol.send_request_async("mnemo/status", {})  # who answered it (after the clock)
            early.append(((st.get("lsp") or {}).get("preinit") or {}).get("earlyHover"))
            try:
                await asyncio.wait_for(c.shutdown_session(), 10)
            except Exception:  # noqa: BLE001
                pass
            await c.stop()
        out[f"first_hover_with_content_ms_{mode}"] = statistics.median(times)
        out[f"first_hover_with_content_samples_{mode}"] = times
        out[f"first_hover_has_content_{mode}"] = content
        # answered by the pre-handshake while pygls loaded (lsp.preinit.earlyHover; None before it existed)
        out[f"first_hover_answered_early_{mode}"] = [None if e is None else e.get("last") for e in early]
    return out


def reuse_or_fill(args) -> Path:
    from mnemo.core.identity import detect_context

    if args.home:
        home = Path(args.home)
        if (home / "mnemo.db").exists():
            print(f"reusing the store in {home}", file=sys.stderr)
            return home
        home.mkdir(parents=True, exist_ok=True)
    else:
        home = scratch_dir("mnemo-lsp-bench-")
    t = time.perf_counter()
    info = fill_store(home, args.memories, detect_context(REPO))
    print(f"filled {args.memories} memories in {time.perf_counter() - t:.1f} s ({info})", file=sys.stderr)
    return home


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--hovers", type=int, default=200)
    ap.add_argument("--lenses", type=int, default=50)
    ap.add_argument("--init-reps", type=int, default=5,
                    help="extra short sessions timing initialize with and without the pre-handshake (default 5)")
    ap.add_argument("--json", action="store_true", help="(the last line is always one JSON object)")
    ap.add_argument("--home", default=None, help="store to use; filled when empty, reused as is otherwise")
    ap.add_argument("--trace", default=None, metavar="FILE",
                    help="set MNEMO_TRACE_FILE=FILE for the language server and its owner and report each stage of "
                         "the timed hovers (p50 / p95) under `stages` (the timing code runs in both processes)")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("ANONYMIZED_TELEMETRY", "False")
    from mnemo.daemon.client import DaemonService

    home = reuse_or_fill(args)
    load_start = os.getloadavg()
    try:
        trace_file = Path(args.trace).resolve() if args.trace else None
        if trace_file is not None:
            trace_file.unlink(missing_ok=True)
        out = asyncio.run(drive(home, args.hovers, args.lenses, args.init_reps, trace_file))
    finally:
        DaemonService(home, autostart=False).shutdown()
    detail = {"memories": args.memories, **out, "machine": f"{os.cpu_count()} cores, {sys.platform}",
              "load_avg_1m": round(os.getloadavg()[0], 2), "load_avg_at_start": [round(x, 2) for x in load_start],
              "load_avg_at_end": [round(x, 2) for x in os.getloadavg()], "server_tree": os.environ.get("PYTHONPATH")}
    print(json.dumps({"detail": detail}), file=sys.stderr)
    keys = ("initialize_ms", "first_hover_ms_after_spawn", "hover_p50_ms", "hover_p95_ms", "code_lens_p95_ms",
            "lsp_rss_mb", "first_hover_with_content_ms_owner_running", "first_hover_with_content_ms_owner_not_running")
    print(json.dumps({**{k: out[k] for k in keys if k in out}, "load_avg_1m": detail["load_avg_1m"]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
