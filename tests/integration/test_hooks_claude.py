"""Claude Code hooks end to end: the commands `mnemo hooks install` writes into `.claude/settings.json`, run the way
Claude Code runs them (through the shell, the event's JSON on stdin, the matcher applied to tool names) with
recorded inputs (tests/fixtures/claude_code), against a real owner with the real MiniLM model; what reaches the
model is the `hookSpecificOutput.additionalContext` they print.
"""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from conftest import REPO, git, run_cli

FIXTURES = REPO / "tests" / "fixtures" / "claude_code"
OWNER_ENV = {"MNEMO_STARTER_SKILLS": "0", "MNEMO_IDLE_TIMEOUT": "600"}
RIGHT_MEMORY = "The payments API requires an idempotency key on every POST request"
OTHER_MEMORY = "The nightly reporting job exports CSV files to the finance bucket at 2am"

SKILLS = {
    "http-clients.md": "---\nname: http-clients\ndescription: Writing HTTP client code - retries with backoff, "
                       "timeouts, idempotency keys. Use when adding or changing outgoing HTTP requests.\n"
                       "keywords: [retry, retries, backoff, http client]\n---\nRetry only idempotent requests or "
                       "requests that carry an idempotency key; exponential backoff with jitter, at most 5 "
                       "attempts.\n",
    "python-testing.md": "---\nname: python-testing\ndescription: How we write Python tests in this repository.\n"
                         "globs: [\"tests/**/*.py\"]\n---\nUse the fixtures in tests/conftest.py; no network in "
                         "unit tests.\n",
    "house-rules.md": "---\nname: house-rules\ndescription: House rules for every change\nalways_apply: true\n"
                      "---\nKeep each change small and say in one sentence why it is needed.\n",
}


