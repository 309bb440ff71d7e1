"""Read rule and skill files in place, one reader per source format, into :class:`Skill`.

Every failure inside one file becomes a :class:`Problem` (path, line, reason); nothing here raises past
:func:`read_skill_file`. Format semantics (what each tool does with its own fields) live here; glob matching
itself lives in :mod:`globs`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from mnemo.core import environment
from mnemo.core.files import agent_rules as publish_format
from mnemo.core.safety.screen import injection_flags, strip_invisible

from ..text import content_hash, estimate_tokens
from . import globs as g
from .frontmatter import Frontmatter, FrontmatterError, split_frontmatter
from .model import (
    FORMAT_AGENTS_MD,
    FORMAT_CLAUDE_MD,
    FORMAT_CLAUDE_SKILL,
    FORMAT_CONTINUE,
    FORMAT_COPILOT,
    FORMAT_COPILOT_REPO,
    FORMAT_CURSOR,
    FORMAT_CURSOR_LEGACY,
    FORMAT_MNEMO,
    FORMAT_WINDSURF,
    FORMAT_WINDSURF_LEGACY,
    FORMATS,
    Problem,
    Skill,
)

MAX_FILE_BYTES = environment.integer("MNEMO_MAX_SKILL_BYTES")

# Zero-width characters and bidi controls: stripped from skill text (skills are data, and these hide content).
_INVISIBLE_RE = re.compile("[\u200b\u200c\u200d\u200e\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff]")

# Trigger phrases inside descriptions: "Use when ...", "Use this skill when ...", "Triggers on ...".
_TRIGGER_RE = re.compile(
    r"(?:\buse (?:this (?:skill|rule|agent) )?(?:when|for|whenever|if)\b"
    r"|\b(?:triggers?|activates?|applies) (?:on|when|for)\b"
    r"|\bwhen (?:the user|users|you) (?:asks?|wants?|needs?|mentions?|requests?)(?: to| for| about)?\b"
    r"|\bapply (?:when|to)\b)\s*:?\s*(.+?)(?:(?<!\be\.g)(?<!\bi\.e)[.;!?](?:\s|$)|$)",
    re.IGNORECASE | re.DOTALL,
)

_TRIGGER_LEAD_RE = re.compile(
    r"^(?:the )?(?:user|users|you|someone)(?: explicitly)? (?:asks?|wants?|needs?|mentions?|requests?|is|are)"
    r"(?: to| for| about)?\s+", re.IGNORECASE)

_TRUE = {"true", "yes", "on", "1", "always"}
_FALSE = {"false", "no", "off", "0", "never"}


def detect_format(path: Path) -> str | None:
    """Format of a file from its name and location (None: not a skill file)."""
    name = path.name
    parts = {p.lower() for p in path.parts[:-1]}
    lname = name.lower()
    if lname.endswith(".mdc"):
        return FORMAT_CURSOR
    if lname.endswith(".instructions.md"):
        return FORMAT_COPILOT
    if name == "copilot-instructions.md":
        return FORMAT_COPILOT_REPO
    if name == "SKILL.md":
        return FORMAT_CLAUDE_SKILL
    if name in ("CLAUDE.md", "CLAUDE.local.md"):
        return FORMAT_CLAUDE_MD
    if name == "AGENTS.md":
        return FORMAT_AGENTS_MD
    if name == ".cursorrules":
        return FORMAT_CURSOR_LEGACY
    if name == ".windsurfrules":
        return FORMAT_WINDSURF_LEGACY
    if lname.endswith(".md"):
        if ".continue" in parts:
            return FORMAT_CONTINUE
        if ".windsurf" in parts:
            return FORMAT_WINDSURF
        return FORMAT_MNEMO
    return None


# --- small value coercions (frontmatter values may be str, list, bool, int, None ...) ---

def _as_str(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, list | tuple):
        return " ".join(_as_str(x) for x in v)
    if isinstance(v, dict):
        return ""
    return str(v).strip()


def _as_list(v: object) -> list[str]:
    if v is None:
        return []
    if isinstance(v, list | tuple):
        return [str(x).strip() for x in v if x is not None and not isinstance(x, dict | list) and str(x).strip()]
    if isinstance(v, str):
        return [s.strip().strip("\"'") for s in v.split(",") if s.strip().strip("\"'")]
    return [str(v)]


def _as_bool(v: object) -> bool | None:
    if isinstance(v, bool):
        return v
    if v is None:
        return None
    s = str(v).strip().strip("\"'").lower()
    if s in _TRUE:
        return True
    if s in _FALSE:
        return False
    return None


def _as_importance(v: object) -> float | None:
    if v is None or v == "":
        return None
    if isinstance(v, str):
        s = v.strip().lower()
        named = {"critical": 1.0, "high": 0.8, "medium": 0.5, "normal": 0.5, "low": 0.2}
        if s in named:
            return named[s]
        try:
            v = float(s)
        except ValueError:
            return None
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        x = float(v)
        if 0.0 <= x <= 1.0:
            return x
        if 1.0 < x <= 5.0:  # a 1..5 scale
            return (x - 1.0) / 4.0
        if 5.0 < x <= 10.0:  # a 1..10 scale
            return (x - 1.0) / 9.0
    return None


def _glob_spec(v: object) -> list[str]:
    if v is None:
        return []
    if isinstance(v, list | tuple):
        return g.split_patterns([str(x) for x in v if x is not None and not isinstance(x, dict | list)])
    return g.split_patterns(str(v))


def extract_triggers(description: str) -> list[str]:
    """Trigger phrases in a description: the clause after "Use when", "Use this skill when", "Triggers on" ..."""
    out: list[str] = []
    for m in _TRIGGER_RE.finditer(description or ""):
        phrase = _TRIGGER_LEAD_RE.sub("", " ".join(m.group(1).split())).strip(" ,:;-")
        if phrase and len(phrase) >= 3:
            out.append(phrase[:300])
    return out


def _strip_invisible(text: str) -> tuple[str, int]:
    n = len(_INVISIBLE_RE.findall(text))
    return (_INVISIBLE_RE.sub("", text), n) if n else (text, 0)


def _line_of_offset(raw: bytes, offset: int) -> int:
    return raw.count(b"\n", 0, offset) + 1


class _Skip(Exception):
    def __init__(self, reason: str, line: int = 1):
        super().__init__(reason)
        self.reason, self.line = reason, line


def _read_text(path: Path, max_bytes: int) -> tuple[str, os.stat_result]:
    st = path.stat()
    if st.st_size > max_bytes:
        raise _Skip(f"file is {st.st_size} bytes, larger than the {max_bytes // 1024} KiB cap for a skill (raise "
                    "MNEMO_MAX_SKILL_BYTES if you must)")
    with open(path, "rb") as f:
        raw = f.read(max_bytes + 1)
    if len(raw) > max_bytes:
        raise _Skip(f"file is larger than the {max_bytes // 1024} KiB cap for a skill (raise MNEMO_MAX_SKILL_BYTES "
                    "if you must)")
    if b"\x00" in raw:
        raise _Skip("binary file (NUL byte)", _line_of_offset(raw, raw.index(b"\x00")))
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Skip(f"not UTF-8 text ({exc.reason} at byte {exc.start})", _line_of_offset(raw, exc.start)) from exc
    return text.replace("\r\n", "\n").replace("\r", "\n"), st


def _default_name(path: Path, fmt: str) -> str:
    name = path.name
    if name == "SKILL.md":
        return path.parent.name or "skill"
    if fmt == FORMAT_COPILOT and name.lower().endswith(".instructions.md"):
        return name[: -len(".instructions.md")]
    if fmt in (FORMAT_CLAUDE_MD, FORMAT_AGENTS_MD, FORMAT_COPILOT_REPO, FORMAT_CURSOR_LEGACY,
               FORMAT_WINDSURF_LEGACY):
        return name
    return path.stem


def read_skill_file(path: Path, fmt: str | None = None, *, scope: str = "project", skill_id: str | None = None,
                    max_bytes: int = MAX_FILE_BYTES) -> tuple[Skill | None, list[Problem]]:
    """Read one file. Returns (skill, problems); skill is None when the file was skipped (an ``error`` problem
    says why). Never raises."""
    spath = str(path)
    fmt = fmt or detect_format(path) or FORMAT_MNEMO
    try:
        if fmt not in FORMATS:
            raise _Skip(f"unknown source format {fmt!r}")
        text, st = _read_text(path, max_bytes)
        return _build(path, text, st, fmt, scope, skill_id)
    except _Skip as exc:
        return None, [Problem(spath, exc.line, exc.reason, "error", fmt)]
    except FrontmatterError as exc:
        return None, [Problem(spath, exc.line, exc.reason, "error", fmt)]
    except OSError as exc:
        return None, [Problem(spath, 1, f"cannot read file: {exc.strerror or exc}", "error", fmt)]
    except Exception as exc:  # noqa: BLE001 - a bad file must never crash the loader
        return None, [Problem(spath, 1, f"unexpected error while reading: {type(exc).__name__}: {exc}", "error", fmt)]


def read_skill_text(path: Path, text: str, fmt: str | None = None) -> tuple[Skill | None, list[Problem]]:
    """Read a file's text as if it were at `path` (not yet written there): what `read_skill_file` would give.
    `mnemo publish` checks each file it is about to write with it."""
    fmt = fmt or detect_format(path) or FORMAT_MNEMO
    st = os.stat_result((0o100644, 0, 0, 1, 0, 0, len(text.encode("utf-8")), 0, 0, 0))
    try:
        return _build(path, text.replace("\r\n", "\n"), st, fmt, "project", None)
    except _Skip as exc:
        return None, [Problem(str(path), exc.line, exc.reason, "error", fmt)]
    except FrontmatterError as exc:
        return None, [Problem(str(path), exc.line, exc.reason, "error", fmt)]


def _build(path: Path, text: str, st: os.stat_result, fmt: str, scope: str,
           skill_id: str | None) -> tuple[Skill | None, list[Problem]]:
    spath = str(path)
    problems: list[Problem] = []
    warnings: list[str] = []

    def warn(reason: str, line: int = 1, severity: str = "warning") -> None:
        problems.append(Problem(spath, line, reason, severity, fmt))
        if severity == "warning":
            warnings.append(reason)

    text, flagged = _screen(text, warn)
    text, published = _published(text)
    if fmt in (FORMAT_CURSOR_LEGACY, FORMAT_WINDSURF_LEGACY):
        fm = Frontmatter(body=text)  # legacy single-file rules have no header
    else:
        fm = split_frontmatter(text)
    for line, reason in fm.warnings:
        warn(reason, line, "info")
    if fm.present and fm.yaml_valid is False:
        warn("header is not valid YAML; read it line by line (as the tool itself does)", 2, "info")
    d = fm.data
    body = fm.body.strip("\n")
    name = _as_str(d.get("name") or d.get("title")) or _default_name(path, fmt)
    description = _as_str(d.get("description"))
    keywords = _as_list(d.get("keywords"))
    importance = _as_importance(d.get("importance"))
    if d.get("importance") not in (None, "") and importance is None:
        warn(f"importance {d.get('importance')!r} not understood (use 0..1, 1..5 or low/medium/high); using 0.5")
    patterns, mode, always, manual = _activation(fmt, d, description, warn)
    if published and fmt == FORMAT_COPILOT and patterns and all(p in ("**", "**/*", "*") for p in patterns):
        always = True  # Mnemo's `applyTo: '**'` means every file, as VS Code reads it (a person's stays a weak glob)
    if patterns:
        bad = g.matcher_for(patterns, mode).invalid_patterns()
        for p in bad:
            warn(f"glob {p!r} is not a valid pattern; ignored")
    if not body.strip() and not description:
        raise _Skip("empty: no description and no body", fm.body_line)
    tags = _as_list(d.get("tags"))
    tools = _as_list(d.get("tools_allowed") or d.get("allowed-tools") or d.get("allowed_tools") or d.get("tools"))
    skill = Skill(
        id=skill_id or f"{fmt}:{spath}", name=name[:200], description=description[:2000], body=body,
        source_path=spath, source_format=fmt, scope=scope, globs=tuple(patterns), glob_mode=mode,
        keywords=tuple(k[:100] for k in keywords[:64]), triggers=tuple(extract_triggers(description)),
        tools_allowed=tuple(tools[:64]), tags=tuple(t[:100] for t in tags[:64]),
        importance=0.5 if importance is None else importance, always_apply=always, manual_only=manual,
        content_hash=content_hash("\n".join([name, description, " ".join(keywords), body])),
        token_cost=estimate_tokens(body) + estimate_tokens(f"### {name}\nSource: {spath}\n"),
        warnings=tuple(warnings), flags=tuple(flagged), mtime=st.st_mtime, size=st.st_size, published=published,
    )
    return skill, problems


def _published(text: str) -> tuple[str, bool]:
    """No loop: what `mnemo publish` wrote is not read back as the person's rules. A section it manages inside a
    person's file (CLAUDE.md, AGENTS.md) is taken out of the text; a file that is only Mnemo's (its own header,
    or nothing but the section) stays a skill marked `published`: it activates for its paths as its tool reads
    it, and is never injected (its memories reach agents as memories)."""
    if not publish_format.has_section(text):
        return text, False
    if publish_format.is_published_file(text):
        return text, True
    rest = publish_format.without_section(text)
    if rest.strip():
        return rest, False
    return text, True


def _screen(text: str, warn) -> tuple[str, list[str]]:
    """Invisible characters removed (with a warning), and the flags of what a poisoned skill adds."""
    text, inv_flags, hidden = strip_invisible(text)
    text, n_invisible = _strip_invisible(text)
    if inv_flags or n_invisible:
        what = " and hidden text in Unicode tag characters" if "hidden_text" in inv_flags else ""
        warn(f"invisible Unicode character(s) (zero-width / bidi controls{what}) removed")
    # Skills are instructions by design; these patterns are what a poisoned one adds (core/safety/screen.py).
    flagged = injection_flags(text, hidden, kind="skill")
    if "hidden_text" in inv_flags:
        flagged.append("hidden_text")
    if flagged:
        warn("reads like a prompt injection (" + ", ".join(f.split(":", 1)[-1] for f in flagged)
             + "): held, not activated, until you accept it in Review (`mnemo review`)")
    return text, flagged


def _activation(fmt: str, d: dict, description: str, warn) -> tuple[list[str], str, bool, bool]:
    """(glob patterns, glob mode, always apply, manual only) as the file's own tool reads its header."""
    always = False
    manual = False
    patterns: list[str] = []
    mode = g.VSCODE
    if fmt == FORMAT_MNEMO:
        patterns = _glob_spec(d.get("globs") if d.get("globs") is not None else d.get("applyTo"))
        always = bool(_as_bool(d.get("always_apply", d.get("alwaysApply"))))
    elif fmt == FORMAT_COPILOT:
        apply_to = d.get("applyTo")
        if isinstance(apply_to, list | tuple):
            warn("applyTo is a YAML list: VS Code ignores it (it reads a string), so this file never attaches "
                 "by glob; write applyTo: '**/*.py, **/*.pyi'")
        elif isinstance(apply_to, dict):
            warn("applyTo is a mapping; ignored")
        elif apply_to is not None:
            patterns = g.split_patterns(str(apply_to))
    elif fmt == FORMAT_CURSOR:
        mode = g.MINIMATCH_DOT
        patterns = _glob_spec(d.get("globs"))
        always = bool(_as_bool(d.get("alwaysApply")))
        manual = not always and not patterns and not description
    elif fmt == FORMAT_CONTINUE:
        mode = g.MINIMATCH
        patterns = _glob_spec(d.get("globs"))
        aa = _as_bool(d.get("alwaysApply"))
        # Continue: true -> always; false -> globs or the agent decides from the description;
        # unset -> always when there are no globs, else when they match.
        always = aa is True or (aa is None and not patterns)
    elif fmt == FORMAT_WINDSURF:
        mode = g.MINIMATCH_DOT
        trigger = _as_str(d.get("trigger")).lower()
        patterns = _glob_spec(d.get("globs")) if trigger in ("", "glob") else []
        always = trigger in ("always_on", "always")
        manual = trigger == "manual"
        if trigger and trigger not in ("always_on", "always", "manual", "model_decision", "glob"):
            warn(f"unknown Windsurf trigger {trigger!r}; treated as model_decision")
    elif fmt == FORMAT_CLAUDE_SKILL:
        mode = g.MINIMATCH_DOT
        patterns = _glob_spec(d.get("paths") if d.get("paths") is not None else d.get("globs"))
    elif fmt in (FORMAT_COPILOT_REPO, FORMAT_CLAUDE_MD, FORMAT_AGENTS_MD, FORMAT_CURSOR_LEGACY,
                 FORMAT_WINDSURF_LEGACY):
        always = True
    return patterns, mode, always, manual
