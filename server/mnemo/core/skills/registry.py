"""Skill registry: discover skill files in every known location, load them (incrementally), watch for edits."""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from mnemo.core import environment

from ..text import content_hash
from .globs import MINIMATCH_DOT
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
    LoadReport,
    Problem,
    Skill,
)
from .sources import MAX_FILE_BYTES, detect_format, read_skill_file

MAX_FILES_PER_SOURCE = 5000
_SKIP_DIRS = {".git", "node_modules", "__pycache__", ".venv", "venv"}
# Nested AGENTS.md / CLAUDE.md below the project root apply to their own subtree (as Codex and Claude Code read
# them). Finding them walks the tree, so the walk is bounded and its result reused for NESTED_RESCAN_S seconds
# (known files are still stat-checked on every refresh: an edit applies at once, a new file within that time).
NESTED_NAMES = ("AGENTS.md", "CLAUDE.md", "CLAUDE.local.md")
NESTED_MAX_DEPTH = 8
NESTED_MAX_DIRS = 20_000
NESTED_RESCAN_S = 30.0
_NESTED_SKIP_DIRS = _SKIP_DIRS | {"dist", "build", "target", "vendor", "third_party", "site-packages", "out",
                                  "coverage", "env"}
_DOC_NAMES = {"readme.md", "license.md", "contributing.md", "changelog.md"}


def default_user_dir() -> Path:
    return Path(environment.raw("MNEMO_USER_SKILLS") or Path.home() / ".mnemo" / "skills")


def builtin_skills_dir() -> Path | None:
    """The starter skills shipped with Mnemo: ``skills/`` at the repository root in a source checkout, else the
    copy a wheel carries as package data (``mnemo/starter_skills``, a symlink to ``skills/`` in the repository)."""
    env = environment.raw("MNEMO_BUILTIN_SKILLS")
    if env:
        return Path(env)
    here = Path(__file__).resolve()
    for parent in here.parents:
        cand = parent / "skills"
        if (parent / "pyproject.toml").is_file() and cand.is_dir():
            return cand
    packaged = here.parents[2] / "starter_skills"        # .../mnemo/core/skills/registry.py -> .../mnemo/
    return packaged.resolve() if packaged.is_dir() else None


@dataclass(frozen=True)
class SkillSource:
    """A place skills are read from. ``kind``: ``dir`` (walk ``root`` for files), ``file`` (one file),
    ``skill_dirs`` (``root/*/SKILL.md``), ``nested`` (AGENTS.md / CLAUDE.md in subdirectories of ``root``, each
    scoped to its subtree). ``format`` None: detect per file name."""

    root: Path
    format: str | None
    scope: str = "project"
    kind: str = "dir"
    suffix: str = ".md"  # files considered in a ``dir`` source
    id_base: Path | None = None  # ids are paths relative to this
    id_prefix: str = ""
    rank: int = 50  # shadowing precedence for same-name Mnemo skills (lower wins)
    skip_docs: bool = False  # ignore README.md & co (documentation next to skills)
    exact_name: str | None = None  # only files with this exact name (e.g. SKILL.md)

    def files(self) -> Iterator[Path]:
        root = self.root
        if self.kind == "file":
            if root.is_file():
                yield root
            return
        if not root.is_dir():
            return
        if self.kind == "skill_dirs":
            for sub in sorted(root.iterdir()):
                f = sub / "SKILL.md"
                if sub.is_dir() and f.is_file():
                    yield f
            return
        if self.kind == "nested":
            yield from _nested_files(root)
            return
        n = 0
        for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
            dirnames[:] = sorted(d for d in dirnames if d not in _SKIP_DIRS)
            for fn in sorted(filenames):
                if not fn.lower().endswith(self.suffix) or (self.exact_name and fn != self.exact_name):
                    continue
                if self.skip_docs and fn.lower() in _DOC_NAMES:
                    continue
                n += 1
                if n > MAX_FILES_PER_SOURCE:
                    return
                yield Path(dirpath) / fn

    def skill_id(self, path: Path) -> str:
        base = self.id_base or (self.root if self.kind != "file" else self.root.parent)
        try:
            rel = path.relative_to(base).as_posix()
        except ValueError:
            rel = path.as_posix()
        return f"{self.id_prefix}{rel}"


_nested_cache: dict[str, tuple[float, list[Path]]] = {}
_nested_busy: set[str] = set()
_nested_lock = threading.Lock()


