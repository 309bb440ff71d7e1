"""Team scope without a server: settings, the circuit breaker, the durable outbox, the secret check, records."""

from __future__ import annotations

import socket
import stat
import time

import pytest

from mnemo.core.errors import InvalidInput, SecretDetected
from mnemo.core.memory.manage import promote
from mnemo.core.memory.recall import recall
from mnemo.core.memory.write import remember
from mnemo.core.team.address import load_settings, save_settings
from mnemo.core.team.client import CircuitBreaker, build_record, record_to_memory


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # nothing listens once the socket is closed


@pytest.fixture
def no_team_env(monkeypatch):
    for var in ("MNEMO_TEAM_URL", "MNEMO_TEAM_TOKEN", "MNEMO_TEAM_NAMESPACE"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def unreachable(monkeypatch, no_team_env):
    monkeypatch.setenv("MNEMO_TEAM_URL", f"http://127.0.0.1:{closed_port()}")
    monkeypatch.setenv("MNEMO_TEAM_RETRY", "3600")


def test_settings_env_wins_over_the_store_file(tmp_path, monkeypatch, no_team_env):
    assert not load_settings(tmp_path).configured
    path = save_settings(tmp_path, "http://team.example:8765", "s3cret-token", "payments")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    s = load_settings(tmp_path)
    assert (s.url, s.token, s.namespace, s.source) == ("http://team.example:8765", "s3cret-token", "payments", "file")
    assert s.endpoint() == ("team.example", 8765, False)
    assert "s3cret" not in str(s.public()) and s.public()["token"] == "set"
    assert s.headers()["Authorization"] == "Bearer s3cret-token"
    monkeypatch.setenv("MNEMO_TEAM_URL", "https://chroma.internal")
    s = load_settings(tmp_path)
    assert s.source == "env" and s.endpoint() == ("chroma.internal", 443, True) and s.token is None
    with pytest.raises(InvalidInput):
        save_settings(tmp_path, "http://x:1", None, "bad namespace!")


def test_settings_file_is_read_again_only_when_it_changes(tmp_path, monkeypatch, no_team_env):
    """Every write's neighbour check asks for the team settings: team.json is parsed once, then again only when it
    changed (a new connection, a disconnect), never served stale."""
    from mnemo.core.team import address

    path = save_settings(tmp_path, "http://one.example:8765", None, "payments")
    reads: list[object] = []
    real = address.Path.read_text
    monkeypatch.setattr(address.Path, "read_text", lambda self, *a, **kw: reads.append(self) or real(self, *a, **kw))
    assert load_settings(tmp_path).url == "http://one.example:8765"
    assert load_settings(tmp_path).url == "http://one.example:8765"
    assert reads == [path]
    save_settings(tmp_path, "http://two.example:8765", None, "payments")  # the same size: a new file
    assert load_settings(tmp_path).url == "http://two.example:8765"
    path.unlink()
    assert not load_settings(tmp_path).configured


def test_breaker_opens_once_waits_then_recovers():
    now = [100.0]
    b = CircuitBreaker(interval=30, clock=lambda: now[0])
    assert b.allow() and b.take_notice() is None
    b.failure("ConnectError")
    assert not b.allow() and "unreachable" in b.take_notice()
    b.failure("ConnectError again")
    assert b.take_notice() is None  # said once per outage
    now[0] += 29
    assert not b.allow()
    now[0] += 2
    assert b.allow()  # one trial after the retry interval
    b.success()
    assert "reachable again" in b.take_notice() and b.take_notice() is None
    assert b.to_dict()["state"] == "closed"


def test_unreachable_server_costs_recall_one_short_try_and_queues_promotions(engine, ctx, unreachable):
    from mnemo.service import LocalService

    svc = LocalService(engine)
    c = ctx.to_dict()
    m = svc.remember(c, "payments API requires idempotency keys on every POST")["memory"]
    t0 = time.perf_counter()
    first = svc.recall(c, "idempotency keys")
    first_s = time.perf_counter() - t0
    assert first["cards"] and any("unreachable" in w for w in first["warnings"])
    t0 = time.perf_counter()
    second = svc.recall(c, "idempotency keys")
    second_s = time.perf_counter() - t0
    assert not any("unreachable" in w for w in second["warnings"])
    assert first_s < 3.5 and second_s < 0.5, (first_s, second_s)

    res = svc.promote(c, m["id"], "team")
    assert res["status"] == "queued" and res["memory"]["scope"] == "project"
    assert res["memory"]["provenance"]["promoted_to_team"]["status"] == "queued"
    again = svc.promote(c, m["id"], "team")  # idempotent: one queued record per memory
    assert again["team"]["record_id"] == res["team"]["record_id"]
    assert engine.team().pending() == 1
    status = svc.team_status(c)
    assert status["configured"] and not status["reachable"] and status["outbox"]["pending"] == 1


def test_outbox_survives_a_restart(home, hash_embedder, ctx, unreachable):
    from mnemo.core.engine import Engine

    e = Engine(home, embedder=hash_embedder)
    try:
        m = remember(e, ctx, "use structured logging everywhere")["memory"]
        assert promote(e, ctx, m["id"], "team")["status"] == "queued"
    finally:
        e.close()
    e = Engine(home, embedder=hash_embedder)
    try:
        client = e.team()
        assert client.pending() == 1
        assert e.store.get_memory(m["id"]).provenance["promoted_to_team"]["status"] == "queued"
    finally:
        e.close()


def test_secrets_are_refused_before_anything_is_sent(engine, ctx, unreachable):
    m = remember(engine, ctx, "staging deploy key: see the vault")["memory"]
    text = "staging deploy key: AKIAIOSFODNN7EXAMPLE"  # as if stored before remember checked for secrets
    with engine.store.write() as c:
        engine.store.update_memory(c, m["id"], text=text)
    with pytest.raises(SecretDetected) as err:
        promote(engine, ctx, m["id"], "team")
    assert "AKIAIOSFODNN7EXAMPLE" not in str(err.value) and "AWS" in str(err.value)
    assert engine.team().pending() == 0
    assert "promoted_to_team" not in engine.store.get_memory(m["id"]).provenance


def test_without_a_team_server_promotion_says_what_to_do(engine, ctx, no_team_env):
    m = remember(engine, ctx, "we deploy on Tuesdays")["memory"]
    with pytest.raises(InvalidInput) as err:
        promote(engine, ctx, m["id"], "team")
    assert "MNEMO_TEAM_URL" in err.value.hint and "mnemo team serve" in err.value.hint
    res = recall(engine, ctx, "deploy", scope="team")
    assert not [c for c in res["cards"] if c["scope"] == "team"]
    assert any("no team server" in w for w in res["warnings"])


def test_team_record_round_trip(engine, ctx):
    m = engine.store.get_memory(remember(engine, ctx, "retry webhooks with backoff", kind="lesson", tags=["webhooks"],
                                                anchors=[{"path": "hooks.py"}])["memory"]["id"])
    rec = build_record(ctx, m, [0.0] * 8, "hash-8", "default")
    assert rec["id"] == "team-" + m.id[4:] and None not in rec["metadata"].values()
    back = record_to_memory(rec["id"], rec["document"], rec["metadata"])
    assert back.scope == "team" and back.author == ctx.user and back.text == m.text and back.kind == "lesson"
    assert back.tags == ["webhooks"] and back.anchors == [{"path": "hooks.py"}]
    assert back.provenance["promoted_from"]["note_id"] == m.id


def test_a_server_that_never_answers_costs_one_bounded_wait(engine, ctx, monkeypatch, no_team_env):
    """A black hole (connections accepted, no reply) is the worst case: one bounded wait, then skipped."""
    sink = socket.socket()
    sink.bind(("127.0.0.1", 0))
    sink.listen(16)  # never accepted, never answered
    try:
        monkeypatch.setenv("MNEMO_TEAM_URL", f"http://127.0.0.1:{sink.getsockname()[1]}")
        monkeypatch.setenv("MNEMO_TEAM_TIMEOUT", "0.5")
        monkeypatch.setenv("MNEMO_TEAM_RETRY", "3600")
        remember(engine, ctx, "payments API requires idempotency keys on every POST")
        t0 = time.perf_counter()
        first = recall(engine, ctx, "idempotency keys")
        first_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        second = recall(engine, ctx, "idempotency keys")
        second_s = time.perf_counter() - t0
        assert first["cards"] and second["cards"]
        assert any("unreachable" in w for w in first["warnings"])
        assert first_s < 5.0 and second_s < 0.5, (first_s, second_s)
    finally:
        sink.close()
