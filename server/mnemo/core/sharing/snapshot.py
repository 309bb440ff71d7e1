"""Snapshots: export a selection of the store to a snapshot file, and merge one in (a plan first, shown by
`diff`; then ONE transaction). Every imported text is embedded here; a snapshot's own vectors are never trusted."""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from mnemo import __version__
from mnemo.core.api_types.records import SnapshotAction
from mnemo.core.api_types.results import SnapshotExport, SnapshotMergeReport
from mnemo.core.errors import InvalidInput, SnapshotError
from mnemo.core.models import Context, Memory
from mnemo.core.safety.screen import injection_flags, is_suspicious
from mnemo.core.sharing.branches import derived_id
from mnemo.core.sharing.snapshot_file import (
    FORMAT_VERSION,
    MAGIC,
    Snapshot,
    _abs_path,
    canonical,
    max_records,
    max_snapshot_bytes,
    memory_record,
    read_snapshot,
    secret_kinds,
    sha256,
    write_atomic,
)
from mnemo.core.store import partition_for

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

STRATEGIES = ("local_wins", "remote_wins", "newer_wins", "keep_both")


def check_strategy(strategy: str | None) -> str:
    strategy = strategy or "newer_wins"
    if strategy not in STRATEGIES:
        raise InvalidInput(f"unknown merge strategy {strategy!r}", hint=f"use one of: {', '.join(STRATEGIES)}")
    return strategy


# -- export ----------------------------------------------------------------------------------------------------
def _check_selection(scopes: list[str] | None, branches: list[str] | None) -> list[str]:
    scopes = list(scopes or ["project", "global"])
    for s in scopes:
        if s not in ("project", "global", "all"):
            raise InvalidInput(f"cannot export the scope {s!r}",
                               hint="use project, global, or all (every project in the store, and global)")
    if branches and not all(isinstance(b, str) and b for b in branches):
        raise InvalidInput("branch names must be non-empty strings")
    return scopes


def export_snapshot(engine: Engine, ctx: Context, path: str, scopes: list[str] | None = None,
                    branches: list[str] | None = None) -> SnapshotExport:
    """Write the selected memories (not those holding what looks like a secret) to a snapshot file."""
    target = _abs_path(path, "snapshot export")
    store = engine.store
    with store.reading():  # one consistent read of the whole selection
        mems = store.for_export(ctx.project_id, _check_selection(scopes, branches), branches or [])
        vec_rows = store.vector_rows([m.id for m in mems])
        decayed = store.decayed_at([m.id for m in mems])
        history = store.versions_of([m.id for m in mems])  # snapshots carry the earlier versions of edits
    if len(mems) > max_records():
        raise SnapshotError(f"{len(mems):,} memories exceed the snapshot limit of {max_records():,}",
                            hint="export fewer scopes/branches, or raise MNEMO_SNAPSHOT_MAX_RECORDS")
    withheld = []
    for m in list(mems):
        kinds = secret_kinds(m.text)
        if kinds:  # secrets never leave the store (SPEC §7)
            withheld.append({"id": m.id, "secrets": kinds})
            mems.remove(m)
    lines = [canonical({"record": rec, "sha256": sha256(canonical(rec))}) + b"\n"
             for rec in (memory_record(m, vec_rows.get(m.id), decayed.get(m.id), history.get(m.id))
                         for m in mems)]
    body = b"".join(lines)
    manifest = _manifest(engine, ctx, mems, vec_rows, scopes, branches, len(lines), body)
    head = {"format": MAGIC, "version": FORMAT_VERSION, "manifest": manifest,
            "manifest_sha256": sha256(canonical(manifest))}
    head_line = canonical(head) + b"\n"
    if len(head_line) + len(body) > max_snapshot_bytes():
        raise SnapshotError(f"the snapshot would be {len(head_line) + len(body):,} bytes, over the limit of "
                            f"{max_snapshot_bytes():,}", hint="export fewer scopes/branches, or raise "
                                                              "MNEMO_SNAPSHOT_MAX_BYTES")
    write_atomic(target, [head_line, body])
    counts = manifest["counts"]
    return {"path": str(target), "bytes": len(head_line) + len(body), "memories": len(mems),
            "by_scope": counts["by_scope"], "by_branch": counts["by_branch"], "model_id": manifest["model_id"],
            "sha256": manifest["body_sha256"], "withheld_secrets": withheld}


