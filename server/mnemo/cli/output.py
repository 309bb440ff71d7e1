"""Human output (rich) and machine output (`--json`) for the CLI.

Every piece of stored or user-supplied text (notes, titles, paths, names, reasons, error messages) is data: it is
put on screen as a plain `rich.text.Text` (`line`, `say`), never parsed as console markup, and its control
characters are made visible first (`mnemo.core.text.visible`), so `[bold]` stays literal and `\\x1b[2J` cannot clear
the screen. Markup appears only in fixed strings written here.

Wrapping: on a terminal, tables and cards are laid out to its width, and lines are soft-wrapped (the terminal
folds them; no newline is ever inserted, so a command in a hint stays one line when copied). When stdout is not a
terminal nothing is wrapped at all: `mnemo skills activate --prompt > f` keeps every line of a skill body intact.
"""

from __future__ import annotations

import datetime as _dt
import json
import sys
import time
from collections.abc import Mapping, Sequence
from typing import Any

from mnemo.core.text import visible

# Width when the output is not a terminal: wide enough that no line is ever wrapped; tables fit their content.
NO_WRAP_WIDTH = 1_000_000


def is_tty(stderr: bool = False) -> bool:
    stream = sys.stderr if stderr else sys.stdout
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def console(stderr: bool = False):
    from rich.console import Console

    if is_tty(stderr):
        return Console(stderr=stderr, highlight=False, emoji=False)
    return Console(stderr=stderr, highlight=False, emoji=False, soft_wrap=True, width=NO_WRAP_WIDTH)


Part = Any  # str (data, shown as is) | (str, style) | rich Text


def line(*parts: Part) -> Any:
    """One line of output from data parts: `"text"`, `("text", "style")` or a `Text`. Never parsed as markup;
    control characters made visible."""
    from rich.text import Text

    out = Text()
    for p in parts:
        if isinstance(p, Text):
            out.append_text(p)
        elif isinstance(p, tuple):
            out.append(visible(p[0]), style=p[1])
        else:
            out.append(visible(p))
    return out


def flat(text: Any) -> str:
    """One-line form of a text (titles, table headers): whitespace runs become one space, controls visible."""
    return visible(" ".join(str(text).split()), keep="")


def say(*parts: Part, stderr: bool = False, c=None) -> None:
    """Print one line built by `line`, soft-wrapped: nothing breaks it (commands in hints stay whole)."""
    (c or console(stderr)).print(line(*parts), soft_wrap=True)


def rule(title: str, c=None) -> None:
    """A section heading: a full-width rule on a terminal, a plain line otherwise."""
    from rich.text import Text

    c = c or console()
    if c.is_terminal:
        c.rule(Text(flat(title), style="bold"))
    else:
        c.print(line(("── " + flat(title) + " ──", "bold")), soft_wrap=True)


def emit_json(obj: Any) -> None:
    sys.stdout.write(json.dumps(obj, indent=2, default=str, ensure_ascii=False) + "\n")


def age(ts: float | None) -> str:
    if not ts:
        return "-"
    secs = max(0, time.time() - ts)
    for unit, n in (("d", 86400), ("h", 3600), ("m", 60)):
        if secs >= n:
            return f"{int(secs // n)}{unit} ago"
    return "just now"


def when(ts: float | None) -> str:
    return _dt.datetime.fromtimestamp(ts).strftime("%Y-%m-%d %H:%M") if ts else "-"


STATE_STYLE = {"high": "green", "medium": "yellow", "low": "red"}


def flag_warning(flags: list[str] | None) -> str | None:
    """The warning shown before a flagged note's text (reads like instructions to an agent, hidden text)."""
    if not flags:
        return None
    from mnemo.core.safety.screen import flag_warning as warning

    return warning(flags)


def _card_meta(card: Mapping[str, Any]) -> list[str]:
    meta = [f"{card['scope']}", card["source_kind"]]
    if card["source_kind"] == "note":
        meta += [card.get("type") or "", card.get("note_kind") or ""]
        if card.get("branch"):
            meta.append(f"branch {card['branch']}")
        if (card.get("confirmations") or 1) > 1:
            meta.append(f"confirmed {card['confirmations']}x")
        if card.get("promoted_from"):
            meta.append(f"promoted from {card['promoted_from'].get('project_name')}")
        if card.get("trust") == "untrusted":
            meta.append("UNTRUSTED")
        if card.get("stale"):
            meta.append("STALE: code changed since this was written")
    if card.get("source_path"):
        lines = card.get("lines")
        meta.append(card["source_path"] + (f":{lines[0]}" if lines else ""))
    meta.append(age(card.get("updated_at")))
    return [str(m) for m in meta if m]


