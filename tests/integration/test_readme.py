"""The README stays true: every command it shows runs, in order, on a fresh store (issue 21 item 14).

The commands are read from README.md itself (its bash blocks line by line, and every `mnemo ...` it names inline),
so a new command in the README must either run here or be listed in SKIPPED with the reason. Real CLI
subprocesses (`python -m mnemo`), a temporary MNEMO_HOME, HOME and git repository, the real embedding model (the
README's recall examples are about relevance). What each command is for is checked where the README makes a
promise about it (the filtered recall finds the README's own note, the search finds it, the history has its
versions, ...)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys

import pytest

from conftest import REPO, git

README = REPO / "README.md"

# Commands the README shows that are not run here, and why.
SKIPPED = {
    "source .venv/bin/activate": "the test runs `python -m mnemo` from the interpreter under test",
    "bash scripts/quickstart.sh": "creates a virtualenv and installs torch and Mnemo from the network",
    "bash scripts/test.sh": "installs the test tooling from the network and runs the whole suite (CI runs it)",
    "mnemo vscode install": "needs the `code`/`code-server` command and npm; tests/integration/test_vscode_install.py",
    "cd vscode-extension && npm ci && npm run package": "needs npm and the network; CI builds the extension",
    "claude mcp add mnemo -- mnemo mcp": "needs Claude Code's `claude` command; `mnemo mcp` is run by "
                                         "tests/e2e/test_mcp_stdio.py",
    "mnemo mcp": "an MCP server on stdio: tests/e2e/test_mcp_stdio.py drives it with the MCP SDK's client",
    "mnemo lsp": "a language server on stdio: tests/e2e/test_lsp_*.py drive it with pytest-lsp",
    "mnemo team serve": "needs nginx and a Chroma server: tests/integration/test_team_auth.py",
    "mnemo team connect": "needs a running team server: tests/integration/test_team_auth.py",
    "mnemo quickstart": "its own temporary store and model load: "
                        "tests/integration/test_cli.py::test_quickstart_never_touches_the_users_store_or_repository",
    "mnemo doctor --repair": "for a damaged store: tests/fault/test_repair_salvage.py damages one and repairs it",
}
# Inline mentions that name commands without being one to run, and what stands for them.
NAMES = {
    "mnemo remember / import / recall / hydrate / edit / history / promote / deprecate / forget / restore / list / "
    "stats / index / skills / context / snapshot / branch / review / doctor / hooks / vscode": None,  # the list
    "mnemo context": ["context", "--message", "how do we retry payments?"],
    "mnemo daemon": ["daemon", "status"],
    "mnemo daemon start|stop|status": [["daemon", "stop"], ["daemon", "start"], ["daemon", "status"]],
    "mnemo config get|set|list": [["config", "get", "idle_timeout"], ["config", "set", "idle_timeout", "900"],
                                  ["config", "list"]],
    "mnemo skills activate --json": ["skills", "activate", "--file", "src/app/Dockerfile", "--json"],
    "mnemo branch merge": "branch-merge",
}
# README lines with placeholders or options in brackets: what they run here ({id}: the README's first note).
CONCRETE = {
    'mnemo edit <id> --text "..." [--type --kind --importance --tags a,b --reason why]':
        ["edit", "{id}", "--text", "payments API requires idempotency keys on every POST and PUT",
         "--tags", "payments,api", "--reason", "PUT is retried too"],
    "mnemo unanchor <id> [--file F [--symbol S]]": ["unanchor", "{id}", "--file", "src/pay.py", "--symbol",
                                                    "charge"],
    "mnemo import notes/ [--dry-run]": [["import", "notes/", "--dry-run"], ["import", "notes/"]],
    "mnemo anchors check [FILE ...] [--all] [--json]": [["anchors", "check", "src/pay.py"],
                                                         ["anchors", "check", "--all", "--json"]],
}

NOTES_JSONL = [{"text": "the ledger service is the only writer of account balances", "kind": "decision",
                "tags": ["ledger"]},
               {"text": "CI caches pip wheels keyed on the lock file hash", "kind": "lesson"}]


def readme_commands() -> list[str]:
    """Every command the README shows, in order: its bash blocks' lines, then the inline `mnemo ...` spans."""
    text = README.read_text()
    out: list[str] = []
    for block in re.findall(r"```bash\n(.*?)```", text, flags=re.S):
        for line in block.splitlines():
            cmd = line.split("  #")[0].split(" # ")[0].strip()
            if cmd and not cmd.startswith("#"):
                out += [c.strip() for c in cmd.split(";") if c.strip()]
    prose = re.sub(r"```.*?```", "", text, flags=re.S).replace("\n", " ")
    for span in re.findall(r"`([^`]+)`", prose):
        span = " ".join(span.split())
        if span.startswith(("mnemo ", "claude ", "cd ", "bash ")) and span not in out:
            out.append(span)
    return out


