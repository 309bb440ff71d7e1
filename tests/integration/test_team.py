"""Team scope against a real Chroma server: two people with their own stores and owner processes share promoted
memories; a server killed mid-test degrades recall to local scopes (said once), queues promotions durably (even
across an owner crash), and everything arrives when it comes back."""

from __future__ import annotations

import os
import signal
import sqlite3
import time
import uuid
from pathlib import Path

import pytest
from team_server import ChromaServer, chroma_server, proxied_team_server  # noqa: F401 - fixtures

from conftest import git
from mnemo.core.errors import NotFound, SecretDetected
from mnemo.core.identity import detect_context
from mnemo.core.team.address import save_settings
from mnemo.daemon.client import DaemonService

pytestmark = pytest.mark.team


def clone(tmp_path: Path, name: str) -> Path:
    """A checkout of acme/payments: two people's clones share one project id."""
    repo = tmp_path / name
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", "https://github.com/acme/payments.git")
    (repo / "README.md").write_text("# Payments\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


@pytest.fixture
def owners(tmp_path, monkeypatch):
    """Owner processes with their own stores, connected to a team server via `<store>/team.json`."""
    monkeypatch.setenv("MNEMO_EMBEDDER", "hash")
    monkeypatch.setenv("MNEMO_TEAM_RETRY", "0.5")
    monkeypatch.setenv("MNEMO_IDLE_TIMEOUT", "120")
    for var in ("MNEMO_TEAM_URL", "MNEMO_TEAM_TOKEN", "MNEMO_TEAM_NAMESPACE", "MNEMO_PROJECT_ROOT"):
        monkeypatch.delenv(var, raising=False)
    started: list[DaemonService] = []

    def make(name: str, url: str, namespace: str, token: str | None = None) -> DaemonService:
        home = tmp_path / f"store-{name}"
        save_settings(home, url, token, namespace)
        svc = DaemonService(home, client_name="test")
        started.append(svc)
        return svc

    yield make
    for svc in started:
        try:
            svc.shutdown()
        except Exception:  # noqa: BLE001 - already gone (killed by the test)
            pass


def person(repo: Path, user: str) -> dict:
    ctx = detect_context(repo).to_dict()
    ctx["user"] = user
    return ctx


def outbox_size(home: Path) -> int:
    con = sqlite3.connect(home / "mnemo.db", timeout=10)
    try:
        return int(con.execute("SELECT COUNT(*) FROM team_outbox").fetchone()[0])
    except sqlite3.OperationalError:
        return 0
    finally:
        con.close()


def wait_for(pred, timeout: float = 20.0, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        time.sleep(step)
    return pred()


def team_cards(res: dict) -> list[dict]:
    return [c for c in res["cards"] if c["scope"] == "team"]


@pytest.fixture(params=["chroma", "behind-nginx"])
def team_endpoint(request) -> tuple[str, str | None]:
    """(url, token): Chroma alone (loopback, tokenless), and `mnemo team serve --token` (nginx checks it)."""
    if request.param == "chroma":
        return request.getfixturevalue("chroma_server").url, None
    server = request.getfixturevalue("proxied_team_server")
    return server.url, server.token


def test_two_stores_share_a_promoted_memory(tmp_path, owners, team_endpoint):
    ns = "t" + uuid.uuid4().hex[:8]
    url, token = team_endpoint
    alice_svc = owners("alice", url, ns, token)
    bob_svc = owners("bob", url, ns, token)
    alice = person(clone(tmp_path, "alice-clone"), "alice")
    bob = person(clone(tmp_path, "bob-clone"), "bob")
    assert alice["project_id"] == bob["project_id"]

    text = "payments API requires idempotency keys on every POST"
    mem = alice_svc.remember(alice, text, kind="decision", anchors=[{"path": "api/payments.py"}])["memory"]
    res = alice_svc.promote(alice, mem["id"], "team")
    assert res["status"] == "promoted", res
    rid = res["team"]["record_id"]
    assert res["memory"]["provenance"]["promoted_to_team"]["status"] == "shared"
    assert res["memory"]["scope"] == "project"  # the local note stays; the team gets a copy

    # Bob's store has never seen it: his recall finds it on the team server, attributed to Alice.
    assert bob_svc.list_memories(bob, scope="project")["total"] == 0
    got = bob_svc.recall(bob, "idempotency keys for POST requests")
    cards = team_cards(got)
    assert [c["item_id"] for c in cards] == [rid]
    card = cards[0]
    assert card["author"] == "alice" and card["compressed_summary"] == text
    assert card["promoted_from"]["project_name"] == "payments" and card["source_path"] == "api/payments.py"
    assert bob_svc.recall(bob, "idempotency keys", scope="team")["cards"][0]["item_id"] == rid
    hyd = bob_svc.hydrate(bob, rid)
    assert hyd["memory"]["text"] == text and hyd["memory"]["author"] == "alice"

    # Alice's own recall shows her local note once (the team copy of the same text is folded into it).
    mine = alice_svc.recall(alice, "idempotency keys for POST requests")["cards"]
    assert [c["scope"] for c in mine if c["compressed_summary"] == text] == ["project"]

    # The secret check runs before anything is stored, so nothing secret can reach the team (promotion checks
    # again, for memories stored before a scanner update; see tests/unit/test_team_unit.py).
    with pytest.raises(SecretDetected) as err:
        alice_svc.remember(alice, "deploy with token ghp_abcdefghijklmnopqrstuvwxyz0123456789")
    assert "ghp_abcdefghij" not in str(err.value) and err.value.details["findings"]

    # Per-user attribution.
    own = bob_svc.remember(bob, "webhook retries use exponential backoff capped at one hour", kind="lesson")
    assert bob_svc.promote(bob, own["memory"]["id"], "team")["status"] == "promoted"
    status = alice_svc.team_status(alice)
    assert status["reachable"] and status["records"] == 2
    assert status["authors"] == {"alice": 1, "bob": 1}
    assert status["outbox"]["pending"] == 0

    # Deprecating a team memory takes it out of everyone's recall.
    bob_svc.deprecate(bob, rid, "superseded by the v2 API")
    assert rid not in [c["item_id"] for c in alice_svc.recall(alice, "idempotency keys", scope="team")["cards"]]
    with pytest.raises(NotFound):
        bob_svc.deprecate(bob, "team-doesnotexist", "x")


def test_outage_degrades_queues_and_recovers(tmp_path, owners):
    server = ChromaServer(tmp_path / "chroma-outage").start()
    try:
        ns = "o" + uuid.uuid4().hex[:8]
        a_svc = owners("a", server.url, ns)
        b_svc = owners("b", server.url, ns)
        a = person(clone(tmp_path, "a-clone"), "ana")
        b = person(clone(tmp_path, "b-clone"), "ben")

        first = a_svc.remember(a, "the ledger service rounds amounts half-even", kind="decision")["memory"]
        assert a_svc.promote(a, first["id"], "team")["status"] == "promoted"
        b_svc.remember(b, "local note: the ledger runs nightly reconciliation at 02:00", kind="fact")
        assert team_cards(b_svc.recall(b, "ledger rounding"))

        server.kill()  # mid-test outage: SIGKILL

        # Recall keeps working on local scopes, says so once, and costs at most one short timeout.
        t0 = time.monotonic()
        down = b_svc.recall(b, "ledger rounding")
        first_ms = (time.monotonic() - t0) * 1000
        assert not team_cards(down) and down["cards"], down
        assert any("unreachable" in w for w in down["warnings"]), down["warnings"]
        t0 = time.monotonic()
        again = b_svc.recall(b, "ledger rounding")
        again_ms = (time.monotonic() - t0) * 1000
        assert not any("unreachable" in w for w in again["warnings"]), again["warnings"]
        assert first_ms < 4000 and again_ms < 1000, (first_ms, again_ms)

        # Promotions while down are queued durably ...
        queued = []
        for text in ("ledger exports are UTF-8 CSV with a BOM for Excel",
                     "never call the ledger API from a request handler: enqueue a job"):
            m = a_svc.remember(a, text, kind="lesson")["memory"]
            res = a_svc.promote(a, m["id"], "team")
            assert res["status"] == "queued", res
            assert res["memory"]["provenance"]["promoted_to_team"]["status"] == "queued"
            queued.append(res["team"]["record_id"])
        assert outbox_size(a_svc.home) == 2

        # ... even across an owner crash.
        pid = a_svc.health()["pid"]
        os.kill(pid, signal.SIGKILL)
        a_svc.close()
        wait_for(lambda: not _alive(pid), timeout=10)
        assert outbox_size(a_svc.home) == 2

        server.start()  # the same data directory and port: back
        a_svc2 = DaemonService(a_svc.home, client_name="test")  # a fresh owner resumes the queue by itself
        try:
            assert a_svc2.health()["pid"] != pid
            assert wait_for(lambda: outbox_size(a_svc.home) == 0, timeout=30), "the outbox did not drain"
            prov = a_svc2.get_memory(a, queued[0].replace("team-", "mem-"))["provenance"]["promoted_to_team"]
            assert prov["status"] == "shared"
        finally:
            a_svc2.close()

        # Nothing is lost: B sees every promotion, and is told once that the team is back.
        back = wait_for(lambda: _recall_ids(b_svc, b, "ledger", scope="team"), timeout=10)
        assert set(back) == {f"team-{first['id'][4:]}", *queued}, back
        status = b_svc.team_status(b)
        assert status["reachable"] and status["records"] == 3 and status["authors"] == {"ana": 3}
    finally:
        server.stop()


def _recall_ids(svc, ctx, query, scope):
    res = svc.recall(ctx, query, scope=scope, limit=10)
    ids = [c["item_id"] for c in res["cards"]]
    return ids if len(ids) >= 3 else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie child of nobody we can reap counts as gone
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split()[2] != "Z"
    except OSError:
        return False


def test_promote_to_team_without_a_server_says_what_to_do(tmp_path, owners, monkeypatch):
    svc = owners("solo", "http://127.0.0.1:9", "default")
    (svc.home / "team.json").unlink()  # not configured at all
    ctx = person(clone(tmp_path, "solo-clone"), "sam")
    m = svc.remember(ctx, "use structured logging everywhere")["memory"]
    with pytest.raises(Exception) as err:
        svc.promote(ctx, m["id"], "team")
    assert "team server" in err.value.message and "MNEMO_TEAM_URL" in err.value.hint
    assert svc.team_status(ctx)["configured"] is False
