"""Branch memory: what a git branch's memories would bring to the current branch (diff), copying them (merge: "git
merge for memory"), deleting them, and finding the branches git already merged."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import subprocess
import threading
import time
import weakref
from typing import TYPE_CHECKING, Any

from mnemo.core.api_types.records import BriefMemory
from mnemo.core.api_types.results import BranchDelete, BranchMergeReport, MergedBranch, MergedBranches
from mnemo.core.errors import InvalidInput
from mnemo.core.identity import read_branch_start, read_ref, read_ref_kept
from mnemo.core.models import Context, Memory
from mnemo.core.store import blob_to_vec

if TYPE_CHECKING:
    from mnemo.core.engine import Engine
    from mnemo.core.store import Store

log = logging.getLogger("mnemo.branches")


def derived_id(*parts: str) -> str:
    """The id of a copy (a branch merge's, a snapshot's kept-both remote): the same inputs, the same id."""
    return "mem-" + hashlib.sha256("\x00".join(parts).encode()).hexdigest()[:20]


# -- plans ---------------------------------------------------------------------------------------------
def _check_branch(name: Any, what: str = "branch") -> str:
    if not isinstance(name, str) or not name.strip() or len(name) > 256 or name.startswith("-") \
            or any(ch in name for ch in "\x00\n\r"):
        raise InvalidInput(f"{what} name {name!r} is not valid", hint="e.g. feature/auth")
    return name.strip()


def _branch_plan(engine: Engine, ctx: Context, source: str, target: str) -> dict[str, Any]:
    store = engine.store
    src = store.on_branch(ctx.project_id, source, live_only=True)
    tgt = store.seen_on_branch(ctx.project_id, target, with_rejected=False)
    tgt_hashes = {m.content_hash: m.id for m in tgt if not m.superseded_by and not m.deprecated}
    tgt_ids = {m.id for m in tgt}
    to_copy, dups, pending = [], [], []
    dup_of: dict[str, str] = {}  # a duplicate's id -> the target's memory it duplicates
    for m in src:
        if m.status == "pending":
            pending.append(m)
        elif derived_id(m.id, target) in tgt_ids or m.content_hash in tgt_hashes:
            dups.append(m)
            dup_of[m.id] = derived_id(m.id, target) if derived_id(m.id, target) in tgt_ids \
                else tgt_hashes[m.content_hash]
        else:
            to_copy.append(m)
            tgt_hashes[m.content_hash] = derived_id(m.id, target)
    # Overrides the branch made over the target's memories become supersedes on merge (git merge for memory).
    supersede, carry = [], []
    if to_copy:
        rows = store.overrides_by([m.id for m in to_copy])
        others = store.get_memories({r["other_id"] for r in rows})
        for r in rows:
            o = others.get(r["other_id"])
            if o is None:
                continue
            if o.scope == "project" and o.branch == target:
                supersede.append((r["item_id"], o, int(r["id"])))
            else:
                carry.append((r["item_id"], o, int(r["id"])))
    return {"copy": to_copy, "duplicates": dups, "pending": pending, "supersede": supersede, "carry": carry,
            "dup_of": dup_of}


def _brief(m: Memory) -> BriefMemory:
    return {"id": m.id, "text": m.text, "type": m.type, "kind": m.kind, "branch": m.branch,
            "updated_at": m.updated_at}


def _plan_dict(plan: dict[str, Any], source: str, target: str, dry_run: bool) -> BranchMergeReport:
    return {"source": source, "target": target, "dry_run": dry_run,
            "imported": len(plan["copy"]), "skipped_duplicates": len(plan["duplicates"]),
            "skipped_pending": len(plan["pending"]), "supersedes": len(plan["supersede"]),
            "new": [_brief(m) for m in plan["copy"]], "duplicates": [_brief(m) for m in plan["duplicates"]],
            "pending": [_brief(m) for m in plan["pending"]],
            "superseded": [{"by": src_id, "memory": _brief(o)} for src_id, o, _ in plan["supersede"]]}


def _target(ctx: Context, source: str) -> str:
    if not ctx.branch:
        raise InvalidInput("this workspace is not on a git branch", hint="branch memory needs a git checkout")
    if ctx.branch == source:
        raise InvalidInput(f"you are on {source}: a branch cannot merge into itself",
                           hint=f"check out the target branch (e.g. {ctx.default_branch or 'main'}) and run the "
                                f"merge from there")
    return ctx.branch


def branch_diff(engine: Engine, ctx: Context, source: str) -> BranchMergeReport:
    """What merging `source`'s memories into the current branch would do; writes nothing."""
    source = _check_branch(source)
    target = _target(ctx, source)
    return _plan_dict(_branch_plan(engine, ctx, source, target), source, target, dry_run=True)


