"""Lifecycle: dedup, conflicts and their resolutions, overrides, review queue, decay, tiers, compaction, anchors.

Plumbing with the hash embedder (texts sharing most words have cosine >= 0.8); the real-model threshold test is in
test_lifecycle_real.py.
"""

from __future__ import annotations

import time
from dataclasses import replace

import pytest

from mnemo.core import lifecycle, review
from mnemo.core.errors import InvalidInput, NotFound
from mnemo.core.memory.manage import list_memories, promote
from mnemo.core.memory.recall import recall
from mnemo.core.memory.write import remember
from mnemo.service import LocalService

A = "The database is PostgreSQL 14 in production"
B = "The database is PostgreSQL 16 in production"


def visible_ids(engine, ctx, query, **kw):
    return [c["item_id"] for c in recall(engine, ctx, query, limit=20, include_docs=False, **kw)["cards"]]


def test_dedup_confirms_and_refreshes_without_a_copy(engine, ctx):
    first = remember(engine, ctx, "Use ruff for linting")["memory"]
    for n in (2, 3):
        r = remember(engine, ctx, " use RUFF for linting. ")
        assert r["status"] == "confirmed" and r["memory"]["id"] == first["id"]
        assert f"confirmed {n}x" in r["message"]
    assert list_memories(engine, ctx)["total"] == 1


def test_dedup_brings_a_cold_memory_back(engine, ctx):
    m = remember(engine, ctx, "Use ruff for linting")["memory"]
    lifecycle.decay(engine, ctx, now=time.time() + 86400 * 365)
    assert engine.store.get_memory(m["id"]).tier == "cold"
    remember(engine, ctx, "use ruff for linting")
    assert engine.store.get_memory(m["id"]).tier == "warm"


def test_conflict_default_goes_to_review_and_resolves(engine, ctx):
    old = remember(engine, ctx, A)["memory"]
    r = remember(engine, ctx, B)
    assert r["status"] == "conflict" and r["memory"]["status"] == "pending"
    assert r["conflicts"][0]["id"] == old["id"] and r["conflicts"][0]["similarity"] >= 0.8
    assert visible_ids(engine, ctx, "database PostgreSQL production") == [old["id"]]
    items = review.review_list(engine, ctx)["items"]
    assert [(i["kind"], i["item_id"], i["other_id"]) for i in items] == [("conflict", r["memory"]["id"], old["id"])]
    assert items[0]["resolutions"] == ["supersede", "keep_both", "keep_existing"]
    with pytest.raises(InvalidInput) as exc:
        review.review_resolve(engine, ctx, items[0]["id"], "accept")
    assert "supersede" in exc.value.hint
    review.review_resolve(engine, ctx, items[0]["id"], "supersede")
    assert visible_ids(engine, ctx, "database PostgreSQL production") == [r["memory"]["id"]]
    hist = engine.store.get_memory(old["id"])
    assert hist.superseded_by == r["memory"]["id"]  # out of recall, still in history
    listed = list_memories(engine, ctx, include_deprecated=True)["memories"]
    assert old["id"] in {m["id"] for m in listed}
    assert review.review_list(engine, ctx)["total"] == 0
    with pytest.raises(InvalidInput):
        review.review_resolve(engine, ctx, items[0]["id"], "supersede")


@pytest.mark.parametrize("resolution,visible", [("keep_both", {"old", "new"}), ("keep_existing", {"old"})])
def test_conflict_review_keep_both_and_keep_existing(engine, ctx, resolution, visible):
    old = remember(engine, ctx, A)["memory"]["id"]
    new = remember(engine, ctx, B)["memory"]["id"]
    rid = review.review_list(engine, ctx)["items"][0]["id"]
    review.review_resolve(engine, ctx, rid, resolution)
    ids = {"old": old, "new": new}
    assert set(visible_ids(engine, ctx, "database PostgreSQL production")) == {ids[v] for v in visible}
    if resolution == "keep_existing":
        assert engine.store.get_memory(new).status == "rejected"


@pytest.mark.parametrize("on_conflict", ["supersede", "keep_both", "keep_existing"])
def test_conflict_resolution_on_write(engine, ctx, on_conflict):
    old = remember(engine, ctx, A)["memory"]["id"]
    r = remember(engine, ctx, B, on_conflict=on_conflict)
    vis = set(visible_ids(engine, ctx, "database PostgreSQL production"))
    if on_conflict == "supersede":
        assert r["status"] == "created" and vis == {r["memory"]["id"]}
        assert engine.store.get_memory(old).superseded_by == r["memory"]["id"]
    elif on_conflict == "keep_both":
        assert r["status"] == "created" and vis == {old, r["memory"]["id"]}
    else:
        assert r["status"] == "kept_existing" and r["memory"]["id"] == old and vis == {old}
        assert list_memories(engine, ctx, status=None)["total"] == 1
    assert review.review_list(engine, ctx)["total"] == 0


