"""Human output of the CLI: stored and user-supplied text is data (never rich markup, never terminal control
sequences), on a terminal and in a pipe; nothing is hard-wrapped when stdout is not a terminal, and a command in a
hint is never broken. Fuzzed with hypothesis over arbitrary text; the commands run against a real store."""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from conftest import git
from mnemo.cli import main
from mnemo.cli import output as out
from mnemo.core.errors import InvalidInput
from mnemo.core.text import strip_controls, visible

# Rich markup, emoji codes, format fields, and terminal control sequences: CSI (screen clear, colour), OSC 8
# hyperlinks (ESC- and BEL-terminated), the one-byte C1 CSI, BEL/BS/CR, bidi override, line separator.
FRAGMENTS = ["[/etc/app]", "[bold]", "[/bold]", "[/]", "[link=https://evil.example]", "[red on blue]", "\\", "\\[",
             "[@click=app.quit]", "[#ff0000]", ":smile:", "{task.description}", "%s", "\x1b[2J", "\x1b[31m",
             "\x1b]8;;https://evil.example\x1b\\", "\x1b]8;;https://evil.example\x07", "\x9b2J", "\x07", "\r",
             "\x08", "\x00", "\u202e", "\u2028", "\t", "\n", "`mnemo promote mem-1`"]
NASTY = st.lists(st.one_of(st.text(max_size=12), st.sampled_from(FRAGMENTS)), min_size=1, max_size=8).map("".join)
SGR = re.compile(r"\x1b\[[0-9;]*m")  # rich's own styling (only on a colour terminal)
BIDI = set("\u2028\u2029\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")


class FakeTTY(io.StringIO):
    def isatty(self) -> bool:
        return True


@contextlib.contextmanager
def terminal(mode: str, columns: int = 60):
    """Capture stdout and stderr as a pipe, a plain terminal (TERM=dumb: no styling at all) or a colour one."""
    env = {"COLUMNS": str(columns), "TERM": "dumb" if mode == "tty" else "xterm-256color", "NO_COLOR": None,
           "FORCE_COLOR": None, "TTY_COMPATIBLE": None, "TTY_INTERACTIVE": None}
    saved = {k: os.environ.get(k) for k in env}
    for k, v in env.items():
        os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)
    stream, err = (io.StringIO(), io.StringIO()) if mode == "pipe" else (FakeTTY(), FakeTTY())
    try:
        with contextlib.redirect_stdout(stream), contextlib.redirect_stderr(err):
            yield lambda: stream.getvalue() + err.getvalue()
    finally:
        for k, v in saved.items():
            os.environ.pop(k, None) if v is None else os.environ.__setitem__(k, v)


def assert_clean(text: str, mode: str) -> None:
    """No control character reaches the terminal: only newlines (and tabs) besides rich's own colours."""
    if mode == "color":
        text = SGR.sub("", text)
    bad = sorted({repr(ch) for ch in text
                  if (ord(ch) < 32 and ch not in "\n\t") or 0x7F <= ord(ch) <= 0x9F or ch in BIDI})
    assert not bad, f"control characters in the output: {bad}\n{text!r}"


def assert_readable(shown: str, *texts: str) -> None:
    """Every word of the data is on screen, as written (control characters in their visible form)."""
    for t in texts:
        for word in visible(t).split():
            assert word in shown, (word, shown)


def card(text: str, kind: str = "note") -> dict:
    return {"item_id": "mem-0123456789abcdef0123", "source_kind": kind, "title": text, "heading_path": [text, text],
            "compressed_summary": text, "key_points": [text], "scope": "project", "type": "project",
            "note_kind": text, "branch": text, "confirmations": 2, "promoted_from": {"project_name": text},
            "trust": "untrusted", "source_path": text, "lines": [1, 2], "updated_at": 1.0, "score": 0.5,
            "confidence": 0.5, "confidence_state": "medium"}


def render_all(text: str) -> None:
    out.print_cards([card(text), card(text, "markdown")], warnings=[text], took_ms=1.0)
    out.print_memories([{"id": text, "scope": "project", "type": "project", "kind": text, "branch": text,
                         "text": text, "updated_at": 1.0, "status": text, "deprecated": True, "confirmations": 3}],
                       total=5)
    out.print_kv(text, {text: text, "nested": {text: [text]}})
    out.print_error(InvalidInput(text, hint=text), as_json=False)
    out.say(("x", "bold"), text, (text, "green"))
    out.rule(text)


def test_visible_and_strip_controls():
    s = "a\x1b[2Jb\x1b]8;;https://e\x1b\\link\x1b]8;;\x1b\\ \x9b31m \u202e\tc\nd\r\x00"
    assert visible(s) == ("a\\x1b[2Jb\\x1b]8;;https://e\\x1b\\link\\x1b]8;;\\x1b\\ \\x9b31m \\u202e\tc\nd\\x0d"
                          "\\x00")
    assert visible("a\nb\tc", keep="") == "a\\x0ab\\x09c"
    assert strip_controls(s) == "a[2Jb]8;;https://e\\link]8;;\\ 31m \tc\nd"
    assert visible("plain [bold] text: ok") == "plain [bold] text: ok"
    assert visible("crlf\r\nline\rover") == "crlf\nline\\x0dover"  # a lone CR would overwrite the line
    assert strip_controls("crlf\r\nline\rover") == "crlf\nlineover"