def _manifest(engine: Engine, ctx: Context, mems: list[Memory], vec_rows: dict, scopes: list[str] | None,
              branches: list[str] | None, records: int, body: bytes) -> dict[str, Any]:
    by_scope: dict[str, int] = {}
    by_branch: dict[str, int] = {}
    models: dict[str, int] = {}
    for m in mems:
        by_scope[m.scope] = by_scope.get(m.scope, 0) + 1
        by_branch[m.branch or "(all branches)"] = by_branch.get(m.branch or "(all branches)", 0) + 1
        if m.id in vec_rows:
            mid = vec_rows[m.id]["model_id"]
            models[mid] = models.get(mid, 0) + 1
    model_id = max(models, key=lambda k: models[k]) if models else (engine.model_id if mems else None)
    return {
        "created_at": time.time(), "mnemo_version": __version__, "model_id": model_id,
        "source": {"project_id": ctx.project_id, "project_name": ctx.project_name, "branch": ctx.branch,
                   "default_branch": ctx.default_branch, "user": ctx.user, "origin": ctx.origin},
        "filters": {"scopes": list(scopes or ["project", "global"]), "branches": list(branches or [])},
        "counts": {"records": records, "memories": len(mems), "by_scope": by_scope, "by_branch": by_branch},
        "body_bytes": len(body), "body_sha256": sha256(body),
    }


# -- plan and merge --------------------------------------------------------------------------------------------
MEMORY_FIELDS = tuple(f.name for f in dataclasses.fields(Memory))


@dataclass
class Action:
    op: str  # insert | replace | copy | skip_duplicate | skip_local | skip_forgotten | skip_secret
    mem: Memory
    local: Memory | None = None
    reason: str = ""
    conflict: bool = False
    decayed_at: float | None = None

    def to_dict(self) -> SnapshotAction:
        out: SnapshotAction = {"op": self.op, "id": self.mem.id, "text": self.mem.text, "scope": self.mem.scope,
               "branch": self.mem.branch, "reason": self.reason}
        if self.local is not None:
            out["local"] = {"id": self.local.id, "text": self.local.text, "updated_at": self.local.updated_at}
            out["remote_updated_at"] = self.mem.updated_at
        return out


def _place(m: Memory) -> tuple:
    return (m.scope, m.project_id if m.scope == "project" else None, m.branch if m.scope == "project" else None)


def _remote_memory(rec: dict[str, Any], snap: Snapshot, ctx: Context, now: float) -> Memory:
    d = {k: rec[k] for k in MEMORY_FIELDS if k in rec}
    src = (snap.manifest.get("source") or {})
    src_pid = src.get("project_id")
    if d["scope"] == "project" and d["project_id"] == src_pid:
        # The snapshot's own project lands in this workspace's project (ids by path differ across machines).
        d["project_id"], d["project_name"] = ctx.project_id, ctx.project_name
    prov = dict(d.get("provenance") or {})
    prov["imported_from"] = {"snapshot": snap.path.name, "snapshot_sha256": snap.manifest.get("body_sha256"),
                             "exported_at": snap.manifest.get("created_at"), "exported_by": src.get("user"),
                             "project_id": rec["project_id"], "project_name": rec["project_name"],
                             "id": rec["id"], "imported_at": now}
    d["provenance"] = prov
    if d["scope"] == "global":
        d["branch"] = None
    # Imported memories are untrusted until a person accepts the import in Review (SPEC §7); one that reads like
    # instructions to the agent waits in Review on its own.
    d["flags"] = sorted(set(d.get("flags") or []) | set(injection_flags(d["text"])))
    d["trust"] = "untrusted"
    if is_suspicious(d["flags"]) and d.get("status") == "active":
        d["status"] = "pending"
    return Memory(**d)