def branch_merge(engine: Engine, ctx: Context, source: str, *, _review_id: int | None = None) -> BranchMergeReport:
    """Copy `source`'s active memories into the current branch (one transaction; duplicates skipped; provenance
    `merged_from`); what the branch overrode on the target is superseded by the copy."""
    source = _check_branch(source)
    target = _target(ctx, source)
    store = engine.store
    plan = _branch_plan(engine, ctx, source, target)
    ids = [m.id for m in plan["copy"]]
    vec_rows, decayed = store.vector_rows(ids), store.decayed_at(ids)
    missing = [m for m in plan["copy"] if m.id not in vec_rows]
    fresh = dict(zip([m.id for m in missing], engine.embed([m.text for m in missing]), strict=True)) if missing else {}
    now = time.time()
    copy_of: dict[str, str] = {}
    with store.write() as c:
        for m in plan["copy"]:
            copy_of[m.id] = cid = derived_id(m.id, target)
            prov = dict(m.provenance)
            prov["merged_from"] = {"branch": source, "id": m.id, "merged_at": now}
            copy = dataclasses.replace(m, id=cid, branch=target, provenance=prov)
            if m.id in vec_rows:
                store.insert_memory(c, copy, blob_to_vec(vec_rows[m.id]["vec"]), vec_rows[m.id]["model_id"])
            else:
                store.insert_memory(c, copy, fresh[m.id], engine.model_id)
            if m.id in decayed:
                store.replace_decay(c, cid, decayed[m.id])
        _carry_decisions(c, store, ctx, plan, copy_of, source, target, now)
        if target == ctx.default_branch:
            _give_way(c, store, plan, copy_of, target, now)
        done = [r["id"] for r in store.branch_merge_items(ctx.project_id)
                if json.loads(r["payload"]).get("source") == source
                and json.loads(r["payload"]).get("target", target) == target]
        store.resolve_reviews(c, done + ([_review_id] if _review_id is not None else []), "merge", now)
    engine.changed()
    out = _plan_dict(plan, source, target, dry_run=False)
    out["copies"] = copy_of
    return out


def _give_way(c, store: Store, plan: dict[str, Any], copy_of: dict[str, str], target: str, now: float) -> None:
    """After a merge into the default branch, the branch's memories give way to their copies there (superseded,
    `provenance.merged_into`): a feature branch sees the default branch's memories too, so keeping both would
    show every merged note twice back on the branch. The same for memories the default branch already held."""
    for m in [*plan["copy"], *plan["duplicates"]]:
        into = copy_of.get(m.id) or plan["dup_of"].get(m.id)
        if not into or into == m.id:
            continue
        prov = {**m.provenance, "merged_into": {"branch": target, "id": into, "merged_at": now}}
        store.update_memory(c, m.id, reindex=True, superseded_by=into, provenance=prov, updated_at=now)


def _carry_decisions(c, store: Store, ctx: Context, plan: dict[str, Any], copy_of: dict[str, str], source: str,
                     target: str, now: float) -> None:
    """What the branch decided goes with its memories: its overrides of the target's memories become supersedes,
    its other overrides are carried over, and pairs kept apart on the branch stay apart on the target."""
    for src_id, o, rid in plan["supersede"]:
        store.update_memory(c, o.id, reindex=True, superseded_by=copy_of[src_id], updated_at=now)
        store.resolve_reviews(c, [rid], "merged", now)
    for pair in store.kept_apart_pairs():
        x, y = sorted(pair) if len(pair) == 2 else (None, None)
        if x in copy_of and y in copy_of:
            store.add_review(c, "conflict", copy_of[x], copy_of[y], ctx.project_id,
                             {"source": "branch_merge", "branch": source}, resolution="keep_both", now=now)
    for src_id, o, _rid in plan["carry"]:
        store.add_review(c, "override", copy_of[src_id], o.id, ctx.project_id,
                         {"level": "scope", "branch": target, "overridden_scope": o.scope,
                          "carried_from": src_id}, now=now)


