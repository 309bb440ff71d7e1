"""The team operations: promote a memory to the team, team hits for recall, the team level of the checks on
write, deprecation, teammates' recent notes, the status view."""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import time
from typing import TYPE_CHECKING, Any

from mnemo.core.api_types.results import MemoryChange, TeamStatus
from mnemo.core.errors import InvalidInput, MnemoError, NotFound, SecretDetected, TeamUnavailable
from mnemo.core.models import Context, Memory
from mnemo.core.relation import compare as relation
from mnemo.core.safety.screen import describe_findings, find_secrets
from mnemo.core.search import Candidate
from mnemo.core.team.address import load_settings
from mnemo.core.team.client import TeamHit, build_record, collection_name

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

log = logging.getLogger("mnemo.team")


def attach(engine: Engine) -> None:
    """Called when the service starts: resumes sending promotions queued before a restart."""
    try:
        engine.team()
    except Exception as exc:  # noqa: BLE001 - a bad team setting must never stop the owner
        log.warning("team scope disabled: %s", exc)


# -- operations called by the engine, recall and the service --------------------------------------------------
def promote_to_team(engine: Engine, ctx: Context, m: Memory) -> MemoryChange:
    team = engine.team()
    if team is None:
        raise InvalidInput("the team scope needs a team server",
                           hint="set MNEMO_TEAM_URL (or run `mnemo team connect http://HOST:PORT`); start a server"
                                " with `mnemo team serve` (see docs/agents-and-teams.md)")
    findings = find_secrets(m.text)
    if findings:
        raise SecretDetected(
            f"memory {m.id} looks like it contains a secret: {describe_findings(findings)}; nothing was promoted",
            hint="promotion shares the text with the whole team: forget this memory and remember it without the"
                 " secret (point to where the secret lives instead)",
            findings=[f.to_dict() for f in findings])
    import numpy as np

    blob = engine.store.vectors([m.id]).get(m.id)
    model_id = engine.model_id
    vec = np.frombuffer(blob, dtype=np.float32) if blob is not None else engine.embed([m.text])[0]
    record = build_record(ctx, m, vec, model_id, team.settings.namespace)
    rid = record["id"]
    info = {"record_id": rid, "namespace": team.settings.namespace, "server": team.settings.url,
            "promoted_at": time.time(), "promoted_by": ctx.user, "status": "queued"}
    with engine.store.write() as c:
        engine.store.enqueue(c, record, m.id)
        prov = dict(m.provenance)
        prov["promoted_to_team"] = info
        engine.store.update_memory(c, m.id, provenance=prov)
    sent = []
    with contextlib.suppress(TeamUnavailable):
        sent = team.drain(only=[rid])
    mem = engine.store.record(m.id)
    if rid in sent:
        return {"status": "promoted", "scope": "team", "memory": mem, "team": {"record_id": rid, "status": "shared",
                                                               "namespace": team.settings.namespace},
                "message": f"shared with the team ({team.settings.namespace}) as {rid}"}
    return {"status": "queued", "scope": "team", "memory": mem,
            "team": {"record_id": rid, "status": "queued", "namespace": team.settings.namespace,
                     "retry_in_s": round(team.breaker.retry_in(), 1), "error": team.breaker.last_error},
            "message": "the team server is unreachable: the promotion is queued and will be sent when it answers"}


