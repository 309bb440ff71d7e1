"""The one service API that every surface (CLI, language server, MCP server) calls.

`Service` is the protocol; `LocalService` is the in-process implementation over an `Engine` (used by the owner
process and by tests); `mnemo.daemon.client.DaemonService` implements the same protocol over the owner's socket.
Every method takes the caller's `ctx` (a `Context` as a dict: project, branch, user, derived from the workspace)
and returns plain JSON-compatible data.
"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from mnemo import PROTOCOL_VERSION, __version__
from mnemo.core.errors import InvalidInput, MnemoError
from mnemo.core.models import Context

log = logging.getLogger("mnemo.service")

Progress = Callable[[dict[str, Any]], None]

# The core modules are imported inside the methods: every client imports this module (daemon/client.py reads
# SERVICE_METHODS), and a client (the language server above all) must start without the core's dependencies.

# The methods a remote client may call; the daemon refuses anything else.
SERVICE_METHODS = frozenset({
    "health", "remember", "recall", "hydrate", "get_memory", "promote", "deprecate", "forget", "list_memories",
    "stats", "index_docs", "skills_list", "skills_check", "activate_skills", "doctor",
    "team_status", "recent_context",
    # lifecycle, review and sharing (core/lifecycle/, core/review.py, core/sharing/)
    "review_list", "review_resolve", "snapshot_export", "snapshot_diff", "snapshot_merge", "branch_diff",
    "branch_merge", "branch_delete", "decay", "compact", "anchor", "check_anchors", "merged_branches", "restore",
})


class Service(Protocol):
    def health(self) -> dict[str, Any]: ...
    def remember(self, ctx: dict, text: str, **kw: Any) -> dict[str, Any]: ...
    def recall(self, ctx: dict, query: str, **kw: Any) -> dict[str, Any]: ...
    def hydrate(self, ctx: dict, item_id: str, mode: str = "default") -> dict[str, Any]: ...
    def get_memory(self, ctx: dict, memory_id: str) -> dict[str, Any]: ...
    def promote(self, ctx: dict, memory_id: str, to: str = "global") -> dict[str, Any]: ...
    def deprecate(self, ctx: dict, memory_id: str, reason: str | None = None) -> dict[str, Any]: ...
    def forget(self, ctx: dict, memory_id: str, reason: str | None = None) -> dict[str, Any]: ...
    def list_memories(self, ctx: dict, **kw: Any) -> dict[str, Any]: ...
    def stats(self, ctx: dict) -> dict[str, Any]: ...
    def index_docs(self, ctx: dict, root: str | None = None, progress: Progress | None = None) -> dict[str, Any]: ...
    def skills_list(self, ctx: dict) -> dict[str, Any]: ...
    def skills_check(self, ctx: dict) -> dict[str, Any]: ...
    def activate_skills(self, ctx: dict, file: str | None = None, message: str | None = None,
                        **kw: Any) -> dict[str, Any]: ...
    def doctor(self, ctx: dict) -> dict[str, Any]: ...
    def team_status(self, ctx: dict) -> dict[str, Any]: ...
    def recent_context(self, ctx: dict, limit: int = 10, days: float = 14.0) -> dict[str, Any]: ...


WRITE_POLICIES = ("auto", "confirm")


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


class LocalService:
    """In-process implementation: the owner process serves it; tests use it directly."""

    def __init__(self, engine):
        self.engine = engine
        self._skill_engines: dict[str, Any] = {}
        self._skills_lock = threading.Lock()
        from mnemo.core.team.ops import attach

        attach(engine)  # resumes sending team promotions queued before a restart (no-op without a team server)

    # -- health ----------------------------------------------------------------------------------------------
    def health(self) -> dict[str, Any]:
        from mnemo.core import config

        idx = self.engine.index
        return {"version": __version__, "protocol": PROTOCOL_VERSION, "pid": os.getpid(),
                "home": str(self.engine.home), "index_ready": bool(idx and idx.ready),
                "model_loaded": self.engine.model_loaded,
                "config": config.owner_view(self.engine.home)}  # what it applies: `mnemo daemon status`

    # -- memories --------------------------------------------------------------------------------------------
    def remember(self, ctx: dict, text: str, **kw: Any) -> dict[str, Any]:
        c = _ctx(ctx)
        policy = write_policy(c)  # checked on every write: a bad value is refused, not ignored
        if kw.get("source", "user") == "agent" and policy == "confirm" and "status" not in kw:
            kw["status"] = "pending"
        from mnemo.core.write import remember

        return remember(self.engine, c, text, **kw)

    def recall(self, ctx: dict, query: str, **kw: Any) -> dict[str, Any]:
        from mnemo.core.recall import recall

        return recall(self.engine, _ctx(ctx), query, **kw)

    def hydrate(self, ctx: dict, item_id: str, mode: str = "default") -> dict[str, Any]:
        from mnemo.core.recall import hydrate

        return hydrate(self.engine, _ctx(ctx), item_id, mode)

    def get_memory(self, ctx: dict, memory_id: str) -> dict[str, Any]:
        from mnemo.core import memories

        return memories.get(self.engine, _ctx(ctx), memory_id).to_dict()

    def promote(self, ctx: dict, memory_id: str, to: str = "global") -> dict[str, Any]:
        from mnemo.core import memories

        return memories.promote(self.engine, _ctx(ctx), memory_id, to)

    def deprecate(self, ctx: dict, memory_id: str, reason: str | None = None) -> dict[str, Any]:
        from mnemo.core import memories

        return memories.deprecate(self.engine, _ctx(ctx), memory_id, reason)

    def forget(self, ctx: dict, memory_id: str, reason: str | None = None) -> dict[str, Any]:
        from mnemo.core import memories

        return memories.forget(self.engine, _ctx(ctx), memory_id, reason)

    def list_memories(self, ctx: dict, **kw: Any) -> dict[str, Any]:
        from mnemo.core import memories

        return memories.list_memories(self.engine, _ctx(ctx), **kw)

    def stats(self, ctx: dict) -> dict[str, Any]:
        from mnemo.core import memories
        from mnemo.core.lifecycle import tier_index

        out = memories.stats(self.engine, _ctx(ctx))
        out["tiers"] = tier_index(self.engine, _ctx(ctx))  # hot / warm / cold, like an index of the memory
        return out

    def index_docs(self, ctx: dict, root: str | None = None, progress: Progress | None = None) -> dict[str, Any]:
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

    def _skill_embedder(self):
        """The embedder of skill activation. Skills are embedded on this machine only (vectors cached in the
        store's home, never shared), so they can use a faster model than memories: by default the int8 export of
        the same MiniLM (~2.4x faster query embedding, same MetaTool accuracy; docs/benchmarks.md), when memories
        use the float ONNX model. MNEMO_SKILL_EMBEDDER=same uses the memory embedder; a kind name forces one."""
        from mnemo.core.embeddings import MODEL_ID, get_embedder

        base = self.engine.embedder
        from mnemo.core import config

        choice = os.environ.get("MNEMO_SKILL_EMBEDDER", "").strip().lower() or str(config.value("skill_embedder"))
        if choice == "same":
            return base
        if choice != "auto":
            return get_embedder(choice)
        if getattr(base, "backend", None) != "onnx" or getattr(base, "model_id", None) != MODEL_ID:
            return base                      # torch, hash (tests) or a caller's own embedder: keep it
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

    def skills_list(self, ctx: dict) -> dict[str, Any]:
        eng = self._skills(_ctx(ctx))
        return {"skills": [s.to_dict() for s in eng.skills()]}

    def skills_check(self, ctx: dict) -> dict[str, Any]:
        c = _ctx(ctx)
        eng = self._skills(c)
        out = eng.check().to_dict()
        out["held"] = self._holds(c, eng)
        return out

    def activate_skills(self, ctx: dict, file: str | None = None, message: str | None = None,
                        **kw: Any) -> dict[str, Any]:
        from mnemo.core.skills import render_prompt_block

        c = _ctx(ctx)
        eng = self._skills(c)
        eng.maybe_refresh()  # an edited skill file gets its new content's hold state at once
        self._holds(c, eng)
        result = eng.activate(file, message, **kw)
        out = result.to_dict()
        out["prompt_block"] = render_prompt_block(result)
        return out

    # -- lifecycle, review and sharing (core/lifecycle/, core/review.py, core/sharing/) ---------------------
    def review_list(self, ctx: dict, kind: str | None = None, include_resolved: bool = False) -> dict[str, Any]:
        from mnemo.core import review

        return review.review_list(self.engine, _ctx(ctx), kind, include_resolved)

    def review_resolve(self, ctx: dict, review_id: int, resolution: str) -> dict[str, Any]:
        from mnemo.core import review

        return review.review_resolve(self.engine, _ctx(ctx), review_id, resolution)

    def snapshot_export(self, ctx: dict, path: str, scopes: list[str] | None = None,
                        branches: list[str] | None = None) -> dict[str, Any]:
        from mnemo.core import sharing

        return sharing.export_snapshot(self.engine, _ctx(ctx), path, scopes, branches)

    def snapshot_diff(self, ctx: dict, path: str, strategy: str = "newer_wins") -> dict[str, Any]:
        from mnemo.core import sharing

        return sharing.diff_snapshot(self.engine, _ctx(ctx), path, strategy)

    def snapshot_merge(self, ctx: dict, path: str, strategy: str = "newer_wins",
                       progress: Progress | None = None) -> dict[str, Any]:
        from mnemo.core import sharing

        return sharing.merge_snapshot(self.engine, _ctx(ctx), path, strategy, progress=progress)

    def branch_diff(self, ctx: dict, source: str) -> dict[str, Any]:
        from mnemo.core import sharing

        return sharing.branch_diff(self.engine, _ctx(ctx), source)

    def branch_merge(self, ctx: dict, source: str) -> dict[str, Any]:
        from mnemo.core import sharing

        return sharing.branch_merge(self.engine, _ctx(ctx), source)

    def branch_delete(self, ctx: dict, name: str, force: bool = False) -> dict[str, Any]:
        from mnemo.core import sharing

        return sharing.branch_delete(self.engine, _ctx(ctx), name, force)

    def merged_branches(self, ctx: dict, queue: bool = True) -> dict[str, Any]:
        from mnemo.core import sharing

        return sharing.merged_branches(self.engine, _ctx(ctx), queue)

    def decay(self, ctx: dict, now: float | str | None = None, dry_run: bool = False,
              force: bool = False) -> dict[str, Any]:
        from mnemo.core import lifecycle

        at = lifecycle.check_decay_time(now, force=bool(force or dry_run))  # a future time: force, or a dry run
        return lifecycle.decay(self.engine, _ctx(ctx), at, dry_run=bool(dry_run))

    def compact(self, ctx: dict) -> dict[str, Any]:
        from mnemo.core import lifecycle

        return lifecycle.compact(self.engine, _ctx(ctx))

    def restore(self, ctx: dict, memory_id: str) -> dict[str, Any]:
        from mnemo.core import lifecycle

        return lifecycle.restore(self.engine, _ctx(ctx), memory_id)

    def anchor(self, ctx: dict, memory_id: str, anchor: dict[str, Any]) -> dict[str, Any]:
        from mnemo.core import lifecycle

        return lifecycle.anchor(self.engine, _ctx(ctx), memory_id, anchor)

    def check_anchors(self, ctx: dict, path: str, symbols: list[dict[str, Any]] | None) -> dict[str, Any]:
        from mnemo.core import lifecycle

        return lifecycle.check_anchors(self.engine, _ctx(ctx), path, symbols)

    # -- doctor ----------------------------------------------------------------------------------------------
    def doctor(self, ctx: dict) -> dict[str, Any]:
        from mnemo.core.doctor import run_checks

        return run_checks(self.engine, _ctx(ctx))

    # -- team, hand-off --------------------------------------------------------------------------------------
    def team_status(self, ctx: dict) -> dict[str, Any]:
        from mnemo.core.team.ops import team_status

        return team_status(self.engine, _ctx(ctx))

    def recent_context(self, ctx: dict, limit: int = 10, days: float = 14.0) -> dict[str, Any]:
        from mnemo.core.recent import recent_context

        return recent_context(self.engine, _ctx(ctx), limit, days)
