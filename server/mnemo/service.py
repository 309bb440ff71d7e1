"""The one service API that every surface (CLI, language server, MCP server) calls.

`mnemo.api.Service` declares it (every operation, its parameters and its result type); `LocalService` is the
in-process implementation over an `Engine` (used by the owner process and by tests);
`mnemo.daemon.client.DaemonService` implements the same protocol over the owner's socket. Every method takes the
caller's `ctx` (a `Context` as a dict: project, branch, user, derived from the workspace) and returns plain
JSON-compatible data.
"""

from __future__ import annotations

import logging
import os
import threading
from pathlib import Path
from typing import Any

from mnemo import PROTOCOL_VERSION, __version__, api
from mnemo.core.errors import InvalidInput, MnemoError
from mnemo.core.models import Context

log = logging.getLogger("mnemo.service")

# The methods a remote client may call (the daemon refuses anything else), derived from `mnemo.api.Service`.
SERVICE_METHODS = api.SERVICE_METHODS
Progress = api.Progress

# The core operations are imported inside the methods, for start-up speed: a client that only probes the owner
# (daemon/client.py -> daemon/server.py -> this module) must not load the core (numpy, the operations: ~0.4 s).


WRITE_POLICIES = ("auto", "confirm")
# The requests that look for merged branches before they answer (they show Review or branches); the others start
# the look in the background.
NOTICE_NOW = frozenset({"review_list", "review_resolve", "merged_branches", "branch_diff", "branch_merge"})

PUBLISH_DELAY = float(os.environ.get("MNEMO_PUBLISH_DELAY", "1.0"))  # seconds of quiet before a publish on change


def write_policy(ctx: Context | None = None) -> str:
    """`auto`: agent-written memories land directly; `confirm`: they wait in Review. People's writes always land.

    The policy is the caller's: it travels in the request's context (`MNEMO_WRITE_POLICY` of the client process,
    the editor's `mnemo.writePolicy` for the language server), so a running owner applies each client's own value.
    A context without one (built by hand, in-process) uses this process's environment. A bad value is refused."""
    policy = ctx.write_policy if ctx is not None and ctx.write_policy is not None else \
        os.environ.get("MNEMO_WRITE_POLICY", "auto")
    policy = (policy or "auto").strip().lower()
    if policy not in WRITE_POLICIES:
        raise InvalidInput(f"write policy {policy!r} is not one of {', '.join(WRITE_POLICIES)}; nothing was stored",
                           hint="fix MNEMO_WRITE_POLICY (or the editor's mnemo.writePolicy): auto or confirm")
    return policy


def _ctx(ctx: dict | Context) -> Context:
    if isinstance(ctx, Context):
        return ctx
    if not isinstance(ctx, dict) or not ctx.get("project_id"):
        raise InvalidInput("missing project context", hint="clients derive it with mnemo.core.identity.detect_context")
    return Context.from_dict(ctx)


class _LazyEmbedder:
    """An embedder whose model loads on its first `embed` (its identity, `model_id` and `dim`, is known before)."""

    def __init__(self, build, model_id: str, dim: int, backend: str):
        self._build, self.model_id, self.dim, self.backend = build, model_id, dim, backend
        self._inst = None
        self._lock = threading.Lock()

    def _get(self):
        if self._inst is None:
            with self._lock:
                if self._inst is None:
                    self._inst = self._build()
        return self._inst

    def embed(self, texts):
        return self._get().embed(texts)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._get(), name)