def test_unknown_on_conflict_is_refused(engine, ctx):
    with pytest.raises(InvalidInput):
        remember(engine, ctx, A, on_conflict="shrug")


def test_threshold_is_configurable(engine, ctx, monkeypatch):
    remember(engine, ctx, A)
    monkeypatch.setenv("MNEMO_CONFLICT_THRESHOLD", "0.99")
    assert remember(engine, ctx, B)["status"] == "created"


def test_unrelated_and_other_project_memories_do_not_conflict(engine, ctx):
    remember(engine, ctx, A)
    assert remember(engine, ctx, "Frontend is written in React with Vite")["status"] == "created"
    other = replace(ctx, project_id="other", project_name="other")
    assert remember(engine, other, B)["status"] == "created"


def test_project_memory_overrides_global_inside_the_project_only(engine, ctx):
    g = remember(engine, ctx, "Code style: indent with spaces, never tabs", type="user")["memory"]
    promote(engine, ctx, g["id"])
    other = replace(ctx, project_id="elsewhere", project_name="elsewhere")
    r = remember(engine, ctx, "Code style: indent with tabs, never spaces")
    assert r["status"] == "created"
    assert [c["relation"] for c in r["conflicts"]] == ["override"] and "overrides global" in r["message"]
    q = "code style indent tabs spaces"
    assert visible_ids(engine, ctx, q) == [r["memory"]["id"]]
    assert visible_ids(engine, other, q) == [g["id"]]
    items = review.review_list(engine, ctx, kind="override")["items"]
    assert len(items) == 1 and items[0]["other_id"] == g["id"]
    # keep_both lifts the override; accept would keep it
    review.review_resolve(engine, ctx, items[0]["id"], "keep_both")
    assert set(visible_ids(engine, ctx, q)) == {r["memory"]["id"], g["id"]}


def test_override_declined_deprecates_the_specific_memory(engine, ctx):
    g = remember(engine, ctx, "Code style: indent with spaces, never tabs")["memory"]
    promote(engine, ctx, g["id"])
    r = remember(engine, ctx, "Code style: indent with tabs, never spaces")["memory"]
    rid = review.review_list(engine, ctx, kind="override")["items"][0]["id"]
    review.review_resolve(engine, ctx, rid, "keep_existing")
    assert engine.store.get_memory(r["id"]).deprecated
    assert visible_ids(engine, ctx, "code style indent tabs spaces") == [g["id"]]


def test_feature_branch_memory_overrides_main_only_on_the_branch(engine, ctx):
    main = remember(engine, ctx, "API timeout is 30 seconds for payment calls")["memory"]
    feat = replace(ctx, branch="feature/slow")
    r = remember(engine, feat, "API timeout is 60 seconds for payment calls")
    assert r["status"] == "created" and r["conflicts"][0]["level"] == "branch"
    q = "API timeout seconds payment calls"
    assert visible_ids(engine, feat, q) == [r["memory"]["id"]]
    assert visible_ids(engine, ctx, q) == [main["id"]]


def test_agent_write_under_confirm_policy_waits_in_review(engine, ctx, monkeypatch):
    monkeypatch.setenv("MNEMO_WRITE_POLICY", "confirm")
    svc = LocalService(engine)
    r = svc.remember(ctx.to_dict(), "Payments retries use exponential backoff", source="agent")
    assert r["status"] == "pending"
    items = svc.review_list(ctx.to_dict(), "pending")["items"]
    assert items[0]["item_id"] == r["memory"]["id"] and items[0]["resolutions"] == ["accept", "reject"]
    svc.review_resolve(ctx.to_dict(), items[0]["id"], "accept")
    assert engine.store.get_memory(r["memory"]["id"]).status == "active"


def test_review_of_another_project_is_not_found(engine, ctx):
    remember(engine, ctx, A)
    remember(engine, ctx, B)
    rid = review.review_list(engine, ctx)["items"][0]["id"]
    other = replace(ctx, project_id="other", project_name="other")
    assert review.review_list(engine, other)["total"] == 0
    with pytest.raises(NotFound):
        review.review_resolve(engine, other, rid, "supersede")
    with pytest.raises(InvalidInput):
        review.review_resolve(engine, ctx, "x", "supersede")


