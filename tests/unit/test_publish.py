"""`mnemo publish`'s parts: the skill reader leaves Mnemo's own sections out (no loop) and marks its files, the
published format reads back a hand-edited section robustly, the budget and the special cases are reported, and
the `publish_on_change` setting is applied or refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo.core import store_settings as config
from mnemo.core.errors import InvalidInput
from mnemo.core.files import agent_rules as fmt
from mnemo.core.memory.write import remember
from mnemo.core.sharing.publish import load_state, memory_globs, plan_sync, publish, select
from mnemo.core.skills.sources import read_skill_file

SECTION = fmt.section(fmt.section_body([fmt.Group((), (("abcdef0123", "Use Decimal for money."),))],
                                       headings=True))


# -- no loop: the skill reader ------------------------------------------------------------------------------------
def test_the_skill_reader_leaves_the_managed_section_out_of_a_persons_file(tmp_path):
    p = tmp_path / "CLAUDE.md"
    p.write_text("# Ours\n\nKeep functions short.\n\n" + SECTION + "\n\nAsk before deleting data.\n")
    skill, problems = read_skill_file(p)
    assert skill is not None and not skill.published and skill.always_apply
    assert "Keep functions short." in skill.body and "Ask before deleting data." in skill.body
    assert "Use Decimal" not in skill.body and "mnemo:begin" not in skill.body


def test_a_file_that_is_only_mnemos_is_marked_published_and_keeps_its_tool_semantics(tmp_path):
    p = tmp_path / "AGENTS.md"
    p.write_text(SECTION + "\n")
    skill, _ = read_skill_file(p)
    assert skill.published and skill.always_apply
    mdc = tmp_path / ".cursor" / "rules" / "mnemo-src-payments.mdc"
    mdc.parent.mkdir(parents=True)
    mdc.write_text(fmt.header("cursor", ("src/payments/**",), "n", "d") + SECTION + "\n")
    skill, problems = read_skill_file(mdc)
    assert skill.published and skill.globs == ("src/payments/**",) and not skill.always_apply
    assert skill.glob_mode == "minimatch_dot" and [p for p in problems if p.severity != "info"] == []
    inst = tmp_path / ".github" / "instructions" / "mnemo.instructions.md"
    inst.parent.mkdir(parents=True)
    inst.write_text(fmt.header("copilot", (), "n", "d") + SECTION + "\n")
    assert read_skill_file(inst)[0].always_apply  # Mnemo's `applyTo: '**'`: every file, as VS Code reads it
    inst.write_text("---\napplyTo: '**'\n---\n\nA person's catch-all stays a weak glob.\n")
    assert not read_skill_file(inst)[0].always_apply


def test_an_unclosed_marker_is_no_section(tmp_path):
    text = "# Ours\n\n<!-- mnemo:begin but never closed\n- a line\n"
    assert fmt.parse_section(text) is None and fmt.without_section(text) == text
    p = tmp_path / "CLAUDE.md"
    p.write_text(text)
    assert "a line" in read_skill_file(p)[0].body
    assert fmt.splice(text, SECTION) == text + "\n" + SECTION + "\n"  # appended; the person's text untouched


# -- the format ---------------------------------------------------------------------------------------------------
def test_parse_a_hand_edited_section():
    text = ("intro\n" + fmt.BEGIN_LINE + "\n## Project memory (Mnemo)\n\n- first line <!-- mnemo:aaaaaaaaaa -->\n"
            "* second\n  continued <!-- mnemo:bbbbbbbbbb -->\n\n### When working in `x/**`\n\n- added by hand\n"
            + fmt.END_LINE + "\nafter\n")
    items = fmt.parse_section(text)
    assert [(i.sid, i.text, i.line) for i in items] == [("aaaaaaaaaa", "first line", 5),
                                                        ("bbbbbbbbbb", "second\ncontinued", 6),
                                                        (None, "added by hand", 11)]
    assert fmt.render_item("a\n\n  b  ", "x") == "- a\n  b <!-- mnemo:x -->"
    assert fmt.parse_section("- a\n" + fmt.section("- a <!-- mnemo:zzzz -->"))[0].sid == "zzzz"


def test_memory_globs_from_anchors(engine, ctx):
    def mem(*paths):
        m = remember(engine, ctx, f"note about {paths}", anchors=[{"path": p} for p in paths])["memory"]
        return engine.store.get_memory(m["id"])

    assert memory_globs(mem("src/payments/charge.py")) == ("src/payments/**",)
    assert memory_globs(mem("setup.py")) == ("setup.py",)
    assert memory_globs(mem("b/x.py", "a/y.py")) == ("a/**", "b/**")
    assert memory_globs(mem("app/[id]/page.tsx")) == ()  # glob characters in a folder: applies everywhere


# -- the operation ------------------------------------------------------------------------------------------------
@pytest.fixture
def two(engine, ctx):
    a = remember(engine, ctx, "Use Decimal for money amounts, never float.", type="feedback", kind="decision",
                 importance=0.9)["memory"]["id"]
    b = remember(engine, ctx, "Refunds must log the reason code in the ledger.", type="project",
                 kind="pattern")["memory"]["id"]
    return a, b


def test_budget_left_out_and_why(engine, ctx, two):
    a, b = two
    long = remember(engine, ctx, "Retries of a payment reuse the idempotency key of the first attempt, so that a "
                    "retried charge is never booked twice by the provider or the ledger.", type="project",
                    kind="decision", importance=0.2)["memory"]["id"]
    res = publish(engine, ctx, ["agents"], dry_run=True, budget=100)
    assert res["files"][0]["memories"] == 2 and res["diff"].count(" <!-- mnemo:") == 2
    assert [d["id"] for d in res["left_out"]] == [long]  # the more important ones stay
    assert res["left_out"][0]["reason"] == "over the 100-token budget of AGENTS.md"
    assert not (Path(ctx.root) / "AGENTS.md").exists()  # a dry run writes nothing
    with pytest.raises(InvalidInput, match="budget"):
        publish(engine, ctx, ["agents"], dry_run=True, budget=5)
    with pytest.raises(InvalidInput, match="unknown publish target 'vim'"):
        publish(engine, ctx, ["vim"])


def test_what_is_never_published(engine, ctx, two):
    hidden = remember(engine, ctx, "Mark the comment <!-- like this --> in templates.", type="feedback",
                      kind="pattern")["memory"]["id"]
    handoff = remember(engine, ctx, "Session ended mid refund fix.", type="project", kind="handoff")["memory"]["id"]
    mems, left = select(engine, ctx)
    assert hidden not in {m.id for m in mems} and "HTML comment" in {d["id"]: d["reason"] for d in left}[hidden]
    assert handoff not in {m.id for m in mems} | {d["id"] for d in left}


def test_a_line_whose_id_was_lost_is_still_its_memorys_edit(engine, ctx, two):
    a, b = two
    publish(engine, ctx, ["agents"])
    p = Path(ctx.root) / "AGENTS.md"
    text = p.read_text()
    line = next(ln for ln in text.split("\n") if "Refunds must" in ln)
    p.write_text(text.replace(line, "- Refunds must log the reason code in the ledger table."))  # id comment gone
    plan = plan_sync(engine, ctx, Path(ctx.root), load_state(engine.home, ctx))
    assert [e["id"] for e in plan["edited"]] == [b] and plan["added"] == [] and plan["removed"] == []
    res = publish(engine, ctx, ["agents"])
    assert res["sync"]["edited"][0]["status"] == "updated"
    assert engine.store.get_memory(b).text == "Refunds must log the reason code in the ledger table."
    assert publish(engine, ctx, ["agents"])["written"] == []


def test_a_persons_file_of_mnemos_name_is_never_overwritten(engine, ctx, two):
    own = Path(ctx.root) / ".windsurf" / "rules" / "mnemo.md"
    own.parent.mkdir(parents=True)
    own.write_bytes(b"---\ntrigger: always_on\n---\n\nmine\n")
    res = publish(engine, ctx, ["windsurf"])
    assert res["files"][0]["status"] == "skipped" and own.read_bytes() == b"---\ntrigger: always_on\n---\n\nmine\n"


def test_publish_on_change_setting_is_applied_or_refused(tmp_path):
    assert config.parse("publish_on_change", "all") == ",".join(fmt.TARGETS)
    assert config.parse("publish_on_change", "cursor, claude") == "claude,cursor"
    assert config.parse("publish_on_change", "OFF") == "off"
    with pytest.raises(InvalidInput, match="off, all, or some of claude"):
        config.parse("publish_on_change", "claude,vim")
    config.set_value(tmp_path, "publish_on_change", "agents")
    assert config.value("publish_on_change", tmp_path) == "agents"


def test_without_what_was_published_an_edit_is_told_from_a_stale_line(engine, ctx, two):
    """A fresh clone or another store: no record of what was published. A line as the memory is, or as it was
    (its history), is not an edit; a line that is neither is."""
    from mnemo.core.memory.history import update

    a, b = two
    publish(engine, ctx, ["agents"])
    update(engine, ctx, a, text="Use Decimal for every money amount, never float.")  # the file is now stale
    p = Path(ctx.root) / "AGENTS.md"
    p.write_text(p.read_text().replace("reason code in the ledger.", "reason code in the audit ledger."))
    fmt.state_file(engine.home, ctx.project_id).unlink()
    res = publish(engine, ctx, ["agents"])
    assert [(e["id"], e["status"]) for e in res["sync"]["edited"]] == [(b, "updated")]
    assert engine.store.get_memory(a).text == "Use Decimal for every money amount, never float."
    text = p.read_text()
    assert "every money amount" in text and "reason code in the audit ledger." in text


def test_claude_md_linked_to_agents_md_is_written_and_read_back_once(engine, ctx, two):
    root = Path(ctx.root)
    (root / "AGENTS.md").write_text("# Agents\n")
    (root / "CLAUDE.md").symlink_to("AGENTS.md")
    res = publish(engine, ctx, ["claude", "agents"])
    assert [f["status"] for f in res["files"]] == ["changed", "skipped"]
    assert (root / "CLAUDE.md").is_symlink() and (root / "AGENTS.md").read_text().count("<!-- mnemo:begin") == 1
    p = root / "AGENTS.md"
    p.write_text(p.read_text().replace("<!-- mnemo:end -->", "- Run ruff before every commit.\n<!-- mnemo:end -->"))
    res = publish(engine, ctx, ["claude", "agents"])
    assert [a["status"] for a in res["sync"]["added"]] == ["created"]  # once, not twice
    assert publish(engine, ctx, ["claude", "agents"])["written"] == []


def test_a_link_out_of_the_repository_is_left_alone(engine, ctx, two, tmp_path):
    outside = tmp_path / "outside.txt"
    outside.write_text("not yours\n")
    (Path(ctx.root) / "AGENTS.md").symlink_to(outside)
    res = publish(engine, ctx, ["agents"])
    assert res["files"][0]["status"] == "skipped" and "outside the repository" in res["files"][0]["reason"]
    assert outside.read_text() == "not yours\n" and res["written"] == []


def test_a_secret_typed_into_a_section_is_refused_reported_redacted_and_not_published(engine, ctx, two):
    publish(engine, ctx, ["agents"])
    p = Path(ctx.root) / "AGENTS.md"
    token = "ghp_" + "Zq9xR4tLmW2vB7nK1pYc8dFj3sHa6gUe0oTi"
    p.write_text(p.read_text().replace("<!-- mnemo:end -->", f"- Deploy with {token}\n<!-- mnemo:end -->"))
    res = publish(engine, ctx, ["agents"])
    added = res["sync"]["added"]
    assert [a["status"] for a in added] == ["refused"] and token not in str(res)
    assert token not in p.read_text()


def test_the_dry_run_diff_shows_the_files_with_the_hand_edits_applied(engine, ctx, two):
    a, b = two
    publish(engine, ctx, ["agents"])
    p = Path(ctx.root) / "AGENTS.md"
    before = p.read_text()
    p.write_text(before.replace("money amounts", "money values"))
    edited = p.read_text()
    res = publish(engine, ctx, ["agents"], dry_run=True)
    assert "money amounts" not in res["diff"]  # the preview does not undo the person's edit
    assert p.read_text() == edited and engine.store.get_memory(a).text.startswith("Use Decimal for money amounts")


# -- properties: the person's text around the section ---------------------------------------------------------------
_person_text = st.text(st.characters(blacklist_categories=("Cs",)), max_size=200).filter(
    lambda t: "<!-- mnemo:" not in t)


@settings(max_examples=60, deadline=None)
@given(before=_person_text, after=_person_text)
def test_splice_keeps_the_persons_text_byte_for_byte_and_is_idempotent(before, after):
    one = fmt.section(fmt.section_body([fmt.Group((), (("aaaaaaaaaa", "first"),))], headings=True))
    two = fmt.section(fmt.section_body([fmt.Group((), (("bbbbbbbbbb", "second\nline"),))], headings=True))
    start = fmt.splice(before, one)
    assert start.startswith(before) and fmt.splice(start, one) == start
    with_after = start + after
    again = fmt.splice(with_after, two)
    span = fmt.find_section(again)
    assert again[:span[0]] == start[:fmt.find_section(start)[0]] and again[span[1]:] == with_after[
        fmt.find_section(with_after)[1]:]
    assert fmt.splice(again, two) == again
    assert [(i.sid, i.text) for i in fmt.parse_section(again)] == [("bbbbbbbbbb", "second\nline")]


def test_a_memory_of_several_lines_and_a_crlf_file_round_trip(engine, ctx):
    mid = remember(engine, ctx, "Money rules:\n- amounts in cents\n- never float", type="feedback",
                   kind="decision")["memory"]["id"]
    p = Path(ctx.root) / "CLAUDE.md"
    p.write_bytes(b"# Ours\r\n\r\nWindows line ends.\r\n")
    publish(engine, ctx, ["claude"])
    raw = p.read_bytes()
    assert raw.startswith(b"# Ours\r\n\r\nWindows line ends.\r\n")
    assert "- Money rules:\n  - amounts in cents\n  - never float <!-- mnemo:" in raw.decode()
    res = publish(engine, ctx, ["claude"])
    assert res["written"] == [] and res["sync"]["edited"] == [] and p.read_bytes() == raw
    p.write_bytes(raw.replace(b"never float", b"never a float"))
    res = publish(engine, ctx, ["claude"])
    assert [e["id"] for e in res["sync"]["edited"]] == [mid]
    assert engine.store.get_memory(mid).text == "Money rules:\n- amounts in cents\n- never a float"


def test_the_same_hand_change_in_two_files_is_one_change_and_different_edits_are_reported(engine, ctx, two):
    a, b = two
    publish(engine, ctx, ["claude", "agents", "cursor"])
    root = Path(ctx.root)
    for rel in ("CLAUDE.md", "AGENTS.md"):
        p = root / rel
        p.write_text(p.read_text().replace("money amounts", "money values").replace(
            "<!-- mnemo:end -->", "- Run ruff before every commit.\n<!-- mnemo:end -->"))
    mdc = root / ".cursor/rules/mnemo.mdc"
    mdc.write_text(mdc.read_text().replace("money amounts", "money sums"))
    res = publish(engine, ctx)
    s = res["sync"]
    assert [(e["id"], e["where"].split(":")[0]) for e in s["edited"]] == [(a, ".cursor/rules/mnemo.mdc")]
    assert [x["where"].split(":")[0] for x in s["skipped"]] == ["AGENTS.md", "CLAUDE.md"]  # reported, not lost
    assert all(x["reason"].startswith("edited differently in .cursor/rules/mnemo.mdc:") for x in s["skipped"])
    assert all(x["text"] == "Use Decimal for money values, never float." for x in s["skipped"])
    assert len(s["added"]) == 1 and s["added"][0]["status"] == "created"  # the same new line in two files: one