def team_candidates(engine: Engine, ctx: Context, qvec, k: int, warnings: list[str], scope: str) -> list:
    """Team hits for recall as `Candidate`s in the team scope (cosine only: BM25 is local)."""
    try:
        team = engine.team()
    except InvalidInput as exc:
        warnings.append(f"team scope skipped: {exc.message}")
        return []
    if team is None:
        if scope == "team":
            warnings.append("no team server is configured (set MNEMO_TEAM_URL or run `mnemo team connect`)")
        return []
    hits: list[TeamHit] = []
    try:
        hits = team.query(qvec, engine.model_id, min(max(k, 10), 100))
    except TeamUnavailable:
        pass  # the breaker's notice below says so, once
    except MnemoError as exc:  # a setting to fix (e.g. a malformed URL): say it every time, keep local recall
        warnings.append(f"team scope skipped: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
    notice = team.breaker.take_notice()
    if notice:
        warnings.append(notice)
    # Another person's note is untrusted here (SPEC §7): recall shows it as such; only your own stays as you left it.
    return [Candidate(h.id, cosine=h.cosine, scope="team", extras={"vector": h.vector},
                      memory=h.memory if h.memory.author == ctx.user else dataclasses.replace(h.memory,
                                                                                              trust="untrusted"))
            for h in hits]


def team_neighbours(engine: Engine, ctx: Context, vec, k: int) -> list[tuple[Memory, float]]:
    """Team records nearest to `vec` as (memory, cosine), for the checks on write (core/neighbours.relate): the
    chain is branch > project > team > global on every level. [] without a server or when it does not answer
    (the breaker keeps that to one short timeout per retry interval)."""
    try:
        team = engine.team()
    except InvalidInput:
        return []
    if team is None or not team.breaker.allow():
        return []
    try:
        hits = team.query(vec, engine.model_id, k)
    except MnemoError:
        return []
    return [(h.memory, h.cosine) for h in hits if not h.memory.deprecated]


def drop_restated(engine: Engine, ctx: Context, visible: dict[str, Any]) -> None:
    """Recall: a team hit that states what a visible local note states (the same claim, core/relation/compare.py) is
    dropped for the more specific local note, as an identical one is (by content hash). Team records written
    before the local note (or while the server was away) never went through the check on write."""
    team_ids = [i for i, c in visible.items() if getattr(c, "scope", None) == "team" and c.memory is not None]
    local = [i for i, c in visible.items() if c.memory is not None and c.scope != "team"]
    if not team_ids or not local:
        return
    import numpy as np

    blobs = engine.store.vectors(local)
    ids = [i for i in local if i in blobs]
    if not ids:
        return
    mat = np.frombuffer(b"".join(blobs[i] for i in ids), dtype=np.float32).reshape(len(ids), -1)
    texts = {m.id: m.text for m in engine.store.get_memories(ids).values()}
    vocab = relation.vocabulary_of(engine.loaded_embedder)
    for tid in team_ids:
        c = visible[tid]
        tvec = c.extras.get("vector")
        if tvec is None or len(tvec) != mat.shape[1]:
            continue
        sims = mat @ np.asarray(tvec, dtype=np.float32)
        for j in np.argsort(-sims)[:5]:
            lid = ids[int(j)]
            if lid in texts and relation.same_claim(c.memory.text, texts[lid], float(sims[int(j)]), vocab):
                visible.pop(tid, None)
                break

def deprecate_team(engine: Engine, ctx: Context, record_id: str, reason: str | None) -> MemoryChange:
    team = engine.team()
    if team is None:
        raise NotFound(f"no team memory {record_id}: no team server is configured", hint="`mnemo team status`")
    team.set_deprecated(record_id, engine.model_id, reason or "deprecated", ctx.user)
    return {"status": "deprecated", "id": record_id, "scope": "team",
            "message": "deprecated for the whole team (kept on the server, out of recall)"}


def recent_team(engine: Engine, ctx: Context, since: float, limit: int = 10) -> list[Memory]:
    """Team memories promoted from this project since `since` (other people's hand-offs); [] when unreachable."""
    team = engine.team()
    if team is None:
        return []
    try:
        recs = team.records(engine.model_id, limit=1000, where={"project_id": ctx.project_id})
    except TeamUnavailable:
        return []
    recs = [m for m in recs if m.updated_at >= since and not m.deprecated]
    recs.sort(key=lambda m: (-m.updated_at, m.id))
    return recs[:limit]


def team_status(engine: Engine, ctx: Context) -> TeamStatus:
    settings = load_settings(engine.home)
    out: TeamStatus = {"configured": settings.configured, "url": settings.url, "namespace": settings.namespace,
                       "token": "set" if settings.token else "not set", "source": settings.source,
                       "ca_cert": settings.ca_cert}  # `settings.public()`, typed
    if not settings.configured:
        out["hint"] = ("start a server with `mnemo team serve`, then `mnemo team connect http://HOST:PORT`"
                       " (or set MNEMO_TEAM_URL)")
        return out
    team = engine.team()
    assert team is not None  # configured
    reachable = team.ping()
    if reachable and team.pending():
        with contextlib.suppress(TeamUnavailable):
            team.drain()
    out.update({"reachable": reachable, "breaker": team.breaker.to_dict(), "outbox": team.outbox(),
                "collection": collection_name(settings.namespace, engine.model_id), "model_id": engine.model_id})
    if reachable:
        try:
            recs = team.records(engine.model_id, limit=1000)
            authors: dict[str, int] = {}
            for m in recs:
                authors[m.author] = authors.get(m.author, 0) + 1
            recs.sort(key=lambda m: (-m.updated_at, m.id))
            out["records"] = team.count(engine.model_id)
            out["authors"] = dict(sorted(authors.items(), key=lambda kv: (-kv[1], kv[0])))
            out["recent"] = [{"id": m.id, "author": m.author, "project_name": m.project_name,
                              "text": m.text[:160], "updated_at": m.updated_at, "deprecated": m.deprecated}
                             for m in recs[:10]]
        except TeamUnavailable as exc:
            out["reachable"] = False
            out["error"] = exc.message
    else:
        out["error"] = team.breaker.last_error
    return out


__all__ = ["attach", "deprecate_team", "drop_restated", "promote_to_team", "recent_team", "team_candidates",
           "team_neighbours", "team_status"]
