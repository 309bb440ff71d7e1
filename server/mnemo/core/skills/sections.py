"""A rule's sections, scored against a request: how a skill that does not fit a context block whole goes in by
its most relevant parts (issue 20: budget by value, not by size).

A body is split at its Markdown headings (outside code fences). The preamble (the text before the first heading,
with a leading ``# Title`` and its text) is kept apart: it says what the rule is for. A heading followed at once
by a sub-heading carries over into the sub-section, so no section is a bare heading. Each section is scored
against the request with the skill engine's own evidence, kept cheap: the share of the request's words the
section holds (weighted by how rare each word is across the rule's sections, a word in the section's title
counting double) and the cosine between the request and the section (the engine's embedder; section vectors are
cached by content like skill vectors, so a rule's sections are embedded once).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ..text import estimate_tokens, tokenize

_HEADING = re.compile(r"^(#{1,6})[ \t]+(.+?)[ \t]*#*[ \t]*$")
_FENCE = re.compile(r"^[ \t]{0,3}(`{3,}|~{3,})")
MAX_SECTIONS = 80          # a rule with more headings keeps the rest in its last section
LEXICAL_WEIGHT = 0.5       # a section's score: cosine + LEXICAL_WEIGHT * lexical share


@dataclass(frozen=True)
class Section:
    index: int
    title: str      # "Parent › Child"; "" for the preamble
    text: str       # the section as written, its heading(s) included
    level: int      # heading level; 0 for the preamble

    @property
    def tokens(self) -> int:
        return estimate_tokens(self.text)

    @property
    def preamble(self) -> bool:
        return self.level == 0


def split_sections(body: str) -> list[Section]:
    """The body's sections in order (the preamble first when there is one)."""
    lines = (body or "").strip("\n").splitlines()
    heads: list[tuple[int, int, str]] = []           # (line, level, title)
    fence: str | None = None
    for i, line in enumerate(lines):
        m = _FENCE.match(line)
        if m:
            mark = m.group(1)
            if fence is None:
                fence = mark[0] * len(mark)
            elif mark[0] == fence[0] and len(mark) >= len(fence):
                fence = None
            continue
        if fence is None:
            h = _HEADING.match(line)
            if h:
                heads.append((i, len(h.group(1)), h.group(2).strip()))
    if not heads:
        return [Section(0, "", "\n".join(lines).strip(), 0)] if any(x.strip() for x in lines) else []
    # a leading "# Title" and the text under it belong to the preamble
    first_text = next((i for i, x in enumerate(lines) if x.strip()), 0)
    if heads[0][0] == first_text and heads[0][1] == 1 and (len(heads) == 1 or heads[1][1] > 1):
        title_line = heads.pop(0)[0]
        pre_end = heads[0][0] if heads else len(lines)
        preamble = "\n".join(lines[title_line:pre_end]).strip()
    else:
        preamble = "\n".join(lines[: heads[0][0]]).strip()
    out: list[Section] = []
    if preamble:
        out.append(Section(0, "", preamble, 0))
    stack: list[tuple[int, str]] = []                # open headings (level, title) for the titles' path
    carry: list[str] = []                            # heading lines with no text of their own
    for n, (start, level, title) in enumerate(heads):
        end = heads[n + 1][0] if n + 1 < len(heads) else len(lines)
        if len(out) >= MAX_SECTIONS - 1 and n + 1 < len(heads):
            end = len(lines)
        while stack and stack[-1][0] >= level:
            stack.pop()
        stack.append((level, title))
        chunk = lines[start:end]
        own = [x for x in chunk[1:] if x.strip()]
        if not own and n + 1 < len(heads) and heads[n + 1][1] > level:
            carry += chunk
            continue
        text = "\n".join(carry + chunk).strip()
        carry = []
        out.append(Section(len(out), " › ".join(t for _lv, t in stack), text, level))
        if end == len(lines):
            break
    return out


def lexical_scores(sections: list[Section], query: str) -> list[float]:
    """Per section: the share of the request's (rarity-weighted) words it holds, title words counting double."""
    q = set(tokenize(query))
    if not q or not sections:
        return [0.0] * len(sections)
    toks = [set(tokenize(s.text)) for s in sections]
    titles = [set(tokenize(s.title)) for s in sections]
    n = len(sections)
    weight = {}
    for w in q:
        df = sum(1 for t in toks if w in t)
        if df:
            weight[w] = math.log(1.0 + n / df)
    total = sum(weight.values()) or 1.0
    out = []
    for t, tt in zip(toks, titles, strict=True):
        s = sum(w * (2.0 if tok in tt else 1.0) for tok, w in weight.items() if tok in t)
        out.append(min(1.0, s / total))
    return out


def score_sections(sections: list[Section], query: str, query_vec=None, section_vecs=None) -> list[float]:
    """Relevance of each section to the request: cosine (when vectors are given) + LEXICAL_WEIGHT * lexical."""
    lex = lexical_scores(sections, query)
    if query_vec is None or section_vecs is None or len(section_vecs) != len(sections):
        return lex
    import numpy as np

    cos = np.asarray(section_vecs, dtype=np.float32) @ np.asarray(query_vec, dtype=np.float32)
    return [float(c) + LEXICAL_WEIGHT * x for c, x in zip(cos.tolist(), lex, strict=True)]


def section_view(skill_name: str, section: Section) -> str:
    """What is embedded for a section: the rule's name, the section's title path and its first words."""
    return f"{skill_name}: {section.title}\n{section.text[:600]}"


def trim(text: str, tokens: int) -> str:
    """``text`` cut at a line boundary to about ``tokens`` tokens (at least its first line)."""
    if estimate_tokens(text) <= tokens:
        return text
    out: list[str] = []
    for line in text.splitlines():
        if out and estimate_tokens("\n".join([*out, line])) > tokens:
            break
        out.append(line)
    return "\n".join(out)


__all__ = ["Section", "lexical_scores", "score_sections", "section_view", "split_sections", "trim"]
