"""Concurrency soak: 3 language servers + 1 MCP server + 1 CLI loop on one store, for a bounded time.

Every client writes notes through its own surface (LSP `mnemo.remember`, MCP `remember`, `mnemo remember`) while
the language servers and the MCP server check that the notes written by the others are visible to them (recall
by the note's words returns its id), measuring the time from the writer's acknowledgement to the first recall that
shows it. At the end: every acknowledged note is in the store exactly once, and no client saw "database is locked"
(errors returned to a client, the servers' stderr, the owner's log).

Fast (default): 20 s. Full (MNEMO_FULL=1): 300 s.
"""

from __future__ import annotations

import json
import os
import random
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
from _helpers import FULL, figure, stop_owner
from _rpc import RawServer

from mnemo.core.identity import detect_context
from mnemo.daemon.client import DaemonService

DURATION = 300.0 if FULL else 20.0
MEM_ID = re.compile(r"\bmem-[0-9a-f]{20}\b")
LOCKED = re.compile(r"database is locked|database table is locked|SQLITE_BUSY", re.I)


def words(rnd: random.Random, tag: str, i: int) -> str:
    return " ".join(f"{rnd.choice('bcdfghklmnprstvz')}{rnd.randrange(10**7):07d}" for _ in range(6)) + f" {tag}{i}"


class Soak:
    def __init__(self):
        self.lock = threading.Lock()
        self.acked: dict[str, tuple[str, float, str]] = {}  # id -> (text, t_ack, writer)
        self.latencies: list[float] = []
        self.first_check_misses = 0
        self.errors: list[str] = []
        self.writes: dict[str, int] = {}
        self.checks = 0

    def ack(self, writer: str, mem_id: str, text: str) -> None:
        with self.lock:
            self.acked[mem_id] = (text, time.monotonic(), writer)
            self.writes[writer] = self.writes.get(writer, 0) + 1

    def others(self, me: str, seen: set[str], n: int = 2) -> list[tuple[str, str, float]]:
        with self.lock:
            todo = [(i, t, ta) for i, (t, ta, w) in self.acked.items() if w != me and i not in seen]
        return todo[-n:]


def lsp_worker(name: str, srv: RawServer, soak: Soak, stop: threading.Event, uri: str) -> None:
    rnd, i, seen = random.Random(name), 0, set()
    while not stop.is_set():
        text = words(rnd, name, i)
        i += 1
        ans = srv.request("workspace/executeCommand", {"command": "mnemo.remember", "arguments": [{"text": text}]},
                          timeout=60)
        if "error" in ans:
            soak.errors.append(f"{name}: {ans['error']}")
            continue
        soak.ack(name, ans["result"]["memory"]["id"], text)
        for mem_id, other_text, t_ack in soak.others(name, seen):
            res = srv.request("mnemo/recall", {"query": other_text, "limit": 3, "includeDocs": False, "uri": uri},
                              timeout=60)
            soak.checks += 1
            if "error" in res:
                soak.errors.append(f"{name} recall: {res['error']}")
                continue
            if any(c["item_id"] == mem_id for c in res["result"]["cards"]):
                soak.latencies.append(time.monotonic() - t_ack)
                seen.add(mem_id)
            else:
                soak.first_check_misses += 1


def mcp_worker(srv: RawServer, soak: Soak, stop: threading.Event) -> None:
    rnd, i, seen = random.Random("mcp"), 0, set()
    while not stop.is_set():
        text = words(rnd, "mcp", i)
        i += 1
        ans = srv.request("tools/call", {"name": "remember", "arguments": {"text": text}}, timeout=60)
        body = json.dumps(ans.get("result") or ans.get("error"))
        ids = MEM_ID.findall(body)
        if "error" in ans or ans["result"].get("isError") or not ids:
            soak.errors.append(f"mcp: {body[:300]}")
            continue
        soak.ack("mcp", ids[0], text)
        for mem_id, other_text, t_ack in soak.others("mcp", seen):
            res = srv.request("tools/call", {"name": "recall", "arguments": {"query": other_text, "limit": 3,
                                                                            "include_docs": False}}, timeout=60)
            soak.checks += 1
            if mem_id in json.dumps(res.get("result")):
                soak.latencies.append(time.monotonic() - t_ack)
                seen.add(mem_id)
            else:
                soak.first_check_misses += 1


def cli_worker(env: dict, repo: Path, soak: Soak, stop: threading.Event) -> None:
    rnd, i = random.Random("cli"), 0
    while not stop.is_set():
        text = words(rnd, "cli", i)
        i += 1
        r = subprocess.run([sys.executable, "-m", "mnemo", "remember", text, "--json"], cwd=repo, env=env,
                           capture_output=True, text=True, timeout=120)
        if r.returncode != 0:
            soak.errors.append(f"cli: {r.stdout[-300:]} {r.stderr[-300:]}")
            continue
        soak.ack("cli", json.loads(r.stdout)["memory"]["id"], text)