def plan_merge(engine: Engine, ctx: Context, snap: Snapshot, strategy: str) -> list[Action]:
    """What merging `snap` with `strategy` does, record by record (writes nothing)."""
    store = engine.store
    now = time.time()
    remote = [(_remote_memory(r, snap, ctx, now), r) for r in snap.records]
    local = store.get_memories([m.id for m, _ in remote])
    tomb = store.tombstoned([m.id for m, _ in remote])
    places: dict[tuple, set[str]] = {}  # (hash, place) -> local ids holding that content there
    for lm in store.with_hashes(sorted({m.content_hash for m, _ in remote})):
        places.setdefault((lm.content_hash, *_place(lm)), set()).add(lm.id)
    copies = store.get_memories(derived_id(m.id, m.content_hash) for m, _ in remote)
    # Content-hash dedup is against what is here already; records inside one snapshot are distinct by id (the
    # source may hold the same text twice, e.g. a deprecated note and a newer one).
    # Local memories this merge replaces with the remote version no longer hold their old content afterwards: they
    # must not make another record of the snapshot a "duplicate" (it would be skipped now and imported next time).
    replaced: set[str] = set()
    secrets_of = {m.id: secret_kinds(m.text) for m, _ in remote}
    for m, _rec in remote:
        here = local.get(m.id)
        if here is not None and m.id not in tomb and not secrets_of[m.id] and here.content_hash != m.content_hash and (
                strategy == "remote_wins" or (strategy == "newer_wins" and m.updated_at > here.updated_at)):
            replaced.add(m.id)

    def held_here(key: tuple) -> bool:
        return bool(places.get(key, set()) - replaced)

    actions: list[Action] = []
    for m, rec in remote:
        if m.id in tomb:
            actions.append(Action("skip_forgotten", m, reason="forgotten here (tombstone)"))
        elif secrets_of[m.id]:
            actions.append(Action("skip_secret", m, reason="holds what looks like a secret: "
                                                           + ", ".join(secrets_of[m.id])))
        elif local.get(m.id) is not None:
            actions.append(_same_id(m, local[m.id], rec.get("decayed_at"), strategy, copies, held_here))
        elif held_here((m.content_hash, *_place(m))):
            actions.append(Action("skip_duplicate", m, None, "same content already here"))
        else:
            actions.append(Action("insert", m, None, "new", decayed_at=rec.get("decayed_at")))
    return actions


def _same_id(m: Memory, lm: Memory, dec: float | None, strategy: str, copies: dict[str, Memory],
             held_here) -> Action:
    """A record whose id is here already: a duplicate, or a conflict resolved by the strategy."""
    if lm.content_hash == m.content_hash:
        return Action("skip_duplicate", m, lm, "same memory, same content")
    take_remote = {"local_wins": False, "remote_wins": True, "keep_both": None,
                   "newer_wins": m.updated_at > lm.updated_at}[strategy]
    if take_remote is None:
        cid = derived_id(m.id, m.content_hash)
        copy = dataclasses.replace(m, id=cid)
        if cid in copies or held_here((m.content_hash, *_place(m))):
            return Action("skip_duplicate", copy, lm, "both kept by an earlier merge", conflict=True)
        return Action("copy", copy, lm, f"kept both: remote imported as {cid}", conflict=True, decayed_at=dec)
    if take_remote:
        why = "remote is newer" if strategy == "newer_wins" else "remote wins"
        return Action("replace", m, lm, f"took remote ({why})", conflict=True, decayed_at=dec)
    why = "local is newer or as new" if strategy == "newer_wins" else "local wins"
    return Action("skip_local", m, lm, f"kept local ({why})", conflict=True)


def _summary(actions: list[Action], strategy: str, snap: Snapshot, dry_run: bool) -> SnapshotMergeReport:
    count = {op: 0 for op in ("insert", "replace", "copy", "skip_duplicate", "skip_local", "skip_forgotten",
                              "skip_secret")}
    for a in actions:
        count[a.op] += 1
    conflicts = [a for a in actions if a.conflict]
    return {
        "strategy": strategy, "snapshot": snap.info(),
        "imported": count["insert"] + count["copy"], "replaced": count["replace"],
        "skipped_duplicates": count["skip_duplicate"] - sum(1 for a in conflicts if a.op == "skip_duplicate"),
        "skipped_forgotten": count["skip_forgotten"], "skipped_secrets": count["skip_secret"],
        "conflicts": len(conflicts),
        "resolutions": {"kept_local": count["skip_local"], "took_remote": count["replace"],
                        "kept_both": count["copy"] + sum(1 for a in conflicts if a.op == "skip_duplicate")},
        "changes": count["insert"] + count["copy"] + count["replace"],
        "conflict_details": [a.to_dict() for a in conflicts],
        "new": [a.to_dict() for a in actions if a.op in ("insert",)],
        "secrets": [{"id": a.mem.id, "reason": a.reason} for a in actions if a.op == "skip_secret"],
        "dry_run": dry_run,
    }


VECTOR_MATCH = 0.99  # a stored vector and the text's own embedding agree to ~1e-3 (onnx vs torch, same model id)