@pytest.fixture
def workspace(tmp_path):
    repo = tmp_path / "shop"
    (repo / "src" / "app").mkdir(parents=True)
    (repo / "src" / "api").mkdir(parents=True)
    (repo / "docs").mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", "https://github.com/acme/shop.git")
    (repo / "src" / "pay.py").write_text("def charge(amount, key):\n    return amount\n")
    (repo / "src" / "api" / "payments.py").write_text("import requests\n\ndef post(url):\n    return url\n")
    (repo / "src" / "app" / "Dockerfile").write_text("FROM python:3.11-slim\n")
    (repo / "docs" / "payments.md").write_text("# Payments\n\n## Retries\n\nEvery POST carries an "
                                               "Idempotency-Key header.\n")
    (repo / "notes.jsonl").write_text("\n".join(json.dumps(n) for n in NOTES_JSONL) + "\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    home = tmp_path / "home"
    user = tmp_path / "user"
    user.mkdir()
    env = dict(os.environ, MNEMO_HOME=str(home), HOME=str(user), MNEMO_STARTER_SKILLS="0",
               MNEMO_IDLE_TIMEOUT="300", HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    env.pop("MNEMO_EMBEDDER", None)  # the real model
    env.pop("MNEMO_MIN_CONFIDENCE", None)  # the default floor, as a user has it
    yield repo, env
    subprocess.run([sys.executable, "-m", "mnemo", "daemon", "stop"], env=env, capture_output=True, timeout=60)


def test_every_readme_command_runs_on_a_fresh_store(workspace):
    repo, env = workspace
    state: dict[str, str] = {}
    ran: list[str] = []

    def mnemo(*argv: str) -> subprocess.CompletedProcess:
        argv = tuple(a.format(**state) for a in argv)
        r = subprocess.run([sys.executable, "-m", "mnemo", *argv], cwd=repo, env=env, capture_output=True,
                           text=True, timeout=300)
        assert r.returncode == 0, f"`mnemo {shlex.join(argv)}` failed ({r.returncode}):\n{r.stderr}\n{r.stdout}"
        ran.append(shlex.join(argv))
        return r

    def as_json(*argv: str) -> dict:
        return json.loads(mnemo(*argv, "--json").stdout)

    def branch_merge() -> None:  # a note on a feature branch, brought to main
        git(repo, "checkout", "-q", "-b", "feature/retry")
        mnemo("remember", "the retry budget is five attempts with jitter", "--kind", "decision")
        git(repo, "checkout", "-q", "main")
        merged = as_json("branch", "merge", "feature/retry")
        assert merged, merged

    for cmd in readme_commands():
        if cmd in SKIPPED:
            continue
        if cmd in NAMES:
            what = NAMES[cmd]
            if what == "branch-merge":
                branch_merge()
            elif what is not None:
                for argv in what if isinstance(what[0], list) else [what]:
                    mnemo(*argv)
            continue
        if cmd in CONCRETE:
            what = CONCRETE[cmd]
            for argv in what if isinstance(what[0], list) else [what]:
                mnemo(*argv)
            continue
        plain = cmd.replace("<id>", "").replace("<item_id>", "").replace('"..."', "")
        assert "<" not in plain and "[" not in plain and "..." not in plain, \
            f"README command with a placeholder and no entry in CONCRETE: {cmd}"
        argv = shlex.split(cmd)
        assert argv[0] == "mnemo", f"a README command this test does not know how to run: {cmd}"
        argv = [a.replace("<id>", "{id}").replace("<item_id>", "{item_id}") for a in argv[1:]]
        r = mnemo(*argv)
        check(cmd, argv, r, state, as_json)
    assert len(ran) >= 30, ran
    assert (repo / ".claude" / "settings.json").exists()  # `mnemo hooks install claude-code --project`


def check(cmd: str, argv: list[str], r: subprocess.CompletedProcess, state: dict[str, str], as_json) -> None:
    """What the README promises for the command just run."""
    if argv[0] == "remember" and "id" not in state:
        state["id"] = as_json("list", "--search", "idempotency")["memories"][0]["id"]
    elif argv[:1] == ["recall"] and "--kind" in argv:  # item 14: the README's own filtered recall
        res = as_json(*argv)
        ids = [c["item_id"] for c in res["cards"]]
        assert state["id"] in ids, f"`{cmd}` does not find the README's own note: {res}"
        assert all(c["confidence"] is not None for c in res["cards"])
    elif argv[:1] == ["recall"] and "--json" not in argv:
        res = as_json(*argv)
        assert res["cards"] and res["cards"][0]["item_id"] == state["id"], res
        state["item_id"] = res["cards"][0]["item_id"]
    elif argv[:1] == ["import"] and argv[1].endswith(".jsonl"):
        assert "2" in r.stdout
    elif argv[:1] == ["list"]:
        assert state["id"] in r.stdout, r.stdout
    elif argv[:1] == ["history"]:
        assert "version" in r.stdout
    elif argv[:1] == ["restore"]:
        assert "restored" in r.stdout
    elif argv[:1] == ["promote"]:
        assert "→ global" in r.stdout, r.stdout
    elif argv[:1] == ["anchor"]:
        assert "src/pay.py › charge" in r.stdout, r.stdout