@pytest.mark.timeout(DURATION + 600)
def test_three_language_servers_an_mcp_server_and_a_cli_loop(tmp_path, git_repo):
    home = tmp_path / "store"
    env = dict(os.environ, MNEMO_HOME=str(home), MNEMO_EMBEDDER="hash", HOME=str(tmp_path),
               MNEMO_IDLE_TIMEOUT="600")
    soak = Soak()
    servers: list[RawServer] = []
    stop = threading.Event()
    try:
        uri = (git_repo / "README.md").as_uri()
        lsps = []
        for k in range(3):
            srv = RawServer([sys.executable, "-m", "mnemo", "lsp"], env, str(git_repo), "lsp")
            servers.append(srv)
            srv.request("initialize", {"processId": None, "rootUri": git_repo.as_uri(), "capabilities": {},
                                       "workspaceFolders": [{"uri": git_repo.as_uri(), "name": "repo"}]}, timeout=90)
            srv.notify("initialized", {})
            lsps.append((f"lsp{k + 1}", srv))
        mcp = RawServer([sys.executable, "-m", "mnemo", "mcp"], env, str(git_repo), "mcp")
        servers.append(mcp)
        mcp.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                                   "clientInfo": {"name": "soak", "version": "0"}}, timeout=90)
        mcp.notify("notifications/initialized", {})
        for _, srv in lsps:  # every server reached the owner before the clock starts
            srv.request("mnemo/status", {}, timeout=90)
        threads = [threading.Thread(target=lsp_worker, args=(n, s, soak, stop, uri), daemon=True) for n, s in lsps]
        threads.append(threading.Thread(target=mcp_worker, args=(mcp, soak, stop), daemon=True))
        threads.append(threading.Thread(target=cli_worker, args=(env, git_repo, soak, stop), daemon=True))
        t0 = time.monotonic()
        for t in threads:
            t.start()
        time.sleep(DURATION)
        stop.set()
        for t in threads:
            t.join(timeout=120)
        took = time.monotonic() - t0
        stderr = "".join(s.stderr_tail(10**7) for s in servers)
    finally:
        stop.set()
        for s in servers:
            s.close()
    # the truth, read back through a fresh client
    ctx = detect_context(git_repo).to_dict()
    svc = DaemonService(home, client_name="soak-check")
    try:
        listed = svc.list_memories(ctx, limit=100000)["memories"]
    finally:
        svc.close()
        stop_owner(home)
    log = (home / "logs" / "daemon.log").read_text() if (home / "logs" / "daemon.log").exists() else ""
    ids = [m["id"] for m in listed]
    texts = [m["text"] for m in listed]
    lost = [i for i in soak.acked if i not in set(ids)]
    dups = len(texts) - len(set(texts))
    locked = len(LOCKED.findall(" ".join(soak.errors))) + len(LOCKED.findall(stderr)) + len(LOCKED.findall(log))
    lat = sorted(soak.latencies)
    p = (lambda q: lat[min(len(lat) - 1, int(q * len(lat)))]) if lat else (lambda q: float("nan"))
    name = "test_soak" + ("[full]" if FULL else "")
    figure(name, "duration", f"{took:.0f}", unit="s", clients="3 LSP + 1 MCP + 1 CLI loop")
    figure(name, "acknowledged writes", len(soak.acked), by_client=soak.writes)
    figure(name, "acknowledged writes lost / duplicated", f"{len(lost)} / {dups}")
    figure(name, "cross-client visibility checks (visible at first check)",
           f"{len(lat)}/{soak.checks}", first_check_misses=soak.first_check_misses)
    figure(name, "write -> visible in another client (p50 / p99 / max)",
           f"{p(0.5) * 1000:.0f} / {p(0.99) * 1000:.0f} / {(lat[-1] if lat else 0) * 1000:.0f}", unit="ms")
    figure(name, "'database is locked' errors surfaced", locked)
    figure(name, "errors returned to clients", len(soak.errors))
    assert not soak.errors, soak.errors[:5]
    assert not lost and dups == 0
    assert locked == 0
    # every note visible at its first check; the latency (the checking client's queueing included) is a figure, not
    # a test: it measured 1.09 s max on the loaded 2-core box. The bound only catches a note that stays invisible.
    assert soak.first_check_misses == 0 and lat and lat[-1] < 10.0
    assert all(v > 0 for v in soak.writes.values()) and len(soak.writes) == 5
