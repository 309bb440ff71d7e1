"""Shared by the skill-activation benchmarks and the fitting script: real rule corpora laid out in temporary git
repositories where each tool keeps them, MetaTool's tools as skills, the dev set and its labels, and the
request-level metrics computed the way `SkillEngine.activate` decides.

Universe per repository (fixed, no sampling): the WHOLE corpus (68-257 rules written by other people) plus Mnemo's
10 starter skills, loaded as the service loads a project (`include_builtin=True`, no user folder). The starter
requests of the dev set run in the `continue_rules` repository (its 68 rules are their distractors).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "server"))

from mnemo.core.skills import SkillEngine, SkillRegistry  # noqa: E402
from mnemo.core.skills.model import Skill  # noqa: E402

DEV_SET = Path(__file__).resolve().parent / "data" / "activation_dev.jsonl"
# Short messages an agent's user types that no skill serves ("continue", "thanks!"): written for Mnemo; the tune
# half chose evidence.COVERAGE_MIN_WORDS, the test half is reported. Run in every repository with no file.
CHATTER = Path(__file__).resolve().parent / "data" / "activation_chatter.jsonl"
CORPORA = ("copilot_instructions", "cursorrules_current", "cursor_mdc_sanjeed5", "continue_rules", "wshobson_skills")
STARTER_REPO = "continue_rules"  # where the dev set's `starter` requests run


def _target(corpus: str, src: Path, rel: Path) -> Path:
    """Where a rule file of ``corpus`` lives in a project that uses its tool."""
    if corpus == "copilot_instructions":
        return Path(".github/instructions") / src.name
    if corpus in ("cursorrules_current", "cursor_mdc_sanjeed5"):
        return Path(".cursor/rules") / src.name
    if corpus == "continue_rules":
        return Path(".continue/rules") / rel.relative_to("rules")
    if corpus == "wshobson_skills":
        return Path(".claude/skills") / src.parent.name / "SKILL.md"
    raise ValueError(corpus)


def layout_repo(data: Path, corpus: str, dest: Path) -> Path:
    """A temporary git repository holding every rule file of ``corpus`` where its tool reads it."""
    root = data / "skills" / corpus
    dest.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", str(dest)], check=True)
    for src in sorted(root.rglob("*")):
        if not src.is_file() or src.suffix not in (".md", ".mdc") or src.name == "LICENSE":
            continue
        if corpus == "wshobson_skills" and src.name != "SKILL.md":
            continue
        out = dest / _target(corpus, src, src.relative_to(root))
        out.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, out)
    return dest


def write_tools(tools: dict[str, str], folder: Path) -> None:
    """MetaTool's tools as Mnemo skills: name and description, nothing else."""
    folder.mkdir(parents=True, exist_ok=True)
    for name, desc in tools.items():
        head = yaml.safe_dump({"name": name, "description": desc}, sort_keys=False, allow_unicode=True)
        (folder / f"{name}.md").write_text(f"---\n{head}---\n", encoding="utf-8")


def short_name(skill: Skill) -> str:
    """The dev set's name for a skill: ``starter:<name>`` for a starter skill, else the rule file's stem (the
    skill folder for a SKILL.md)."""
    if skill.scope == "builtin":
        return f"starter:{skill.name}"
    p = Path(skill.source_path)
    if p.name == "SKILL.md":
        return p.parent.name
    name = p.name
    for ext in (".instructions.md", ".mdc", ".md", ".md"):  # one continue rule is named *.md.md
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name


@dataclass
class Universe:
    """One repository's engine and the dev-set name -> skill position map."""

    name: str
    engine: SkillEngine
    pos: dict[str, int] = field(default_factory=dict)  # dev-set name -> position in the engine's index
    pos_by_id: dict[str, int] = field(default_factory=dict)  # skill id -> position

    def positions(self, names: list[str]) -> list[int]:
        missing = [n for n in names if n not in self.pos]
        if missing:
            raise KeyError(f"{self.name}: unknown skill(s) {missing}")
        return [self.pos[n] for n in names]


def _universe(name: str, engine: SkillEngine) -> Universe:
    idx = engine._ensure_index()
    u = Universe(name, engine)
    for i, s in enumerate(idx.skills):
        u.pos.setdefault(short_name(s), i)
        u.pos_by_id[s.id] = i
    return u


def build_universes(data: Path, tmp: Path, embedder, vector_cache: str | None) -> dict[str, Universe]:
    """One engine per corpus repository (with the starter skills), as the service builds it for a project."""
    out = {}
    for corpus in CORPORA:
        repo = layout_repo(data, corpus, tmp / corpus)
        reg = SkillRegistry(repo, use_user_dir=False, include_builtin=True)
        eng = SkillEngine(reg, embedder, auto_refresh=False, vector_cache=vector_cache)
        eng.warm()
        out[corpus] = _universe(corpus, eng)
    return out


