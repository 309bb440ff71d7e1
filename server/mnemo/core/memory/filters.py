"""The filters recall and the list view share (`--type --kind --branch --tag --since --until --author --source
--status`, and `--search` for the list): checked once here, unknown values refused with the accepted ones named,
then applied to a memory by `matches`. Pure: no store, no model."""

from __future__ import annotations

import dataclasses
import datetime as dt
import re
import time
from typing import Any

from mnemo.core.errors import InvalidInput
from mnemo.core.models import SOURCES, check_status, check_type
from mnemo.core.text import tokenize

_RELATIVE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([smhdw])\s*$")
_UNIT = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
TIME_HINT = "give a date (2026-11-30), a date and time (2026-11-30T14:00), a time ago (12h, 7d, 2w) or epoch seconds"


@dataclasses.dataclass(frozen=True)
class Filter:
    """What a recall or a list keeps. Empty fields keep everything; `tags`: the memory carries each of them;
    `since`/`until`: its last write (`updated_at`) in that range; `branch`: written there or branch-independent;
    `search`: every word of it appears in the text, kind or tags (the list view only)."""
    types: tuple[str, ...] = ()
    kind: str | None = None
    branch: str | None = None
    tags: tuple[str, ...] = ()
    since: float | None = None
    until: float | None = None
    author: str | None = None
    source: str | None = None
    status: str | None = None
    search: str | None = None

    def by_memory_fields(self) -> bool:
        """Whether the filter asks for anything a Markdown block does not have (then docs are left out)."""
        return bool(self.types or self.kind or self.tags or self.author or self.source or self.search
                    or self.branch or self.status)

    def needs_full_rows(self) -> bool:
        """Whether it reads more than the visibility columns (type, branch, status, updated_at)."""
        return bool(self.kind or self.tags or self.author or self.source or self.search)

    def is_empty(self) -> bool:
        return self == Filter()


def parse_time(value: Any, what: str, now: float | None = None) -> float | None:
    """Epoch seconds from a number, an ISO date or date-time (UTC when it names no zone) or a time ago (7d)."""
    if value is None or value == "":
        return None
    if isinstance(value, bool):
        raise InvalidInput(f"{what} {value!r} is not a time", hint=TIME_HINT)
    if isinstance(value, int | float):
        return float(value)
    text = str(value).strip()
    m = _RELATIVE.match(text)
    if m:
        return (time.time() if now is None else now) - float(m.group(1)) * _UNIT[m.group(2)]
    try:
        return float(text)
    except ValueError:
        pass
    try:
        parsed = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidInput(f"{what} {text[:40]!r} is not a time I can read", hint=TIME_HINT) from None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.UTC)
    return parsed.timestamp()


def _words(value: Any, what: str, limit: int = 64) -> str | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str) or len(value) > limit:
        raise InvalidInput(f"{what} must be a short text (at most {limit} characters)")
    return value.strip() or None


def _list(value: Any, what: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list | tuple) or not all(isinstance(v, str) for v in value):
        raise InvalidInput(f"{what} must be a list of words")
    return tuple(v.strip() for v in value if v.strip())


def make_filter(*, types: Any = None, kind: Any = None, branch: Any = None, tags: Any = None, since: Any = None,
                until: Any = None, author: Any = None, source: Any = None, status: Any = None,
                search: Any = None) -> Filter:
    """A checked `Filter`: an unknown type, source or status, or a time that does not read, is refused and names
    what is accepted."""
    types_t = _list(types, "types")
    for t in types_t:
        check_type(t)
    source = _words(source, "source")
    if source is not None and source not in SOURCES:
        raise InvalidInput(f"unknown source {source!r}", hint=f"use one of: {', '.join(SOURCES)}")
    status = _words(status, "status")
    if status is not None:
        check_status(status)
    start, end = parse_time(since, "since"), parse_time(until, "until")
    if start is not None and end is not None and start > end:
        raise InvalidInput("since is after until: nothing can match", hint="swap them, or drop one")
    return Filter(types=types_t, kind=_words(kind, "kind"), branch=_words(branch, "branch", 255),
                  tags=_list(tags, "tags"), since=start, until=end, author=_words(author, "author", 255),
                  source=source, status=status, search=_words(search, "search", 1000))


def matches(m: Any, f: Filter) -> bool:
    """Whether memory `m` (a `Memory`, or the visibility columns of its row for the fields they hold) passes."""
    if f.types and m.type not in f.types:
        return False
    if f.status and m.status != f.status:
        return False
    if f.branch and m.branch not in (None, f.branch):
        return False
    if f.since is not None and m.updated_at < f.since:
        return False
    if f.until is not None and m.updated_at > f.until:
        return False
    if not f.needs_full_rows():
        return True
    if f.kind and m.kind != f.kind:
        return False
    if f.author and m.author != f.author:
        return False
    if f.source and m.source != f.source:
        return False
    if f.tags and not set(f.tags) <= set(m.tags):
        return False
    if f.search:
        hay = set(tokenize(" ".join([m.text, m.kind, *m.tags]), stem=True))
        if not set(tokenize(f.search, stem=True)) <= hay:
            return False
    return True

