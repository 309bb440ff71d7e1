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
from typing import TYPE_CHECKING, Any, Unpack, cast

from mnemo import PROTOCOL_VERSION, __version__, api, trace
from mnemo.core import environment
from mnemo.core.api_types.requests import filled
from mnemo.core.errors import InvalidInput, MnemoError
from mnemo.core.models import Context

if TYPE_CHECKING:
    from mnemo.core.engine import Engine

log = logging.getLogger("mnemo.service")

# The methods a remote client may call (the daemon refuses anything else), derived from `mnemo.api.Service`.
SERVICE_METHODS = api.SERVICE_METHODS
Progress = api.Progress

# The core operations are imported inside the methods, for start-up speed: a client that only probes the owner
# (daemon/client.py -> daemon/server.py -> this module) must not load the core (numpy, the operations: ~0.4 s).


# The requests that look for merged branches before they answer (they show Review or branches); the others start
# the look in the background.
NOTICE_NOW = frozenset({"review_list", "review_resolve", "merged_branches", "branch_diff", "branch_merge"})

PUBLISH_DELAY = environment.number("MNEMO_PUBLISH_DELAY")  # seconds of quiet before a publish on change


def _ctx(ctx: api.Ctx | Context) -> Context:
    if isinstance(ctx, Context):
        return ctx
    if not isinstance(ctx, dict) or not ctx.get("project_id"):
        raise InvalidInput("missing project context", hint="clients derive it with mnemo.core.identity.detect_context")
    return Context.from_dict(ctx)


_LIBC: Any = None


def release_freed_memory() -> None:
    """Give the C heap's freed pages back to the system (glibc's `malloc_trim`; nothing elsewhere). A batch's chunk
    products with the vector file are large (64 notes x the partition's rows, 25 MB at 100k) and glibc keeps what
    they freed in its heap: an owner that imported 500 notes into a 100k store held ~90 MB more after it than before
    (~7 ms to release; issue 22, sixth pass: docs/benchmarks.md)."""
    global _LIBC
    if _LIBC is None:
        try:
            import ctypes

            libc = ctypes.CDLL(None)
            _LIBC = libc if hasattr(libc, "malloc_trim") else False
        except OSError:
            _LIBC = False
    if _LIBC:
        _LIBC.malloc_trim(0)