def branch_delete(engine: Engine, ctx: Context, name: str, force: bool = False) -> BranchDelete:
    """Delete one branch's memories (explicit; tombstones kept). Branch-independent and global memories are never
    touched. Refuses the default branch and the checked-out branch unless `force`."""
    name = _check_branch(name)
    if not force and name == ctx.default_branch:
        raise InvalidInput(f"{name} is the default branch: deleting its memories is refused",
                           hint="pass --force if you really mean it")
    if not force and name == ctx.branch:
        raise InvalidInput(f"you are on {name}", hint="check out another branch first, or pass --force")
    store = engine.store
    mems = store.on_branch(ctx.project_id, name)
    default_hashes = set()
    if ctx.default_branch and ctx.default_branch != name:
        default_hashes = {m.content_hash for m in store.seen_on_branch(ctx.project_id, ctx.default_branch)}
    unmerged = [m for m in mems if m.status == "active" and not m.superseded_by and not m.deprecated
                and m.content_hash not in default_hashes]
    now = time.time()
    with store.write() as c:
        for m in mems:
            store.forget_memory(c, m, f"branch {name} deleted", now)
            store.clear_decay(c, m.id)
            store.resolve_reviews_of(c, m.id, "branch_deleted", now)
        store.resolve_reviews(c, [r["id"] for r in store.branch_merge_items(ctx.project_id)
                                  if json.loads(r["payload"]).get("source") == name], "branch_deleted", now)
    engine.changed()
    return {"branch": name, "deleted": len(mems), "unmerged": len(unmerged),
            "unmerged_memories": [_brief(m) for m in unmerged]}


# -- merged-branch detection (git) -----------------------------------------------------------------------------
def _git(root: str, *args: str) -> subprocess.CompletedProcess | None:
    try:
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True, timeout=15,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError):
        return None


def _head(root: str, branch: str) -> str | None:
    for ref in (f"refs/heads/{branch}", f"refs/remotes/origin/{branch}"):
        r = _git(root, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}")
        if r is not None and r.returncode == 0 and r.stdout.strip():
            return r.stdout.strip()
    return None


def merged_branches(engine: Engine, ctx: Context, queue: bool = True) -> MergedBranches:
    """Branches with memories whose git head the default branch contains (`git merge-base --is-ancestor`); with
    `queue`, each one that still has memories to merge gets one `branch_merge` review item (once per head)."""
    if not ctx.root or not ctx.default_branch:
        return {"default_branch": ctx.default_branch, "branches": [], "note": "not a git workspace"}
    rows = engine.store.branch_counts(ctx.project_id, ctx.default_branch)
    default_head = _head(ctx.root, ctx.default_branch)
    out: list[MergedBranch] = []
    if default_head is None:
        return {"default_branch": ctx.default_branch, "branches": [],
                "note": f"cannot resolve {ctx.default_branch} in git"}
    tctx = dataclasses.replace(ctx, branch=ctx.default_branch)
    for branch, count in rows:
        if branch.startswith("detached@"):
            continue
        head = _head(ctx.root, branch)
        entry: MergedBranch = {"branch": branch, "head": head, "memories": int(count), "state": "unmerged"}
        if head is None:
            entry["state"] = "gone"
        elif not _has_own_commits(ctx.root, branch, head):
            entry["state"] = "unmerged"  # created here and never committed on: git has nothing of it to merge
        else:
            r = _git(ctx.root, "merge-base", "--is-ancestor", head, default_head)
            entry["state"] = "merged" if r is not None and r.returncode == 0 else "unmerged"
        if entry["state"] == "merged":
            plan = _branch_plan(engine, tctx, branch, ctx.default_branch)
            entry["unmerged_memories"] = len(plan["copy"])
            if queue and plan["copy"] and head is not None:
                entry["review_id"] = _queue_branch_merge(engine, ctx, branch, head, len(plan["copy"]))
        out.append(entry)
    return {"default_branch": ctx.default_branch, "default_head": default_head, "branches": out}


def _has_own_commits(root: str, branch: str, head: str) -> bool:
    """Whether `branch` moved since it was created (its reflog's first entry). A branch just created from the
    default branch, with notes but no commit yet, has the default head as its head: an ancestor, not a merge."""
    start = read_branch_start(root, branch)
    return start is None or start != head


# The default branch's head each engine last looked at, per workspace: a merge is looked for once per head.
_SEEN: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_SEEN_LOCK = threading.Lock()


