"""Skill model: one rule/skill file, normalized from whatever format it was written in, plus the load report."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

# Source formats (what tool the file was written for) and how each one activates by default.
FORMAT_MNEMO = "mnemo"  # skills/, .mnemo/skills/, ~/.mnemo/skills/ (Markdown + frontmatter)
FORMAT_COPILOT = "copilot"  # .github/instructions/*.instructions.md (applyTo)
FORMAT_COPILOT_REPO = "copilot-repo"  # .github/copilot-instructions.md (always)
FORMAT_CURSOR = "cursor"  # .cursor/rules/*.mdc (globs, alwaysApply, description)
FORMAT_CURSOR_LEGACY = "cursorrules"  # .cursorrules (always)
FORMAT_CLAUDE_SKILL = "claude-skill"  # .claude/skills/*/SKILL.md (name, description)
FORMAT_CLAUDE_MD = "claude-md"  # CLAUDE.md (always)
FORMAT_AGENTS_MD = "agents-md"  # AGENTS.md (always)
FORMAT_CONTINUE = "continue"  # .continue/rules/*.md (globs, alwaysApply, description)
FORMAT_WINDSURF = "windsurf"  # .windsurf/rules/*.md (trigger, globs, description)
FORMAT_WINDSURF_LEGACY = "windsurfrules"  # .windsurfrules (always)

FORMATS = (FORMAT_MNEMO, FORMAT_COPILOT, FORMAT_COPILOT_REPO, FORMAT_CURSOR, FORMAT_CURSOR_LEGACY,
           FORMAT_CLAUDE_SKILL, FORMAT_CLAUDE_MD, FORMAT_AGENTS_MD, FORMAT_CONTINUE, FORMAT_WINDSURF,
           FORMAT_WINDSURF_LEGACY)


@dataclass(frozen=True)
class Skill:
    """A skill or rule, read in place. ``id`` is ``<format>:<path relative to its source root>``."""

    id: str
    name: str
    description: str
    body: str
    source_path: str  # absolute path of the file
    source_format: str
    scope: str = "project"  # project | user | builtin | extra
    globs: tuple[str, ...] = ()
    glob_mode: str = "vscode"
    keywords: tuple[str, ...] = ()
    triggers: tuple[str, ...] = ()  # trigger phrases found in the description ("Use when ...")
    tools_allowed: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()
    importance: float = 0.5  # 0..1
    always_apply: bool = False
    manual_only: bool = False  # the tool attaches it only when mentioned by name (Cursor/Windsurf manual rules)
    content_hash: str = ""
    token_cost: int = 0  # estimated tokens of the body as injected
    warnings: tuple[str, ...] = ()
    flags: tuple[str, ...] = ()  # reads like a prompt injection (core/safety/screen.py): held until accepted in Review
    mtime: float = 0.0
    size: int = 0
    published: bool = False  # written by `mnemo publish`: activates, never injected (its memories are delivered)

    def to_dict(self, body: bool = False) -> dict:
        d = asdict(self)
        for k, v in list(d.items()):
            if isinstance(v, tuple):
                d[k] = list(v)
        if not body:
            d.pop("body")
        return d

    @property
    def activation_modes(self) -> list[str]:
        """How this skill can activate, for listings: always / glob / keyword / semantic / manual."""
        modes = []
        if self.always_apply:
            modes.append("always")
        if self.globs:
            modes.append(f"glob({self.glob_mode})")
        if self.keywords or self.triggers:
            modes.append("keyword")
        modes.append("semantic")
        if self.manual_only:
            modes.append("manual")
        return modes


@dataclass(frozen=True)
class Problem:
    """A file that could not be used (severity ``error``: skipped) or a note on a loaded one (``warning``)."""

    path: str
    line: int
    reason: str
    severity: str = "error"
    source_format: str = ""

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class LoadReport:
    skills: list[Skill] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    files_seen: int = 0
    shadowed: list[dict] = field(default_factory=list)  # same-name Mnemo skills hidden by a closer scope

    @property
    def loaded(self) -> int:
        return len(self.skills) + len(self.shadowed)

    @property
    def skipped(self) -> int:
        return sum(1 for p in self.problems if p.severity == "error")

    @property
    def warnings(self) -> list[Problem]:
        return [p for p in self.problems if p.severity == "warning"]

    def by_format(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.skills:
            out[s.source_format] = out.get(s.source_format, 0) + 1
        return dict(sorted(out.items()))

    def to_dict(self, skills: bool = True) -> dict:
        d = {
            "files_seen": self.files_seen,
            "loaded": self.loaded,
            "active_skills": len(self.skills),
            "skipped": self.skipped,
            "warnings": len(self.warnings),
            "by_format": self.by_format(),
            "problems": [p.to_dict() for p in self.problems],
            "shadowed": list(self.shadowed),
        }
        if skills:
            d["skills"] = [s.to_dict() for s in self.skills]
        return d