def card_panel(i: int, card: Mapping[str, Any], expand: bool = True):
    from rich.panel import Panel

    title = card["title"] if card["source_kind"] != "markdown" else " › ".join(card["heading_path"])
    head = line((f"{i}. ", "bold"), (flat(title), "bold"))
    warning = flag_warning(card.get("flags"))
    parts: list[Part] = [(warning + "\n", "bold red")] if warning else []
    parts += [str(card["compressed_summary"]) + "\n"]
    parts += [(f"  • {kp}\n", "dim") for kp in card.get("key_points") or []]
    parts += [(" · ".join(_card_meta(card)), "cyan"),
              (f"\n{card['item_id']}  score {card['score']:.3f}  confidence ", "dim"),
              (f"{card['confidence']:.2f} {card['confidence_state']}",
               STATE_STYLE.get(card["confidence_state"], ""))]
    return Panel(line(*parts), title=head, title_align="left", expand=expand)


def print_cards(cards: Sequence[Mapping[str, Any]], warnings: list[str] | None = None, took_ms: float | None = None) -> None:
    c = console()
    if not cards:
        c.print("[dim]nothing relevant found[/dim]")
    for i, card in enumerate(cards, start=1):
        c.print(card_panel(i, card, expand=c.is_terminal), soft_wrap=False)
    for w in warnings or []:
        say(("note:", "yellow"), " ", w, stderr=True)
    if took_ms is not None:
        say((f"{len(cards)} result(s) in {took_ms:.1f} ms", "dim"), c=c)


def _marks(m: dict[str, Any]) -> str:
    marks = []
    if m.get("deprecated"):
        marks.append("[deprecated]")
    if m.get("status") != "active":
        marks.append(f"[{m.get('status')}]")
    if m.get("confirmations", 1) > 1:
        marks.append(f"(confirmed {m['confirmations']}x)")
    if "stale_anchor" in (m.get("flags") or []):
        marks.append("[stale: code changed]")
    return " ".join(marks)


MEMORY_COLUMNS = ("id", "scope", "type", "kind", "branch", "text", "updated")
NARROW = 100  # below this many columns the table shows id and text, the rest on a second line of the cell


def print_memories(memories: list[dict[str, Any]], total: int | None = None) -> None:
    from rich.table import Table

    c = console()
    narrow = c.is_terminal and c.width < NARROW
    t = Table(show_lines=narrow, expand=c.is_terminal)
    for col in ("id", "memory") if narrow else MEMORY_COLUMNS:
        t.add_column(col, overflow="fold" if col in ("text", "kind", "memory") else "ellipsis",
                     no_wrap=col not in ("text", "kind", "memory"))
    flagged = []
    for m in memories:
        marks = _marks(m)
        warning = flag_warning(m.get("flags"))
        if warning:
            marks = ("⚠ FLAGGED " + marks).strip()
            flagged.append((m["id"], warning))
        text = line(m["text"], (" " + marks, "dim") if marks else "")
        meta = (m["scope"], m["type"], m["kind"], m.get("branch") or "*")
        if narrow:
            t.add_row(line(m["id"]), line(text, "\n", (" · ".join(map(str, meta)) + " · " + age(m["updated_at"]),
                                                       "dim")))
        else:
            t.add_row(line(m["id"]), *(line(str(v)) for v in meta), text, line(age(m["updated_at"])))
    c.print(t, soft_wrap=False)
    for mem_id, warning in flagged:
        say((f"⚠ {mem_id}: {warning}", "bold red"), c=c)
    if total is not None and total > len(memories):
        say((f"showing {len(memories)} of {total}", "dim"), c=c)


def print_kv(title: str, data: dict[str, Any]) -> None:
    from rich.tree import Tree

    tree = Tree(line((flat(title), "bold")))

    def add(node, obj):
        for k, v in obj.items():
            if isinstance(v, dict):
                add(node.add(line((flat(k), "cyan"))), v)
            else:
                node.add(line((flat(k), "cyan"), ": ", str(v)))

    add(tree, data)
    console().print(tree)


def print_error(err: Exception, as_json: bool) -> None:
    data = err.to_dict() if hasattr(err, "to_dict") else {"type": type(err).__name__, "message": str(err)}
    if as_json:
        emit_json({"error": data})
        return
    say(("error:", "bold red"), " ", str(data["message"]), stderr=True)
    if data.get("hint"):
        say(("what to do:", "yellow"), " ", str(data["hint"]), stderr=True)