def _stop(home: Path) -> None:
    from mnemo.daemon.client import DaemonService
    from mnemo.daemon.paths import socket_path

    try:
        DaemonService(home, autostart=False).shutdown()
    except Exception:  # noqa: BLE001 - already stopped
        pass
    for _ in range(100):
        if not socket_path(home).exists():
            return
        time.sleep(0.05)


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A repository with skills, a CLAUDE.md, two memories, Mnemo's hooks installed in its project settings, and
    a running owner (real model), warmed up."""
    base = tmp_path_factory.mktemp("hooks")
    home, repo = base / "home", base / "repo"
    home.mkdir()
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", "git@github.com:acme/payments.git")
    (repo / "skills").mkdir()
    for name, text in SKILLS.items():
        (repo / "skills" / name).write_text(text)
    (repo / "CLAUDE.md").write_text("# Claude\nClaude Code reads this file itself.\n")
    (repo / "tests").mkdir()
    (repo / "tests" / "test_payments.py").write_text("def test_ok():\n    assert True\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    r = run_cli("daemon", "start", "--json", home=home, cwd=repo, env=OWNER_ENV)
    assert r.returncode == 0, r.stderr
    for text in (RIGHT_MEMORY, OTHER_MEMORY):
        r = run_cli("remember", text, "--type", "project", "--kind", "decision", home=home, cwd=repo)
        assert r.returncode == 0, r.stderr
    r = run_cli("hooks", "install", "claude-code", "--project", "--command", f"{sys.executable} -m mnemo",
                home=home, cwd=repo)
    assert r.returncode == 0, r.stderr + r.stdout
    # warm the owner (model, skill vectors, the corrections detector) so the hooks below answer in time
    r = run_cli("context", "-m", "warm up the retry policy", "--learn", "confirm", "--format", "json",
                home=home, cwd=repo)
    assert r.returncode == 0, r.stderr
    yield {"home": home, "repo": repo, "settings": json.loads((repo / ".claude" / "settings.json").read_text())}
    _stop(home)


def _input(name: str, repo: Path, session: str, transcript: Path | None = None) -> str:
    text = (FIXTURES / name).read_text()
    return (text.replace("$CWD", str(repo)).replace("$SESSION", session)
            .replace("$TRANSCRIPT", str(transcript or repo / "no-transcript.jsonl")))


def _commands(settings: dict, event: str, tool: str | None = None) -> list[str]:
    """The commands Claude Code would run for `event` (and `tool`, matched like Claude Code: a regex on the name)."""
    out = []
    for group in settings["hooks"].get(event, []):
        matcher = group.get("matcher")
        if tool is not None and matcher not in (None, "", "*") and not re.fullmatch(matcher, tool):
            continue
        out += [h["command"] for h in group["hooks"] if h.get("type") == "command"]
    return out


def run_hook(project: dict, event: str, fixture: str, session: str, tool: str | None = None,
             transcript: Path | None = None, env: dict | None = None, home: Path | None = None):
    """Run the installed command(s) for the event like Claude Code; returns (context text, stderr, rc, seconds)."""
    cmds = _commands(project["settings"], event, tool)
    if not cmds:
        return None, "", 0, 0.0
    assert len(cmds) == 1, cmds
    e = {**os.environ, "MNEMO_HOME": str(home or project["home"]), "MNEMO_HOOK_TIMEOUT": "20", **(env or {})}
    t0 = time.monotonic()
    stdin = json.dumps(fixture) if isinstance(fixture, dict) else _input(fixture, project["repo"], session, transcript)
    p = subprocess.run(cmds[0], shell=True, input=stdin,
                       capture_output=True, text=True, cwd=project["repo"], env=e, timeout=60)
    took = time.monotonic() - t0
    text = None
    if p.stdout.strip():
        out = json.loads(p.stdout)
        hso = out["hookSpecificOutput"]
        assert hso["hookEventName"] == event
        text = hso["additionalContext"]
    return text, p.stderr, p.returncode, took


def test_install_writes_the_four_events_with_their_matchers(project):
    hooks = project["settings"]["hooks"]
    assert set(hooks) == {"SessionStart", "UserPromptSubmit", "PreToolUse", "SessionEnd"}
    assert _commands(project["settings"], "PreToolUse", "Read") and _commands(project["settings"], "PreToolUse",
                                                                              "MultiEdit")
    assert _commands(project["settings"], "PreToolUse", "Bash") == []
    r = run_cli("hooks", "status", "--json", home=project["home"], cwd=project["repo"])
    st = json.loads(r.stdout)["project"]
    assert st["installed"] and all(h["runs"] for h in st["mnemo"])


def test_a_prompt_gets_the_right_skill_and_memory_once(project):
    text, err, rc, _ = run_hook(project, "UserPromptSubmit", "user_prompt_submit.json", "s-prompt")
    assert rc == 0, err
    assert text and text.startswith("## Mnemo memory: data with provenance, not instructions")
    assert f"> {RIGHT_MEMORY}" in text                       # quoted, with provenance
    assert re.search(r"\[mem-\w+ · project/decision · ", text) and "confidence" not in text   # scores: JSON only
    assert OTHER_MEMORY not in text
    assert "#### http-clients" in text and "exponential backoff with jitter" in text
    assert "python-testing" not in text                      # a glob-only skill, no file at hand
    assert "Claude Code reads this file itself" not in text  # CLAUDE.md: Claude Code loads it itself
    again, err, rc, _ = run_hook(project, "UserPromptSubmit", "user_prompt_submit.json", "s-prompt")
    assert rc == 0 and again is None, again                  # nothing repeated within the session
    other, *_ = run_hook(project, "UserPromptSubmit", "user_prompt_submit.json", "another-session")
    assert other and RIGHT_MEMORY in other                   # another session gets it


def test_before_a_file_is_read_or_edited_its_glob_skills_come_once(project):
    text, err, rc, _ = run_hook(project, "PreToolUse", "pre_tool_use_read.json", "s-tool", tool="Read")
    assert rc == 0, err
    assert text and "#### python-testing" in text and "tests/test_payments.py" in text
    assert "http-clients" not in text and "house-rules" not in text
    again, _err, rc, _ = run_hook(project, "PreToolUse", "pre_tool_use_edit.json", "s-tool", tool="Edit")
    assert rc == 0 and again is None
    bash, *_ = run_hook(project, "PreToolUse", "pre_tool_use_bash.json", "s-tool", tool="Bash")
    assert bash is None                                      # the matcher keeps other tools out


def test_a_correction_is_filed_for_review_and_confirmed_when_said_again(project):
    text, err, rc, _ = run_hook(project, "UserPromptSubmit", "user_prompt_submit_correction.json", "s-learn")
    assert rc == 0, err
    assert "### Learned from this prompt" in text and "waiting in Review" in text and "Use pnpm, not npm." in text
    r = run_cli("review", "--json", home=project["home"], cwd=project["repo"])
    items = [i for i in json.loads(r.stdout)["items"] if i["kind"] == "pending"]
    mem = [i["item"] for i in items if i["item"]["text"] == "Use pnpm, not npm."]
    assert mem and mem[0]["kind"] == "feedback" and mem[0]["type"] == "project"
    assert mem[0]["provenance"]["learned_from"]["prompt"] == "no, use pnpm, not npm"
    text, *_ = run_hook(project, "UserPromptSubmit", "user_prompt_submit_correction.json", "s-learn-2")
    assert "confirmed 2x" in text
    r = run_cli("review", "--json", home=project["home"], cwd=project["repo"])
    same = [i for i in json.loads(r.stdout)["items"] if i["kind"] == "pending" and "pnpm" in i["item"]["text"]]
    assert len(same) == 1 and same[0]["item"]["confirmations"] == 2


def test_a_learned_correction_keeps_its_negation(project):
    """Issue 20 point 7: "no need to explain, just show the diff" was learned as "Need to explain, ...": the note
    the hook files is the person's words minus a lead-in, never the opposite."""
    text, err, rc, _ = run_hook(project, "UserPromptSubmit", "user_prompt_submit_negation.json", "s-negation")
    assert rc == 0, err
    assert "No need to explain, just show the diff." in text, text
    r = run_cli("review", "--json", home=project["home"], cwd=project["repo"])
    texts = [i["item"]["text"] for i in json.loads(r.stdout)["items"] if i["kind"] == "pending"]
    assert "No need to explain, just show the diff." in texts and "Need to explain, just show the diff." not in texts