def _walk_nested(root: Path) -> list[Path]:
    found: list[Path] = []
    visited = 0
    base_depth = len(root.parts)
    for dirpath, dirnames, filenames in os.walk(root, followlinks=False):
        visited += 1
        depth = len(Path(dirpath).parts) - base_depth
        dirnames[:] = [] if depth >= NESTED_MAX_DEPTH or visited >= NESTED_MAX_DIRS else sorted(
            d for d in dirnames if d not in _NESTED_SKIP_DIRS and not d.startswith("."))
        if depth == 0:
            continue
        names = set(filenames)
        found.extend(Path(dirpath) / n for n in NESTED_NAMES if n in names)
        if len(found) >= MAX_FILES_PER_SOURCE:
            break
    return found


def _rescan(key: str, root: Path) -> None:
    try:
        found = _walk_nested(root)
        with _nested_lock:
            _nested_cache[key] = (time.monotonic(), found)
    finally:
        with _nested_lock:
            _nested_busy.discard(key)


def _nested_files(root: Path) -> list[Path]:
    """AGENTS.md / CLAUDE.md files in subdirectories of ``root`` (not ``root`` itself: those are their own
    sources), skipping hidden, dependency and build directories; bounded in depth and directories visited. The
    first call walks; later ones answer from the last walk and, once it is NESTED_RESCAN_S old, start a new walk
    in the background (an activation never waits for a walk of a huge tree)."""
    key = str(root)
    with _nested_lock:
        hit = _nested_cache.get(key)
        stale = hit is None or time.monotonic() - hit[0] >= NESTED_RESCAN_S
        start = hit is not None and stale and key not in _nested_busy
        if start:
            _nested_busy.add(key)
    if hit is None:
        found = _walk_nested(root)
        with _nested_lock:
            _nested_cache[key] = (time.monotonic(), found)
        return list(found)
    if start:
        threading.Thread(target=_rescan, args=(key, root), name="mnemo-nested-rules", daemon=True).start()
    return [p for p in hit[1] if p.is_file()]


def scope_to_subtree(skill: Skill, project_root: Path) -> Skill:
    """A nested AGENTS.md / CLAUDE.md: instructions for the files under its directory, not for the whole project.
    Glob ``<dir>/**`` (escaped: ``app/[id]`` is a literal folder name), named by its path."""
    from wcmatch import glob as wglob

    rel_dir = Path(skill.source_path).parent.relative_to(project_root).as_posix()
    name = f"{rel_dir}/{Path(skill.source_path).name}"
    description = skill.description or f"Instructions for the files under {rel_dir}/"
    out = replace(skill, name=name, description=description, globs=(f"{wglob.escape(rel_dir)}/**",),
                  glob_mode=MINIMATCH_DOT, always_apply=False)
    return replace(out, content_hash=content_hash("\n".join([out.name, out.description, " ".join(out.keywords),
                                                              out.body])))


def project_sources(root: Path) -> list[SkillSource]:
    """Every location read in a project (the table in docs/architecture.md, "Skills")."""
    r = root
    b: dict[str, Any] = {"id_base": r, "scope": "project"}
    return [
        SkillSource(r / ".mnemo" / "skills", FORMAT_MNEMO, rank=0, skip_docs=True, **b),
        SkillSource(r / "skills", FORMAT_MNEMO, rank=10, skip_docs=True, **b),
        SkillSource(r / ".github" / "copilot-instructions.md", FORMAT_COPILOT_REPO, kind="file", **b),
        SkillSource(r / ".github" / "instructions", FORMAT_COPILOT, suffix=".instructions.md", **b),
        SkillSource(r / ".cursor" / "rules", FORMAT_CURSOR, suffix=".mdc", **b),
        SkillSource(r / ".cursorrules", FORMAT_CURSOR_LEGACY, kind="file", **b),
        SkillSource(r / ".claude" / "skills", FORMAT_CLAUDE_SKILL, kind="skill_dirs", **b),
        SkillSource(r / "CLAUDE.md", FORMAT_CLAUDE_MD, kind="file", **b),
        SkillSource(r / ".claude" / "CLAUDE.md", FORMAT_CLAUDE_MD, kind="file", **b),
        SkillSource(r / "CLAUDE.local.md", FORMAT_CLAUDE_MD, kind="file", **b),
        SkillSource(r / "AGENTS.md", FORMAT_AGENTS_MD, kind="file", **b),
        SkillSource(r, None, kind="nested", **b),
        SkillSource(r / ".continue" / "rules", FORMAT_CONTINUE, **b),
        SkillSource(r / ".windsurf" / "rules", FORMAT_WINDSURF, **b),
        SkillSource(r / ".windsurfrules", FORMAT_WINDSURF_LEGACY, kind="file", **b),
    ]