def notice_merges(engine: Engine, ctx: Context, *, wait: bool = True) -> list[int]:
    """Called by the owner before each request with a workspace: when the default branch's head moved since the
    last look (a file read; otherwise nothing happens), one `git for-each-ref --merged` lists the branches whose
    head it now contains, and each one with memories still to bring, its own commits (not just created) and no
    item for that head yet gets one `branch_merge` review item: "feature/retry was merged: bring its 3 memories
    to main?". With `wait` the look is done now (Review asks: it must see the offer); without, in a background
    thread (a hover or a hook never pays for it). Returns the new items' ids (none when not waited for). Never
    raises: a git or store problem is logged and that head is not looked at again."""
    if not ctx.root or not ctx.default_branch:
        return []
    head = read_ref_kept(ctx.root, ctx.default_branch)
    if head is None:
        return []
    key = (ctx.project_id, ctx.root, ctx.default_branch)
    seen = _SEEN.get(engine)
    if seen is not None and seen.get(key) == head:
        return []
    if not wait:
        if _SEEN_LOCK.locked():  # a look is under way
            return []
        threading.Thread(target=_look, args=(engine, ctx, key, head, False), name="mnemo-merge-notice",
                         daemon=True).start()
        return []
    return _look(engine, ctx, key, head, True)


def _look(engine: Engine, ctx: Context, key: tuple, head: str, wait: bool) -> list[int]:
    # waiting: a look under way (started by the request before) finishes first, then this one sees its result
    if not _SEEN_LOCK.acquire(timeout=10.0 if wait else 0.0):
        return []
    try:
        seen = _SEEN.setdefault(engine, {})
        if seen.get(key) == head:
            return []
        try:
            return _notice(engine, ctx, head)
        except Exception as exc:  # noqa: BLE001 - a request must never fail for this
            log.warning("looking for merged branches failed: %s", exc)
            return []
        finally:
            seen[key] = head
    finally:
        _SEEN_LOCK.release()


def _notice(engine: Engine, ctx: Context, default_head: str) -> list[int]:
    root, default = ctx.root, ctx.default_branch
    if root is None or default is None:  # (the caller looked: a git workspace)
        return []
    store = engine.store
    rows = [(b, n) for b, n in store.branch_counts(ctx.project_id, default)
            if not b.startswith("detached@")]
    if not rows:
        return []
    r = _git(root, "for-each-ref", f"--merged={default_head}", "--format=%(objectname) %(refname)",
             "refs/heads", "refs/remotes/origin")
    if r is None or r.returncode != 0:
        return []
    merged: dict[str, str] = {}
    for line in r.stdout.splitlines():
        sha, _, ref = line.strip().partition(" ")
        if ref.startswith("refs/heads/"):
            merged[ref[len("refs/heads/"):]] = sha
        elif ref.startswith("refs/remotes/origin/") and read_ref(root, ref[len("refs/remotes/origin/"):]) is None:
            merged.setdefault(ref[len("refs/remotes/origin/"):], sha)  # no local branch of that name
    queued = []
    offered = {(p.get("source"), p.get("head")) for p in
               (json.loads(x["payload"]) for x in store.branch_merge_items(ctx.project_id, open_only=False))}
    open_for = {json.loads(x["payload"]).get("source") for x in store.branch_merge_items(ctx.project_id)}
    tctx = dataclasses.replace(ctx, branch=default)
    for branch, _count in rows:
        head = merged.get(branch)
        if head is None or (branch, head) in offered or branch in open_for:
            continue
        if not _has_own_commits(root, branch, head):
            continue
        plan = _branch_plan(engine, tctx, branch, default)
        if plan["copy"]:
            queued.append(_queue_branch_merge(engine, ctx, branch, head, len(plan["copy"])))
    if queued:
        engine.changed()
    return queued


def _queue_branch_merge(engine: Engine, ctx: Context, branch: str, head: str, unmerged: int) -> int:
    store = engine.store
    with store.write() as c:
        for r in store.branch_merge_items(ctx.project_id, open_only=False):
            p = json.loads(r["payload"])
            if p.get("source") == branch and (p.get("head") == head or r["resolved_at"] is None):
                return int(r["id"])
        return store.add_review(c, "branch_merge", None, None, ctx.project_id,
                                {"source": branch, "target": ctx.default_branch, "head": head, "unmerged": unmerged})


__all__ = ["branch_delete", "branch_diff", "branch_merge", "derived_id", "merged_branches", "notice_merges"]