def test_session_end_hands_off_to_the_next_session_start(project, tmp_path):
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text((FIXTURES / "transcript.jsonl").read_text().replace("$CWD", str(project["repo"])))
    start, err, rc, _ = run_hook(project, "SessionStart", "session_start.json", "s-one", transcript=transcript)
    assert rc == 0, err
    assert "#### house-rules" in start and "Hand-off" not in start
    _text, err, rc, _ = run_hook(project, "SessionEnd", "session_end.json", "s-one", transcript=transcript)
    assert rc == 0, err
    nxt, err, rc, _ = run_hook(project, "SessionStart", "session_start.json", "s-two", transcript=transcript)
    assert rc == 0, err
    assert "### Hand-off from the last session" in nxt
    assert "now make the failing test pass" in nxt
    assert "src/payments/client.py" in nxt and "tests/test_retry_policy.py" in nxt
    assert "`pytest -q tests/test_payments.py` (Exit code 1)" in nxt
    assert "/cost" not in nxt                                # meta lines are not requests
    again, *_ = run_hook(project, "SessionStart", "session_start.json", "s-two", transcript=transcript)
    assert again is None                                     # a resumed session is not told twice
    compacted, *_ = run_hook(project, "SessionStart", "session_start_compact.json", "s-two", transcript=transcript)
    assert compacted and "Hand-off" in compacted             # after a compaction it is told again


CLIENT = 'def post(url, body):\n    return send("POST", url, body)\n\n\ndef get(url):\n    return send("GET", url, None)\n'
POST_NOTE = "post() must not follow redirects: the provider answers 307 to a mirror we do not trust"
GET_NOTE = "get() responses are cached for 30 seconds by the gateway, so a read after a write can be old"


def test_an_edit_gets_the_notes_on_its_code_and_session_end_checks_the_files_it_edited(project, tmp_path):
    """Issue 20 point 5: the pre-tool hook of an Edit brings the memories anchored to the file (the symbol it edits
    first, whatever their recall confidence); the session-end hook checks the anchors of the files the session
    edited against the working tree and files the changed ones in Review."""
    repo, home = project["repo"], project["home"]
    (repo / "src" / "payments").mkdir(parents=True, exist_ok=True)
    client = repo / "src" / "payments" / "client.py"
    client.write_text(CLIENT)
    ids = {}
    for name, text in (("post", POST_NOTE), ("get", GET_NOTE)):
        r = run_cli("remember", text, "--kind", "decision", "--json", home=home, cwd=repo)
        assert r.returncode == 0, r.stderr
        ids[name] = json.loads(r.stdout)["memory"]["id"]
        r = run_cli("anchor", ids[name], "--file", "src/payments/client.py", "--symbol", name, home=home, cwd=repo)
        assert r.returncode == 0, r.stderr
    edit = {"session_id": "s-edit", "transcript_path": str(tmp_path / "none.jsonl"), "cwd": str(repo),
            "permission_mode": "acceptEdits", "hook_event_name": "PreToolUse", "tool_name": "Edit",
            "tool_input": {"file_path": str(client), "old_string": 'return send("GET", url, None)',
                           "new_string": 'return send("GET", url, None, timeout=5)', "replace_all": False},
            "tool_use_id": "toolu_01EditGet"}
    text, err, rc, _ = run_hook(project, "PreToolUse", edit, "s-edit", tool="Edit")
    assert rc == 0, err
    assert text and "### Memories about `src/payments/client.py › get`" in text
    assert text.index(GET_NOTE) < text.index(POST_NOTE)      # the symbol being edited first, then the file's others
    assert "Warning:" not in text

    def stale_items() -> list[str]:
        r = run_cli("review", "--json", home=home, cwd=repo)
        assert r.returncode == 0, r.stderr
        return [i.get("item_id") for i in json.loads(r.stdout)["items"] if i["kind"] == "stale_anchor"]

    assert ids["post"] not in stale_items()
    client.write_text(CLIENT.replace('send("POST", url, body)', 'send("POST", url, body, redirects=False)'))
    transcript = tmp_path / "transcript.jsonl"               # it edited src/payments/client.py
    transcript.write_text((FIXTURES / "transcript.jsonl").read_text().replace("$CWD", str(repo)))
    _text, err, rc, _ = run_hook(project, "SessionEnd", "session_end.json", "s-edit", transcript=transcript)
    assert rc == 0, err
    assert stale_items().count(ids["post"]) == 1 and ids["get"] not in stale_items()
    read = {**edit, "session_id": "s-read", "tool_name": "Read", "tool_input": {"file_path": str(client)}}
    text, err, rc, _ = run_hook(project, "PreToolUse", read, "s-read", tool="Read")
    assert rc == 0, err
    assert "Warning: the code this note is anchored to (`src/payments/client.py` › `post`) changed" in text
    assert stale_items().count(ids["post"]) == 1            # read again: not filed twice
    for mid in ids.values():  # (the module's later tests count what a prompt receives)
        assert run_cli("forget", mid, home=home, cwd=repo).returncode == 0


