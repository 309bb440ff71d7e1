"""Glob semantics per tool (VS Code applyTo, minimatch, minimatch with dot) and the suffix pre-check."""

from __future__ import annotations

import pytest

from mnemo.core.skills.globs import MINIMATCH, MINIMATCH_DOT, VSCODE, GlobMatcher, split_patterns


def m(patterns, mode, rel, abs_=None):
    return GlobMatcher.build(split_patterns(patterns), mode).match(rel, abs_ or f"/ws/repo/{rel}")


def test_split_on_commas_outside_braces_and_brackets():
    assert split_patterns("**/*.{js,ts}, src/[a,b]*.py,  docs/** ") == ["**/*.{js,ts}", "src/[a,b]*.py", "docs/**"]
    assert split_patterns(["a, b", "c"]) == ["a", "b", "c"]
    assert split_patterns(None) == [] and split_patterns(" , ") == []


@pytest.mark.parametrize("pattern,path,expected", [
    ("*.py", "deep/dir/x.py", True),  # **/ prepended
    ("src/**/*.ts", "pkg/src/a/b.ts", True),  # matches at any depth
    ("**/*.PY", "a/X.py", True),  # case-insensitive
    ("**/*.yml", ".github/workflows/ci.yml", True),  # dotfiles
    ("**/*.(ts|tsx)", "a/b.ts", False),  # parentheses are literal
    ("**", "anything/at/all", True),
    ("/ws/repo/src/*.go", "src/main.go", True),  # absolute pattern against the absolute path
])
def test_vscode_apply_to(pattern, path, expected):
    assert (m(pattern, VSCODE, path) is not None) is expected


@pytest.mark.parametrize("pattern,path,expected", [
    ("*.py", "x.py", True),
    ("*.py", "a/x.py", False),  # anchored at the root
    ("**/*.yml", ".github/ci.yml", False),  # no dotfiles
    ("**/*.PY", "a/x.py", False),  # case-sensitive
    ("src/**/*.{ts,tsx}", "src/a/b.tsx", True),
    ("!**/*.md", "a/b.py", True),  # negation
    ("!**/*.md", "a/b.md", False),
])
def test_minimatch(pattern, path, expected):
    assert (m(pattern, MINIMATCH, path) is not None) is expected


def test_minimatch_dot_matches_dotfiles():
    assert m("**/*.yml", MINIMATCH_DOT, ".github/ci.yml") == "**/*.yml"
    assert m("*.py", MINIMATCH_DOT, "a/x.py") is None


def test_catch_all_flag_and_reported_pattern():
    g = GlobMatcher.build(["**/*"], MINIMATCH_DOT)
    assert g.catch_all and g.match("a/b", None) == "**/*"
    assert GlobMatcher.build(["*"], VSCODE).catch_all
    assert not GlobMatcher.build(["**/*.py"], VSCODE).catch_all


@pytest.mark.parametrize("mode", [VSCODE, MINIMATCH, MINIMATCH_DOT])
def test_suffix_precheck_never_changes_the_answer(mode):
    pats = ["**/*.{js,jsx}", "src/lib/router.ts", "**/Dockerfile*", "lwc/**", "**/*.tf.json", "*.md",
            "app/**/*.tsx", "**/[Mm]akefile", "**/*.(ts|tsx)", "**/${input:file}"]
    paths = ["a.js", "x/b.JSX", "src/lib/router.ts", "Dockerfile.dev", "lwc/a/b.html", "infra/x.tf.json",
             "README.md", "docs/a.md", "app/p/page.tsx", "Makefile", "sub/makefile", "a.ts"]
    for p in pats:
        fast = GlobMatcher.build([p], mode)
        slow = GlobMatcher.build([p], mode)
        slow.suffixes = None
        slow._pattern_suffixes = [None] * len(slow._pattern_suffixes)
        for path in paths:
            assert fast.match(path, "/ws/r/" + path) == slow.match(path, "/ws/r/" + path), (p, path)


def test_bad_pattern_matches_nothing_and_is_listed():
    g = GlobMatcher.build(["[", "**/*.py"], MINIMATCH)
    assert g.match("x.py", None) is None or g.match("x.py", None) == "**/*.py"
    assert g.match("a/b.txt", None) is None
