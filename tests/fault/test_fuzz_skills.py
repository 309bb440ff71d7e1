"""Fuzzing skill parsing (hypothesis): frontmatter and whole rule files of every format.

`split_frontmatter` may only raise FrontmatterError; `read_skill_file` never raises (a bad file is a Problem);
nothing takes more than 2 s; YAML bombs (billion laughs, deep nesting, huge headers) are refused with a message that
names the limit; YAML tags never execute anything; loading a directory of hostile files and activating skills on
it never fails. Each fuzz test reports its own figures, as measured, when its examples have run.
"""

from __future__ import annotations

import time

from _helpers import FULL, figure
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemo.core.skills import SkillEngine, SkillRegistry, read_skill_file
from mnemo.core.skills.frontmatter import FrontmatterError, split_frontmatter

EXAMPLES = 10000 if FULL else 1000
SETTINGS = settings(max_examples=EXAMPLES, deadline=2000, derandomize=not FULL, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
NAMES = ["SKILL.md", "rule.mdc", "x.instructions.md", "copilot-instructions.md", "CLAUDE.md", "AGENTS.md",
         ".cursorrules", ".windsurfrules", "note.md"]
DIRS = ["skills", ".cursor/rules", ".github/instructions", ".github", ".claude/skills/s", ".continue/rules",
        ".windsurf/rules", "."]

yaml_scalar = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["**/*.ts", "*", "[a, b]", "{a: 1}", "&a x", "*a", "!!python/object/apply:os.system ['touch "
                     "PWNED']", "|", ">-", "'unterminated", '"bad \\q escape"', "~", "null", "yes", "0x1F", "1e999",
                     "- item", "key: value: more", "\t", "%YAML 1.1", "---", "...", "\u202eevil", "\x00"]),
)
yaml_line = st.one_of(
    st.builds(lambda k, v: f"{k}: {v}", st.sampled_from(["name", "description", "globs", "applyTo", "alwaysApply",
                                                           "keywords", "importance", "tools_allowed", "trigger",
                                                           "paths", "tags", "x"]), yaml_scalar),
    st.builds(lambda v: f"  - {v}", yaml_scalar),
    st.builds(lambda v: f"    {v}", yaml_scalar),
    yaml_scalar,
)
frontmatter_text = st.builds(
    lambda lines, body, close: "---\n" + "\n".join(lines) + ("\n---\n" if close else "\n") + body,
    st.lists(yaml_line, max_size=15), st.text(max_size=200), st.booleans())


def timed(fn, *args, stats: dict | None = None):
    t0 = time.perf_counter()
    out = fn(*args)
    took = time.perf_counter() - t0
    if stats is not None:
        stats["max_s"] = max(stats["max_s"], took)
    # a guard against a runaway (an unbounded alias bomb takes minutes or exhausts memory), not a speed target:
    # loose enough for a 2-core machine under heavy load
    assert took < 15.0, f"took {took:.2f} s"
    return out


def new_stats() -> dict:
    return {"examples": 0, "refused": 0, "crashes": 0, "max_s": 0.0}


def report(stats: dict, examples: str, crashes: str) -> None:
    name = "test_fuzz_skills" + ("[full]" if FULL else "")
    figure(name, examples, f"{stats['examples']} ({stats['refused']})")
    figure(name, crashes, stats["crashes"])
    figure(name, f"slowest ({examples.split(' (')[0]})", f"{stats['max_s'] * 1000:.0f}", unit="ms")


def test_frontmatter_only_raises_frontmatter_error():
    stats = new_stats()

    @SETTINGS
    @given(text=st.one_of(frontmatter_text, st.text(max_size=2000)))
    def check(text):
        stats["examples"] += 1
        try:
            fm = timed(split_frontmatter, text, stats=stats)
        except FrontmatterError as exc:
            stats["refused"] += 1
            assert exc.reason and exc.line >= 1
            return
        except Exception:
            stats["crashes"] += 1
            raise
        assert isinstance(fm.data, dict) and all(isinstance(k, str) for k in fm.data) and isinstance(fm.body, str)

    try:
        check()
    finally:
        report(stats, "frontmatter examples (refused with FrontmatterError)",
               "frontmatter crashes (an exception other than FrontmatterError)")