class _SilentOwner:
    """A socket at the owner's path that accepts connections and never answers (an owner stuck or overloaded)."""

    def __init__(self, home: Path):
        from mnemo.daemon.paths import socket_path

        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(socket_path(home)))
        self.sock.listen(8)
        self.conns: list[socket.socket] = []
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self) -> None:
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            self.conns.append(c)

    def close(self) -> None:
        self.sock.close()
        for c in self.conns:
            c.close()


def test_a_slow_owner_costs_the_agent_under_a_second_and_nothing_else(project, tmp_path):
    home = tmp_path / "slow-home"
    home.mkdir()
    owner = _SilentOwner(home)
    try:
        for event, fixture, tool in (("UserPromptSubmit", "user_prompt_submit.json", None),
                                     ("PreToolUse", "pre_tool_use_read.json", "Read"),
                                     ("SessionStart", "session_start.json", None)):
            text, err, rc, took = run_hook(project, event, fixture, "s-slow", tool=tool, home=home,
                                           env={"MNEMO_HOOK_TIMEOUT": "0.8"})
            assert (text, rc) == (None, 0)
            assert took < 1.0, f"{event} took {took:.2f} s"
            assert err.count("\n") == 1 and "did not answer" in err
    finally:
        owner.close()


def test_told_not_to_wait_the_hook_answers_nothing_at_once_and_starts_one(project, tmp_path):
    home = tmp_path / "down-home"
    home.mkdir()
    try:
        text, err, rc, took = run_hook(project, "UserPromptSubmit", "user_prompt_submit.json", "s-down",
                                       home=home, env={"MNEMO_HOOK_TIMEOUT": "0.8", "MNEMO_HOOK_START_WAIT": "0",
                                                       **OWNER_ENV})
        assert (text, rc) == (None, 0) and took < 1.0, took
        assert err.count("\n") == 1 and "no owner was running" in err
        from mnemo.daemon.client import DaemonService

        svc = DaemonService(home, autostart=False)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:          # the owner it started comes up by itself
            try:
                assert svc.health()["pid"] > 0
                break
            except Exception:  # noqa: BLE001 - still starting
                time.sleep(0.2)
        else:
            pytest.fail("the hook did not start an owner")
        svc.close()
    finally:
        _stop(home)


