"""A rule split at its headings (core/skills/sections.py): the preamble kept apart, headings inside code fences
ignored, a heading with no text of its own carried into its sub-section, sections ranked by the request's words."""

from __future__ import annotations

from mnemo.core.skills.sections import lexical_scores, split_sections, trim

RULE = """# Makefile rules

How we write Makefiles here.

## Variables
- Use `:=` for simple expansion.

```makefile
# not a heading: a comment inside a fence
CC := cc
```

## Targets
### Phony targets
- Declare `clean` and `all` as `.PHONY`.

### Incremental builds
- List every prerequisite so make rebuilds only what changed.
"""


def test_sections_follow_the_headings_outside_fences():
    secs = split_sections(RULE)
    assert [s.title for s in secs] == ["", "Variables", "Targets › Phony targets", "Targets › Incremental builds"]
    assert secs[0].preamble and secs[0].text.startswith("# Makefile rules\n\nHow we write Makefiles here.")
    assert "# not a heading: a comment inside a fence" in secs[1].text      # the fence stays in its section
    assert secs[2].text.startswith("## Targets\n### Phony targets")           # no bare heading section
    assert split_sections("just text, no headings")[0].title == ""
    assert split_sections("") == []


def test_the_requests_words_rank_the_sections():
    secs = split_sections(RULE)
    scores = lexical_scores(secs, "make should only rebuild what changed")
    assert max(range(len(secs)), key=lambda i: scores[i]) == 3
    assert lexical_scores(secs, "") == [0.0] * len(secs)


def test_trim_cuts_at_a_line():
    text = "\n".join(f"line {i} " + "x" * 40 for i in range(50))
    cut = trim(text, 100)
    assert cut and text.startswith(cut) and len(cut) <= 100 * 4 + 50 and cut.endswith("x")
