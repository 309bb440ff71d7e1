"""Human output (rich) and machine output (`--json`) for the CLI."""

from __future__ import annotations

import datetime as _dt
import json
import sys
import time
from typing import Any


def console(stderr: bool = False):
    from rich.console import Console

    return Console(stderr=stderr, highlight=False, soft_wrap=False)


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
    from mnemo.core.safety import flag_warning as warning

    return warning(flags)


def print_cards(cards: list[dict[str, Any]], warnings: list[str] | None = None, took_ms: float | None = None) -> None:
    from rich.panel import Panel
    from rich.text import Text

    c = console()
    if not cards:
        c.print("[dim]nothing relevant found[/dim]")
    for i, card in enumerate(cards, start=1):
        head = Text()
        head.append(f"{i}. ", style="bold")
        head.append(card["title"] if card["source_kind"] != "markdown" else " › ".join(card["heading_path"]),
                    style="bold")
        body = Text()
        warning = flag_warning(card.get("flags"))
        if warning:
            body.append(warning + "\n", style="bold red")
        body.append(card["compressed_summary"] + "\n")
        for kp in card.get("key_points") or []:
            body.append(f"  • {kp}\n", style="dim")
        meta = [f"{card['scope']}", card["source_kind"]]
        if card["source_kind"] == "note":
            meta += [card.get("type") or "", card.get("note_kind") or ""]
            if card.get("branch"):
                meta.append(f"branch {card['branch']}")
            if (card.get("confirmations") or 1) > 1:
                meta.append(f"confirmed {card['confirmations']}x")
            if card.get("promoted_from"):
                pf = card["promoted_from"]
                meta.append(f"promoted from {pf.get('project_name')}")
            if card.get("trust") == "untrusted":
                meta.append("UNTRUSTED")
        if card.get("source_path"):
            lines = card.get("lines")
            meta.append(card["source_path"] + (f":{lines[0]}" if lines else ""))
        meta.append(age(card.get("updated_at")))
        body.append(" · ".join(m for m in meta if m), style="cyan")
        body.append(f"\n{card['item_id']}  score {card['score']:.3f}  confidence ", style="dim")
        body.append(f"{card['confidence']:.2f} {card['confidence_state']}", style=STATE_STYLE[card["confidence_state"]])
        c.print(Panel(body, title=head, title_align="left", expand=True))
    for w in warnings or []:
        console(stderr=True).print(f"[yellow]note:[/yellow] {w}")
    if took_ms is not None:
        c.print(f"[dim]{len(cards)} result(s) in {took_ms:.1f} ms[/dim]")


def print_memories(memories: list[dict[str, Any]], total: int | None = None) -> None:
    from rich.table import Table

    t = Table(show_lines=False, expand=True)
    for col in ("id", "scope", "type", "kind", "branch", "text", "updated"):
        t.add_column(col, overflow="fold" if col == "text" else "ellipsis", no_wrap=col != "text")
    flagged = []
    for m in memories:
        marks = []
        warning = flag_warning(m.get("flags"))
        if warning:
            marks.append("⚠ FLAGGED")
            flagged.append((m["id"], warning))
        if m.get("deprecated"):
            marks.append("[deprecated]")
        if m.get("status") != "active":
            marks.append(f"[{m.get('status')}]")
        if m.get("confirmations", 1) > 1:
            marks.append(f"(confirmed {m['confirmations']}x)")
        t.add_row(m["id"], m["scope"], m["type"], m["kind"], m.get("branch") or "*",
                  m["text"] + (" " + " ".join(marks) if marks else ""), age(m["updated_at"]))
    c = console()
    c.print(t)
    for mem_id, warning in flagged:
        c.print(f"⚠ {mem_id}: {warning}", style="bold red", markup=False)
    if total is not None and total > len(memories):
        c.print(f"[dim]showing {len(memories)} of {total}[/dim]")


def print_kv(title: str, data: dict[str, Any]) -> None:
    from rich.tree import Tree

    tree = Tree(f"[bold]{title}[/bold]")

    def add(node, obj):
        for k, v in obj.items():
            if isinstance(v, dict):
                add(node.add(f"[cyan]{k}[/cyan]"), v)
            else:
                node.add(f"[cyan]{k}[/cyan]: {v}")

    add(tree, data)
    console().print(tree)


def print_error(err: Exception, as_json: bool) -> None:
    data = err.to_dict() if hasattr(err, "to_dict") else {"type": type(err).__name__, "message": str(err)}
    if as_json:
        emit_json({"error": data})
        return
    c = console(stderr=True)
    c.print(f"[bold red]error:[/bold red] {data['message']}")
    if data.get("hint"):
        c.print(f"[yellow]what to do:[/yellow] {data['hint']}")
