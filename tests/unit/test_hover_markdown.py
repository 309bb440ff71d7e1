"""Hover Markdown: whatever a note, a kind, a path or a skill name holds, an editor shows it as text (issue 13)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo.core.text import visible
from mnemo.lsp import convert

HOSTILE = ["[click](https://evil.example)", "![img](https://evil.example/x.png)", "<img src=x onerror=alert(1)>",
           "&lt;script&gt;", "&#x202E;", "https://evil.example/path", "www.evil.example", "evil@example.com", "# Head",
           "- item", "1. item", "> quoted", "---", "***", "`code`", "**bold**", "_em_", "| a | b |", "\\", "\x1b[2J",
           "\x1b]8;;https://evil.example\x07", "\u202e", "<https://evil.example>", "[ref]: https://evil.example"]
LIVE = {"link_open", "image", "html_inline", "html_block", "heading_open", "bullet_list_open", "ordered_list_open",
        "fence", "code_block", "table_open", "em_open"}


def _hostile_card(text: str) -> dict:
    return {"item_id": "mem-1", "source_kind": "note", "scope": text, "branch": text, "type": "project",
            "note_kind": text, "updated_at": 1, "confirmations": 1, "source": text, "author": text,
            "compressed_summary": text, "confidence": 0.5, "confidence_state": "medium",
            "promoted_from": {"project_name": text}, "imported_from": {"source": text},
            "anchors": [{"path": text}]}


def _tokens(md: str):
    from markdown_it import MarkdownIt

    for tok in MarkdownIt("commonmark").enable("table").parse(md):
        yield tok
        yield from tok.children or []


@settings(max_examples=200, deadline=None)
@given(text=st.lists(st.one_of(st.text(max_size=15), st.sampled_from(HOSTILE)), min_size=1, max_size=6).map(" ".join))
def test_hover_markdown_renders_stored_text_as_text(text):
    """Issue 13: whatever a note, a kind or a path holds, the hover shows it as text (CommonMark parse: no link,
    image, HTML, heading, list, rule, code block, table, emphasis; no control characters)."""
    md = convert.hover_markdown([_hostile_card(text)], set(), [{"name": text, "token_cost": 1}], symbol=text)
    kinds = [tok.type for tok in _tokens(md)]
    assert not set(kinds) & LIVE, (set(kinds) & LIVE, md)
    assert kinds.count("hr") == 2  # only the hover's own separators
    assert not any(ord(ch) < 32 and ch != "\n" or 0x7F <= ord(ch) <= 0x9F for ch in md), md
    shown = " ".join(tok.content for tok in _tokens(md) if tok.type in ("text", "code_inline"))
    for word in " ".join(visible(text).split()).split(" ")[:20]:
        assert word.replace("`", "'") in shown, (word, md)


@settings(max_examples=100, deadline=None)
@given(text=st.lists(st.one_of(st.text(max_size=15), st.sampled_from(HOSTILE)), min_size=1, max_size=6).map(" ".join))
def test_the_only_link_is_the_edit_command_of_a_local_memory(text):
    """Issue 15: a client that runs `mnemo.editMemory` links gets one per local memory, and no other link."""
    card = {**_hostile_card(text), "item_id": "mem-0123abcd"}
    md = convert.hover_markdown([card, {**_hostile_card(text), "item_id": "team-1"}], set(), [], symbol=text,
                                command_links=True)
    links = [tok.attrs.get("href") for tok in _tokens(md) if tok.type == "link_open"]
    assert links == ["command:mnemo.editMemory?%5B%7B%22id%22%3A%22mem-0123abcd%22%7D%5D"], md
    assert "command:" not in convert.hover_markdown([card], set(), [], symbol=text)  # not declared: no link