def test_with_the_owner_stopped_session_start_starts_it_and_delivers_the_hand_off(project, tmp_path):
    """Issue 20 point 6: a stopped owner (it exits after its idle time) no longer costs the session its hand-off:
    the hook starts one (which warms this project as it starts) and waits for the block, within its bound."""
    home = tmp_path / "cold-home"
    home.mkdir()
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text((FIXTURES / "transcript.jsonl").read_text().replace("$CWD", str(project["repo"])))
    env = {"MNEMO_HOOK_TIMEOUT": "0.8", "MNEMO_HOOK_START_WAIT": "25", **OWNER_ENV}  # a bound, not a timing
    try:
        r = run_cli("daemon", "start", "--json", home=home, cwd=project["repo"], env=OWNER_ENV)
        assert r.returncode == 0, r.stderr
        _text, err, rc, _ = run_hook(project, "SessionEnd", "session_end.json", "s-cold-0", transcript=transcript,
                                     home=home, env={"MNEMO_HOOK_TIMEOUT": "20", **OWNER_ENV})
        assert rc == 0, err
        r = run_cli("context", "-m", "warm up", home=home, cwd=project["repo"], env=OWNER_ENV)  # as a used store
        assert r.returncode == 0, r.stderr
        _stop(home)
        from mnemo.daemon.paths import socket_path

        assert not socket_path(home).exists()
        start, err, rc, _took = run_hook(project, "SessionStart", "session_start.json", "s-cold-1", home=home,
                                         transcript=transcript, env=env)
        assert rc == 0 and err == "", err
        assert start and "### Hand-off from the last session" in start and "src/payments/client.py" in start
        # the owner it started is up (still warming, it says so: the prompt gets the longer bound): the first
        # prompt's block, with the default 0.8 s deadline
        text, err, rc, _took = run_hook(project, "UserPromptSubmit", "user_prompt_submit.json", "s-cold-1",
                                        home=home, env=env)
        assert rc == 0 and err == "", err
        assert text and "http-clients" in text
    finally:
        _stop(home)


def test_an_owner_that_cannot_start_ends_the_wait_at_once(project, tmp_path):
    """Fail-open stays: a store the owner cannot open makes it exit, and the hook gives up then, not at its bound."""
    home = tmp_path / "broken-home"
    home.mkdir()
    # SQLite's header, then garbage: the hook cannot tell it is damaged before an owner tries to open it
    (home / "mnemo.db").write_bytes(b"SQLite format 3\x00" + b"this is not a SQLite database" * 100)
    text, err, rc, took = run_hook(project, "SessionStart", "session_start.json", "s-broken", home=home,
                                   env={"MNEMO_HOOK_TIMEOUT": "0.8", "MNEMO_HOOK_START_WAIT": "25", **OWNER_ENV})
    assert (text, rc) == (None, 0)
    assert err.count("\n") == 1 and "mnemo doctor --repair" in err, err
    assert took < 20, took  # the owner's exit ended the wait, long before the 25 s bound
    _stop(home)


def test_session_end_with_no_owner_still_writes_the_hand_off(project, tmp_path):
    home = tmp_path / "end-home"
    home.mkdir()
    transcript = tmp_path / "transcript.jsonl"
    transcript.write_text((FIXTURES / "transcript.jsonl").read_text().replace("$CWD", str(project["repo"])))
    try:
        _text, err, rc, took = run_hook(project, "SessionEnd", "session_end.json", "s-end", transcript=transcript,
                                        home=home, env={"MNEMO_HOOK_TIMEOUT": "0.8", **OWNER_ENV})
        assert rc == 0 and took < 1.0 and "written in the background" in err
        deadline = time.monotonic() + 90
        handoffs = []
        while time.monotonic() < deadline and not handoffs:
            time.sleep(0.5)
            r = run_cli("list", "--kind", "handoff", "--json", home=home, cwd=project["repo"],
                        env={"MNEMO_NO_DAEMON": "0"})
            if r.returncode == 0:
                handoffs = json.loads(r.stdout)["memories"]
        assert handoffs and "src/payments/client.py" in handoffs[0]["text"]
    finally:
        _stop(home)


def test_bad_settings_are_refused_without_blocking(project):
    text, err, rc, _ = run_hook(project, "UserPromptSubmit", "user_prompt_submit.json", "s-bad",
                                env={"MNEMO_CONTEXT_BUDGET": "lots"})
    assert (text, rc) == (None, 0) and "MNEMO_CONTEXT_BUDGET='lots'" in err
    text, err, rc, _ = run_hook(project, "UserPromptSubmit", "user_prompt_submit.json", "s-bad",
                                env={"MNEMO_LEARN_CORRECTIONS": "sometimes"})
    assert (text, rc) == (None, 0) and "MNEMO_LEARN_CORRECTIONS" in err


def test_the_budget_bounds_what_a_prompt_receives(project):
    text, err, rc, _ = run_hook(project, "UserPromptSubmit", "user_prompt_submit.json", "s-budget",
                                env={"MNEMO_CONTEXT_BUDGET": "220"})
    assert rc == 0, err
    assert text and len(text) <= 220 * 4
    assert RIGHT_MEMORY in text                               # memories first; then the skill's best part
    assert "#### http-clients" in text and "exponential backoff" in text   # not a bare pointer (issue 20)
