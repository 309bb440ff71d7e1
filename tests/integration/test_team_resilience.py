"""Issue 21 item 16: team resilience, measured against the real `mnemo team serve --token` (nginx checks the token,
Chroma behind it) and real owner processes.

- The team server stopped in the middle of a run of promotions: nothing is lost; what could not be sent waits in
  the owner's outbox and is replayed when the server is back (the same data directory and port).
- Four owners promoting at the same time through the token proxy: every record reaches the server exactly once.

Each test prints a `FIGURES {...}` line (run with `-s`): docs/reliability.md, "Issue 21 — branches and the team".
"""

from __future__ import annotations

import json
import os
import signal
import threading
import time
import uuid

import pytest
from team_server import TEAM_TOKEN, TeamServe, proxied_team_server, require_nginx  # noqa: F401 - fixture
from test_team import clone, outbox_size, owners, person, wait_for  # noqa: F401 - fixture

pytestmark = pytest.mark.team

SERVICES = ["billing", "ledger", "search", "catalog", "checkout", "auth", "inventory", "shipping", "payouts",
            "reports", "notifications", "gateway", "scheduler", "pricing", "reviews", "profiles", "uploads",
            "analytics", "exports", "webhooks"]
STORES = ["postgres", "redis", "sqlite", "dynamodb", "cassandra"]
SINKS = ["loki", "datadog", "splunk", "elastic", "papertrail"]
DAYS = ["monday", "tuesday", "wednesday", "thursday", "friday"]
FACTS = ["{s} keeps its state in {db} and nowhere else",
         "calls into {s} carry a {n} second deadline set by the caller",
         "{s} ships structured logs to {sink}",
         "{s} releases go out every {day} after the freeze",
         "only the {s} team may change the {s}_{db} schema"]


# The owners run the hash embedder (plumbing, not relevance): to it these templated notes read alike, and the check
# on write would hold them as conflicts. A person's `keep_both` lets them all land; what is measured is the team path.
KEEP = "keep_both"


