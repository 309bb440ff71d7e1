"""A session's hand-off note, written without a model from what the session did, so the next one starts there.

The client (the session-end hook) reads its agent's transcript and sends a summary: the last requests, the files
edited, the commands that failed, the last reply. This module turns it into one short note of kind `handoff`
(type project: on this branch), which `recent_context` and the next session's start show first. Secrets in the
summary (a token in a failed command line) are redacted, never refused: a hand-off must not be lost to them.
Hand-offs are a log of what happened, not a claim, so they land active whatever the write policy.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from mnemo.core.errors import InvalidInput
from mnemo.core.memory.write import remember
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


def write_handoff(engine: Engine, ctx: Context, summary: dict[str, Any], *, session: str | None = None,
                  client: str | None = None) -> dict[str, Any]:
    """Store the note (nothing when the session did nothing worth handing off)."""
    text = compose(summary, client, ctx.branch)
    if not text:
        return {"status": "empty", "memory": None, "message": "nothing to hand off"}
    text, _found = redact_secrets(text)
    prov = {"handoff": {"client": client, "session": (session or "")[:200] or None, "at": time.time(),
                        "transcript": _short(summary.get("transcript") or "", 300) or None}}
    return remember(engine, ctx, text, type="project", kind="handoff", tags=["handoff", "auto"], importance=0.4,
                    source="agent", status="active", provenance=prov)


__all__ = ["compose", "write_handoff"]
