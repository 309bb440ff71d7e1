"""Two trees' language servers hovering the same definitions in turn: an A/B comparison that holds on a loaded box.

    python bench/lsp_hover_ab.py --tree old=/tmp/old/server --tree new=server --memories 10000 --json

`bench/lsp_latency.py` times one tree at a time; on a box shared with other work its wall clock swings 1.5-2x from
one run to the next, more than the difference between two trees. Here each tree gets its own copy of the same
store (N synthetic notes, filled as `lsp_latency.py` does), its own owner and its own `python -m mnemo lsp`
(pytest-lsp's client, `PYTHONPATH` = the tree), both set up as an editor would (open the eleven files of
`lsp_latency.HOVER_FILES`, let the open-time pass finish), then hover the same definitions one after the other:
spot 1 on A then B, spot 2 on B then A, ... so both meet the same load at nearly the same moment. Reported per
tree: hover p50/p95 (ms), the CPU time its language server and its owner spent per hover, and the median of the
per-spot differences (B - A). The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import shutil
import statistics
import sys
import time
from pathlib import Path

from scratch import scratch_dir  # bench/ is on sys.path when run as a script

sys.path.insert(0, str(Path(__file__).resolve().parent))

from lsp_latency import (  # noqa: E402
    HOVER_FILES,
    REPO,
    TARGET,
    client_factory,
    cpu_ms,
    fill_store,
    hover_positions,
    initialize_params,
    pct,
    settle,
)


async def start_tree(name: str, tree: str, home: Path):
    from pytest_lsp import ClientServerConfig

    env = dict(os.environ, MNEMO_HOME=str(home), MNEMO_IDLE_TIMEOUT="120", HF_HUB_OFFLINE="1",
               MNEMO_USER_SKILLS=str(home / "user-skills"), PYTHONPATH=str(Path(tree).resolve()))
    for k in ("MNEMO_EMBEDDER", "MNEMO_LSP_PREINIT", "MNEMO_TRACE_FILE"):
        env.pop(k, None)
    client = await ClientServerConfig(server_command=[sys.executable, "-m", "mnemo", "lsp"], server_env=env,
                                      client_factory=client_factory).start()
    await client.initialize_session(initialize_params())
    client.name = name
    return client


async def ready(client, sources: dict[str, str]) -> None:
    from lsprotocol import types as t

    client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
        uri=TARGET.as_uri(), language_id="python", version=1, text=sources[TARGET.as_uri()])))
    t0 = time.perf_counter()
    while not any(s.get("state") == "ready" for s in client.states):
        if time.perf_counter() - t0 > 180:
            raise RuntimeError(f"{client.name}: the server never became ready")
        await asyncio.sleep(0.1)
    while True:
        idx = (await client.protocol.send_request_async("mnemo/stats", {}))["index"]
        if idx["ready"] and idx["indexed_seq"] >= idx["store_seq"]:
            break
        await asyncio.sleep(0.5)
    for u, text in sources.items():
        if u != TARGET.as_uri():
            client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
                uri=u, language_id="python", version=1, text=text)))


async def hover_ms(client, uri: str, line: int, col: int) -> tuple[float, bool]:
    from lsprotocol import types as t

    ts = time.perf_counter()
    res = await client.text_document_hover_async(t.HoverParams(
        text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=line, character=col)))
    return (time.perf_counter() - ts) * 1000, res is not None


async def drive(trees: list[tuple[str, str]], homes: list[Path], hovers: int) -> dict:
    sources = {f.as_uri(): f.read_text() for f in HOVER_FILES if f.is_file()}
    spots = hover_positions(sources, hovers + 20)
    clients = [await start_tree(name, tree, home) for (name, tree), home in zip(trees, homes, strict=True)]
    out: dict = {"trees": dict(trees)}
    try:
        for c in clients:
            await ready(c, sources)
        await asyncio.gather(*(settle(c) for c in clients))
        for u, line, col in spots[:20]:  # warm-up, both
            for c in clients:
                await hover_ms(c, u, line, col)
        pids = {}
        for c in clients:
            st = await c.protocol.send_request_async("mnemo/status", {})
            pids[c.name] = {"lsp": c._server.pid, "owner": (st.get("owner") or {}).get("pid")}
        cpu0 = {n: {k: cpu_ms(p) for k, p in d.items()} for n, d in pids.items()}
        lat: dict[str, list[float]] = {c.name: [] for c in clients}
        shown: dict[str, int] = {c.name: 0 for c in clients}
        for i, (u, line, col) in enumerate(spots[20:]):
            for c in (clients if i % 2 == 0 else clients[::-1]):
                ms, has = await hover_ms(c, u, line, col)
                lat[c.name].append(ms)
                shown[c.name] += has
        for c in clients:
            n = c.name
            row = {"hover_p50_ms": round(statistics.median(lat[n]), 2), "hover_p95_ms": round(pct(lat[n], 95), 2),
                   "hover_max_ms": round(max(lat[n]), 2), "hovers": len(lat[n]), "hovers_with_content": shown[n]}
            for k, p in pids[n].items():
                now, was = cpu_ms(p), cpu0[n][k]
                if now is not None and was is not None:
                    row[f"{k}_cpu_ms_per_hover"] = round((now - was) / len(lat[n]), 2)
            out[n] = row
        a, b = (c.name for c in clients[:2])
        diffs = [y - x for x, y in zip(lat[a], lat[b], strict=True)]
        out[f"median_difference_{b}_minus_{a}_ms"] = round(statistics.median(diffs), 2)
        out[f"share_of_spots_{b}_faster"] = round(sum(d < 0 for d in diffs) / len(diffs), 3)
    finally:
        for c in clients:
            try:
                await asyncio.wait_for(c.shutdown_session(), 10)
            except Exception:  # noqa: BLE001
                pass
            await c.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--tree", action="append", required=True, metavar="NAME=SERVER_DIR",
                    help="a tree's `server` directory (its `mnemo` package), twice: A then B")
    ap.add_argument("--memories", type=int, default=10000)
    ap.add_argument("--hovers", type=int, default=200)
    ap.add_argument("--dir", default=None, help="where the stores live (filled once, copied per tree; reused)")
    ap.add_argument("--json", action="store_true", help="(the last line is always one JSON object)")
    args = ap.parse_args()
    trees = [tuple(t.split("=", 1)) for t in args.tree]
    if len(trees) != 2 or any(len(t) != 2 for t in trees):
        ap.error("give two trees: --tree old=DIR --tree new=DIR")
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from mnemo.core.identity import detect_context
    from mnemo.daemon.client import DaemonService

    base = Path(args.dir or scratch_dir("mnemo-hover-ab-"))
    seed = base / f"seed-{args.memories}"
    if not (seed / "mnemo.db").exists():
        seed.mkdir(parents=True, exist_ok=True)
        fill_store(seed, args.memories, detect_context(REPO))
    homes = []
    for name, _tree in trees:
        home = base / f"{name}-{args.memories}"
        if home.exists():
            DaemonService(home, autostart=False).shutdown()
            shutil.rmtree(home)
        shutil.copytree(seed, home, ignore=shutil.ignore_patterns("*.sock", "owner.lock", "logs"))
        homes.append(home)
    load_start = os.getloadavg()
    try:
        out = asyncio.run(drive(trees, homes, args.hovers))
    finally:
        for home in homes:
            DaemonService(home, autostart=False).shutdown()
    out.update({"memories": args.memories, "machine": f"{os.cpu_count()} cores, {sys.platform}",
                "load_avg_at_start": [round(x, 2) for x in load_start],
                "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
