"""Glob activation with the semantics of the tool each rule file was written for.

Modes (all backed by `wcmatch.glob`, compiled once per distinct pattern set):

- ``vscode``: GitHub Copilot ``applyTo`` in VS Code (``.github/instructions/*.instructions.md``).
  The value is split on commas outside ``{}``/``[]``; ``**``, ``**/*`` and ``*`` apply to every file; a pattern
  not starting with ``/`` or ``**/`` gets ``**/`` prepended (so ``*.py`` matches at any depth); matching is
  case-insensitive, ``*`` matches dotfiles, ``(a|b)`` is literal (no extglob); the pattern is matched against the
  file's absolute path. Mnemo's own skills use this mode too: it is the most forgiving for people.
- ``minimatch``: minimatch defaults on the project-relative path (Continue): anchored at the root, dotfiles not
  matched by wildcards, case-sensitive, ``*.py`` matches root-level files only, ``!pat`` negates, extglob on.
- ``minimatch_dot``: minimatch with ``dot: true`` (Cursor ``.mdc`` rules, Windsurf rules).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import bracex
from wcmatch import glob as wglob

VSCODE = "vscode"
MINIMATCH = "minimatch"
MINIMATCH_DOT = "minimatch_dot"
MODES = (VSCODE, MINIMATCH, MINIMATCH_DOT)

_VSCODE_CATCH_ALL = frozenset({"**", "**/*", "*"})
_MINIMATCH_CATCH_ALL = frozenset({"**", "**/*", "**/**"})

_BASE_FLAGS = wglob.GLOBSTAR | wglob.BRACE | wglob.FORCEUNIX
_FLAGS = {
    VSCODE: _BASE_FLAGS | wglob.DOTGLOB | wglob.IGNORECASE,
    MINIMATCH: _BASE_FLAGS | wglob.EXTGLOB,
    MINIMATCH_DOT: _BASE_FLAGS | wglob.EXTGLOB | wglob.DOTGLOB,
}


def split_patterns(spec: str | Sequence[str] | None) -> list[str]:
    """Split a glob spec into patterns: a list is taken item by item; a string is split on commas outside
    ``{}`` and ``[]`` (so ``**/*.{js,ts}`` stays whole). Empty items are dropped."""
    if spec is None:
        return []
    items = [spec] if isinstance(spec, str) else [str(s) for s in spec if s is not None]
    out: list[str] = []
    for item in items:
        depth_brace = depth_bracket = 0
        cur: list[str] = []
        for ch in item:
            if ch == "{":
                depth_brace += 1
            elif ch == "}" and depth_brace:
                depth_brace -= 1
            elif ch == "[":
                depth_bracket += 1
            elif ch == "]" and depth_bracket:
                depth_bracket -= 1
            if ch == "," and not depth_brace and not depth_bracket:
                out.append("".join(cur))
                cur = []
            else:
                cur.append(ch)
        out.append("".join(cur))
    return [p.strip() for p in out if p.strip()]


_SPECIAL = set("*?[]{}()!@+|\\")


def required_suffixes(pattern: str, ignore_case: bool) -> frozenset[str] | None:
    """Literal endings a path must have for ``pattern`` to match it (a cheap pre-check before the real glob
    match), or None when the pattern gives no such guarantee. Conservative: any special character in the
    final literal run, or an expansion without a literal ending, disables the pre-check."""
    try:
        expanded = bracex.expand(pattern, limit=256) if "{" in pattern else [pattern]
    except Exception:  # noqa: BLE001 - malformed braces: no pre-check, the glob library decides
        return None
    out = set()
    for e in expanded:
        i = len(e)
        while i > 0 and e[i - 1] not in _SPECIAL and e[i - 1] != "/":
            i -= 1
        tail = e[i:]
        if not tail or (i > 0 and e[i - 1] == "\\"):
            return None
        out.add(tail.lower() if ignore_case else tail)
    return frozenset(out) if out else None


def _vscode_pattern(p: str) -> str:
    if p.startswith("/") or p.startswith("**/") or p == "**":
        return p
    return "**/" + p


@dataclass
class GlobMatcher:
    """A compiled set of patterns in one mode. ``match`` returns the first pattern that matched (for the
    explanation), or None. ``catch_all`` is True when the set applies to every file (a weak signal)."""

    patterns: tuple[str, ...]
    mode: str
    catch_all: bool = False
    _compiled: list[tuple[str, object, bool]] = field(default_factory=list, repr=False)
    # endings a path must have for any positive pattern to match (None: no pre-check possible)
    suffixes: tuple[str, ...] | None = None
    _pattern_suffixes: list[tuple[str, ...] | None] = field(default_factory=list, repr=False)

    @classmethod
    def build(cls, patterns: Sequence[str], mode: str) -> GlobMatcher:
        if mode not in MODES:
            raise ValueError(f"unknown glob mode {mode!r}")
        pats = tuple(patterns)
        flags = _FLAGS[mode]
        compiled: list[tuple[str, object, bool]] = []
        catch_all = False
        for p in pats:
            negated = False
            body = p
            if mode == VSCODE:
                if p in _VSCODE_CATCH_ALL:
                    catch_all = True
                body = _vscode_pattern(p)
            else:
                if p.startswith("#"):
                    continue  # minimatch: a comment pattern matches nothing
                while body.startswith("!"):
                    negated = not negated
                    body = body[1:]
                if not negated and body in _MINIMATCH_CATCH_ALL:
                    catch_all = True
            try:
                compiled.append((p, wglob.compile(body, flags=flags), negated))
            except Exception:  # a malformed pattern matches nothing (reported by the loader as a warning)
                continue
        suffixes: set[str] = set()
        open_ended = False  # a pattern that requires no literal ending: no suffix prefilter
        for raw, _m, negated in compiled:
            if negated:
                open_ended = True  # "everything except": no literal ending required
                break
            req = required_suffixes(_vscode_pattern(raw) if mode == VSCODE else raw, mode == VSCODE)
            if req is None:
                open_ended = True
                break
            suffixes |= req
        sfx = tuple(sorted(suffixes)) if suffixes and not open_ended else None
        if catch_all or not compiled:
            sfx = None
        per: list[tuple[str, ...] | None] = []
        for raw, _m, negated in compiled:
            if negated:
                continue
            req = required_suffixes(_vscode_pattern(raw) if mode == VSCODE else raw, mode == VSCODE)
            per.append(tuple(sorted(req)) if req else None)
        return cls(pats, mode, catch_all, compiled, sfx, per)

    def match(self, rel_path: str | None, abs_path: str | None) -> str | None:
        path = abs_path if self.mode == VSCODE else rel_path
        if not path:
            return None
        if self.mode == VSCODE and self.catch_all:
            return next(p for p in self.patterns if p in _VSCODE_CATCH_ALL)
        probe = path.lower() if self.mode == VSCODE else path
        if self.suffixes is not None:
            if not probe.endswith(self.suffixes):
                return None  # no pattern can match: skip the glob engine
        positives, negatives = self._split()
        if any(m.match(path) for _, m in negatives):  # type: ignore[attr-defined]
            return None  # `!pat` excludes what pat matches
        if not positives:
            return negatives[0][0] if negatives else None  # only negations: "everything except ..."
        for (raw, m), sfx in zip(positives, self._pattern_suffixes, strict=True):
            if sfx is not None and not probe.endswith(sfx):
                continue
            if m.match(path):  # type: ignore[attr-defined]
                return raw
        return None

    def _split(self) -> tuple[list[tuple[str, object]], list[tuple[str, object]]]:
        """(positive, negated) compiled patterns, computed once (match runs for every rule on every file)."""
        split = self.__dict__.get("_split_cache")
        if split is None:
            split = ([(raw, m) for raw, m, neg in self._compiled if not neg],
                     [(raw, m) for raw, m, neg in self._compiled if neg])
            self.__dict__["_split_cache"] = split
        return split

    def invalid_patterns(self) -> list[str]:
        ok = {raw for raw, _, _ in self._compiled}
        return [p for p in self.patterns if p not in ok and not p.startswith("#")]


_lock = threading.Lock()


@lru_cache(maxsize=8192)
def _cached(patterns: tuple[str, ...], mode: str) -> GlobMatcher:
    return GlobMatcher.build(patterns, mode)


def matcher_for(patterns: Sequence[str], mode: str) -> GlobMatcher:
    """A shared compiled matcher (many rules carry the same pattern set, e.g. ``**/*.py``)."""
    with _lock:
        return _cached(tuple(patterns), mode)
