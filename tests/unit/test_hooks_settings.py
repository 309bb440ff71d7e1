"""`mnemo hooks install|uninstall` on Claude Code settings files: Mnemo's entries in, everything else untouched;
install then uninstall gives the file back byte for byte."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import run_cli
from mnemo.core.errors import InvalidInput
from mnemo.hooks import claude
from mnemo.hooks.jsonspan import JSONSyntaxError, parse

# A real-looking project settings file: permissions, env, a status line and other people's hooks on the same
# events Mnemo uses (PreToolUse, UserPromptSubmit) and on others (Stop, PostToolUse), in 4-space indentation.
SETTINGS = """{
    "$schema": "https://json.schemastore.org/claude-code-settings.json",
    "model": "opus",
    "permissions": {
        "allow": ["Bash(npm run lint)", "Bash(npm run test:*)", "Read(~/.zshrc)"],
        "deny": ["Read(./.env)", "Read(./secrets/**)"]
    },
    "env": {"FOO": "b\\u00e9r", "RATIO": 1.50e3, "EMPTY": ""},
    "hooks": {
        "PreToolUse": [
            {
                "matcher": "Bash",
                "hooks": [ { "type": "command", "command": "\\"$CLAUDE_PROJECT_DIR\\"/.claude/hooks/check.sh",
                             "timeout": 5 } ]
            }
        ],
        "PostToolUse": [{"matcher": "Edit|Write", "hooks": [{"type": "command", "command": "npx prettier --write"}]}],
        "Stop": [{"hooks": [{"type": "command", "command": "say done"}]}],
        "UserPromptSubmit": []
    },
    "statusLine": {"type": "command", "command": "~/.claude/statusline.sh"},
    "includeCoAuthoredBy": false
}
"""

SHAPES = {
    "project settings with other hooks": SETTINGS,
    "compact, one line": '{"hooks":{"PreToolUse":[{"matcher":"Bash","hooks":[{"type":"command","command":"x"}]}]},'
                         '"model":"sonnet"}',
    "empty object": "{ }\n",
    "empty hooks object, tabs, CRLF": '{\r\n\t"hooks": {},\r\n\t"x": [1, 2]\r\n}\r\n',
    "no hooks, CRLF": '{\r\n  "model": "opus"\r\n}\r\n',
    "no trailing newline": '{"permissions": {"allow": []}}',
    "empty event arrays": '{\n  "hooks": {\n    "SessionStart": [ ],\n    "SessionEnd": []\n  }\n}\n',
    "unicode and escapes": '{"model": "opus", "note": "caf\\u00e9 \\"quoted\\" \\\\ \\/ \\n", "x": "日本"}\n',
}


def _install(path: Path, home: Path, command: str = "mnemo") -> dict:
    return claude.install(path, command, home)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_install_then_uninstall_gives_the_file_back_byte_for_byte(tmp_path, shape):
    path = tmp_path / ".claude" / "settings.json"
    path.parent.mkdir()
    original = SHAPES[shape].encode("utf-8")
    path.write_bytes(original)
    res = _install(path, tmp_path / "home")
    assert res["status"] == "installed"
    after = json.loads(path.read_text(encoding="utf-8"))
    before = json.loads(original)
    for key, value in before.items():       # every other setting keeps its value ...
        if key != "hooks":
            assert after[key] == value
    for event, groups in (before.get("hooks") or {}).items():  # ... and every other hook stays, in its place
        assert after["hooks"][event][: len(groups)] == groups
    assert list(after)[: len(before)] == list(before)          # key order kept
    for event, _m, name, _t in claude.SPECS:
        assert after["hooks"][event][-1]["hooks"][0]["command"] == f"mnemo hook {name}"
    assert claude.uninstall(path, tmp_path / "home")["status"] == "uninstalled"
    assert path.read_bytes() == original


def test_only_the_added_bytes_change(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(SETTINGS)
    _install(path, tmp_path / "home")
    after = path.read_text()
    # the text before the first insertion point is the original's, byte for byte
    first = SETTINGS.index("\n        ],\n        \"PostToolUse\"")
    assert after[:first] == SETTINGS[:first]
    assert after.endswith('    "statusLine": {"type": "command", "command": "~/.claude/statusline.sh"},\n'
                          '    "includeCoAuthoredBy": false\n}\n')
    assert "\n            {\n                \"matcher\": \"Read|Edit|Write|MultiEdit\",\n" in after  # its indentation


def test_install_is_idempotent_and_replaces_an_older_command(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(SETTINGS)
    home = tmp_path / "home"
    _install(path, home, "/old/venv/bin/mnemo")
    assert _install(path, home, "/old/venv/bin/mnemo")["status"] == "unchanged"
    assert _install(path, home, "/new/venv/bin/mnemo")["status"] == "replaced"
    data = json.loads(path.read_text())
    commands = [h["command"] for gs in data["hooks"].values() for g in gs for h in g["hooks"]]
    assert not any(c.startswith("/old/") for c in commands)
    assert sum(c.startswith("/new/") for c in commands) == 4
    claude.uninstall(path, home)
    assert path.read_text() == SETTINGS


def test_a_missing_file_is_created_and_removed_again(tmp_path):
    path = tmp_path / "proj" / ".claude" / "settings.json"
    home = tmp_path / "home"
    assert _install(path, home)["status"] == "created"
    assert set(json.loads(path.read_text())["hooks"]) == {e for e, *_ in claude.SPECS}
    res = claude.uninstall(path, home)
    assert not path.exists() and not path.parent.exists(), res


def test_without_the_install_record_uninstall_still_removes_only_mnemo(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(SETTINGS)
    _install(path, tmp_path / "home-a")
    claude.uninstall(path, tmp_path / "home-b")      # another store: no record of what install created
    data = json.loads(path.read_text())
    assert data == json.loads(SETTINGS) | {"hooks": {k: v for k, v in json.loads(SETTINGS)["hooks"].items()
                                                     if v}}  # an array left empty is removed, nothing else


def test_mnemo_handlers_inside_a_shared_group_are_removed_alone(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "Read", "hooks": [
        {"type": "command", "command": "audit.sh"},
        {"type": "command", "command": "/usr/local/bin/mnemo hook pre-tool"}]}]}}, indent=2))
    claude.uninstall(path, tmp_path / "home")
    assert json.loads(path.read_text()) == {"hooks": {"PreToolUse": [{"matcher": "Read", "hooks": [
        {"type": "command", "command": "audit.sh"}]}]}}


@pytest.mark.parametrize("text, what", [
    ('{"hooks": {"PreToolUse": [}', "not valid JSON"),
    ('{"a": 1,}', "not valid JSON"),
    ("[1, 2]", "does not hold a JSON object"),
    ('{"hooks": []}', "`hooks` in"),
    ('{"hooks": {"PreToolUse": {}}}', "is not a list"),
    ("   \n", "empty but not a JSON object"),
])
def test_a_file_it_cannot_read_is_refused_and_left_alone(tmp_path, text, what):
    path = tmp_path / "settings.json"
    path.write_text(text)
    with pytest.raises(InvalidInput) as e:
        _install(path, tmp_path / "home")
    assert what in e.value.message and "nothing was changed" in e.value.message
    assert path.read_text() == text


def test_status_lists_each_scope(tmp_path):
    path = tmp_path / "p" / ".claude" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_text(SETTINGS)
    _install(path, tmp_path / "home", "/nowhere/mnemo")
    st = claude.status({"project": path, "user": tmp_path / "u" / "settings.json"})
    assert st["project"]["installed"] and st["project"]["other_hooks"] == 3
    assert not any(h["runs"] for h in st["project"]["mnemo"])  # /nowhere/mnemo does not exist
    assert st["user"] == {"path": str(tmp_path / "u" / "settings.json"), "exists": False, "mnemo": [],
                          "installed": False, "other_hooks": 0}


def test_the_cli_installs_into_the_project_and_says_what_it_did(git_repo, home):
    r = run_cli("hooks", "install", "claude-code", "--project", home=home, cwd=git_repo)
    assert r.returncode == 0, r.stderr
    assert "created" in r.stdout and ".claude/settings.json" in r.stdout
    assert json.loads((git_repo / ".claude" / "settings.json").read_text())["hooks"]["SessionStart"]
    r = run_cli("hooks", "status", home=home, cwd=git_repo)
    assert "project" in r.stdout and "installed" in r.stdout
    r = run_cli("hooks", "uninstall", "--project", home=home, cwd=git_repo)
    assert r.returncode == 0 and not (git_repo / ".claude" / "settings.json").exists()
    r = run_cli("hooks", "install", "--settings", str(git_repo / "bad.json"), home=home, cwd=git_repo)
    assert r.returncode == 0  # a missing file is created
    (git_repo / "broken.json").write_text("{")
    r = run_cli("hooks", "install", "--settings", str(git_repo / "broken.json"), home=home, cwd=git_repo)
    assert r.returncode == 2 and "not valid JSON" in r.stderr and (git_repo / "broken.json").read_text() == "{"


# -- the span parser ------------------------------------------------------------------------------------------
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20)


@settings(max_examples=200, suppress_health_check=[HealthCheck.too_slow], deadline=None)
@given(json_values, st.sampled_from([None, 0, 1, 2, 4, "\t"]), st.booleans())
def test_the_span_parser_reads_what_json_reads(value, indent, ascii_only):
    text = json.dumps(value, indent=indent, ensure_ascii=ascii_only)
    node = parse(text)
    assert node.to_python() == json.loads(text)
    assert (node.start, node.end) == (0, len(text))


@pytest.mark.parametrize("bad", ["", "{", '{"a" 1}', "[1,]", '{"a": tru}', '"\\x"', "01", '{"a": 1} x', "'a'"])
def test_the_span_parser_refuses_what_json_refuses(bad):
    with pytest.raises(json.JSONDecodeError):
        json.loads(bad)
    with pytest.raises(JSONSyntaxError):
        parse(bad)


@settings(max_examples=100, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
          deadline=None)
@given(st.dictionaries(st.text(min_size=1, max_size=6).filter(lambda k: k != "hooks"), json_values, max_size=5),
       st.sampled_from([None, 2, 4, "\t"]))
def test_install_uninstall_round_trips_any_settings(tmp_path, other, indent):
    path = tmp_path / "settings.json"
    text = json.dumps(other, indent=indent)
    path.write_text(text)
    claude.install(path, "mnemo", tmp_path / "home")
    assert {k: v for k, v in json.loads(path.read_text()).items() if k != "hooks"} == other
    claude.uninstall(path, tmp_path / "home")
    assert path.read_text() == text