def note(i: int) -> str:
    """The i-th of 100 distinct project notes (no two state the same or a contradicting claim)."""
    s, f = SERVICES[i % 20], FACTS[i // 20]
    return f.format(s=s, db=STORES[i % 5], n=5 + i % 20, sink=SINKS[i % 5], day=DAYS[i % 5])


def server_ids(url: str, token: str, collection: str) -> list[str]:
    """Every record id in the team collection, read straight from the server (through the proxy, with the token)."""
    import chromadb
    from chromadb.config import Settings

    from mnemo.core.team.address import TeamSettings

    host, port, ssl = TeamSettings(url=url, token=token).endpoint()
    client = chromadb.HttpClient(host=host, port=port, ssl=ssl, headers=TeamSettings(url=url, token=token).headers(),
                                 settings=Settings(anonymized_telemetry=False))
    col = client.get_collection(collection)
    ids: list[str] = []
    while True:
        page = col.get(limit=500, offset=len(ids), include=[])["ids"]
        ids += page
        if len(page) < 500:
            return ids


@pytest.mark.parametrize("how", ["stop", pytest.param("crash", marks=pytest.mark.slow)])
def test_team_server_stopped_mid_promotions_loses_nothing(tmp_path, owners, monkeypatch, how):  # noqa: F811
    """`stop`: SIGTERM to `mnemo team serve` (it stops nginx and Chroma); `crash`: SIGKILL (its children die with
    it), no chance to flush."""
    require_nginx()
    # The default retry interval (30 s), not the `owners` fixture's 0.5 s: the queue must replay when the server is
    # back, not when the interval is over (MNEMO_TEST_TEAM_RETRY sets another interval to measure).
    retry = float(os.environ.get("MNEMO_TEST_TEAM_RETRY") or 30.0)
    monkeypatch.setenv("MNEMO_TEAM_RETRY", str(retry))
    data = tmp_path / "team-data"
    server = TeamServe(data, "--token", TEAM_TOKEN).start()
    port = server.port
    try:
        ns = "r" + uuid.uuid4().hex[:8]
        svc = owners("ana", server.url, ns, TEAM_TOKEN)
        ctx = person(clone(tmp_path, "ana-clone"), "ana")
        total, stop_after = 60, 20
        results: list[dict] = []
        errors: list[BaseException] = []

        def promote_all():
            try:
                for i in range(total):
                    m = svc.remember(ctx, note(i), kind="decision", on_conflict=KEEP)["memory"]
                    t0 = time.monotonic()
                    res = svc.promote(ctx, m["id"], "team")
                    results.append({"id": m["id"], "status": res["status"], "record_id": res["team"]["record_id"],
                                    "ms": (time.monotonic() - t0) * 1000})
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        worker = threading.Thread(target=promote_all)
        worker.start()
        assert wait_for(lambda: len(results) >= stop_after or errors, timeout=120) and not errors, (errors, len(results))
        t_stop = time.monotonic()
        server.stop(signal.SIGTERM if how == "stop" else signal.SIGKILL)  # down while promotions go on
        stopped_s = time.monotonic() - t_stop
        worker.join(timeout=300)
        assert not worker.is_alive() and not errors, errors
        assert len(results) == total
        statuses = [r["status"] for r in results]
        assert set(statuses) <= {"promoted", "queued"}, statuses
        queued = statuses.count("queued")
        # what came after the stop was queued, not refused (how many promotes land while the server goes down
        # depends on the machine's load: at least the last ones are queued)
        assert queued >= 1 and statuses[-1] == "queued", statuses
        assert outbox_size(svc.home) == queued  # durably, in the store

        # The server comes back on the same data directory and port: the owner's sender replays the outbox.
        t_back = time.monotonic()
        server = TeamServe(data, "--token", TEAM_TOKEN, port=port).start()
        ready_s = time.monotonic() - t_back
        t_ready = time.monotonic()
        assert wait_for(lambda: outbox_size(svc.home) == 0, timeout=retry + 120, step=0.1), "the outbox did not drain"
        replay_s = time.monotonic() - t_ready
        assert replay_s < retry / 2, f"replayed {replay_s:.1f} s after the server was back (retry interval {retry} s)"

        status = svc.team_status(ctx)
        ids = server_ids(server.url, TEAM_TOKEN, status["collection"])
        expected = {r["record_id"] for r in results}
        assert len(ids) == len(set(ids)) == total and set(ids) == expected  # every promotion, once
        assert status["records"] == total and status["outbox"]["pending"] == 0
        shared = [svc.get_memory(ctx, r["id"])["provenance"]["promoted_to_team"]["status"] for r in results]
        assert shared == ["shared"] * total
        down_ms = sorted(r["ms"] for r, s in zip(results, statuses, strict=True) if s == "queued")
        print("FIGURES " + json.dumps({
            "test": f"server {'stopped' if how == 'stop' else 'killed'} mid-promotions", "promotions": total, "sent_before_stop": statuses.count(
                "promoted"), "queued_while_down": queued, "on_server_after": len(ids), "lost": total - len(set(ids)),
            "duplicates": len(ids) - len(set(ids)), "server_stop_s": round(stopped_s, 1),
            "server_restart_s": round(ready_s, 1), "replay_s_after_ready": round(replay_s, 2),
            "promote_ms_while_down_median": round(down_ms[len(down_ms) // 2], 1) if down_ms else None,
            "promote_ms_while_down_max": round(down_ms[-1], 1) if down_ms else None,
            "team_retry_s": retry}))
    finally:
        server.stop()


def test_four_owners_promoting_at_once_through_the_proxy_store_each_record_once(tmp_path, owners,  # noqa: F811
                                                                                  proxied_team_server):  # noqa: F811
    server = proxied_team_server
    ns = "c" + uuid.uuid4().hex[:8]
    people = ["ana", "ben", "chen", "dara"]
    per_owner = 25
    svcs = {p: owners(p, server.url, ns, server.token) for p in people}
    ctxs = {p: person(clone(tmp_path, f"{p}-clone"), p) for p in people}
    assert len({c["project_id"] for c in ctxs.values()}) == 1  # four clones of one project
    barrier = threading.Barrier(len(people))
    mems: dict[str, list[str]] = {p: [] for p in people}
    results: dict[str, list[dict]] = {p: [] for p in people}
    errors: list[BaseException] = []

    def promote_all(k: int, p: str) -> None:
        """Write and promote at once, from the first call on: the four owners also race to create the team's
        collection (a new namespace)."""
        try:
            barrier.wait(timeout=60)
            for i in range(per_owner):
                mid = svcs[p].remember(ctxs[p], note(k * per_owner + i), kind="decision",
                                       on_conflict=KEEP)["memory"]["id"]
                mems[p].append(mid)
                results[p].append(svcs[p].promote(ctxs[p], mid, "team"))
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    for p in people:  # each owner running (not yet connected to the team server) before the race
        assert svcs[p].health()["pid"]
    threads = [threading.Thread(target=promote_all, args=(k, p)) for k, p in enumerate(people)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
    took = time.monotonic() - t0
    assert not errors, errors
    statuses = [r["status"] for p in people for r in results[p]]
    assert len(statuses) == len(people) * per_owner and set(statuses) <= {"promoted", "queued"}
    assert wait_for(lambda: all(outbox_size(svcs[p].home) == 0 for p in people), timeout=60)

    status = svcs["ana"].team_status(ctxs["ana"])
    ids = server_ids(server.url, server.token, status["collection"])
    expected = {r["team"]["record_id"] for p in people for r in results[p]}
    assert len(expected) == len(people) * per_owner
    assert len(ids) == len(set(ids)) == len(expected) and set(ids) == expected  # every record, once
    assert status["authors"] == {p: per_owner for p in people}
    for p in people:  # and every owner sees each of its promotions as shared
        assert all(svcs[p].get_memory(ctxs[p], mid)["provenance"]["promoted_to_team"]["status"] == "shared"
                   for mid in mems[p])
    print("FIGURES " + json.dumps({
        "test": "four owners promoting concurrently through the token proxy", "owners": len(people),
        "promotions": len(expected), "promoted_at_once": statuses.count("promoted"),
        "queued_then_sent": statuses.count("queued"), "on_server": len(ids), "lost": len(expected - set(ids)),
        "duplicates": len(ids) - len(set(ids)), "wall_s": round(took, 1),
        "promotions_per_s": round(len(expected) / took, 1)}))
