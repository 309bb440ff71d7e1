"""Helpers for the language server end-to-end tests: workspaces, a pytest-lsp client over stdio, waiting.

The server is the real `python -m mnemo lsp` process; it starts (or reuses) a real owner process on a temporary
MNEMO_HOME, which the tests stop at teardown. Nothing touches ~/.mnemo.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
from lsprotocol import types as t
from pytest_lsp import ClientServerConfig
from pytest_lsp.client import LanguageClient, register_lsp_features

PY_SOURCE = '''import os


class PaymentsClient:
    """Talks to the payments API."""

    def post(self, path: str, body: dict) -> dict:
        """POST with an idempotency key so retries are safe."""
        key = os.urandom(8).hex()
        return self._send(path, body, key)

    def _send(self, path, body, key):
        return {"path": path, "key": key}


def render_banner(title):
    return title.upper()
'''
# 0-based positions in PY_SOURCE
POST_LINE, POST_COL = 6, 9  # `post` in `def post(`
KEY_LINE, KEY_COL = 8, 9  # `key` in `key = os.urandom`
BANNER_LINE, BANNER_COL = 15, 6  # `render_banner`

TS_SOURCE = '''// Retry helpers.
export class Retrier {
  /** Retry a POST with backoff. */
  async retryPost(url: string): Promise<void> {
    await fetch(url, { method: "POST" });
  }
}
'''

SKILL = """---
name: payments-python
description: Conventions for the payments client code in Python.
globs: ["src/**/*.py"]
keywords: [payments, idempotency]
---
Always send an idempotency key with every POST to the payments API.
"""


def git(cwd: Path, *args: str) -> str:
    env = dict(os.environ, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t",
               GIT_COMMITTER_EMAIL="t@e")
    return subprocess.run(["git", "-C", str(cwd), *args], check=True, capture_output=True, text=True,
                          env=env).stdout.strip()


def make_workspace(base: Path, name: str = "ws") -> Path:
    """A git repo on `main` with a unique origin (so each test is its own project), Python/TS sources, a skill."""
    root = base / name
    (root / "src").mkdir(parents=True)
    (root / ".mnemo" / "skills").mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(root, "remote", "add", "origin", f"git@github.com:acme/lsp-{uuid.uuid4().hex[:10]}.git")
    (root / "src" / "client.py").write_text(PY_SOURCE)
    (root / "src" / "retry.ts").write_text(TS_SOURCE)
    (root / ".mnemo" / "skills" / "payments-python.md").write_text(SKILL)
    (root / "README.md").write_text("# Payments\n\nThe payments service client.\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


def server_env(home: Path, **extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.update({"MNEMO_HOME": str(home), "MNEMO_EMBEDDER": "hash", "MNEMO_USER_SKILLS": str(home / "user-skills"),
                "MNEMO_IDLE_TIMEOUT": "120", "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False",
                "MNEMO_STARTER_SKILLS": "0"})  # the fixture's own skills only: counts in lenses stay exact
    env.pop("MNEMO_PROJECT_ROOT", None)
    env.pop("MNEMO_PROJECT_ID", None)
    env.update(extra)
    return env


def _structure_code_action_or_command(converter):
    """lsprotocol 2025.0.0 structures any object with a "command" key as a Command, mangling CodeActions that
    carry a command (RECIPES): pick Command only when `command` is a string."""
    from typing import Union

    def hook(obj, _type):
        if isinstance(obj.get("command"), str):
            return converter.structure(obj, t.Command)
        return converter.structure(obj, t.CodeAction)

    converter.register_structure_hook(Union[t.Command, t.CodeAction], hook)  # noqa: UP007


def make_client() -> LanguageClient:
    from mnemo.lsp.jsonrpc import converter_factory

    client = LanguageClient(converter_factory=converter_factory)
    register_lsp_features(client)
    _structure_code_action_or_command(client.protocol._converter)
    client.states = []
    client.changes = []
    client.lens_refreshes = 0

    @client.feature("mnemo/stateChanged")
    def _state(ls, params):
        client.states.append(params)

    @client.feature("mnemo/memoriesChanged")
    def _changed(ls, params):
        client.changes.append(params)

    @client.feature(t.WORKSPACE_CODE_LENS_REFRESH)
    def _refresh(ls, params):
        client.lens_refreshes += 1

    return client


def capabilities() -> t.ClientCapabilities:
    return t.ClientCapabilities(
        experimental={"mnemoCommandLinks": ["mnemo.editMemory"]},  # as the VS Code extension declares
        window=t.WindowClientCapabilities(work_done_progress=True),
        workspace=t.WorkspaceClientCapabilities(
            configuration=True, code_lens=t.CodeLensWorkspaceClientCapabilities(refresh_support=True)),
        text_document=t.TextDocumentClientCapabilities(
            hover=t.HoverClientCapabilities(content_format=[t.MarkupKind.Markdown]),
            code_action=t.CodeActionClientCapabilities(code_action_literal_support=t.ClientCodeActionLiteralOptions(
                code_action_kind=t.ClientCodeActionKindOptions(value_set=["refactor", "source", "quickfix"])))))


async def start(root: Path, home: Path, *, init_options: dict | None = None, env: dict | None = None,
                configuration: dict | None = None, wait_ready: bool = True,
                command: list[str] | None = None) -> LanguageClient:
    opts = {"docs": {"indexOnStartup": False}, "hover": {"minConfidence": 0.0}, "branchPollSeconds": 0.3,
            "debounceMs": 50}
    for k, v in (init_options or {}).items():
        if isinstance(v, dict) and isinstance(opts.get(k), dict):
            opts[k] = {**opts[k], **v}
        else:
            opts[k] = v
    if wait_ready:
        prestart_owner(home, env)  # in parallel with the language server's own start-up: faster tests
    cfg = ClientServerConfig(server_command=command or [sys.executable, "-m", "mnemo", "lsp"],
                             server_env=server_env(home, **(env or {})), client_factory=make_client)
    client = await cfg.start()
    if configuration is not None:
        client.set_configuration(configuration)
    client.init_started = time.perf_counter()
    client.init_result = await client.initialize_session(t.InitializeParams(
        capabilities=capabilities(), root_uri=root.as_uri(),
        workspace_folders=[t.WorkspaceFolder(uri=root.as_uri(), name=root.name)], initialization_options=opts))
    client.init_ms = (time.perf_counter() - client.init_started) * 1000
    if wait_ready:
        await wait_for(lambda: any(s.get("state") == "ready" for s in client.states), 60,
                       "the server never reported state ready")
    return client


def prestart_owner(home: Path, env: dict | None = None) -> None:
    """Start the store's owner now (what the language server would do after `initialized`); if the server's own
    attempt comes first, this one exits (code 3) and the server uses the winner."""
    home.mkdir(parents=True, exist_ok=True)
    (home / "logs").mkdir(exist_ok=True)
    with open(home / "logs" / "daemon.log", "ab") as log:
        subprocess.Popen([sys.executable, "-m", "mnemo", "daemon", "run", "--home", str(home)],
                         env=server_env(home, **(env or {})), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=log, start_new_session=True, cwd=str(home))


async def stop(client: LanguageClient) -> None:
    try:
        await asyncio.wait_for(client.shutdown_session(), 10)
    except Exception:  # noqa: BLE001 - a test may have killed the server
        pass
    await client.stop()


def stop_owner(home: Path) -> None:
    from mnemo.daemon.client import DaemonService

    try:
        DaemonService(home, autostart=False).shutdown()
    except Exception:  # noqa: BLE001
        pass


async def wait_for(pred, timeout: float = 10.0, what: str = "condition") -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = pred()
        if value:
            return value
        await asyncio.sleep(0.05)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


async def request(client: LanguageClient, method: str, params: Any = None) -> Any:
    return await client.protocol.send_request_async(method, {} if params is None else params)


async def command(client: LanguageClient, name: str, args: dict | None = None) -> Any:
    return await client.workspace_execute_command_async(t.ExecuteCommandParams(
        command=name, arguments=[args or {}]))


def open_doc(client: LanguageClient, path: Path, text: str | None = None, language_id: str = "python",
             version: int = 1) -> str:
    uri = path.as_uri()
    client.text_document_did_open(t.DidOpenTextDocumentParams(text_document=t.TextDocumentItem(
        uri=uri, language_id=language_id, version=version, text=path.read_text() if text is None else text)))
    return uri


async def hover(client: LanguageClient, uri: str, line: int, character: int) -> str | None:
    res = await client.text_document_hover_async(t.HoverParams(
        text_document=t.TextDocumentIdentifier(uri=uri), position=t.Position(line=line, character=character)))
    if res is None:
        return None
    return res.contents.value


def rng(l1: int, c1: int, l2: int, c2: int) -> dict:
    return {"start": {"line": l1, "character": c1}, "end": {"line": l2, "character": c2}}


# -- the fixtures of the language server tests (imported by name: no conftest.py below tests/) ------------------
@pytest.fixture
def home(tmp_path):
    """A temporary store per test; its owner is stopped at teardown."""
    h = tmp_path / "home"
    yield h
    stop_owner(h)


@pytest_asyncio.fixture
async def lsp(home, tmp_path):
    """A real language server over stdio on a fresh workspace (`make_workspace`): `client.root` is the workspace,
    `client.py` its Python source file."""
    root = make_workspace(tmp_path)
    client = await start(root, home)
    client.root = root
    client.py = root / "src" / "client.py"
    yield client
    await stop(client)
