"""Frontmatter: YAML when it is YAML, a tolerant line reader when it is not, refusal of hostile headers."""

from __future__ import annotations

import pytest

from mnemo.core.skills.frontmatter import (
    MAX_FRONTMATTER_BYTES,
    FrontmatterError,
    safe_yaml,
    split_frontmatter,
    tolerant_parse,
)


def test_valid_yaml_header():
    fm = split_frontmatter("---\nname: x\nglobs: ['a/**', 'b']\nalwaysApply: true\n---\n# Body\n")
    assert fm.present and fm.yaml_valid is True
    assert fm.data == {"name": "x", "globs": ["a/**", "b"], "alwaysApply": True}
    assert fm.body == "# Body\n" and fm.body_line == 6


def test_cursor_style_header_is_read_line_by_line():
    # `*` starts a YAML alias: this is not YAML, but it is what every Cursor rule looks like.
    text = "---\ndescription: Rules for TS: strict mode\nglobs: **/*.ts, src/*.{js,jsx}\nalwaysApply: false\n---\nbody"
    fm = split_frontmatter(text)
    assert fm.yaml_valid is False
    assert fm.data["globs"] == "**/*.ts, src/*.{js,jsx}"
    assert fm.data["description"] == "Rules for TS: strict mode"
    assert fm.data["alwaysApply"] == "false"
    assert fm.body == "body"


def test_tolerant_lists_quotes_and_continuations():
    data, warnings = tolerant_parse(
        'name: "quoted"\nglobs:\n  - "*.py"\n  - src/**\ntags: [a, "b c"]\ndescription: first line\n  second line\n'
        "weird line without colon\n"
    )
    assert data["name"] == "quoted"
    assert data["globs"] == ["*.py", "src/**"]
    assert data["tags"] == ["a", "b c"]
    assert data["description"] == "first line second line"
    assert warnings and warnings[0][0] == 9  # file line: the header starts on line 2


def test_no_header_and_bom():
    fm = split_frontmatter("\ufeff# Title\ntext")
    assert not fm.present and fm.body == "# Title\ntext"
    fm2 = split_frontmatter("\ufeff---\nname: a\n---\nb")
    assert fm2.data == {"name": "a"}


def test_unclosed_header_is_an_error_with_line():
    with pytest.raises(FrontmatterError) as e:
        split_frontmatter("---\nname: a\nno end\n")
    assert e.value.line == 1 and "never closed" in e.value.reason


def test_alias_bomb_is_refused():
    bomb = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: [*b, *b, *b, *b, *b]\n"
    with pytest.raises(FrontmatterError) as e:
        safe_yaml(bomb)
    assert "alias" in e.value.reason
    with pytest.raises(FrontmatterError):
        split_frontmatter("---\n" + bomb + "---\nbody")


def test_oversized_and_deep_headers_are_refused():
    with pytest.raises(FrontmatterError):
        split_frontmatter("---\n" + ("k: " + "v" * 100 + "\n") * (MAX_FRONTMATTER_BYTES // 100) + "---\n")
    with pytest.raises(FrontmatterError):
        split_frontmatter("---\nk: " + "[" * 200 + "]" * 200 + "\n---\n")


def test_python_tags_are_not_constructed():
    fm = split_frontmatter("---\nname: !!python/object/apply:os.system ['echo hi']\n---\nbody")
    # safe_load refuses the tag; the tolerant reader keeps the text as a plain string, nothing runs
    assert isinstance(fm.data.get("name"), str)


def test_garbage_header_is_an_error():
    with pytest.raises(FrontmatterError):
        split_frontmatter("---\n: : :\n- - -\n---\nbody")