def test_read_skill_file_never_raises(tmp_path_factory):
    stats = new_stats()

    @SETTINGS
    @given(data=st.one_of(frontmatter_text.map(lambda s: s.encode("utf-8", "surrogatepass")),
                          st.binary(max_size=3000)),
           name=st.sampled_from(NAMES), where=st.sampled_from(DIRS))
    def check(data, name, where):
        d = tmp_path_factory.mktemp("sk") / where
        d.mkdir(parents=True, exist_ok=True)
        p = d / name
        p.write_bytes(data)
        stats["examples"] += 1
        try:
            skill, problems = timed(read_skill_file, p, stats=stats)
        except Exception:
            stats["crashes"] += 1
            raise
        if skill is None:
            stats["refused"] += 1
            assert any(pr.severity == "error" for pr in problems)
        else:
            assert skill.name and isinstance(skill.body, str)
            assert "\u202e" not in skill.body and "\u200b" not in skill.body  # invisible characters are stripped

    try:
        check()
    finally:
        report(stats, "rule files of every format (skipped with a Problem)",
               "rule file crashes (an exception escaping the parser / loader)")


BOMBS = {
    "billion laughs": "---\na: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\n"
                      "c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n---\nbody\n",
    "deep nesting": "---\nx: " + "[" * 5000 + "]" * 5000 + "\n---\nbody\n",
    "deep mapping": "---\n" + "".join("  " * i + f"k{i}:\n" for i in range(200)) + "---\nbody\n",
    "huge header": "---\ndescription: " + "a" * 70_000 + "\n---\nbody\n",
    "many nodes": "---\nkeywords: [" + ", ".join(f"k{i}" for i in range(5000)) + "]\n---\nbody\n",
    "python tag": "---\nname: !!python/object/apply:os.system ['touch PWNED']\n---\nbody\n",
    "unterminated": "---\nname: x\nbody without a closing line\n",
}


def test_yaml_bombs_are_refused_with_a_limit(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    results = {}
    for name, text in BOMBS.items():
        p = tmp_path / "skills" / f"{name.replace(' ', '-')}.md"
        p.parent.mkdir(exist_ok=True)
        p.write_text(text)
        skill, problems = timed(read_skill_file, p)
        results[name] = "refused" if skill is None else "read"
        if skill is None:
            assert problems and problems[0].reason
    assert not (tmp_path / "PWNED").exists(), "a YAML tag executed code"
    for name in ("billion laughs", "deep nesting", "huge header", "many nodes", "unterminated"):
        assert results[name] == "refused", name
    huge = read_skill_file(tmp_path / "skills" / "huge-header.md")[1][0].reason
    assert "64 KiB" in huge and "MNEMO_MAX_FRONTMATTER_BYTES" in huge
    bombs = {k: v for k, v in results.items() if k != "python tag"}
    figure("test_fuzz_skills", "YAML bombs and broken headers refused",
           f"{sum(v == 'refused' for v in bombs.values())}/{len(bombs)}", detail=bombs)
    figure("test_fuzz_skills", "YAML tags executed", 0, python_tag=results["python tag"] + " as plain text")


def test_registry_and_activation_survive_a_directory_of_hostile_files(tmp_path, hash_embedder):
    root = tmp_path / "repo"
    for i, text in enumerate(BOMBS.values()):
        p = root / ".cursor" / "rules" / f"r{i}.mdc"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    (root / "skills").mkdir(parents=True)
    (root / "skills" / "bin.md").write_bytes(bytes(range(256)))
    (root / "skills" / "latin1.md").write_bytes("---\nname: caf\xe9\n---\nbody".encode("latin-1"))
    (root / "skills" / "ok.md").write_text("---\nname: ok\nglobs: ['**/*.py']\n---\nUse type hints.\n")
    reg = SkillRegistry(root, use_user_dir=False)
    report = timed(reg.load)
    eng = SkillEngine(reg, hash_embedder)
    res = timed(eng.activate, str(root / "src" / "a.py"), "add type hints")
    assert [a.name for a in res.activations] == ["ok"]
    assert report.skipped >= 5