def extra_source(spec: object) -> SkillSource:
    """An extra directory: a path (format detected per file), ``(path, format)``, or a SkillSource."""
    if isinstance(spec, SkillSource):
        return spec
    fmt = None
    if isinstance(spec, tuple | list):
        pair = spec
        spec, fmt = pair[0], pair[1]
    p = Path(str(spec)).expanduser()
    if fmt is not None and fmt not in FORMATS:
        raise ValueError(f"unknown skill format {fmt!r}; one of {', '.join(FORMATS)}")
    suffix = {None: "", FORMAT_CURSOR: ".mdc", FORMAT_COPILOT: ".instructions.md"}.get(fmt, ".md")
    return SkillSource(p, fmt, scope="extra", kind="file" if p.is_file() else "dir", suffix=suffix,
                       exact_name="SKILL.md" if fmt == FORMAT_CLAUDE_SKILL else None,
                       id_prefix=f"{p.name}/", rank=40)


class SkillRegistry:
    """All skills visible from a project. ``load()`` reads every source (re-parsing only files whose
    mtime/size changed); ``refresh_if_changed()`` is a cheap stat scan used by the watcher."""

    def __init__(self, project_root: Path | str | None = None, user_dir: Path | str | None = None,
                 extra_dirs: Iterable[object] = (), include_builtin: bool = False,
                 max_file_bytes: int = MAX_FILE_BYTES, use_user_dir: bool = True):
        self.project_root = Path(project_root).resolve() if project_root else None
        self.user_dir = (Path(user_dir).expanduser() if user_dir else default_user_dir()) if use_user_dir else None
        self.max_file_bytes = max_file_bytes
        srcs: list[SkillSource] = []
        if self.project_root:
            srcs += project_sources(self.project_root)
        if self.user_dir:
            srcs.append(SkillSource(self.user_dir, FORMAT_MNEMO, scope="user", id_base=self.user_dir,
                                    id_prefix="user:", rank=20, skip_docs=True))
        if include_builtin:
            bdir = builtin_skills_dir()
            if bdir and not any(s.root.resolve() == bdir.resolve() for s in srcs if s.root.exists()):
                srcs.append(SkillSource(bdir, FORMAT_MNEMO, scope="builtin", id_base=bdir, id_prefix="builtin:",
                                        rank=30, skip_docs=True))
        srcs += [extra_source(e) for e in extra_dirs]
        self.sources = srcs
        self._lock = threading.RLock()
        self._cache: dict[str, tuple[tuple[int, int], Skill | None, list[Problem]]] = {}
        self._fingerprint: tuple = ()
        self._report = LoadReport()
        self.version = 0
        self._loaded = False

    # -- discovery -------------------------------------------------------------------------------------------
    def _candidates(self) -> list[tuple[Path, str, SkillSource]]:
        out: list[tuple[Path, str, SkillSource]] = []
        seen: set[str] = set()
        for src in self.sources:
            try:
                for f in src.files():
                    key = str(f)
                    if key in seen:
                        continue
                    fmt = src.format or detect_format(f)
                    if fmt is None:
                        continue
                    seen.add(key)
                    out.append((f, fmt, src))
            except OSError:
                continue
        return out

    @staticmethod
    def _stat_key(p: Path) -> tuple[int, int]:
        try:
            st = p.stat()
            return (st.st_mtime_ns, st.st_size)
        except OSError:
            return (-1, -1)

    # -- loading ---------------------------------------------------------------------------------------------
    def load(self) -> LoadReport:
        with self._lock:
            cands = self._candidates()
            report = LoadReport(files_seen=len(cands))
            fingerprint = []
            new_cache = {}
            ids: set[str] = set()
            ranked: list[tuple[Skill, SkillSource]] = []
            for path, fmt, src in cands:
                key = str(path)
                sk = self._stat_key(path)
                fingerprint.append((key, sk))
                cached = self._cache.get(key)
                if cached and cached[0] == sk and sk != (-1, -1):
                    skill, problems = cached[1], cached[2]
                else:
                    skill, problems = read_skill_file(path, fmt, scope=src.scope, skill_id=src.skill_id(path),
                                                      max_bytes=self.max_file_bytes)
                    if skill is not None and src.kind == "nested":
                        skill = scope_to_subtree(skill, src.root)
                new_cache[key] = (sk, skill, problems)
                report.problems.extend(problems)
                if skill is not None:
                    if skill.id in ids:  # same id from two sources: keep both, make the id unique
                        n = 2
                        while f"{skill.id}#{n}" in ids:
                            n += 1
                        skill = _replace_id(skill, f"{skill.id}#{n}")
                    ids.add(skill.id)
                    ranked.append((skill, src))
            report.skills = self._shadow(ranked, report)
            self._cache = new_cache
            self._fingerprint = tuple(fingerprint)
            self._report = report
            self.version += 1
            self._loaded = True
            return report

    @staticmethod
    def _shadow(ranked: list[tuple[Skill, SkillSource]], report: LoadReport) -> list[Skill]:
        """A Mnemo skill named like one from a closer scope (.mnemo/skills > skills/ > ~/.mnemo > builtin) is
        hidden; the report lists it."""
        best: dict[str, tuple[int, Skill]] = {}
        for skill, src in ranked:
            if skill.source_format != FORMAT_MNEMO:
                continue
            key = skill.name.strip().lower()
            if key not in best or src.rank < best[key][0]:
                best[key] = (src.rank, skill)
        out = []
        seen_files: dict[str, str] = {}
        seen_always: dict[str, str] = {}
        for skill, _src in ranked:
            if skill.source_format == FORMAT_MNEMO:
                winner = best[skill.name.strip().lower()][1]
                if winner is not skill:
                    report.shadowed.append({"id": skill.id, "path": skill.source_path, "by": winner.id})
                    continue
            # the same file reached twice (a symlink such as CLAUDE.md -> AGENTS.md), or two always-apply files
            # with the same text, would inject the same rules twice (files `mnemo publish` wrote are never
            # injected: each stays, so each tool's file shows how that tool applies it)
            real = os.path.realpath(skill.source_path)
            dup = seen_files.get(real)
            if dup is None and skill.always_apply and not skill.published:
                dup = seen_always.get(content_hash(skill.body))
            if dup is not None:
                report.shadowed.append({"id": skill.id, "path": skill.source_path, "by": dup})
                continue
            seen_files[real] = skill.id
            if skill.always_apply and not skill.published:
                seen_always[content_hash(skill.body)] = skill.id
            out.append(skill)
        return out

    def refresh_if_changed(self) -> bool:
        """Reload when any skill file was added, removed or changed (mtime/size). Returns True if reloaded."""
        with self._lock:
            if not self._loaded:
                self.load()
                return True
            cands = self._candidates()
            fp = tuple((str(p), self._stat_key(p)) for p, _f, _s in cands)
            if fp == self._fingerprint:
                return False
            self.load()
            return True

    # -- access ----------------------------------------------------------------------------------------------
    @property
    def report(self) -> LoadReport:
        with self._lock:
            if not self._loaded:
                self.load()
            return self._report

    def skills(self) -> list[Skill]:
        return list(self.report.skills)

    def snapshot(self) -> tuple[int, list[Skill]]:
        """(version, skills) read together, for indexes built from the registry."""
        with self._lock:
            rep = self.report
            return self.version, list(rep.skills)

    def get(self, key: str) -> Skill | None:
        """A skill by id, by name (case-insensitive), or by source path."""
        skills = self.skills()
        for s in skills:
            if s.id == key:
                return s
        low = key.strip().lower()
        for s in skills:
            if s.name.lower() == low or s.source_path == key:
                return s
        return None

    def watch(self, interval: float = 1.0, on_change: Callable[[LoadReport], None] | None = None) -> SkillWatcher:
        w = SkillWatcher(self, interval, on_change)
        w.start()
        return w


def _replace_id(skill: Skill, new_id: str) -> Skill:
    from dataclasses import replace

    return replace(skill, id=new_id)


class SkillWatcher(threading.Thread):
    """Polls the registry (stat only) so edits to skill files take effect without a restart."""

    def __init__(self, registry: SkillRegistry, interval: float = 1.0,
                 on_change: Callable[[LoadReport], None] | None = None):
        super().__init__(name="mnemo-skill-watcher", daemon=True)
        self.registry = registry
        self.interval = max(0.05, float(interval))
        self.on_change = on_change
        self._stop_event = threading.Event()
        self.errors = 0

    def run(self) -> None:
        while not self._stop_event.wait(self.interval):
            try:
                if self.registry.refresh_if_changed() and self.on_change:
                    self.on_change(self.registry.report)
            except Exception:  # noqa: BLE001 - the watcher must keep running
                self.errors += 1

    def stop(self, timeout: float | None = 2.0) -> None:
        self._stop_event.set()
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)