@pytest.mark.parametrize("mode", ["pipe", "tty", "color"])
def test_markup_and_escapes_stay_data(mode):
    text = "paths like [/etc/app] and [bold]loud[/bold] :smile: \x1b[2J\x1b]8;;https://evil.example\x1b\\here"
    with terminal(mode) as shown:
        render_all(text)
    s = shown()
    assert_clean(s, mode)
    assert "[/etc/app]" in s and "[bold]loud[/bold]" in s and ":smile:" in s and "😄" not in s
    assert "\\x1b[2J" in s and "\\x1b]8;;https://evil.example" in s  # made visible, not executed or hidden
    if mode == "color":
        assert "\x1b[1mloud" not in s  # [bold] did not restyle the text


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=NASTY)
def test_renderers_fuzz(text):
    for mode in ("pipe", "tty", "color"):
        with terminal(mode, columns=40) as shown:
            render_all(text)
        assert_clean(shown(), mode)
        if mode == "pipe":
            assert_readable(shown(), text)


def test_pipe_never_wraps_and_hints_keep_commands_whole():
    long = "word " * 60 + "`mnemo promote mem-0123456789abcdef0123 --to global`"
    with terminal("pipe", columns=40) as shown:
        out.print_error(InvalidInput("x " * 50, hint=long), as_json=False)
        out.print_memories([{"id": "mem-1", "scope": "project", "type": "project", "kind": "fact", "branch": None,
                             "text": long, "updated_at": 1.0, "status": "active"}])
    s = shown()
    assert f"what to do: {long}" in s.splitlines()  # one line, nothing inserted
    assert any(long in ln for ln in s.splitlines())  # the table cell is not folded either
    for mode in ("tty", "color"):  # a narrow terminal: the terminal folds the line, rich inserts no newline
        with terminal(mode, columns=40) as shown:
            out.print_error(InvalidInput("bad", hint=long), as_json=False)
        assert any("mnemo promote mem-0123456789abcdef0123 --to global" in ln
                   for ln in SGR.sub("", shown()).splitlines())


# -- the commands, against a real store (in-process service; the hash embedder is plumbing only) ----------------
NOTE = "paths like [/etc/app] and [bold]loud[/bold] :smile: \x1b]8;;https://evil.example\x1b\\click"
SKILL = ("---\napplyTo: \"**/*.py\"\ndescription: \"[bold]py[/bold] rules \x1b[2J\"\n---\n# Python [/etc/app]\n\n"
         "```python\n" + "x = 1  # " + "a-very-long-line " * 20 + "\n```\n")


@pytest.fixture
def project(git_repo: Path) -> Path:
    (git_repo / "docs").mkdir()
    (git_repo / "docs" / "[ops].md").write_text("# Ops [/etc/app]\n\n## Deploy [bold]now\n\nRun `make deploy`.\n")
    (git_repo / ".github" / "instructions").mkdir(parents=True)
    (git_repo / ".github" / "instructions" / "[py].instructions.md").write_text(SKILL)
    (git_repo / "app.py").write_text("x = 1\n")
    git(git_repo, "add", "-A")
    git(git_repo, "commit", "-q", "-m", "docs")
    return git_repo


@pytest.fixture
def service(engine):
    from mnemo.service import LocalService

    return LocalService(engine)


def cli(service, project, *argv, mode="pipe", columns=60):
    with terminal(mode, columns) as shown:
        code = main([*argv, "-C", str(project)], service=service)
    return code, shown()


def test_every_human_renderer_on_hostile_data(service, project, tmp_path):
    code, s = cli(service, project, "remember", NOTE, "--kind", "k[red]\x1b[31m", "--tag", "[/t]")
    assert code == 0, s
    mid = json.loads(cli(service, project, "list", "--json")[1])["memories"][0]["id"]
    assert cli(service, project, "index")[0] == 0
    snap = str(tmp_path / "s.mnemo")
    commands = [["list"], ["stats"], ["recall", "paths etc app deploy"], ["hydrate", mid], ["review"],
                ["skills", "list"], ["skills", "check"], ["skills", "activate", "--file", str(project / "app.py")],
                ["skills", "activate", "--file", str(project / "app.py"), "--prompt"],
                ["snapshot", "export", snap], ["snapshot", "diff", snap], ["decay", "--dry-run"], ["compact"],
                ["restore", mid], ["deprecate", mid, "--reason", "[bold]gone\x1b[2J"], ["list", "--deprecated"]]
    for argv in commands:
        for mode in ("pipe", "tty", "color"):
            code, s = cli(service, project, *argv, mode=mode)
            assert code in (0, 1), (argv, s)
            assert_clean(s, mode)
        assert "Traceback" not in s
    _, s = cli(service, project, "list", "--deprecated")
    assert "[/etc/app]" in s and "[bold]loud[/bold]" in s and "k[red]\\x1b[31m" in s
    _, s = cli(service, project, "recall", "Deploy now make deploy")
    assert "[bold]now" in s  # a doc heading with markup in it


def test_prompt_block_is_not_wrapped_when_piped(service, project):
    code, s = cli(service, project, "skills", "activate", "--file", str(project / "app.py"), "--prompt", columns=40)
    assert code == 0
    assert "x = 1  # " + "a-very-long-line " * 19 + "a-very-long-line" in s  # the fenced line, whole
    assert "```python" in s.splitlines()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                 HealthCheck.too_slow])
@given(text=NASTY, kind=NASTY)
def test_commands_fuzz(service, project, text, kind):
    assume(not text.startswith("-"))  # argparse reads a leading dash as an option: not a rendering question
    for argv in (["remember", text, f"--kind={kind[:64]}"], ["list"], ["recall", text], ["stats"], ["review"]):
        for mode in ("pipe", "color"):
            code, s = cli(service, project, *argv, mode=mode, columns=50)
            assert code in (0, 2), (argv, s)  # 2: refused with an error message (empty text, a secret ...)
            assert_clean(s, mode)
            assert "Traceback" not in s
