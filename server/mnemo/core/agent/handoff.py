"""A session's hand-off note, written without a model from what the session did, so the next one starts there.

The client (the session-end hook) reads its agent's transcript and sends a summary: the last requests, the files
edited, the commands that failed, the last reply. This module turns it into one short note of kind `handoff`
(type project: on this branch), which `recent_context` and the next session's start show first. Secrets in the
summary (a token in a failed command line) are redacted, never refused: a hand-off must not be lost to them.
Hand-offs are a log of what happened, not a claim, so they land active whatever the write policy and are never
weighed against other notes as a conflict (a flagged one, instruction-like text from the transcript, still waits in
Review like any agent note). A newer hand-off of the same session (its end fired again, e.g. with another reason)
replaces the older one: the older is superseded by it and stays in history.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from mnemo.core.errors import InvalidInput
from mnemo.core.memory.write import confirm, draft, find_duplicate, land
from mnemo.core.safety.screen import redact_secrets
from mnemo.core.text import strip_controls

if TYPE_CHECKING:
    from mnemo.core.engine import Engine
    from mnemo.core.models import Context

MAX_REQUESTS = 3
MAX_FILES = 12
MAX_FAILED = 4
MAX_NOTE_CHARS = 1800


def _short(text: Any, limit: int) -> str:
    s = " ".join(strip_controls(str(text or "")).split())
    return s if len(s) <= limit else s[: limit - 1].rsplit(" ", 1)[0] + "…"


def _strings(value: Any, name: str, limit: int) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidInput(f"summary.{name} must be a list")
    return [str(v) for v in value if isinstance(v, str | int | float) and str(v).strip()][-limit:]


def compose(summary: dict[str, Any], client: str | None = None, branch: str | None = None) -> str:
    """The note's text: what was asked last, what was edited, what failed, how it ended."""
    if not isinstance(summary, dict):
        raise InvalidInput("summary must be an object", hint="{requests: [...], files_edited: [...], ...}")
    requests = _strings(summary.get("requests"), "requests", MAX_REQUESTS)
    files = _strings(summary.get("files_edited"), "files_edited", 100)
    failed = summary.get("failed_commands") or []
    if not isinstance(failed, list):
        raise InvalidInput("summary.failed_commands must be a list")
    head = f"Session hand-off ({client or 'agent'}"
    if branch:
        head += f", branch {branch}"
    if summary.get("reason"):
        head += f", ended: {_short(summary['reason'], 40)}"
    parts = [head + ")."]
    if requests:
        parts.append("Last requests: " + "; ".join(f'"{_short(r, 220)}"' for r in requests) + ".")
    if files:
        shown = [_short(f, 120) for f in files[-MAX_FILES:]]
        more = f" (+{len(files) - len(shown)} more)" if len(files) > len(shown) else ""
        parts.append("Files edited: " + ", ".join(shown) + more + ".")
    bad = []
    for f in failed[-MAX_FAILED:]:
        if isinstance(f, dict) and f.get("command"):
            err = _short(f.get("error") or "", 140)
            bad.append(f"`{_short(f['command'], 160)}`" + (f" ({err})" if err else ""))
    if bad:
        parts.append("Commands that failed: " + "; ".join(bad) + ".")
    if summary.get("last_reply"):
        parts.append(f'Last reply: "{_short(summary["last_reply"], 300)}"')
    if len(parts) == 1:
        return ""
    text = "\n".join(parts)
    return text if len(text) <= MAX_NOTE_CHARS else text[: MAX_NOTE_CHARS - 1] + "…"


def earlier_handoffs(engine: Engine, ctx: Context, session: str | None) -> list:
    """This project's active hand-offs written by the same session (its end can fire more than once)."""
    if not session:
        return []
    return [m for m in engine.store.listed(ctx.project_id, ("project",), kind="handoff", status="active")
            if not m.superseded_by and not m.deprecated
            and ((m.provenance or {}).get("handoff") or {}).get("session") == session]


def write_handoff(engine: Engine, ctx: Context, summary: dict[str, Any], *, session: str | None = None,
                  client: str | None = None) -> dict[str, Any]:
    """Store the note (nothing when the session did nothing worth handing off); it replaces the same session's
    earlier hand-off."""
    text = compose(summary, client, ctx.branch)
    if not text:
        return {"status": "empty", "memory": None, "message": "nothing to hand off"}
    text, _found = redact_secrets(text)
    session = (session or "")[:200] or None
    prov = {"handoff": {"client": client, "session": session, "at": time.time(),
                        "transcript": _short(summary.get("transcript") or "", 300) or None}}
    mem, suspicious = draft(ctx, text, type="project", kind="handoff", tags=["handoff", "auto"], importance=0.4,
                            source="agent", status="active", provenance=prov)
    if suspicious:  # instruction-like text from the transcript: waits in Review like any flagged agent note
        res = land(engine, ctx, mem, suspicious, "review")
        engine.changed()
        return dict(res)  # a remember result, as a plain dict like this function's other answers
    store, now = engine.store, time.time()
    same = find_duplicate(engine, ctx, mem.content_hash, mem.branch)
    if same is not None:  # the very same hand-off again
        with store.write() as c:
            confirm(c, store, same.id, mem.importance, now)
        return {"status": "confirmed", "memory": store.record(same.id),
                "message": "the same hand-off is already stored", "conflicts": []}
    older = earlier_handoffs(engine, ctx, session)
    vec = engine.embed([mem.text])[0]
    with store.write() as c:
        store.insert_memory(c, mem, vec, engine.model_id)
        for old in older:
            store.update_memory(c, old.id, reindex=True, superseded_by=mem.id, updated_at=now)
    engine.changed()
    message = "hand-off written"
    if older:
        message += (f"; it replaces {', '.join(o.id for o in older)} (this session's earlier hand-off, kept in "
                    "history)")
    return {"status": "created", "memory": store.record(mem.id), "message": message,
            "conflicts": [], "replaced": [o.id for o in older]}


__all__ = ["compose", "earlier_handoffs", "write_handoff"]