class LocalService:
    """In-process implementation: the owner process serves it; tests use it directly."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self._publish_lock = threading.Lock()  # one publish at a time (a request's, or one after a change)
        self._publish_timers: dict[str, threading.Timer] = {}
        self._timers_lock = threading.Lock()  # guards _publish_timers
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
    def _changed(self, ctx: api.Ctx | Context) -> None:
        """After a change a person would want in the agent files: publish a second later (later changes push it
        back), in a timer thread of this process; a setting of `off` (the default) costs one cached read."""
        from mnemo.core import store_settings as config

        try:
            targets = config.value("publish_on_change", self.engine.home)
            c = _ctx(ctx)
        except MnemoError:
            return
        if not targets or targets == "off" or not c.root:
            return
        with self._timers_lock:
            old = self._publish_timers.pop(c.project_id + "\0" + c.root, None)
            if old is not None:
                old.cancel()
            t = threading.Timer(PUBLISH_DELAY, self._publish_now, args=(c, targets))
            t.daemon = True
            self._publish_timers[c.project_id + "\0" + c.root] = t
            t.start()

    def _publish_now(self, c: Context, targets: str) -> None:
        from mnemo.core.sharing.publish import publish

        with self._timers_lock:
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
        with self._timers_lock:
            pending = list(self._publish_timers.values())
        for t in pending:
            t.cancel()
            self._publish_now(*t.args)

    # -- health ----------------------------------------------------------------------------------------------
    def health(self) -> api.Health:
        from mnemo.core import store_settings as config

        idx = self.engine.index
        return {"version": __version__, "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
                "home": str(self.engine.home), "index_ready": bool(idx and idx.ready),
                "model_loaded": self.engine.model_loaded,
                "config": config.owner_view(self.engine.home)}  # what it applies: `mnemo daemon status`

    # -- memories --------------------------------------------------------------------------------------------
    def remember(self, ctx: api.Ctx, text: str, **options: Unpack[api.RememberOptions]) -> api.RememberResult:
        from mnemo.core.memory.write import remember
        from mnemo.core.policy import landing_status

        c = _ctx(ctx)
        request = filled(api.RememberOptions, options)  # an option remember does not take is refused here
        # the policy is checked on every write: refused, not ignored
        request["status"] = landing_status(c, request["source"], request["status"])
        res = remember(self.engine, c, text, **request)
        self._changed(c)
        return res

    def remember_batch(self, ctx: api.Ctx, items: list[api.BatchNote], *, source: str = "user", status: str | None = None,
                       on_conflict: str | None = None, progress: Progress | None = None) -> api.RememberBatchResult:
        from mnemo.core.memory.write import remember_batch
        from mnemo.core.policy import landing_status

        c = _ctx(ctx)
        status = landing_status(c, source, status)

        try:
            return remember_batch(self.engine, c, items, source=source, status=status, on_conflict=on_conflict,
                                  progress=progress)
        finally:
            release_freed_memory()


    def recall(self, ctx: api.Ctx, query: str, *, scope: str = "hybrid", limit: int = 5, types: list[str] | None = None,
               include_docs: bool = True, include_cold: bool = False, min_confidence: float | None = None,
               kind: str | None = None, branch: str | None = None, tags: list[str] | None = None,
               since: float | str | None = None, until: float | str | None = None, author: str | None = None,
               source: str | None = None, status: str | None = None) -> api.RecallResult:
        from mnemo.core.memory.filters import make_filter
        from mnemo.core.memory.recall import recall

        filt = make_filter(kind=kind, branch=branch, tags=tags, since=since, until=until, author=author,
                           source=source, status=status)
        c = _ctx(ctx)
        trace.current().mark("s.args")
        res = recall(self.engine, c, query, scope=scope, limit=limit, types=types, include_docs=include_docs,
                     include_cold=include_cold, min_confidence=min_confidence, filters=filt)
        self._fresh(c, res.get("cards") or [])
        trace.current().mark("s.fresh")
        return res

    def _fresh(self, c: Context, cards: list[api.records.Card]) -> None:
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

    def hydrate(self, ctx: api.Ctx, item_id: str, mode: str = "default") -> api.Hydrated:
        from mnemo.core.memory.recall import hydrate

        return hydrate(self.engine, _ctx(ctx), item_id, mode)

    def get_memory(self, ctx: api.Ctx, memory_id: str) -> api.Memory:
        from mnemo.core.memory import manage as memories

        return memories.get(self.engine, _ctx(ctx), memory_id).to_dict()

    def promote(self, ctx: api.Ctx, memory_id: str, to: str = "global") -> api.MemoryChange:
        from mnemo.core.memory import manage as memories

        return memories.promote(self.engine, _ctx(ctx), memory_id, to)

    def deprecate(self, ctx: api.Ctx, memory_id: str, reason: str | None = None) -> api.MemoryChange:
        from mnemo.core.memory import manage as memories

        res = memories.deprecate(self.engine, _ctx(ctx), memory_id, reason)
        self._changed(ctx)
        return res

    def forget(self, ctx: api.Ctx, memory_id: str, reason: str | None = None) -> api.Forgotten:
        from mnemo.core.memory import history

        res = history.forget(self.engine, _ctx(ctx), memory_id, reason)
        self._changed(ctx)
        return res

    def list_memories(self, ctx: api.Ctx, *, scope: str = "hybrid", branch: str | None = None, type: str | None = None,
                      kind: str | None = None, include_deprecated: bool = False, include_cold: bool = False,
                      status: str | None = "active", all_branches: bool = False, limit: int = 200,
                      offset: int = 0, tags: list[str] | None = None, since: float | str | None = None,
                      until: float | str | None = None, author: str | None = None, source: str | None = None,
                      search: str | None = None) -> api.MemoryList:
        from mnemo.core.memory import manage as memories
        from mnemo.core.memory.filters import make_filter

        filt = make_filter(tags=tags, since=since, until=until, author=author, source=source, search=search)
        return memories.list_memories(self.engine, _ctx(ctx), scope=scope, branch=branch, type=type, kind=kind,
                                      include_deprecated=include_deprecated, include_cold=include_cold,
                                      status=status, all_branches=all_branches, limit=limit, offset=offset,
                                      filters=filt)

    # -- edits and undo (core/memory/history.py) --------------------------------------------------------------------
    def update(self, ctx: api.Ctx, memory_id: str, text: str | None = None, *, type: str | None = None,
               kind: str | None = None, importance: float | None = None, tags: list[str] | None = None,
               reason: str | None = None, source: str = "user", on_conflict: str | None = None) -> api.UpdateResult:
        from mnemo.core.memory import history
        from mnemo.core.policy import write_policy

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

    def history(self, ctx: api.Ctx, memory_id: str) -> api.MemoryHistory:
        from mnemo.core.memory import history

        return history.history(self.engine, _ctx(ctx), memory_id)

    def stats(self, ctx: api.Ctx) -> api.Stats:
        from mnemo.core.lifecycle import tier_index
        from mnemo.core.memory import manage as memories
        from mnemo.core.memory.history import purge_forgotten

        purge_forgotten(self.engine)  # the forget retention: forgotten text older than it is purged
        c = _ctx(ctx)
        return memories.stats(self.engine, c, tier_index(self.engine, c))  # tiers: like an index of the memory

    def index_docs(self, ctx: api.Ctx, root: str | None = None, *,
                   progress: Progress | None = None) -> api.IndexDocsResult:
        from mnemo.core.documents.indexing import index_docs

        return index_docs(self.engine, _ctx(ctx), root, progress)

    # -- skills ----------------------------------------------------------------------------------------------
    def _warm(self, root: str | None) -> None:
        """What the first context of a session needs, loaded now (the owner calls it in the background as it starts,
        for the project of the hook that started it): the memory model, the skill engine of the project with its
        skill vectors, the corrections detector's examples."""
        from mnemo.core.agent import corrections
        from mnemo.core.identity import detect_context

        if root:  # first: a session's start needs the project's skills, not the memory model
            eng = self.engine.skill_engine(detect_context(Path(root)))
            eng.maybe_refresh()
            eng.warm()
            eng.activate(None, "warm up")  # the query embedder of the skills (an int8 model by default) too
        self.engine.warm_up()
        corrections.warm(self.engine.embedder)

    def skills_list(self, ctx: api.Ctx) -> api.SkillList:
        eng = self.engine.skill_engine(_ctx(ctx))
        # core/skills/ builds its records untyped (typing them there is left to its own change)
        return {"skills": [cast(api.records.Skill, s.to_dict()) for s in eng.skills()]}

    def skills_check(self, ctx: api.Ctx) -> api.SkillsCheck:
        from mnemo.core.review import project_skills

        eng, held = project_skills(self.engine, _ctx(ctx))
        out = eng.check().to_dict()
        out["held"] = held
        return out

    def activate_skills(self, ctx: api.Ctx, file: str | None = None, message: str | None = None, *,
                        max_skills: int | None = None, token_budget: int | None = None) -> api.ActivationResult:
        from mnemo.core.review import project_skills
        from mnemo.core.skills import render_prompt_block

        eng, _ = project_skills(self.engine, _ctx(ctx))
        result = eng.activate(file, message, max_skills=max_skills, token_budget=token_budget)
        out = result.to_dict()
        out["prompt_block"] = render_prompt_block(result)
        return out

    # -- lifecycle, review and sharing (core/lifecycle/, core/review.py, core/sharing/) ---------------------
    def review_list(self, ctx: api.Ctx, kind: str | None = None, include_resolved: bool = False) -> api.ReviewList:
        from mnemo.core import review

        return review.review_list(self.engine, _ctx(ctx), kind, include_resolved)

    def review_resolve(self, ctx: api.Ctx, review_id: int, resolution: str) -> api.ReviewResolution:
        from mnemo.core import review

        res = review.review_resolve(self.engine, _ctx(ctx), review_id, resolution)
        self._changed(ctx)
        return res

    def snapshot_export(self, ctx: api.Ctx, path: str, scopes: list[str] | None = None,
                        branches: list[str] | None = None) -> api.SnapshotExport:
        from mnemo.core import sharing

        return sharing.export_snapshot(self.engine, _ctx(ctx), path, scopes, branches)

    def snapshot_diff(self, ctx: api.Ctx, path: str, strategy: str = "newer_wins") -> api.SnapshotMergeReport:
        from mnemo.core import sharing

        return sharing.diff_snapshot(self.engine, _ctx(ctx), path, strategy)

    def snapshot_merge(self, ctx: api.Ctx, path: str, strategy: str = "newer_wins", *,
                       progress: Progress | None = None) -> api.SnapshotMergeReport:
        from mnemo.core import sharing

        return sharing.merge_snapshot(self.engine, _ctx(ctx), path, strategy, progress=progress)

    def markdown_export(self, ctx: api.Ctx, path: str, scopes: list[str] | None = None) -> api.MarkdownExport:
        from mnemo.core.sharing.markdown_files import export_markdown

        return export_markdown(self.engine, _ctx(ctx), path, scopes)

    def markdown_import(self, ctx: api.Ctx, path: str, dry_run: bool = False) -> api.MarkdownImport:
        from mnemo.core.sharing.markdown_files import import_markdown

        return import_markdown(self.engine, _ctx(ctx), path, bool(dry_run))

    def publish(self, ctx: api.Ctx, targets: list[str] | None = None, dry_run: bool = False,
                budget: int | None = None, sync: bool = False) -> api.PublishReport:
        from mnemo.core.sharing.publish import publish

        with self._publish_lock:
            return publish(self.engine, _ctx(ctx), targets, dry_run=bool(dry_run), budget=budget, sync=bool(sync))

    def branch_diff(self, ctx: api.Ctx, source: str) -> api.BranchMergeReport:
        from mnemo.core import sharing

        return sharing.branch_diff(self.engine, _ctx(ctx), source)

    def branch_merge(self, ctx: api.Ctx, source: str) -> api.BranchMergeReport:
        from mnemo.core import sharing

        return sharing.branch_merge(self.engine, _ctx(ctx), source)

    def branch_delete(self, ctx: api.Ctx, name: str, force: bool = False) -> api.BranchDelete:
        from mnemo.core import sharing

        return sharing.branch_delete(self.engine, _ctx(ctx), name, force)

    def merged_branches(self, ctx: api.Ctx, queue: bool = True) -> api.MergedBranches:
        from mnemo.core import sharing

        return sharing.merged_branches(self.engine, _ctx(ctx), queue)

    def decay(self, ctx: api.Ctx, now: float | str | None = None, dry_run: bool = False,
              force: bool = False) -> api.DecayReport:
        from mnemo.core import lifecycle

        at = lifecycle.check_decay_time(now, force=bool(force or dry_run))  # a future time: force, or a dry run
        return lifecycle.decay(self.engine, _ctx(ctx), at, dry_run=bool(dry_run))

    def compact(self, ctx: api.Ctx) -> api.CompactReport:
        from mnemo.core import lifecycle

        return lifecycle.compact(self.engine, _ctx(ctx))

    def restore(self, ctx: api.Ctx, memory_id: str) -> api.MemoryChange:
        from mnemo.core import lifecycle
        from mnemo.core.memory import history

        if history.is_forgotten(self.engine, memory_id):  # a forgotten memory, back from its tombstone
            return history.unforget(self.engine, _ctx(ctx), memory_id)
        return lifecycle.restore(self.engine, _ctx(ctx), memory_id)

    def anchor(self, ctx: api.Ctx, memory_id: str, anchor: api.Anchor) -> api.MemoryChange:
        from mnemo.core import lifecycle

        return lifecycle.anchor(self.engine, _ctx(ctx), memory_id, anchor)

    def unanchor(self, ctx: api.Ctx, memory_id: str, path: str | None = None,
                 symbol: str | None = None) -> api.MemoryChange:
        from mnemo.core import lifecycle

        return lifecycle.unanchor(self.engine, _ctx(ctx), memory_id, path, symbol)

    def check_anchors(self, ctx: api.Ctx, path: str, symbols: list[api.CodeSymbol] | None) -> api.AnchorCheck:
        from mnemo.core import lifecycle

        return lifecycle.check_anchors(self.engine, _ctx(ctx), path, symbols)

    def check_anchor_files(self, ctx: api.Ctx, paths: list[str] | None = None) -> api.AnchorsCheck:
        from mnemo.core.lifecycle.anchors import check_files

        if paths is not None and (not isinstance(paths, list) or not all(isinstance(p, str) for p in paths)):
            raise InvalidInput("paths must be a list of file paths", hint='e.g. ["src/pay.py"]')
        return check_files(self.engine, _ctx(ctx), paths)

    # -- doctor ----------------------------------------------------------------------------------------------
    def doctor(self, ctx: api.Ctx) -> api.DoctorResult:
        from mnemo.core.recovery.doctor import run_checks

        return run_checks(self.engine, _ctx(ctx))

    # -- team, hand-off --------------------------------------------------------------------------------------
    def team_status(self, ctx: api.Ctx) -> api.TeamStatus:
        from mnemo.core.team.ops import team_status

        return team_status(self.engine, _ctx(ctx))

    def recent_context(self, ctx: api.Ctx, limit: int = 10, days: float = 14.0) -> api.RecentContext:
        from mnemo.core.agent.recent import recent_context

        return recent_context(self.engine, _ctx(ctx), limit, days)

    # -- the editor's context (core/memory/anchored_to_file.py) -------------------------------------------------------------
    def hover_context(self, ctx: api.Ctx, path: str | None = None, line: int | None = None, symbol: str | None = None,
                      query: str | None = None, limit: int = 5, include_docs: bool = True,
                      min_confidence: float | None = None, skills: bool = True, max_skills: int | None = None,
                      token_budget: int | None = None) -> api.HoverContext:
        """What an editor shows at a position, in one round trip: the recall cards for `query` (none without one),
        the memories anchored to `symbol` in `path` (outside any symbol: to the lines around `line`) as cards with
        their stale state, every anchor of the file (`file_anchors`, for code lenses), and the skills active for
        the file (`skills`: activate_skills' answer; None when not asked for)."""
        from mnemo.core.memory.anchored_to_file import anchored_context, check_position
        from mnemo.core.memory.recall import recall

        st = trace.current()  # bench runs only: the stages of this request
        c = _ctx(ctx)
        check_position(path, line, symbol)
        if query is not None and not isinstance(query, str):
            raise InvalidInput(f"hover_context: query must be a string, got {type(query).__name__}")
        out: api.HoverContext = {"path": path, "symbol": symbol, "cards": [], "warnings": [], "anchored": [],
                                 "file_anchors": {}, "skills": None}
        st.mark("context")
        if trace.enabled() and query is not None:  # was the query's embedding ready (the lens pass asked it)?
            st.note("embedded", (self.engine.model_id, query) in self.engine._embed_cache)  # noqa: SLF001
        if query is not None:
            recalled = recall(self.engine, c, query, limit=limit, include_docs=include_docs,
                              min_confidence=min_confidence)
            out["cards"], out["warnings"] = recalled["cards"], recalled["warnings"]
            st.mark("recall")
        if path:
            out.update(anchored_context(self.engine, c, path, symbol, line))
            st.mark("anchored")
        self._fresh(c, [*out["cards"], *out["anchored"]])
        st.mark("fresh")
        if skills:
            try:
                out["skills"] = self.activate_skills(ctx, path, None, max_skills=max_skills, token_budget=token_budget)
            except MnemoError as exc:  # skills must not take the memories of a hover down with them
                log.warning("hover_context: skills: %s", exc)
                out["skills"] = {"activations": [], "total_tokens": 0, "error": str(exc)}
            st.mark("skills")
        return out

    def memory_cards(self, ctx: api.Ctx, ids: list[str]) -> api.MemoryCards:
        """The card of each memory (the one recall shows, unscored) and its record, for an editor that opens
        memories by id; ids not visible from this project are `missing`."""
        from mnemo.core.memory.anchored_to_file import memory_cards

        return memory_cards(self.engine, _ctx(ctx), ids)

    # -- what agents receive without asking (core/agent/context_block.py), session hand-offs (core/agent/handoff.py) -----------
    def context(self, ctx: api.Ctx, file: str | None = None, message: str | None = None, *, event: str = "context",
                session: str | None = None, budget: int | None = None, learn: str | None = None,
                client: str | None = None, source: str | None = None, min_confidence: float | None = None,
                commit: bool = True, symbol: str | None = None, line: int | None = None) -> api.ContextBlock:
        """The context block for an event (session-start | prompt | pre-tool | context), never repeating what the
        session (`session`) already received, under `budget` tokens; `learn` (off | confirm | auto) files the
        corrections a prompt states. Used by the hooks, `mnemo context`, MCP and the editor."""
        from mnemo.core.agent.context_block import build_context

        # core/agent/context_block.py builds the block untyped (typing it there is left to its own change)
        return cast(api.ContextBlock, build_context(self.engine, _ctx(ctx), file=file, message=message, event=event, session=session,
                             budget=budget, learn=learn, client=client, source=source,
                             min_confidence=min_confidence, commit=commit, symbol=symbol, line=line))

    def context_commit(self, ctx: api.Ctx, session: str | None = None, keys: list[str] | None = None,
                       last_file: str | None = None, reset: bool = False) -> api.ContextCommit:
        """Record what a session received (a hook calls it once the agent has the block: `context(commit=False)`
        leaves that to it, so a block lost to a timeout is not counted as given)."""
        from mnemo.core.agent.context_block import commit

        _ctx(ctx)
        return {"session": session, "seen": commit(self.engine.home, session, keys or [], last_file, bool(reset))}

    def session_end(self, ctx: api.Ctx, session: str | None = None, summary: dict | None = None,
                    client: str | None = None) -> api.SessionEnd:
        """Write the session's hand-off note from its summary and forget what the session was given."""
        from mnemo.core.agent import sessions
        from mnemo.core.agent.handoff import write_handoff

        c = _ctx(ctx)
        session = sessions.check_session(session)
        res = write_handoff(self.engine, c, summary or {}, session=session, client=client)
        out: api.SessionEnd = {"handoff": res, "session_cleared": sessions.end(self.engine.home, session)}
        edited = (summary or {}).get("files_edited") if isinstance(summary, dict) else None
        if edited and isinstance(edited, list) and c.root:  # the anchors into the files the session edited
            from mnemo.core.lifecycle.anchors import check_files

            try:
                out["anchors"] = check_files(self.engine, c, [p for p in edited if isinstance(p, str)][:200])
            except MnemoError as exc:  # the hand-off is written; a failed check must not lose it
                log.warning("session end: anchor check failed: %s", exc)
        return out
