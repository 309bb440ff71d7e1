"""What a hover asks the owner and what it shows, without pygls or lsprotocol: shared by the hover feature
(`features/hover.py`) and the pre-handshake's early hover (`early_hover.py`), which answers the session's first
hover while pygls is still loading. Both paths go through these functions, so they ask the same question and render
the same Markdown (tests/e2e/test_lsp_early_hover.py compares them through real clients)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from mnemo.core.files import code_symbols as cc
from mnemo.lsp import convert


def on_definition(code: cc.CodeContext, line: int) -> bool:
    """Whether `line` is where the symbol at the cursor is defined (decorators to name), or outside any symbol."""
    sym = code.symbol
    return sym is None or sym.start_line <= line <= max(sym.start_line, sym.name_line)


def query(code: cc.CodeContext) -> tuple[str | None, str]:
    """(the symbol's qualified name or None outside any symbol, the recall query): a definition asks its symbol's
    query (`symbol_query`, the text the code lens pass recalls with), outside any symbol the identifier and line."""
    symbol = code.symbol
    return (symbol.qualname, cc.symbol_query(symbol)) if symbol is not None else (None, code.query())


def recall_limit(max_memories: int) -> int:
    """How many recall cards a hover asks for to show `max_memories` (anchored ones come first)."""
    return max(4, max_memories * 2)


def edit_links(experimental: Any) -> bool:
    """Whether the client runs `mnemo.editMemory` links in a hover: it says so in
    `capabilities.experimental.mnemoCommandLinks` (the VS Code extension does); others get no link."""
    return isinstance(experimental, dict) and "mnemo.editMemory" in (experimental.get("mnemoCommandLinks") or [])


def markdown(answer: Mapping[str, Any], code: cc.CodeContext, max_memories: int, command_links: bool) -> str | None:
    """The hover's Markdown for a `hover_context` answer: the anchored memories first, then the recall cards, at
    most `max_memories`, and the file's active skills; None when there is no memory to show."""
    anchored = answer.get("anchored") or []
    anchored_ids = {c["item_id"] for c in anchored}
    cards = [*anchored, *(c for c in answer.get("cards") or [] if c.get("item_id") not in anchored_ids)]
    cards = cards[:max_memories]
    if not cards:
        return None
    skills = answer.get("skills") or {}
    symbol = code.symbol
    return convert.hover_markdown(cards, anchored_ids, skills.get("activations", []),
                                  symbol.qualname if symbol else code.word, command_links=command_links)


__all__ = ["edit_links", "markdown", "on_definition", "query", "recall_limit"]
