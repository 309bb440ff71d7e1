"""Memories as Markdown a person can read and edit (`mnemo export --format md`, `mnemo import DIR`): pure functions.

One file per scope and type (`project-project.md`, `global-user.md`, ...). Each memory is a `## ` heading (its
first line, for the reader; ignored on import), then its metadata on one compact line in a code span, then its
text as written:

    ## Retries reuse the idempotency key
    `id: mem-0f3c… · kind: decision · tags: payments, http · branch: main · anchors: src/pay.py?symbol=charge…`

    Retries reuse the idempotency key of the first attempt.

Lossless for text, type, kind, tags, anchors, branch, importance and ids: a value's separators (`%` `,` `;` `·`
and the backtick) are percent-encoded; a text line that would read as a memory heading (`## `, after any
backslashes) gets one more leading backslash, which the parser takes off. `render_file(parse_file(x)) == x` for
any file `render_file` wrote. A project memory on every branch says `branch: *`; an entry with no branch is on
the branch the import runs on.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote

from mnemo.core.errors import InvalidInput

FORMAT_LINE = "<!-- mnemo memories v1: one memory per `## ` heading; edit the text or the metadata line, add a " \
              "heading with text for a new memory; `mnemo import` reads it back -->"
SEP = " · "
_ENCODE = {"%": "%25", ",": "%2C", ";": "%3B", "`": "%60", "·": "%C2%B7", "\n": "%0A", "\r": "%0D", "\t": "%09",
           "?": "%3F", "&": "%26", "=": "%3D"}
_HEADING = re.compile(r"^(\\*)## ")
_FILE = re.compile(r"^(project|global|team)-(user|feedback|project|reference)\.md$")
DEFAULT_IMPORTANCE = 0.5
ANCHOR_KEYS = ("symbol", "kind", "hash")  # in this order after the path; lines as `lines=a-b` (1-based)


def enc(value: str) -> str:
    """A value safe inside the metadata line (its separators and the backtick percent-encoded; spaces at the ends
    too)."""
    out = "".join(_ENCODE.get(ch, ch) for ch in value)
    if out != out.strip():
        core = out.strip()
        lead, trail = out[: len(out) - len(out.lstrip())], out[len(out.rstrip()):]
        out = lead.replace(" ", "%20") + core + trail.replace(" ", "%20")
    return out


def file_name(scope: str, type_: str) -> str:
    return f"{scope}-{type_}.md"


def split_name(name: str) -> tuple[str, str] | None:
    """(scope, type) of a file `render_file` names, else None."""
    m = _FILE.match(name)
    return (m.group(1), m.group(2)) if m else None


# -- anchors ---------------------------------------------------------------------------------------------------
def _anchor_value(v: Any) -> str:
    return enc(v) if isinstance(v, str) and not v.startswith("~") else "~" + enc(json.dumps(v, sort_keys=True))


def anchor_token(a: dict[str, Any]) -> str:
    """`path?symbol=…&kind=…&lines=3-9&hash=…` (lines 1-based; other keys after, a non-string value as ~JSON)."""
    parts = []
    for key in ANCHOR_KEYS[:2]:
        if key in a:
            parts.append(f"{key}={_anchor_value(a[key])}")
    s, e = a.get("start_line"), a.get("end_line")
    plain = False
    if isinstance(s, int) and isinstance(e, int) and not isinstance(s, bool) and not isinstance(e, bool) \
            and s >= 0 and e >= 0:
        parts.append(f"lines={s + 1}-{e + 1}")
        plain = True
    if "hash" in a:
        parts.append(f"hash={_anchor_value(a['hash'])}")
    skip = {"path", *ANCHOR_KEYS, *(("start_line", "end_line") if plain else ())}
    parts += [f"{enc(k)}={_anchor_value(a[k])}" for k in sorted(a) if k not in skip]
    head = _anchor_value(a.get("path"))
    return head + ("?" + "&".join(parts) if parts else "")


def _parse_value(v: str) -> Any:
    v = unquote(v)
    return json.loads(v[1:]) if v.startswith("~") else v


def parse_anchor(token: str) -> dict[str, Any]:
    path, _, query = token.strip().partition("?")
    a: dict[str, Any] = {"path": _parse_value(path)}
    for pair in filter(None, query.split("&")):
        key, eq, value = pair.partition("=")
        if not eq:
            raise InvalidInput(f"anchor {token!r}: {pair!r} is not key=value",
                               hint="e.g. src/pay.py?symbol=charge&lines=3-9")
        key = unquote(key)
        if key == "lines":
            m = re.fullmatch(r"(\d+)-(\d+)", value)
            if not m or int(m.group(1)) < 1:
                raise InvalidInput(f"anchor {token!r}: lines must be FIRST-LAST (1-based)", hint="e.g. lines=3-9")
            a["start_line"], a["end_line"] = int(m.group(1)) - 1, int(m.group(2)) - 1
        else:
            a[key] = _parse_value(value)
    return a


# -- one memory --------------------------------------------------------------------------------------------------
def title(text: str, limit: int = 80) -> str:
    first = " ".join(next((ln for ln in text.splitlines() if ln.strip()), "").split())
    return first if len(first) <= limit else first[: limit - 1].rstrip() + "…"


def day(ts: float | None) -> str | None:
    if not isinstance(ts, int | float) or ts <= 0:
        return None
    return _dt.datetime.fromtimestamp(float(ts), _dt.UTC).strftime("%Y-%m-%d")


def meta_line(m: Mapping[str, Any]) -> str:
    """The compact metadata line of a memory record (`Memory.to_dict()` or a parsed entry)."""
    parts = [f"id: {enc(m['id'])}", f"kind: {enc(m.get('kind') or 'fact')}"]
    if m.get("tags"):
        parts.append("tags: " + ", ".join(enc(str(t)) for t in m["tags"]))
    if m.get("branch"):
        parts.append(f"branch: {enc(m['branch'])}")
    elif "branch" in m and m.get("scope", "project") == "project" and \
            m.get("type", "project") not in BRANCH_INDEPENDENT_TYPES:
        parts.append(f"branch: {ALL_BRANCHES}")  # on every branch (no entry's branch means the current one)
    imp = m.get("importance", DEFAULT_IMPORTANCE)
    if imp is not None and float(imp) != DEFAULT_IMPORTANCE:
        parts.append(f"importance: {float(imp)!r}")
    if m.get("anchors"):
        parts.append("anchors: " + "; ".join(anchor_token(a) for a in m["anchors"]))
    created = m.get("created") or day(m.get("created_at"))
    if created:
        parts.append(f"created: {created}")
    return "`" + SEP.join(parts) + "`"


def escape_body(text: str) -> str:
    return "\n".join("\\" + ln if _HEADING.match(ln) else ln for ln in text.split("\n"))


def unescape_body(lines: list[str]) -> str:
    return "\n".join(ln[1:] if _HEADING.match(ln) and ln.startswith("\\") else ln for ln in lines)


def render_entry(m: Mapping[str, Any]) -> str:
    return f"## {title(m['text'])}\n{meta_line(m)}\n\n{escape_body(m['text'])}"


def sort_key(m: Mapping[str, Any]) -> tuple[str, str]:
    return (m.get("created") or day(m.get("created_at")) or "", m.get("id") or "")


def render_file(scope: str, type_: str, memories: list[Mapping[str, Any]]) -> str:
    """The file of one scope and type: a header, then each memory (by creation day, then id)."""
    head = f"# Mnemo memories: scope {scope}, type {type_}\n\n{FORMAT_LINE}\n"
    blocks = [render_entry(m) for m in sorted(memories, key=sort_key)]
    return head + "".join("\n" + b + "\n" for b in blocks)


# -- reading it back ---------------------------------------------------------------------------------------------
_H1 = re.compile(r"^# Mnemo memories: scope (\w+), type (\w+)\s*$")
_META = re.compile(r"^`([^`]*)`\s*$")
META_KEYS = ("id", "kind", "tags", "branch", "importance", "anchors", "created")
ALL_BRANCHES = "*"  # not a git branch name (git refuses it)
BRANCH_INDEPENDENT_TYPES = ("user", "feedback")  # models.BRANCH_INDEPENDENT_TYPES (this floor is below models)


def _bad(where: str, message: str, hint: str) -> InvalidInput:
    return InvalidInput(f"{where}: {message}; nothing was imported", hint=hint)


def parse_meta(line: str, where: str) -> dict[str, Any]:
    """The fields of a metadata line (see `meta_line`)."""
    m = _META.match(line)
    assert m is not None
    out: dict[str, Any] = {}
    for part in m.group(1).split(SEP):
        key, colon, value = part.partition(": ")
        key = key.strip()
        if not colon and part.strip().endswith(":"):
            key, value = part.strip()[:-1], ""
        elif not colon:
            raise _bad(where, f"{part!r} is not `key: value`", "metadata is `id: … · kind: … · tags: a, b`")
        if key not in META_KEYS:
            raise _bad(where, f"unknown field {key!r}", f"fields are: {', '.join(META_KEYS)}")
        if key == "tags":
            out[key] = [unquote(t) for t in value.split(", ")] if value else []
        elif key == "anchors":
            out[key] = [parse_anchor(t) for t in value.split("; ") if t.strip()]
        elif key == "importance":
            try:
                out[key] = float(value)
            except ValueError:
                raise _bad(where, f"importance {value!r} is not a number", "a number from 0 to 1") from None
        elif key == "created":
            if not re.fullmatch(r"\d{4}-\d\d-\d\d", value.strip()):
                raise _bad(where, f"created {value!r} is not a date", "YYYY-MM-DD")
            out[key] = value.strip()
        elif key == "branch" and value.strip() == ALL_BRANCHES:
            out[key] = None
        else:
            out[key] = unquote(value)
    return out


def _entry(lines: list[str], first: int, name: str) -> dict[str, Any]:
    """The memory of `lines` (its heading, up to the next heading; `first`: the heading's 0-based line in the
    file): its metadata line when there is one (none: a new memory a person added), then the text."""
    where = f"{name}:{first + 1}"
    i = 1
    entry: dict[str, Any] = {"line": first + 1}
    if i < len(lines) and not _META.match(lines[i]) and re.match(r"^\s*`?\s*id:", lines[i]):
        raise _bad(f"{name}:{first + 2}", "a metadata line must be one code span (`id: … · kind: …`)",
                   "put back the backticks around the line, or remove the line to make the entry a new memory")
    if i < len(lines) and _META.match(lines[i]):
        entry.update(parse_meta(lines[i], f"{name}:{first + 2}"))
        i += 1
        if i < len(lines) and lines[i] == "":
            i += 1
    body = lines[i:]
    while body and not body[-1].strip():
        body.pop()
    while body and not body[0].strip():  # (a hand-written entry)
        body.pop(0)
    entry["text"] = unescape_body(body)
    if not entry["text"].strip():
        raise _bad(where, "a memory heading without text", "write the memory's text under its heading, or "
                                                            "remove the heading")
    return entry


def is_memories_file(text: str, name: str) -> bool:
    """Does this read as a file `render_file` wrote (its first heading, or its name)?"""
    head = text.replace("\r\n", "\n").split("\n## ", 1)[0]
    return any(_H1.match(ln) for ln in head.split("\n")) or split_name(name) is not None


def parse_file(text: str, name: str) -> tuple[str, str, list[dict[str, Any]]]:
    """(scope, type, entries) of a memories file; scope and type from its first heading, else from its name."""
    lines = text.replace("\r\n", "\n").split("\n")
    starts = [i for i, ln in enumerate(lines) if ln.startswith("## ")]
    h1 = next((_H1.match(ln) for ln in lines[: starts[0] if starts else len(lines)] if _H1.match(ln)), None)
    st = (h1.group(1), h1.group(2)) if h1 else split_name(name.rsplit("/", 1)[-1])
    if st is None:
        raise _bad(name, "not a Mnemo memories file (no `# Mnemo memories: scope …, type …` heading)",
                   "export one with `mnemo export --format md DIR`, or name it <scope>-<type>.md, e.g. "
                   "project-project.md")
    entries = [_entry(lines[s:e], s, name) for s, e in zip(starts, [*starts[1:], len(lines)], strict=True)]
    for e in entries:
        e["text"] = e["text"] if "id" in e else e["text"].strip()
    return st[0], st[1], entries
