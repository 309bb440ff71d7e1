"""Markdown export and import (core/sharing/markdown_format.py, core/sharing/markdown_files.py).

Property (hypothesis): export -> import into a fresh store -> export again gives identical files, for memories
whose text holds heading-like lines, backslashes, backticks and separators, and whose tags, kinds and anchors hold
the characters the metadata line encodes. Then what a person's edits do: a changed text or tag is an edit, a new
heading a new memory, a removed entry a report (nothing deleted), a forgotten id stays out; bad files are refused
with the file and line, before anything is written.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from mnemo.core.embedding.embedder import HashEmbedder
from mnemo.core.engine import Engine
from mnemo.core.errors import InvalidInput
from mnemo.core.models import Context, Memory
from mnemo.core.safety import screen as safety
from mnemo.core.sharing import markdown_format as memory_md
from mnemo.core.sharing.markdown_files import export_markdown, import_markdown
from mnemo.core.text import content_hash

CTX = Context(project_id="git-md", project_name="md", root=None, branch="main", default_branch="main")
EMB = HashEmbedder()
T0 = 1_700_000_000.0
PROPS = settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])

TOKENS = ["alpha", "bravo", "## heading", "\\## escaped", "\\\\", "`code`", "a · b", "50%", "x,y", "p;q", "é",
          "  indented", "- item", "# h1", "?k=v&w", "~tilde", "##", "#", "*"]
LINE = st.lists(st.sampled_from(TOKENS), min_size=1, max_size=4).map(" ".join)
TEXT = st.lists(LINE | st.just(""), min_size=1, max_size=5).map("\n".join)
ODD = ["a,b", "c;d", "x y", "p·q", "ok", "50%", "`t`", "k=v", "é", "~x"]
PATH = st.lists(st.sampled_from(["src", "a b", "x#y", "q?r", "k=v&w", "50%", "é", "~h"]), min_size=1,
                max_size=3).map(lambda parts: "/".join(parts) + ".py")
ANCHOR = st.fixed_dictionaries({"path": PATH}, optional={
    "symbol": st.sampled_from(["charge", "Pay.charge", "f(x)", "~odd", "a;b"]),
    "hash": st.sampled_from(["0" * 64, "ab12"]),
    "kind": st.sampled_from(["function", "method"])})
LINES = st.tuples(st.integers(0, 500), st.integers(0, 50))


@st.composite
def memory_specs(draw):
    n = draw(st.integers(1, 6))
    out = []
    for i in range(n):
        type_ = draw(st.sampled_from(["project", "reference", "user", "feedback"]))
        scope = draw(st.sampled_from(["project", "project", "global"]))
        anchors = draw(st.lists(ANCHOR, max_size=2))
        for a in anchors:
            if draw(st.booleans()):
                start, span = draw(LINES)
                a.update(start_line=start, end_line=start + span)
        out.append({
            "text": f"note {i}: " + draw(TEXT), "type": type_, "scope": scope,
            "kind": draw(st.sampled_from(["fact", "decision", "a·b", "with,comma", "x`y"])),
            "tags": draw(st.lists(st.sampled_from(ODD), max_size=3, unique=True)),
            "importance": draw(st.sampled_from([0.5, 0.25, 0.9])),
            "branch": None if type_ in ("user", "feedback") or scope == "global" else draw(
                st.sampled_from(["main", "feature/x", None])),
            "anchors": anchors, "created_at": T0 + draw(st.integers(0, 30)) * 86400.0})
    return out


def new_engine(d: str, name: str) -> Engine:
    return Engine(Path(d) / name, embedder=EMB, lock=False, start_indexer=False)


def put(engine: Engine, specs: list[dict], start: int = 0) -> list[Memory]:
    mems = []
    for i, s in enumerate(specs, start=start):
        text, _ = safety.clean_text(s["text"])
        mems.append(Memory(id=f"mem-{i:020d}", text=text, type=s["type"], kind=s["kind"], scope=s["scope"],
                           project_id=CTX.project_id, project_name=CTX.project_name, branch=s["branch"],
                           importance=s["importance"], confirmations=1, created_at=s["created_at"],
                           updated_at=s["created_at"], last_accessed=T0, access_count=0,
                           content_hash=content_hash(text), source="user", tags=s["tags"], anchors=s["anchors"]))
    vecs = EMB.embed([m.text for m in mems])
    with engine.store.write() as c:
        for m, v in zip(mems, vecs, strict=True):
            engine.store.insert_memory(c, m, v, EMB.model_id)
    return mems


def files(d: Path) -> dict[str, str]:
    return {p.name: p.read_text(encoding="utf-8") for p in sorted(d.glob("*.md"))}


@PROPS
@given(memory_specs())
def test_export_import_export_is_identical(specs):
    assume(not any(safety.is_suspicious(safety.clean_text(s["text"])[1]) for s in specs))
    with tempfile.TemporaryDirectory() as d:
        a, b = new_engine(d, "a"), new_engine(d, "b")
        try:
            mems = put(a, specs)
            first = export_markdown(a, CTX, f"{d}/one")
            assert first["memories"] == len(mems)
            with b.store.write() as c:  # b held these ids once (a repair lost them): restored with them
                for m in mems:
                    b.store.log_change(c, m.id, f"p-{CTX.project_id}", "delete")
            report = import_markdown(b, CTX, f"{d}/one")
            assert sorted(report["restored"]) == sorted(m.id for m in mems)
            assert report["skipped"] == report["removed"] == report["edited"] == []
            export_markdown(b, CTX, f"{d}/two")
            assert files(Path(d, "two")) == files(Path(d, "one"))
            for m in mems:  # and the store holds them as they were
                got = b.store.get_memory(m.id)
                assert (got.text, got.type, got.kind, got.tags, got.anchors, got.scope, got.branch) == \
                    (m.text, m.type, m.kind, m.tags, m.anchors, m.scope, m.branch)
            again = import_markdown(a, CTX, f"{d}/two")  # into the store it came from: nothing to do
            assert again["unchanged"] == len(mems) and not (again["edited"] or again["restored"] or
                                                            again["created"] or again["removed"])
        finally:
            a.close()
            b.close()


@PROPS
@given(TEXT, st.lists(ANCHOR, max_size=3), st.lists(st.sampled_from(ODD), max_size=4))
def test_the_format_alone_round_trips(text, anchors, tags):
    clean, _ = safety.clean_text(text)
    assume(clean)
    m = {"id": "mem-1", "text": clean, "kind": "k,·`", "tags": tags, "anchors": anchors, "branch": "b·1",
         "importance": 0.3, "created_at": T0}
    rendered = memory_md.render_file("project", "project", [m])
    scope, type_, [entry] = memory_md.parse_file(rendered, "x.md")
    assert (scope, type_) == ("project", "project")
    got = {"tags": [], "anchors": [], "branch": None, "importance": 0.5, **entry}
    assert {k: got[k] for k in ("id", "text", "kind", "tags", "anchors", "branch", "importance")} == \
        {k: m[k] for k in ("id", "text", "kind", "tags", "anchors", "branch", "importance")}
    assert memory_md.render_file(scope, type_, [entry]) == rendered


@pytest.fixture
def eng(tmp_path):
    e = new_engine(str(tmp_path), "s")
    yield e
    e.close()


def test_a_persons_edits_are_edits_new_entries_memories_removals_reports(eng, tmp_path):
    mems = put(eng, [
        {"text": "deploys need the VPN", "type": "project", "scope": "project", "kind": "lesson", "tags": ["ops"],
         "importance": 0.5, "branch": "main", "anchors": [], "created_at": T0},
        {"text": "staging is rebuilt nightly", "type": "project", "scope": "project", "kind": "fact", "tags": [],
         "importance": 0.5, "branch": "main", "anchors": [], "created_at": T0 + 1},
        {"text": "old note nobody needs", "type": "project", "scope": "project", "kind": "fact", "tags": [],
         "importance": 0.5, "branch": "main", "anchors": [], "created_at": T0 + 2}])
    export_markdown(eng, CTX, str(tmp_path / "md"))
    f = tmp_path / "md" / "project-project.md"
    text = f.read_text()
    text = text.replace("deploys need the VPN", "deploys need the VPN and a hardware key")
    text = text.replace("kind: lesson · tags: ops", "kind: lesson · tags: ops, security")
    cut = text.index("## old note nobody needs")
    text = text[:cut] + "## a new one\n\nrelease notes go in CHANGELOG.md\n"
    f.write_text(text)
    dry = import_markdown(eng, CTX, str(tmp_path / "md"), dry_run=True)
    assert [e["fields"] for e in dry["edited"]] == [["tags", "text"]] and dry["created"] == [
        {"where": "project-project.md:15"}]
    assert eng.store.get_memory(mems[0].id).text == "deploys need the VPN"  # a dry run writes nothing
    res = import_markdown(eng, CTX, str(tmp_path / "md"))
    assert res["edited"][0]["id"] == mems[0].id and res["unchanged"] == 1
    edited = eng.store.get_memory(mems[0].id)
    assert (edited.text, edited.tags) == ("deploys need the VPN and a hardware key", ["ops", "security"])
    assert edited.content_hash == content_hash(edited.text) and edited.id == mems[0].id
    [new] = res["created"]
    assert new["status"] == "created" and eng.store.get_memory(new["id"]).text == "release notes go in CHANGELOG.md"
    assert res["removed"] == [{"id": mems[2].id, "title": "old note nobody needs", "file": "project-project.md"}]
    assert eng.store.get_memory(mems[2].id) is not None  # reported, not deleted


def test_forgotten_ids_stay_out_and_bad_files_are_refused_before_any_write(eng, tmp_path):
    [m] = put(eng, [{"text": "use pnpm", "type": "project", "scope": "project", "kind": "fact", "tags": [],
                       "importance": 0.5, "branch": "main", "anchors": [], "created_at": T0}])
    export_markdown(eng, CTX, str(tmp_path / "md"))
    with eng.store.write() as c:
        eng.store.forget_memory(c, m, "wrong", T0)
    res = import_markdown(eng, CTX, str(tmp_path / "md"))
    assert res["restored"] == [] and res["skipped"][0]["reason"].startswith("forgotten here")

    f = tmp_path / "md" / "project-project.md"
    good = f.read_text()
    f.write_text(good + "\n## new\n\nfresh note\n\n## broken\n`id: mem-x · colour: red`\n\ntext\n")
    with pytest.raises(InvalidInput, match=r"project-project.md:\d+: unknown field 'colour'"):
        import_markdown(eng, CTX, str(tmp_path / "md"))
    f.write_text(good + "\n## broken\nid: mem-x · kind: fact\n\ntext\n")
    with pytest.raises(InvalidInput, match=r"project-project.md:\d+: a metadata line must be one code span"):
        import_markdown(eng, CTX, str(tmp_path / "md"))
    f.write_text(good + "\n## leaks\n\naws key AKIAIOSFODNN7EXAMPLE secret wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY\n")
    with pytest.raises(Exception, match=r"project-project.md:\d+"):
        import_markdown(eng, CTX, str(tmp_path / "md"))
    f.write_text(good + "\n## outside\n`id: mem-y · kind: fact · anchors: ../etc/passwd`\n\nx\n")
    with pytest.raises(InvalidInput, match="outside the project"):
        import_markdown(eng, CTX, str(tmp_path / "md"))
    assert eng.store.listed(CTX.project_id, ("project",)) == []  # nothing was written by the refused imports
    (tmp_path / "other.md").write_text("# Notes\n\n## x\n\ny\n")
    with pytest.raises(InvalidInput, match="not a Mnemo memories file"):
        import_markdown(eng, CTX, str(tmp_path / "other.md"))
    m2 = put(eng, [{"text": "use yarn", "type": "project", "scope": "project", "kind": "fact", "tags": [],
                    "importance": 0.5, "branch": "main", "anchors": [], "created_at": T0}], start=7)[0]
    export_markdown(eng, CTX, str(tmp_path / "md"))
    good = f.read_text()
    f.write_text(good.replace("branch: main", "branch: other").replace("use yarn", "use yarn 4"))
    res = import_markdown(eng, CTX, str(tmp_path / "md"))
    assert res["edited"] == [] and "a branch is not changed by an import" in res["skipped"][-1]["reason"]
    assert eng.store.get_memory(m2.id).text == "use yarn"
    f.write_text(good)
    (tmp_path / "md" / "README.md").write_text("# What this folder is\n\n## notes\n\nexported memories\n")
    res = import_markdown(eng, CTX, str(tmp_path / "md"), dry_run=True)
    assert res["ignored"] == ["README.md"] and res["files"] == ["project-project.md"]
    (tmp_path / "md" / "project-project.md").unlink()
    with pytest.raises(InvalidInput, match="no Mnemo memories files"):
        import_markdown(eng, CTX, str(tmp_path / "md"))
    with pytest.raises(InvalidInput, match="does not exist"):
        import_markdown(eng, CTX, str(tmp_path / "nowhere"))


def test_import_restores_only_ids_the_store_held_and_screens_the_branch(tmp_path):
    """Issue 21, items 2 and 3: an id the store's change log names is restored with it (its branch through the
    secrets policy, a missing branch the current one); a made-up id becomes a new memory with a new id."""
    import dataclasses

    from mnemo.core.errors import SecretDetected

    token = "ghp_" + "a1B2c3D4e5F6g7H8i9J0k1L2m3N4o5P6q7R8"
    eng = new_engine(str(tmp_path), "a")
    try:
        held = "mem-" + "1" * 20
        with eng.store.write() as c:
            eng.store.log_change(c, held, f"p-{CTX.project_id}", "delete")  # held once (a repair lost it)
        (tmp_path / "project-project.md").write_text(
            "# Mnemo memories: scope project, type project\n\n"
            f"## a\n`id: {held} · kind: fact · branch: {token}`\n\ncharges are idempotent\n\n"
            f"## b\n`id: mem-{'9' * 20} · kind: fact`\n\nrefunds go through the ledger\n")
        with pytest.raises(SecretDetected) as err:
            import_markdown(eng, CTX, str(tmp_path / "project-project.md"))
        assert "project-project.md:3" in err.value.message and token not in err.value.message
        assert eng.store.get_memory(held) is None
        red = dataclasses.replace(CTX, secrets="redact")
        res = import_markdown(eng, red, str(tmp_path / "project-project.md"))
        assert res["restored"] == [held] and eng.store.get_memory(held).branch.startswith("[REDACTED")
        [made] = res["created"]
        assert made["requested_id"] == f"mem-{'9' * 20}" and made["id"] != made["requested_id"]
        assert eng.store.get_memory(made["id"]).branch == "main" and eng.store.get_memory(made["requested_id"]) is None
        held2 = "mem-" + "2" * 20
        with eng.store.write() as c:
            eng.store.log_change(c, held2, f"p-{CTX.project_id}", "delete")
        (tmp_path / "project-project.md").write_text(  # no branch named: the current one, not every branch
            "# Mnemo memories: scope project, type project\n\n"
            f"## c\n`id: {held2} · kind: fact`\n\nwebhooks are signed\n")
        feature = dataclasses.replace(CTX, branch="feature/x")
        assert import_markdown(eng, feature, str(tmp_path / "project-project.md"))["restored"] == [held2]
        assert eng.store.get_memory(held2).branch == "feature/x"
    finally:
        eng.close()