# -- decay and tiers -------------------------------------------------------------------------------------------
def _age(engine, mem_id, hours):
    """Pretend the memory was last touched `hours` ago."""
    t = time.time() - hours * 3600
    with engine.store.write() as c:
        c.execute("UPDATE memories SET last_accessed=?, created_at=? WHERE id=?", (t, t, mem_id))


def test_decay_halves_per_half_life_and_is_idempotent(engine, ctx):
    m = remember(engine, ctx, "Payments use Stripe", importance=0.8)["memory"]
    _age(engine, m["id"], 168)
    now = time.time()
    r1 = lifecycle.decay(engine, ctx, now=now)
    imp = engine.store.get_memory(m["id"]).importance
    assert imp == pytest.approx(0.4, rel=1e-3) and r1["decayed"] == 1
    r2 = lifecycle.decay(engine, ctx, now=now)
    assert engine.store.get_memory(m["id"]).importance == imp and r2["decayed"] == 0
    # t1 then t2 equals one run at t2
    lifecycle.decay(engine, ctx, now=now + 168 * 3600)
    assert engine.store.get_memory(m["id"]).importance == pytest.approx(0.2, rel=1e-3)
    # an earlier time never raises anything
    lifecycle.decay(engine, ctx, now=now - 1000)
    assert engine.store.get_memory(m["id"]).importance == pytest.approx(0.2, rel=1e-3)


def test_access_reinforces(engine, ctx):
    a = remember(engine, ctx, "Payments use Stripe webhooks", importance=0.8)["memory"]
    b = remember(engine, ctx, "Search runs on OpenSearch cluster", importance=0.8)["memory"]
    _age(engine, a["id"], 168)
    _age(engine, b["id"], 168)
    recall(engine, ctx, "Stripe webhooks payments", limit=1, include_docs=False)
    engine.flush_access()
    lifecycle.decay(engine, ctx)
    assert engine.store.get_memory(a["id"]).importance > 0.79
    assert engine.store.get_memory(b["id"]).importance == pytest.approx(0.4, rel=1e-2)


def test_cold_tier_is_archived_searchable_restorable_never_deleted(engine, ctx):
    m = remember(engine, ctx, "Legacy cron job lives in ops/cron.py")["memory"]
    _age(engine, m["id"], 168 * 5)  # 0.5 / 32 < 0.05
    r = lifecycle.decay(engine, ctx)
    assert [x["id"] for x in r["moved_to_cold"]] == [m["id"]] and "without access" in r["moved_to_cold"][0]["reason"]
    assert engine.store.get_memory(m["id"]) is not None
    q = "legacy cron job ops"
    assert visible_ids(engine, ctx, q) == []
    assert visible_ids(engine, ctx, q, include_cold=True) == [m["id"]]
    assert r["tiers"]["cold"] == 1
    res = lifecycle.restore(engine, ctx, m["id"])
    assert res["status"] == "restored" and res["memory"]["tier"] == "warm"
    assert visible_ids(engine, ctx, q) == [m["id"]]
    assert lifecycle.decay(engine, ctx)["moved_to_cold"] == []  # restored clock


def test_restore_gives_back_the_importance_it_had_before_decay(engine, ctx):
    """Issue 13: restore set an important memory (0.9) that had faded to cold back to 0.5."""
    m = remember(engine, ctx, "The release train leaves every second Tuesday", importance=0.9)["memory"]
    _age(engine, m["id"], 168 * 3)
    t0 = time.time()
    lifecycle.decay(engine, ctx, now=t0)  # 0.9 -> 0.1125, still warm
    assert engine.store.get_memory(m["id"]).tier != "cold"
    lifecycle.decay(engine, ctx, now=t0 + 168 * 3 * 3600)  # three half-lives later: cold
    assert engine.store.get_memory(m["id"]).tier == "cold"
    res = lifecycle.restore(engine, ctx, m["id"])
    assert res["memory"]["tier"] == "warm" and res["memory"]["importance"] == pytest.approx(0.9)


