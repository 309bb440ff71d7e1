"""Conversions between Mnemo's service data and LSP: Markdown cards, ranges in client units, errors, params.

Pure functions (no server state), unit-testable. Recalled memories are shown as quoted data with provenance, never
as instructions (SPEC §2).

Importing this module loads neither pygls nor lsprotocol (they are imported by the few functions that build their
objects): the pre-handshake's early hover (`early_hover.py`) renders the first hover with these same functions while
pygls is still loading, on a thread that must not wait for lsprotocol's import.
"""

from __future__ import annotations

import functools
import json
import math
import re
import time
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo.core.errors import MnemoError
from mnemo.core.text import visible

if TYPE_CHECKING:
    from lsprotocol import types as t
    from pygls.exceptions import JsonRpcException

REQUEST_FAILED = -32803  # LSP ErrorCodes.RequestFailed
FULL_TEXT_CHARS = 4000  # an opened memory's whole text, up to this
# lsprotocol's PositionEncodingKind values (a str enum: its members compare equal to these)
UTF8, UTF16, UTF32 = "utf-8", "utf-16", "utf-32"


def _invalid_params(message: str) -> Exception:
    from pygls.exceptions import JsonRpcInvalidParams

    return JsonRpcInvalidParams(message, data={"code": "invalid_params"})