class LocalService:
    """In-process implementation: the owner process serves it; tests use it directly."""

    def __init__(self, engine):
        self.engine = engine
        self._skill_engines: dict[str, Any] = {}
        self._skills_lock = threading.Lock()
        self._publish_lock = threading.Lock()  # one publish at a time (a request's, or one after a change)
        self._publish_timers: dict[str, threading.Timer] = {}
        from mnemo.core.team.ops import attach

        attach(engine)  # resumes sending team promotions queued before a restart (no-op without a team server)

    def _notice(self, ctx: Any, method: str = "") -> None:
        """Before a request with a workspace (the owner calls this): a git merge of a branch with memories is
        noticed and offered in Review once per head of the default branch (a file read otherwise; see
        core/sharing/branches.notice_merges): at once for the requests that show Review or branches, in the
        background for every other (a hover, a hook, a recall never wait for git). Never fails the request."""
        try:
            from mnemo.core.sharing.branches import notice_merges

            notice_merges(self.engine, _ctx(ctx), wait=method in NOTICE_NOW)
        except Exception as exc:  # noqa: BLE001 - the caller's request goes on
            log.warning("merged-branch check skipped: %s", exc)

    # -- publish on change (`publish_on_change`): off the request's path, one publish per quiet second ------------
    def _changed(self, ctx: dict | Context) -> None:
        """After a change a person would want in the agent files: publish a second later (later changes push it
        back), in a timer thread of this process; a setting of `off` (the default) costs one cached read."""
        from mnemo.core import config

        try:
            targets = config.value("publish_on_change", self.engine.home)
            c = _ctx(ctx)
        except MnemoError:
            return
        if not targets or targets == "off" or not c.root:
            return
        with self._skills_lock:
            old = self._publish_timers.pop(c.project_id + "\0" + c.root, None)
            if old is not None:
                old.cancel()
            t = threading.Timer(PUBLISH_DELAY, self._publish_now, args=(c, targets))
            t.daemon = True
            self._publish_timers[c.project_id + "\0" + c.root] = t
            t.start()

    def _publish_now(self, c: Context, targets: str) -> None:
        from mnemo.core.sharing.publish import publish

        with self._skills_lock:
            self._publish_timers.pop(c.project_id + "\0" + (c.root or ""), None)
        try:
            with self._publish_lock:
                res = publish(self.engine, c, targets.split(","))
            if res["written"]:
                log.info("published to %s", ", ".join(res["written"]))
        except Exception as exc:  # noqa: BLE001 - a background publish must never take the owner down
            log.warning("publish on change (%s) failed: %s", c.root, exc)

    def _flush_publishes(self) -> None:
        """Run now the publishes a change scheduled (a process about to exit: `--no-daemon` commands)."""
        with self._skills_lock:
            pending = list(self._publish_timers.values())
        for t in pending:
            t.cancel()
            self._publish_now(*t.args)

    # -- health ----------------------------------------------------------------------------------------------
    def health(self) -> api.Health:
        from mnemo.core import config

        idx = self.engine.index
        return {"version": __version__, "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
                "home": str(self.engine.home), "index_ready": bool(idx and idx.ready),
                "model_loaded": self.engine.model_loaded,
                "config": config.owner_view(self.engine.home)}  # what it applies: `mnemo daemon status`

    # -- memories --------------------------------------------------------------------------------------------
    def remember(self, ctx: dict, text: str, *, type: str = "project", kind: str = "fact", scope: str = "project",
                 tags: list[str] | None = None, importance: float = 0.5, source: str = "user",
                 anchors: list[dict] | None = None, trust: str = "trusted", status: str | None = None,
                 provenance: dict | None = None, on_conflict: str | None = None) -> api.RememberResult:
        c = _ctx(ctx)
        policy = write_policy(c)  # checked on every write: a bad value is refused, not ignored
        if status is None:
            status = "pending" if source == "agent" and policy == "confirm" else "active"
        from mnemo.core.write import remember

        res = remember(self.engine, c, text, type=type, kind=kind, scope=scope, tags=tags, importance=importance,
                       source=source, anchors=anchors, trust=trust, status=status, provenance=provenance,
                       on_conflict=on_conflict)
        self._changed(c)
        return res

    def remember_batch(self, ctx: dict, items: list[dict], *, source: str = "user", status: str | None = None,
                       on_conflict: str | None = None, progress: Progress | None = None) -> api.RememberBatchResult:
        c = _ctx(ctx)
        policy = write_policy(c)
        if status is None:
            status = "pending" if source == "agent" and policy == "confirm" else "active"
        from mnemo.core.write import remember_batch

        return remember_batch(self.engine, c, items, source=source, status=status, on_conflict=on_conflict,
                              progress=progress)

    def recall(self, ctx: dict, query: str, *, scope: str = "hybrid", limit: int = 5, types: list[str] | None = None,
               include_docs: bool = True, include_cold: bool = False, min_confidence: float | None = None,
               kind: str | None = None, branch: str | None = None, tags: list[str] | None = None,
               since: float | str | None = None, until: float | str | None = None, author: str | None = None,
               source: str | None = None, status: str | None = None) -> api.RecallResult:
        from mnemo.core.filters import make_filter
        from mnemo.core.recall import recall

        filt = make_filter(kind=kind, branch=branch, tags=tags, since=since, until=until, author=author,
                           source=source, status=status)
        c = _ctx(ctx)
        res = recall(self.engine, c, query, scope=scope, limit=limit, types=types, include_docs=include_docs,
                     include_cold=include_cold, min_confidence=min_confidence, filters=filt)
        self._fresh(c, res.get("cards") or [])
        return res

    def _fresh(self, c: Context, cards: list[dict[str, Any]]) -> None:
        """Each note card's `stale` as the working tree says now (its anchored code checked on read)."""
        from mnemo.core.lifecycle.anchors import freshen

        ids = [card["item_id"] for card in cards if card.get("source_kind", "note") == "note" and card.get("anchors")]
        if not ids:
            return
        try:
            state = freshen(self.engine, c, ids)
        except MnemoError as exc:  # the cards are still worth showing with their stored state
            log.warning("anchor check on read failed: %s", exc)
            return
        for card in cards:
            if card.get("item_id") in state:
                card["stale"] = state[card["item_id"]]["stale"]

    def hydrate(self, ctx: dict, item_id: str, mode: str = "default") -> api.Hydrated:
        from mnemo.core.recall import hydrate

        return hydrate(self.engine, _ctx(ctx), item_id, mode)

    def get_memory(self, ctx: dict, memory_id: str) -> api.Memory:
        from mnemo.core import memories

        return memories.get(self.engine, _ctx(ctx), memory_id).to_dict()

    def promote(self, ctx: dict, memory_id: str, to: str = "global") -> api.MemoryChange:
        from mnemo.core import memories

        return memories.promote(self.engine, _ctx(ctx), memory_id, to)

    def deprecate(self, ctx: dict, memory_id: str, reason: str | None = None) -> api.MemoryChange:
        from mnemo.core import memories

        res = memories.deprecate(self.engine, _ctx(ctx), memory_id, reason)
        self._changed(ctx)
        return res

    def forget(self, ctx: dict, memory_id: str, reason: str | None = None) -> api.Forgotten:
        from mnemo.core import history

        res = history.forget(self.engine, _ctx(ctx), memory_id, reason)
        self._changed(ctx)
        return res

    def list_memories(self, ctx: dict, *, scope: str = "hybrid", branch: str | None = None, type: str | None = None,
                      kind: str | None = None, include_deprecated: bool = False, include_cold: bool = False,
                      status: str | None = "active", all_branches: bool = False, limit: int = 200,
                      offset: int = 0, tags: list[str] | None = None, since: float | str | None = None,
                      until: float | str | None = None, author: str | None = None, source: str | None = None,
                      search: str | None = None) -> api.MemoryList:
        from mnemo.core import memories
        from mnemo.core.filters import make_filter

        filt = make_filter(tags=tags, since=since, until=until, author=author, source=source, search=search)
        return memories.list_memories(self.engine, _ctx(ctx), scope=scope, branch=branch, type=type, kind=kind,
                                      include_deprecated=include_deprecated, include_cold=include_cold,
                                      status=status, all_branches=all_branches, limit=limit, offset=offset,
                                      filters=filt)

    # -- edits and undo (core/history.py) --------------------------------------------------------------------
    def update(self, ctx: dict, memory_id: str, text: str | None = None, *, type: str | None = None,
               kind: str | None = None, importance: float | None = None, tags: list[str] | None = None,
               reason: str | None = None, source: str = "user", on_conflict: str | None = None) -> api.UpdateResult:
        from mnemo.core import history

        c = _ctx(ctx)
        if source == "agent" and write_policy(c) == "confirm":  # the policy is applied: refused, not bypassed
            raise InvalidInput("an agent cannot edit a memory under the `confirm` write policy; nothing was changed",
                               hint="remember the correction instead (it waits in Review for a person), or ask "
                                    "the person to run `mnemo edit`")
        res = history.update(self.engine, c, memory_id, text=text, type=type, kind=kind,
                             importance=importance, tags=tags, reason=reason, source=source,
                             on_conflict=on_conflict)
        if res["status"] == "updated" and text is not None:
            from mnemo.core.edits import settle_rewritten

            res["memory"] = settle_rewritten(self.engine, res["memory"]["id"])  # "edit the note" settles a stale anchor
        self._changed(c)
        return res

    def history(self, ctx: dict, memory_id: str) -> api.MemoryHistory:
        from mnemo.core import history

        return history.history(self.engine, _ctx(ctx), memory_id)

    def stats(self, ctx: dict) -> api.Stats:
        from mnemo.core import memories
        from mnemo.core.history import purge_forgotten
        from mnemo.core.lifecycle import tier_index

        purge_forgotten(self.engine)  # the forget retention: forgotten text older than it is purged
        out = memories.stats(self.engine, _ctx(ctx))
        out["tiers"] = tier_index(self.engine, _ctx(ctx))  # hot / warm / cold, like an index of the memory
        return out

    def index_docs(self, ctx: dict, root: str | None = None, *,
                   progress: Progress | None = None) -> api.IndexDocsResult:
        from mnemo.core.docs import index_docs

        return index_docs(self.engine, _ctx(ctx), root, progress)

    # -- skills ----------------------------------------------------------------------------------------------
    def _skills(self, c: Context):
        from mnemo.core import config
        from mnemo.core.skills import SkillEngine, SkillRegistry

        # Mnemo's starter skills apply in every project unless `mnemo config set starter_skills false` (or
        # MNEMO_STARTER_SKILLS=0); a change applies at once (another cache key). Skill vectors are cached in the
        # store so a restart embeds only what changed.
        starter = bool(config.value("starter_skills", self.engine.home))
        key = f"{int(starter)}:{c.root or ''}"
        with self._skills_lock:
            eng = self._skill_engines.get(key)
            if eng is None:
                registry = SkillRegistry(Path(c.root) if c.root else None, include_builtin=starter)
                eng = SkillEngine(registry, self._skill_embedder(),
                                  vector_cache=self.engine.home / "skill_vectors.sqlite")
                self._skill_engines[key] = eng
            return eng

    def _warm(self, root: str | None) -> None:
        """What the first context of a session needs, loaded now (the owner calls it in the background as it starts,
        for the project of the hook that started it): the memory model, the skill engine of the project with its
        skill vectors, the corrections detector's examples."""
        from mnemo.core import corrections
        from mnemo.core.identity import detect_context

        if root:  # first: a session's start needs the project's skills, not the memory model
            c = detect_context(Path(root))
            eng = self._skills(c)
            eng.maybe_refresh()
            eng.warm()
            eng.activate(None, "warm up")  # the query embedder of the skills (an int8 model by default) too
        self.engine.warm_up()
        corrections.warm(self.engine.embedder)

    def _skill_embedder(self):
        """The embedder of skill activation. Skills are embedded on this machine only (vectors cached in the
        store's home, never shared), so they use the int8 export of MiniLM by default (~2x faster query embedding,
        same MetaTool accuracy; docs/benchmarks.md). Memories use it too by default (issue 22): then skills share
        the memory embedder's one session, never a second copy of the model. With memories on the float ONNX
        model, skills still load the int8 one. MNEMO_SKILL_EMBEDDER=same uses the memory embedder; a kind name
        forces one."""
        from mnemo.core import config
        from mnemo.core.embeddings import (
            DIM,
            MODEL_ID,
            MODEL_ID_INT8,
            ONNX_KINDS,
            configured_kind,
            get_embedder,
        )

        choice = os.environ.get("MNEMO_SKILL_EMBEDDER", "").strip().lower() or str(config.value("skill_embedder"))
        loaded = self.engine.loaded_embedder
        if choice == "auto" and loaded is not None and getattr(loaded, "model_id", None) == MODEL_ID_INT8:
            return loaded                    # the memory embedder is the int8 model: one session for both
        if choice == "auto" and configured_kind() in ONNX_KINDS and (loaded is None or (
                getattr(loaded, "backend", None) in ONNX_KINDS
                and getattr(loaded, "model_id", None) in (MODEL_ID, MODEL_ID_INT8))):
            # built on first use: a session's start needs the skills' cached vectors, not a model (issue 20);
            # get_embedder("onnx-int8") is the very instance the memory embedder gets when it is configured so
            return _LazyEmbedder(lambda: get_embedder("onnx-int8"), MODEL_ID_INT8, DIM, "onnx-int8")
        base = self.engine.embedder
        if choice == "same":
            return base
        if choice != "auto":
            return get_embedder(choice)
        if getattr(base, "backend", None) != "onnx" or getattr(base, "model_id", None) != MODEL_ID:
            return base                      # int8 already, torch, hash (tests) or a caller's own embedder: keep it
        try:
            return get_embedder("onnx-int8")
        except MnemoError as e:
            log.warning("int8 skill embedder unavailable (%s); skills use the memory embedder", e)
            return base

    def _holds(self, c: Context, eng) -> list[dict[str, Any]]:
        """Skill files that read like a prompt injection stay held until a person accepts them in Review
        (`skill_held` items, keyed by path and content): queue the new ones, let the accepted ones activate."""
        from mnemo.core.review import skill_holds
        from mnemo.core.skills import hold_key

        flagged = [{"key": hold_key(s), "path": s.source_path, "name": s.name, "flags": list(s.flags)}
                   for s in eng.skills() if s.flags]
        accepted = frozenset(skill_holds(self.engine, c, flagged))
        eng.accepted = lambda skill: hold_key(skill) in accepted
        return [{**f, "state": "accepted" if f["key"] in accepted else "held"} for f in flagged]

    def skills_list(self, ctx: dict) -> api.SkillList:
        eng = self._skills(_ctx(ctx))
        return {"skills": [s.to_dict() for s in eng.skills()]}

    def skills_check(self, ctx: dict) -> api.SkillsCheck:
        c = _ctx(ctx)
        eng = self._skills(c)
        out = eng.check().to_dict()
        out["held"] = self._holds(c, eng)
        return out

    def activate_skills(self, ctx: dict, file: str | None = None, message: str | None = None, *,
                        max_skills: int | None = None, token_budget: int | None = None) -> api.ActivationResult:
        from mnemo.core.skills import render_prompt_block

        c = _ctx(ctx)
        eng = self._skills(c)
        eng.maybe_refresh()  # an edited skill file gets its new content's hold state at once
        self._holds(c, eng)
        result = eng.activate(file, message, max_skills=max_skills, token_budget=token_budget)
        out = result.to_dict()
        out["prompt_block"] = render_prompt_block(result)
        return out

    # -- lifecycle, review and sharing (core/lifecycle/, core/review.py, core/sharing/) ---------------------
    def review_list(self, ctx: dict, kind: str | None = None, include_resolved: bool = False) -> api.ReviewList:
        from mnemo.core import review

        return review.review_list(self.engine, _ctx(ctx), kind, include_resolved)

    def review_resolve(self, ctx: dict, review_id: int, resolution: str) -> api.ReviewResolution:
        from mnemo.core import review

        res = review.review_resolve(self.engine, _ctx(ctx), review_id, resolution)
        self._changed(ctx)
        return res

    def snapshot_export(self, ctx: dict, path: str, scopes: list[str] | None = None,
                        branches: list[str] | None = None) -> api.SnapshotExport:
        from mnemo.core import sharing

        return sharing.export_snapshot(self.engine, _ctx(ctx), path, scopes, branches)

    def snapshot_diff(self, ctx: dict, path: str, strategy: str = "newer_wins") -> api.SnapshotMergeReport:
        from mnemo.core import sharing

        return sharing.diff_snapshot(self.engine, _ctx(ctx), path, strategy)

    def snapshot_merge(self, ctx: dict, path: str, strategy: str = "newer_wins", *,
                       progress: Progress | None = None) -> api.SnapshotMergeReport:
        from mnemo.core import sharing

        return sharing.merge_snapshot(self.engine, _ctx(ctx), path, strategy, progress=progress)

    def markdown_export(self, ctx: dict, path: str, scopes: list[str] | None = None) -> api.MarkdownExport:
        from mnemo.core.sharing.markdown import export_markdown

        return export_markdown(self.engine, _ctx(ctx), path, scopes)

    def markdown_import(self, ctx: dict, path: str, dry_run: bool = False) -> api.MarkdownImport:
        from mnemo.core.sharing.markdown import import_markdown

        return import_markdown(self.engine, _ctx(ctx), path, bool(dry_run))

    def publish(self, ctx: dict, targets: list[str] | None = None, dry_run: bool = False, budget: int | None = None,
                sync: bool = False) -> api.PublishReport:
        from mnemo.core.sharing.publish import publish

        with self._publish_lock:
            return publish(self.engine, _ctx(ctx), targets, dry_run=bool(dry_run), budget=budget, sync=bool(sync))

    def branch_diff(self, ctx: dict, source: str) -> api.BranchMergeReport:
        from mnemo.core import sharing

        return sharing.branch_diff(self.engine, _ctx(ctx), source)

    def branch_merge(self, ctx: dict, source: str) -> api.BranchMergeReport:
        from mnemo.core import sharing

        return sharing.branch_merge(self.engine, _ctx(ctx), source)

    def branch_delete(self, ctx: dict, name: str, force: bool = False) -> api.BranchDelete:
        from mnemo.core import sharing

        return sharing.branch_delete(self.engine, _ctx(ctx), name, force)

    def merged_branches(self, ctx: dict, queue: bool = True) -> api.MergedBranches:
        from mnemo.core import sharing

        return sharing.merged_branches(self.engine, _ctx(ctx), queue)

    def decay(self, ctx: dict, now: float | str | None = None, dry_run: bool = False,
              force: bool = False) -> api.DecayReport:
        from mnemo.core import lifecycle

        at = lifecycle.check_decay_time(now, force=bool(force or dry_run))  # a future time: force, or a dry run
        return lifecycle.decay(self.engine, _ctx(ctx), at, dry_run=bool(dry_run))

    def compact(self, ctx: dict) -> api.CompactReport:
        from mnemo.core import lifecycle

        return lifecycle.compact(self.engine, _ctx(ctx))

    def restore(self, ctx: dict, memory_id: str) -> api.MemoryChange:
        from mnemo.core import history, lifecycle

        if history.is_forgotten(self.engine, memory_id):  # a forgotten memory, back from its tombstone
            return history.unforget(self.engine, _ctx(ctx), memory_id)
        return lifecycle.restore(self.engine, _ctx(ctx), memory_id)

    def anchor(self, ctx: dict, memory_id: str, anchor: dict[str, Any]) -> api.MemoryChange:
        from mnemo.core import lifecycle

        return lifecycle.anchor(self.engine, _ctx(ctx), memory_id, anchor)

    def unanchor(self, ctx: dict, memory_id: str, path: str | None = None,
                 symbol: str | None = None) -> api.MemoryChange:
        from mnemo.core import lifecycle

        return lifecycle.unanchor(self.engine, _ctx(ctx), memory_id, path, symbol)

    def check_anchors(self, ctx: dict, path: str, symbols: list[dict[str, Any]] | None) -> api.AnchorCheck:
        from mnemo.core import lifecycle

        return lifecycle.check_anchors(self.engine, _ctx(ctx), path, symbols)

    def check_anchor_files(self, ctx: dict, paths: list[str] | None = None) -> api.AnchorsCheck:
        from mnemo.core.lifecycle.anchors import check_files

        if paths is not None and (not isinstance(paths, list) or not all(isinstance(p, str) for p in paths)):
            raise InvalidInput("paths must be a list of file paths", hint='e.g. ["src/pay.py"]')
        return check_files(self.engine, _ctx(ctx), paths)

    # -- doctor ----------------------------------------------------------------------------------------------
    def doctor(self, ctx: dict) -> api.DoctorResult:
        from mnemo.core.doctor import run_checks

        return run_checks(self.engine, _ctx(ctx))

    # -- team, hand-off --------------------------------------------------------------------------------------
    def team_status(self, ctx: dict) -> api.TeamStatus:
        from mnemo.core.team.ops import team_status

        return team_status(self.engine, _ctx(ctx))

    def recent_context(self, ctx: dict, limit: int = 10, days: float = 14.0) -> api.RecentContext:
        from mnemo.core.recent import recent_context

        return recent_context(self.engine, _ctx(ctx), limit, days)

    # -- the editor's context (core/anchored.py) -------------------------------------------------------------
    def hover_context(self, ctx: dict, path: str | None = None, line: int | None = None, symbol: str | None = None,
                      query: str | None = None, limit: int = 5, include_docs: bool = True,
                      min_confidence: float | None = None, skills: bool = True, max_skills: int | None = None,
                      token_budget: int | None = None) -> api.HoverContext:
        """What an editor shows at a position, in one round trip: the recall cards for `query` (none without one),
        the memories anchored to `symbol` in `path` (outside any symbol: to the lines around `line`) as cards with
        their stale state, every anchor of the file (`file_anchors`, for code lenses), and the skills active for
        the file (`skills`: activate_skills' answer; None when not asked for)."""
        from mnemo.core.anchored import anchored_context, check_position
        from mnemo.core.recall import recall

        c = _ctx(ctx)
        check_position(path, line, symbol)
        if query is not None and not isinstance(query, str):
            raise InvalidInput(f"hover_context: query must be a string, got {type(query).__name__}")
        out: dict[str, Any] = {"path": path, "symbol": symbol, "cards": [], "warnings": [], "anchored": [],
                               "file_anchors": {}, "skills": None}
        if query is not None:
            recalled = recall(self.engine, c, query, limit=limit, include_docs=include_docs,
                              min_confidence=min_confidence)
            out.update(cards=recalled["cards"], warnings=recalled["warnings"])
        if path:
            out.update(anchored_context(self.engine, c, path, symbol, line))
        self._fresh(c, out["cards"] + out["anchored"])
        if skills:
            try:
                out["skills"] = self.activate_skills(ctx, path, None, max_skills=max_skills, token_budget=token_budget)
            except MnemoError as exc:  # skills must not take the memories of a hover down with them
                log.warning("hover_context: skills: %s", exc)
                out["skills"] = {"activations": [], "total_tokens": 0, "error": str(exc)}
        return out

    def memory_cards(self, ctx: dict, ids: list[str]) -> api.MemoryCards:
        """The card of each memory (the one recall shows, unscored) and its record, for an editor that opens
        memories by id; ids not visible from this project are `missing`."""
        from mnemo.core.anchored import memory_cards

        return memory_cards(self.engine, _ctx(ctx), ids)

    # -- what agents receive without asking (core/context.py), session hand-offs (core/handoff.py) -----------
    def context(self, ctx: dict, file: str | None = None, message: str | None = None, *, event: str = "context",
                session: str | None = None, budget: int | None = None, learn: str | None = None,
                client: str | None = None, source: str | None = None, min_confidence: float | None = None,
                commit: bool = True, symbol: str | None = None, line: int | None = None) -> api.ContextBlock:
        """The context block for an event (session-start | prompt | pre-tool | context), never repeating what the
        session (`session`) already received, under `budget` tokens; `learn` (off | confirm | auto) files the
        corrections a prompt states. Used by the hooks, `mnemo context`, MCP and the editor."""
        from mnemo.core.context import build_context

        c = _ctx(ctx)

        def activate(file_path: str | None, msg: str | None):
            eng = self._skills(c)
            eng.maybe_refresh()
            self._holds(c, eng)  # held skills never reach an agent
            return eng.activate(file_path, msg)

        class _Sections:  # the skill engine ranks a rule's sections by meaning (resolved only when needed)
            def message_vector(_self, text: str):
                return self._skills(c).message_vector(text)

            def text_vectors(_self, texts: list[str], wait: bool = True):
                return self._skills(c).text_vectors(texts, wait)

        return build_context(self.engine, c, activate, _Sections(), file=file, message=message, event=event,
                             session=session, budget=budget, learn=learn, client=client, source=source,
                             min_confidence=min_confidence, commit=commit, symbol=symbol, line=line)

    def context_commit(self, ctx: dict, session: str | None = None, keys: list[str] | None = None,
                       last_file: str | None = None, reset: bool = False) -> api.ContextCommit:
        """Record what a session received (a hook calls it once the agent has the block: `context(commit=False)`
        leaves that to it, so a block lost to a timeout is not counted as given)."""
        from mnemo.core.context import commit

        _ctx(ctx)
        return {"session": session, "seen": commit(self.engine.home, session, keys or [], last_file, bool(reset))}

    def session_end(self, ctx: dict, session: str | None = None, summary: dict | None = None,
                    client: str | None = None) -> api.SessionEnd:
        """Write the session's hand-off note from its summary and forget what the session was given."""
        from mnemo.core import sessions
        from mnemo.core.handoff import write_handoff

        c = _ctx(ctx)
        session = sessions.check_session(session)
        res = write_handoff(self.engine, c, summary or {}, session=session, client=client)
        out: dict[str, Any] = {"handoff": res, "session_cleared": sessions.end(self.engine.home, session)}
        edited = (summary or {}).get("files_edited") if isinstance(summary, dict) else None
        if edited and isinstance(edited, list) and c.root:  # the anchors into the files the session edited
            from mnemo.core.lifecycle.anchors import check_files

            try:
                out["anchors"] = check_files(self.engine, c, [p for p in edited if isinstance(p, str)][:200])
            except MnemoError as exc:  # the hand-off is written; a failed check must not lose it
                log.warning("session end: anchor check failed: %s", exc)
        return out
