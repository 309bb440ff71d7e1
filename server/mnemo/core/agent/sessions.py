"""What an agent session has already received, so the context a hook injects never repeats itself.

One small JSON file per session under `<store>/sessions/` (named by a hash of the session id, so an id can never
be a path), written by the owner only (temp file + rename). Bounded: at most `MAX_KEYS` delivered items per session
(the oldest forgotten first), at most `MAX_SESSIONS` files (the least recently used removed), none older than
`MAX_AGE_DAYS`; the session's end removes its file. A session that was cleared or compacted starts over (its
context window no longer holds what it was given).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Any

from mnemo.core.errors import InvalidInput

MAX_KEYS = 400
MAX_SESSIONS = 200
MAX_AGE_DAYS = 7.0
MAX_ID_CHARS = 200
PRUNE_EVERY_S = 60.0

_lock = threading.Lock()
_last_prune: dict[str, float] = {}


def check_session(session: Any) -> str | None:
    if session is None or session == "":
        return None
    if not isinstance(session, str) or len(session) > MAX_ID_CHARS or not session.strip():
        raise InvalidInput(f"session must be a short id (1..{MAX_ID_CHARS} characters)",
                           hint="pass the agent's session id (Claude Code's session_id)")
    return session


def _dir(home: Path) -> Path:
    return Path(home) / "sessions"


def _path(home: Path, session: str) -> Path:
    return _dir(home) / (hashlib.sha256(session.encode("utf-8")).hexdigest()[:32] + ".json")


def _read(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


class Session:
    """One session's state: the keys of what it was given (in order) and the last file it touched."""

    def __init__(self, home: Path, session: str):
        self.home, self.id = Path(home), session
        self.path = _path(self.home, session)
        data = _read(self.path)
        self.seen: list[str] = [k for k in data.get("seen", []) if isinstance(k, str)]
        self.last_file: str | None = data.get("last_file") if isinstance(data.get("last_file"), str) else None
        self.created = float(data.get("created") or time.time())
        self._set = set(self.seen)

    def has(self, key: str) -> bool:
        return key in self._set

    def add(self, keys: list[str]) -> None:
        for k in keys:
            if k not in self._set:
                self.seen.append(k)
                self._set.add(k)
        if len(self.seen) > MAX_KEYS:
            self.seen = self.seen[-MAX_KEYS:]
            self._set = set(self.seen)

    def reset(self) -> None:
        self.seen, self._set = [], set()

    def save(self) -> None:
        d = _dir(self.home)
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        tmp = self.path.with_suffix(f".{os.getpid()}.{threading.get_ident()}.tmp")
        tmp.write_text(json.dumps({"session": self.id[:MAX_ID_CHARS], "created": self.created,
                                   "updated": time.time(), "last_file": self.last_file, "seen": self.seen}),
                       encoding="utf-8")
        os.replace(tmp, self.path)
        prune(self.home)


def open_session(home: Path, session: str | None) -> Session | None:
    return Session(home, session) if session else None


def locked():
    """The owner serializes the read-modify-write of session files (parallel tool hooks of one session)."""
    return _lock


def end(home: Path, session: str | None) -> bool:
    """The session is over: forget what it was given."""
    if not session:
        return False
    with _lock:
        try:
            _path(Path(home), session).unlink()
            return True
        except FileNotFoundError:
            return False


def prune(home: Path, now: float | None = None, force: bool = False) -> int:
    """Remove session files older than MAX_AGE_DAYS and the least recently used beyond MAX_SESSIONS."""
    now = time.time() if now is None else now
    key = str(home)
    if not force and now - _last_prune.get(key, 0.0) < PRUNE_EVERY_S:
        return 0
    _last_prune[key] = now
    files = []
    for p in _dir(Path(home)).glob("*.json"):
        with contextlib.suppress(OSError):
            files.append((p.stat().st_mtime, p))
    files.sort(reverse=True)
    removed = 0
    for n, (mtime, p) in enumerate(files):
        if n >= MAX_SESSIONS or now - mtime > MAX_AGE_DAYS * 86400:
            with contextlib.suppress(OSError):
                p.unlink()
                removed += 1
    for p in _dir(Path(home)).glob("*.tmp"):
        with contextlib.suppress(OSError):
            if now - p.stat().st_mtime > 3600:
                p.unlink()
    return removed


__all__ = ["MAX_KEYS", "MAX_SESSIONS", "Session", "check_session", "end", "locked", "open_session", "prune"]