# -- params ------------------------------------------------------------------------------------------------------
def plain(obj: Any) -> Any:
    """pygls hands unknown-method params over as namedtuples (or attrs objects): back to JSON-like data."""
    if obj is None or isinstance(obj, str | int | float | bool):
        return obj
    if hasattr(obj, "_asdict"):
        return {k: plain(v) for k, v in obj._asdict().items()}
    if isinstance(obj, Mapping):
        return {str(k): plain(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [plain(v) for v in obj]
    if hasattr(obj, "__attrs_attrs__"):
        from lsprotocol import converters

        return converters.get_converter().unstructure(obj)
    return obj


def params_object(params: Any, method: str) -> dict[str, Any]:
    """The one params object of a custom request/command; InvalidParams when it is not an object."""
    value = plain(params)
    if value is None:
        return {}
    if isinstance(value, list):  # executeCommand arguments
        if not value:
            return {}
        if len(value) == 1 and isinstance(value[0], dict):
            return value[0]
        raise _invalid_params(f"{method}: expected one object argument, got {len(value)} arguments")
    if not isinstance(value, dict):
        raise _invalid_params(f"{method}: params must be an object, got {type(value).__name__}")
    return value


def want(params: Mapping[str, Any], key: str, typ: type | tuple[type, ...], method: str, default: Any = None,
         required: bool = False) -> Any:
    value = params.get(key, default)
    if value is None:
        if required:
            raise _invalid_params(f"{method}: `{key}` is required")
        return default
    if isinstance(value, bool) and typ in (int, float):
        raise _invalid_params(f"{method}: `{key}` must be a number")
    if typ is float and isinstance(value, int):
        value = float(value)
    if not isinstance(value, typ):
        name = typ.__name__ if isinstance(typ, type) else "/".join(x.__name__ for x in typ)
        raise _invalid_params(f"{method}: `{key}` must be {name}, got {type(value).__name__}")
    return value


def snake(key: str) -> str:
    return re.sub(r"(?<=[a-z0-9])([A-Z])", lambda m: "_" + m.group(1).lower(), key)


# -- errors ------------------------------------------------------------------------------------------------------
def lsp_error(exc: MnemoError) -> JsonRpcException:
    from pygls.exceptions import JsonRpcException

    message = exc.message + (f" — {exc.hint}" if exc.hint else "")
    return JsonRpcException(message=message, code=REQUEST_FAILED, data=exc.to_dict())


# -- positions ---------------------------------------------------------------------------------------------------
@functools.lru_cache(maxsize=64)
def _resolved_root(root: str) -> Path:
    """A workspace root resolved (`detect_context` gives it resolved already: this is for the other callers)."""
    return Path(root).resolve()


def rel_path(path: str, ctx: Mapping[str, Any]) -> str:
    """A file's path (as the client's URI gives it) relative to the context's root, POSIX form; the path itself
    when it lies outside the root or there is none. The hover feature and the early hover send the same."""
    root = ctx.get("root")
    if root:
        try:
            return Path(path).resolve().relative_to(_resolved_root(root)).as_posix()
        except ValueError:
            pass
    return Path(path).as_posix()


def _units(text: str, encoding: str) -> int:
    if encoding == UTF8:
        return len(text.encode("utf-8", errors="surrogatepass"))
    if encoding == UTF32:
        return len(text)
    return len(text) + sum(1 for ch in text if ord(ch) > 0xFFFF)


def col_from_client(line_text: str, character: int, encoding: str) -> int:
    """Client column units -> code points on one line."""
    if encoding == UTF32:
        return min(character, len(line_text))
    units = 0
    for i, ch in enumerate(line_text):
        if units >= character:
            return i
        units += _units(ch, encoding)
    return len(line_text)


def col_to_client(line_text: str, col: int, encoding: str) -> int:
    return _units(line_text[:col], encoding)


def word_span(line_text: str, character: int, word: str, encoding: str) -> tuple[int, int] | None:
    """Where `word` is on `line_text` around the client column `character`, as (start, end) in client units; None
    when it is not on the line. (A hover's range: `documents.word_range`, the early hover.)"""
    col = col_from_client(line_text, character, encoding)
    start = line_text.rfind(word, 0, col + 1)
    if start < 0 or start + len(word) < col:
        start = line_text.find(word)
    if start < 0:
        return None
    return col_to_client(line_text, start, encoding), col_to_client(line_text, start + len(word), encoding)


def position(line: int, character: int) -> t.Position:
    from lsprotocol import types as t

    return t.Position(line=max(0, line), character=max(0, character))


# -- Markdown ----------------------------------------------------------------------------------------------------
def age(ts: float | None, now: float | None = None) -> str:
    if not ts:
        return "?"
    secs = max(0.0, (now or time.time()) - float(ts))
    for unit, size in (("y", 365 * 86400), ("mo", 30 * 86400), ("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= size:
            return f"{int(secs // size)}{unit} ago"
    return "just now"


# Markdown punctuation (links, images, HTML and entities, emphasis, code, headings, tables), the `:` of a bare
# `scheme://` URL and the `.` of `www.` (GFM autolinks), and a list or heading marker at the start of the text.
_MD_SPECIAL = re.compile(r"([\\`*_{}\[\]<>()#+!|~&]|:(?=//)|(?<=www)\.)")
_MD_LINE_START = re.compile(r"^(?:([-=])|(\d+)(?=[.)]))")


def md_escape(text: object) -> str:
    """Escape Markdown so stored text renders as text (never as links, HTML, entities, headings, lists or code
    blocks): one line, whitespace runs collapsed, control characters made visible."""
    out = _MD_SPECIAL.sub(r"\\\1", visible(" ".join(str(text).split()), keep=""))
    return _MD_LINE_START.sub(lambda m: "\\" + m.group(1) if m.group(1) else m.group(2) + "\\", out, count=1)


def code(text: object) -> str:
    """An inline code span (Markdown escapes do not apply inside one: drop backticks instead)."""
    return "`" + visible(str(text).replace("\n", " "), keep="").replace("`", "'") + "`"


def quote(text: str, limit: int = 400) -> str:
    flat = " ".join(text.split())
    if len(flat) > limit:
        flat = flat[:limit].rsplit(" ", 1)[0] + " …"
    return "> " + md_escape(flat)


def flag_warning(card: Mapping[str, Any]) -> str | None:
    """The warning of a flagged note (reads like instructions to an agent, hidden text), whoever wrote it."""
    flags = card.get("flags")
    if not flags:
        return None
    from mnemo.core.safety.screen import flag_warning as warning  # lazy for start-up speed (~185 ms)

    return warning(flags)


def auto_injectable(card: Mapping[str, Any]) -> bool:
    """Trust decides what is injected without a person asking: untrusted or flagged notes are not."""
    return card.get("trust") != "untrusted" and flag_warning(card) is None


def first_line(text: str, limit: int = 90) -> str:
    line = " ".join(text.split())
    return line if len(line) <= limit else line[:limit].rsplit(" ", 1)[0] + " …"


def stale_line(card: Mapping[str, Any]) -> str:
    """The warning of a memory whose anchored code changed since it was written (its `stale_anchor` item waits in
    Review), with the date it was written."""
    if not card.get("stale"):
        return ""
    ts = card.get("updated_at")
    day = time.strftime("%Y-%m-%d", time.gmtime(float(ts))) if isinstance(ts, int | float) and ts > 0 else None
    return ("**⚠ code changed since this was written**" + (f" ({day})" if day else "")
            + " · update the anchor, edit the note or deprecate it in Review\n\n")


def card_markdown(card: Mapping[str, Any], anchored_here: bool = False, now: float | None = None) -> str:
    """One compact card: the memory as a quote, then scope · branch · type/kind · age, then provenance."""
    if card.get("source_kind") == "markdown":
        where = card.get("source_path") or "docs"
        heading = " › ".join(card.get("heading_path") or []) or card.get("title") or ""
        meta = [f"doc {code(where)}", md_escape(heading), age(card.get("updated_at"), now)]
        return quote(card.get("compressed_summary") or card.get("title") or "") + "\n\n" + \
            " · ".join(x for x in meta if x)
    meta = [md_escape(card.get("scope") or "project")]
    branch = card.get("branch")
    meta.append(code(branch) if branch else "all branches")
    kind = card.get("note_kind") or card.get("kind")
    meta.append(md_escape("/".join(str(x) for x in (card.get("type"), kind) if x)))
    meta.append(age(card.get("updated_at"), now))
    if card.get("confidence") is not None:
        meta.append(md_escape(f"{card.get('confidence_state') or ''} {float(card['confidence']):.2f}".strip()))
    prov = []
    if anchored_here:
        prov.append("anchored here")
    elif card.get("anchors"):
        a = card["anchors"][0]
        prov.append(f"anchored to {code(a.get('symbol') or a.get('path'))}")
    if (card.get("confirmations") or 1) > 1:
        prov.append(f"confirmed {card['confirmations']}x")
    if card.get("source"):
        prov.append(f"from {md_escape(card['source'])}" + (f" ({md_escape(str(card['author']))})"
                                                             if card.get("author") else ""))
    pf = card.get("promoted_from")
    if pf:
        prov.append(f"promoted from {md_escape(str(pf.get('project_name') or pf.get('scope')))}")
    imp = card.get("imported_from")
    if imp:
        prov.append("imported" + (f" from {md_escape(str(imp.get('source') or imp.get('path') or ''))}"
                                  if isinstance(imp, dict) else ""))
    if card.get("trust") == "untrusted":
        prov.append("**untrusted**")
    prov.append(code(card.get("item_id")))
    text = card.get("compressed_summary") or card.get("title") or ""
    warning = flag_warning(card)
    head = f"**⚠ {md_escape(warning)}**\n\n" if warning else ""
    head += stale_line(card)
    return head + quote(text) + "\n\n" + " · ".join(x for x in meta if x) + "  \n" + " · ".join(prov)


def skills_line(activations: list[Mapping[str, Any]]) -> str:
    """The active skills and what they cost. (The skills that nearly activated, with the threshold they missed, are
    for the Skills view and `mnemo skills activate`, not for a hover.)"""
    if not activations:
        return ""
    names = ", ".join(code(str(a.get('name'))) for a in activations)
    tokens = sum(int(a.get("token_cost") or 0) for a in activations if a.get("injected", True))
    label = "skill" if len(activations) == 1 else "skills"
    return f"**Active {label}**: {names} (≈{tokens} tokens)"


def edit_link(card: Mapping[str, Any]) -> str:
    """A command link that opens the client's Edit of a local memory (`mnemo.editMemory {id}`; only for a client
    that declared it runs that link: `capabilities.experimental.mnemoCommandLinks`)."""
    mid = card.get("item_id")
    if card.get("source_kind") != "note" or not isinstance(mid, str) or not re.fullmatch(r"mem-[0-9a-f]+", mid):
        return ""
    args = urllib.parse.quote(json.dumps([{"id": mid}], separators=(",", ":")))
    return f" · [Edit](command:mnemo.editMemory?{args} \"Edit this memory\")"


def hover_markdown(cards: list[Mapping[str, Any]], anchored_ids: set[str], activations: list[Mapping[str, Any]],
                   symbol: str | None, command_links: bool = False) -> str:
    head = "**Mnemo**" + (f" · {code(symbol)}" if symbol else "")
    parts = [head]
    parts.extend(card_markdown(c, c.get("item_id") in anchored_ids) + (edit_link(c) if command_links else "")
                 for c in cards)
    sl = skills_line(activations)
    if sl:
        parts.append(sl)
    return "\n\n---\n\n".join(parts)


def lens_title(memories: int, skills: int) -> str:
    parts = [f"{memories} memor{'y' if memories == 1 else 'ies'}"]
    if skills:
        parts.append(f"{skills} skill{'' if skills == 1 else 's'}")
    return " · ".join(parts)


def estimate_tokens(text: str) -> int:
    """≈ 4 characters a token (what the injection preview shows for memories)."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


def injection_markdown(file: str | None, skills: list[Mapping[str, Any]], cards: list[Mapping[str, Any]],
                       skill_tokens: int, memory_tokens: int,
                       withheld: list[Mapping[str, Any]] | None = None) -> str:
    lines = [f"### Would be injected for {code(file or '(no file)')}", ""]
    lines.append(f"**Skills** ({len(skills)}, ≈{skill_tokens} tokens)")
    if not skills:
        lines.append("- none active")
    for a in skills:
        why = md_escape(", ".join(a.get("activated_by") or [])) or "—"
        signals = md_escape(", ".join(f"{k} {float(v):.2f}" for k, v in (a.get("signals") or {}).items()))
        lines.append(f"- {code(a.get('name'))} score {float(a.get('score') or 0):.2f} "
                     f"({why}; {signals}) · {a.get('token_cost', 0)} tokens")
    lines += ["", f"**Memories** ({len(cards)}, ≈{memory_tokens} tokens)"]
    if not cards:
        lines.append("- none relevant")
    for c in cards:
        conf = c.get("confidence")
        conf_s = f"{float(conf):.2f}" if conf is not None else "anchored"
        lines.append(f"- {md_escape(first_line(c.get('compressed_summary') or c.get('title') or ''))} "
                     f"({md_escape(c.get('scope'))}, {conf_s}, {code(c.get('item_id'))})")
    if withheld:
        lines += ["", f"**Not injected** ({len(withheld)}: untrusted or flagged; recall shows them with a warning)"]
        for c in withheld:
            why = flag_warning(c) or "untrusted: a person accepts it in Review first"
            lines.append(f"- {code(c.get('item_id'))}: {md_escape(why)}")
    lines += ["", f"**Total** ≈{skill_tokens + memory_tokens} tokens"]
    return "\n".join(lines)


def memories_markdown(cards: list[Mapping[str, Any]], memories: list[Mapping[str, Any]] | None = None,
                      symbol: str | None = None) -> str:
    """Opened memories: each one's card (the core's, as a hover shows it), then its whole text when the card's
    summary left some out (`memories`: the records, matched by id)."""
    texts = {m.get("id"): m.get("text") or "" for m in memories or []}
    head = "### Mnemo" + (f" · {code(symbol)}" if symbol else "")
    body = []
    for c in cards:
        part = card_markdown(c)
        text = texts.get(c.get("item_id"), "")
        if len(" ".join(text.split())) > len(c.get("compressed_summary") or ""):
            part += "\n\n" + quote(text, limit=FULL_TEXT_CHARS)
        body.append(part)
    return "\n\n---\n\n".join([head, *(body or ["_no memories_"])])
