"""All five real corpora (~940 rule files written by other people) load: every file is either loaded or reported
with a reason, nothing crashes, and the parsed fields agree with the corpora's own index."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemo.core.skills import SkillRegistry
from mnemo.core.skills.globs import split_patterns
from mnemo.core.skills.model import FORMAT_CLAUDE_SKILL, FORMAT_CONTINUE, FORMAT_COPILOT, FORMAT_CURSOR

DATA = Path(__file__).resolve().parents[2].parent / "shared" / "data"
CORPORA = {
    "continue_rules": FORMAT_CONTINUE,
    "copilot_instructions": FORMAT_COPILOT,
    "cursor_mdc_sanjeed5": FORMAT_CURSOR,
    "cursorrules_current": FORMAT_CURSOR,
    "wshobson_skills": FORMAT_CLAUDE_SKILL,
}

pytestmark = pytest.mark.shared_data


@pytest.fixture(scope="module")
def data() -> Path:
    if not (DATA / "skills").is_dir():
        pytest.skip(f"needs the evaluation data at {DATA} (../shared/data); absent in this clone")
    return DATA


def _rule_files(d: Path) -> list[Path]:
    return [p for p in d.rglob("*") if p.is_file() and p.suffix in (".md", ".mdc")]


@pytest.mark.parametrize("corpus", sorted(CORPORA))
def test_corpus_loads_without_crash(data, corpus):
    d = data / "skills" / corpus
    files = _rule_files(d)
    rep = SkillRegistry(None, use_user_dir=False, extra_dirs=[(d, CORPORA[corpus])]).load()
    errors = {p.path for p in rep.problems if p.severity == "error"}
    assert rep.files_seen == len(files)
    assert rep.loaded + len(errors) == len(files)  # every file loaded or reported
    for p in rep.problems:
        assert p.path and p.line >= 1 and p.reason
    index = [json.loads(line) for line in open(data / "skills" / f"{corpus}.jsonl", encoding="utf-8")]
    assert len(index) == len(files)
    by_path = {Path(s.source_path).relative_to(d).as_posix(): s for s in rep.skills}
    for rec in index:
        s = by_path[rec["path"]]
        raw = rec["globs_raw"] or ""
        expected = [] if (CORPORA[corpus] == FORMAT_COPILOT and raw.startswith("[")) else split_patterns(rec["globs"])
        assert list(s.globs) == expected, rec["id"]
        assert s.description == (rec["description"] or "").strip().strip('"'), rec["id"]


def test_all_corpora_together_report_counts(data):
    extra = [(data / "skills" / c, f) for c, f in CORPORA.items()]
    rep = SkillRegistry(None, use_user_dir=False, extra_dirs=extra).load()
    total = sum(len(_rule_files(data / "skills" / c)) for c in CORPORA)
    d = rep.to_dict(skills=False)
    assert d["files_seen"] == total >= 900
    assert d["loaded"] + d["skipped"] == total
    assert d["loaded"] == total  # today every real file is usable; a regression would show here
    assert sum(d["by_format"].values()) == d["active_skills"]