def metatool_universe(data: Path, tmp: Path, embedder, vector_cache: str | None) -> tuple[Universe, list[dict]]:
    """MetaTool's 199 tools as the skills of a project (no starter skills) and the awareness records."""
    tools = json.loads((data / "metatool" / "plugin_des.json").read_text())
    repo = tmp / "metatool"
    subprocess.run(["git", "init", "-q", str(repo)], check=True)
    write_tools(tools, repo / ".mnemo" / "skills")
    reg = SkillRegistry(repo, use_user_dir=False, include_builtin=False)
    eng = SkillEngine(reg, embedder, auto_refresh=False, vector_cache=vector_cache)
    eng.warm()
    u = Universe("metatool", eng)
    for i, s in enumerate(eng._ensure_index().skills):
        u.pos[s.name] = i
        u.pos_by_id[s.id] = i
    assert len(u.pos) == len(tools), (len(u.pos), len(tools))
    rows = [json.loads(line) for line in open(data / "metatool" / "awareness.jsonl", encoding="utf-8")]
    return u, rows


def load_dev(path: Path = DEV_SET) -> list[dict]:
    return [json.loads(line) for line in open(path, encoding="utf-8") if line.strip()]


def repo_of(rec: dict) -> str:
    return STARTER_REPO if rec["corpus"] == "starter" else rec["corpus"]


@dataclass
class Case:
    """One request as the metrics see it: where it runs, what must activate (groups of acceptable skills; empty
    for a negative), and its slices."""

    id: str
    source: str  # metatool | dev
    split: str
    universe: str
    file: str | None
    message: str | None
    groups: list[list[int]]
    kind: str
    corpus: str
    evidence_kind: str = ""  # description-only / catch-all / specific glob (of the first expected skill)
    fmt: str = ""  # source format of the first expected skill


def evidence_kind(skill: Skill, engine: SkillEngine) -> str:
    idx = engine._ensure_index()
    i = next(j for j, s in enumerate(idx.skills) if s.id == skill.id)
    if idx.specific[i]:
        return "specific_glob"
    return "catch_all_glob" if skill.globs else "description_only"


def dev_cases(records: list[dict], universes: dict[str, Universe]) -> list[Case]:
    out = []
    for r in records:
        u = universes[repo_of(r)]
        groups = [u.positions(g) for g in r["expected"]]
        kind_, fmt = "", ""
        if groups:
            s = u.engine._ensure_index().skills[groups[0][0]]
            kind_, fmt = evidence_kind(s, u.engine), s.source_format
        out.append(Case(r["id"], "dev", r["split"], u.name, r["file"], r["request"], groups, r["kind"],
                        r["corpus"], kind_, fmt))
    return out


def metatool_cases(rows: list[dict], u: Universe) -> list[Case]:
    return [Case(r["id"], "metatool", r["split"], u.name, None, r["query"],
                 [[u.pos[r["tool"]]]] if r["label"] == "positive" else [], r["label"], "metatool")
            for r in rows]


def chatter_cases(universes: dict[str, Universe], path: Path = CHATTER) -> list[Case]:
    out = []
    for r in (json.loads(line) for line in open(path, encoding="utf-8") if line.strip()):
        for name in universes:
            out.append(Case(f"{r['id']}@{name}", "chatter", r["split"], name, None, r["request"], [], "chatter", name))
    return out


def hit_at(groups: list[list[int]], activated: list[int], k: int = 3) -> bool:
    """Every needed skill (one of each group's acceptable ones) is among the first k activated."""
    top = set(activated[:k])
    return all(any(i in top for i in g) for g in groups)


def rates(cases: list[Case], activated: dict[str, list[int]], k: int = 3) -> dict:
    """Positives: hit@k over the activated skills (always-apply ones excluded); negatives: nothing activated."""
    pos = [c for c in cases if c.groups]
    neg = [c for c in cases if not c.groups]
    hit = [hit_at(c.groups, activated[c.id], k) for c in pos]
    quiet = [not activated[c.id] for c in neg]
    return {"pos_hit3": round(float(np.mean(hit)), 4) if hit else None,
            "neg_quiet": round(float(np.mean(quiet)), 4) if quiet else None,
            "n_pos": len(pos), "n_neg": len(neg)}


def by_slice(cases: list[Case], activated: dict[str, list[int]], key) -> dict:
    out: dict[str, dict] = {}
    for name in sorted({key(c) for c in cases if key(c)}):
        sub = [c for c in cases if key(c) == name]
        r = rates(sub, activated)
        out[name] = r["pos_hit3"] if r["n_pos"] else r["neg_quiet"]
        out[name + "_n"] = len(sub)
    return out


def activated_by_product(universes: dict[str, Universe], cases: list[Case]) -> dict[str, list[int]]:
    """The product's own decision: `SkillEngine.activate` with every filter on; always-apply skills left out
    (they are in every answer by definition)."""
    out = {}
    for c in cases:
        u = universes[c.universe]
        res = u.engine.activate(c.file, c.message)
        out[c.id] = [u.pos_by_id[a.skill_id] for a in res.activations if not a.always]
    return out