def test_decay_dry_run_reports_the_same_and_writes_nothing(engine, ctx):
    from conftest import store_dump

    ids = [remember(engine, ctx, t, importance=imp)["memory"]["id"]
           for t, imp in (("Builds run with Bazel", 0.9), ("Logs ship to Loki", 0.5), ("Cron lives in ops", 0.3))]
    for mem_id, hours in zip(ids, (10, 168, 168 * 5), strict=True):
        _age(engine, mem_id, hours)
    now = time.time()
    before = store_dump(engine.store.path)
    dry = lifecycle.decay(engine, ctx, now=now, dry_run=True)
    assert store_dump(engine.store.path) == before  # not a row changed
    assert dry["dry_run"] is True and dry["decayed"] == 2 and [m["id"] for m in dry["moved_to_cold"]] == [ids[2]]
    real = lifecycle.decay(engine, ctx, now=now)
    assert real["dry_run"] is False and {**dry, "dry_run": False} == real
    assert engine.store.get_memory(ids[2]).tier == "cold"


def test_future_decay_is_refused_unless_forced(engine, ctx):
    """Issue 13: `decay --now <future>` aged everything at once and could not be undone."""
    svc = LocalService(engine)
    m = remember(engine, ctx, "Payments go through Stripe")["memory"]
    with pytest.raises(InvalidInput) as err:
        svc.decay(ctx.to_dict(), now="2099-01-01T00:00:00Z")
    assert "future" in err.value.message and "--force" in err.value.hint and "--dry-run" in err.value.hint
    assert engine.store.get_memory(m["id"]).tier != "cold"
    assert svc.decay(ctx.to_dict(), now="2099-01-01T00:00:00Z", dry_run=True)["moved_to_cold"][0]["id"] == m["id"]
    assert engine.store.get_memory(m["id"]).tier != "cold"
    svc.decay(ctx.to_dict(), now="2099-01-01T00:00:00Z", force=True)
    assert engine.store.get_memory(m["id"]).tier == "cold"
    svc.decay(ctx.to_dict(), now=time.time() + 5)  # a clock a few seconds ahead is not "the future"


def test_hot_tier_is_small_and_holds_the_most_important(engine, ctx, monkeypatch):
    monkeypatch.setenv("MNEMO_HOT_MAX", "2")
    ids = [remember(engine, ctx, text, importance=imp)["memory"]["id"]
           for text, imp in (("Builds run with Bazel", 0.9), ("Payments go through Stripe", 0.95),
                             ("Logs ship to Loki", 0.8), ("The office plant is a fern", 0.3))]
    r = lifecycle.decay(engine, ctx)
    assert r["tiers"]["hot"] == 2
    hot = {m["id"] for m in lifecycle.hot_memories(engine, ctx)}
    assert hot == {ids[0], ids[1]}
    assert {mv["id"] for mv in r["tier_moves"]} == {ids[0], ids[1]}
    idx = LocalService(engine).stats(ctx.to_dict())["tiers"]
    assert idx["hot"]["count"] == 2 and idx["warm"]["count"] == 2 and idx["cold"]["count"] == 0
    assert "always offered" in idx["hot"]["meaning"] and ids[1] in idx["hot"]["top"]


# -- compaction ------------------------------------------------------------------------------------------------
def stored(engine, ctx, text, confirmations=1, created_at=None):
    """A memory written straight to the store, as an import or an older version would have: no check on write."""
    import uuid

    from mnemo.core.models import Memory
    from mnemo.core.text import content_hash

    now = time.time() if created_at is None else created_at
    m = Memory(id="mem-" + uuid.uuid4().hex[:20], text=text, type="project", kind="fact", scope="project",
               project_id=ctx.project_id, project_name=ctx.project_name, branch=ctx.branch, importance=0.5,
               confirmations=confirmations, created_at=now, updated_at=now, last_accessed=now, access_count=0,
               content_hash=content_hash(text), source="user")
    with engine.store.write() as c:
        engine.store.insert_memory(c, m, engine.embed([text])[0], engine.model_id)
    return m.to_dict()