def _vectors_for(engine: Engine, snap: Snapshot, mems: list[Memory]) -> tuple[dict[str, Any], list[str]]:
    """Every imported text is embedded here (before any transaction starts), and that vector is the one stored: a
    snapshot's vector is never trusted, as a forged one could hide a note from recall or pull it into every
    answer. Returns the vectors and the ids whose stored vector (under our model id) did not match its text."""
    import numpy as np

    out: dict[str, Any] = {}
    mismatched: list[str] = []
    for i in range(0, len(mems), 256):
        chunk = mems[i:i + 256]
        for m, vec in zip(chunk, engine.embed([m.text for m in chunk]), strict=True):
            out[m.id] = vec
            orig = m.provenance.get("imported_from", {}).get("id", m.id)
            given = snap.vectors.get(orig)
            if given is not None and given[0] == engine.model_id and (
                    given[1].shape != np.shape(vec) or float(np.dot(given[1], vec)) < VECTOR_MATCH):
                mismatched.append(m.id)
    return out, mismatched


def diff_snapshot(engine: Engine, ctx: Context, path: str, strategy: str = "newer_wins") -> SnapshotMergeReport:
    """What `merge_snapshot` would do; writes nothing."""
    strategy = check_strategy(strategy)
    snap = read_snapshot(path)
    actions = plan_merge(engine, ctx, snap, strategy)
    return _summary(actions, strategy, snap, dry_run=True)


def merge_snapshot(engine: Engine, ctx: Context, path: str, strategy: str = "newer_wins",
                   progress=None) -> SnapshotMergeReport:
    """Import a snapshot: validated first, then ONE transaction; duplicates skipped; provenance kept."""
    strategy = check_strategy(strategy)
    snap = read_snapshot(path)
    actions = plan_merge(engine, ctx, snap, strategy)
    writes = [a for a in actions if a.op in ("insert", "replace", "copy")]
    vecs, mismatched = _vectors_for(engine, snap, [a.mem for a in writes])
    store = engine.store
    summary = _summary(actions, strategy, snap, dry_run=False)
    summary["vectors_replaced"] = mismatched  # stored vectors that did not match their text (re-embedded)
    histories = {r["id"]: r.get("history") or [] for r in snap.records}
    with store.write() as c:
        for n, a in enumerate(writes, start=1):
            _apply(c, engine, ctx, snap, a, vecs[a.mem.id])
            if a.op in ("insert", "replace"):  # the earlier versions come along (a version held here stays)
                for v in histories.get(a.mem.id, []):
                    store.add_version(c, {**v, "memory_id": a.mem.id})
            if progress and n % 200 == 0:
                progress({"done": n, "total": len(writes)})
        if writes:
            brief = {k: summary[k] for k in ("imported", "replaced", "skipped_duplicates", "conflicts")}
            summary["review_id"] = store.add_review(
                c, "snapshot_merge", None, None, ctx.project_id,
                {"file": snap.path.name, "strategy": strategy, "summary": brief,
                 "sha256": snap.manifest.get("body_sha256"),
                 "conflicts": [a.to_dict() for a in actions if a.conflict][:50]})
    engine.changed()
    return summary


def _apply(c, engine: Engine, ctx: Context, snap: Snapshot, a: Action, vec) -> None:
    """Write one planned insert, replace or copy (inside the merge's transaction)."""
    store, m = engine.store, a.mem
    if a.op == "replace":
        old_part = store.memory_part(m.id)
        store.delete_item(c, m.id)
        store.insert_memory(c, m, vec, engine.model_id)
        if old_part is not None and old_part != partition_for(m.scope, m.project_id):
            store.log_change(c, m.id, old_part, "upsert")  # the index drops the copy in the old partition
    else:
        store.insert_memory(c, m, vec, engine.model_id)
    if a.decayed_at is not None:
        store.set_decayed_at(c, m.id, a.decayed_at)
    if a.op == "copy" and a.local is not None:  # kept apart on purpose: compaction must never merge them
        store.add_review(c, "conflict", m.id, a.local.id, ctx.project_id,
                         {"source": "snapshot_merge", "file": snap.path.name,
                          "new_text": m.text, "existing_text": a.local.text}, resolution="keep_both")
    if m.status == "pending":  # flagged (or pending at the source): a person decides
        store.add_review(c, "pending", m.id, None, ctx.project_id,
                         {"source": "import", "flags": m.flags, "file": snap.path.name})