def test_compaction_merges_near_duplicates_and_summarizes_verbose_notes(engine, ctx, monkeypatch):
    monkeypatch.setenv("MNEMO_COMPACT_DUP_THRESHOLD", "0.9")
    monkeypatch.setenv("MNEMO_VERBOSE_CHARS", "300")
    base = "the release checklist requires a changelog entry a version bump a signed tag and green CI on main"
    a = stored(engine, ctx, base, confirmations=2, created_at=time.time() - 10)
    b = stored(engine, ctx, base + " always")
    c = stored(engine, ctx, base + " first")
    verbose = remember(engine, ctx, "Deployment notes. " + " ".join(
        f"Step {i}: run the migration job number {i} and verify the dashboard." for i in range(12)))["memory"]
    r = lifecycle.compact(engine, ctx)
    assert len(r["merged"]) == 1
    g = r["merged"][0]
    assert g["kept"] == a["id"] and set(g["merged"]) == {b["id"], c["id"]} and "near-duplicates" in g["reason"]
    kept = engine.store.get_memory(a["id"])
    assert kept.confirmations == 4 and set(kept.provenance["merged_from"]) == {b["id"], c["id"]}
    assert engine.store.get_memory(b["id"]).superseded_by == a["id"]
    assert len(r["summarized"]) == 1 and r["summarized"][0]["from"] == verbose["id"]
    s = r["summarized"][0]
    assert s["chars_after"] < s["chars_before"]
    new = engine.store.get_memory(s["to"])
    assert new.provenance["summarized_from"] == verbose["id"] and new.text.startswith("Deployment notes.")
    assert engine.store.get_memory(verbose["id"]).superseded_by == new.id  # original kept in history
    again = lifecycle.compact(engine, ctx)
    assert again["merged"] == [] and again["summarized"] == []


def test_compaction_respects_keep_both_decisions(engine, ctx, monkeypatch):
    monkeypatch.setenv("MNEMO_COMPACT_DUP_THRESHOLD", "0.8")
    remember(engine, ctx, A)
    remember(engine, ctx, B, on_conflict="keep_both")
    assert lifecycle.compact(engine, ctx)["merged"] == []


# -- stale anchors ---------------------------------------------------------------------------------------------
def test_stale_anchors_are_flagged_and_cleared(engine, ctx, git_repo):
    m = remember(engine, ctx, "charge() must send an idempotency key")["memory"]
    n = remember(engine, ctx, "refund() is only for settled payments")["memory"]
    lifecycle.anchor(engine, ctx, m["id"], {"path": str(git_repo / "src/pay.py"), "symbol": "charge", "hash": "h1"})
    lifecycle.anchor(engine, ctx, n["id"], {"path": "src/pay.py", "symbol": "refund", "hash": "r1"})
    assert engine.store.get_memory(m["id"]).anchors[0]["path"] == "src/pay.py"
    same = lifecycle.check_anchors(engine, ctx, "src/pay.py", [{"name": "charge", "hash": "h1"},
                                                               {"name": "refund", "hash": "r1"}])
    assert same["flagged"] == [] and same["ok"] == 2
    r = lifecycle.check_anchors(engine, ctx, "src/pay.py", [{"name": "charge", "hash": "h2"}])
    reasons = {f["memory_id"]: f["reason"] for f in r["flagged"]}
    assert reasons == {m["id"]: "changed", n["id"]: "vanished"}
    assert "stale_anchor" in engine.store.get_memory(m["id"]).flags
    # checking again does not duplicate review items
    lifecycle.check_anchors(engine, ctx, "src/pay.py", [{"name": "charge", "hash": "h2"}])
    items = review.review_list(engine, ctx, kind="stale_anchor")["items"]
    assert len(items) == 2
    by_mem = {i["item_id"]: i for i in items}
    review.review_resolve(engine, ctx, by_mem[m["id"]]["id"], "update")
    mm = engine.store.get_memory(m["id"])
    assert mm.anchors[0]["hash"] == "h2" and "stale_anchor" not in mm.flags
    review.review_resolve(engine, ctx, by_mem[n["id"]]["id"], "deprecate")
    assert engine.store.get_memory(n["id"]).deprecated
    # the file disappears: every anchor into it vanished
    r = lifecycle.check_anchors(engine, ctx, "src/pay.py", None)
    assert [f["memory_id"] for f in r["flagged"]] == [m["id"]]
    # a symbol back to its anchored hash clears the flag
    r = lifecycle.check_anchors(engine, ctx, "src/pay.py", [{"name": "charge", "hash": "h2"}])
    assert [c["memory_id"] for c in r["cleared"]] == [m["id"]]
    assert "stale_anchor" not in engine.store.get_memory(m["id"]).flags


def test_anchor_outside_the_project_is_refused(engine, ctx):
    m = remember(engine, ctx, "something anchored")["memory"]
    for bad in ("/etc/passwd", "../other/x.py", ""):
        with pytest.raises(InvalidInput):
            lifecycle.anchor(engine, ctx, m["id"], {"path": bad})


def test_decay_now_accepts_iso_and_refuses_garbage(engine, ctx):
    assert lifecycle.decay(engine, ctx, now="2030-01-01T00:00:00Z")["now"] > time.time()
    with pytest.raises(InvalidInput):
        lifecycle.decay(engine, ctx, now="next tuesday")
