"""Cross-project isolation through the MCP server: memories of repository A never appear in recall (or hydrate,
recent context, promote, deprecate) from repository B, whether the server is started inside a repository, from
the home directory with the client's roots, or from the home directory with no roots at all."""

from __future__ import annotations

import os
import re
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client

from conftest import git
from mnemo.core.identity import detect_context
from mnemo.daemon.client import DaemonService

MEM_ID = re.compile(r"\b(mem-[0-9a-f]{20})\b")
A_FACT = "zeppelin billing cron runs at 03:00 UTC and must finish before the ledger export"
B_FACT = "quokka search index is rebuilt nightly from the catalog snapshot"
HOME_FACT = "marmalade scratch note written from the home directory"
ALL_QUERIES = ("zeppelin billing cron", "quokka search index", "marmalade scratch note", "nightly ledger export")


def make_repo(path: Path, origin: str | None) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    if origin:
        git(path, "remote", "add", "origin", origin)
    (path / "src").mkdir()
    (path / "src" / "app.py").write_text("print('hi')\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


@pytest.fixture
def env(tmp_path: Path):
    fake_home = tmp_path / "home"
    fake_home.mkdir()
    store = tmp_path / "store"
    e = {"MNEMO_HOME": str(store), "HOME": str(fake_home), "MNEMO_EMBEDDER": "hash", "MNEMO_IDLE_TIMEOUT": "120",
         "ANONYMIZED_TELEMETRY": "False"}
    yield e
    DaemonService(store, autostart=False).shutdown()


@asynccontextmanager
async def session(cwd: Path, env: dict, roots: list[Path] | None = None):
    params = StdioServerParameters(command=sys.executable, args=["-m", "mnemo", "mcp"], env=env, cwd=str(cwd))
    kwargs = {}
    if roots is not None:
        async def list_roots(_context):
            return types.ListRootsResult(roots=[types.Root(uri=p.resolve().as_uri()) for p in roots])

        kwargs["list_roots_callback"] = list_roots
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60, **kwargs) as s:
                await s.initialize()
                yield s


async def text_of(s: ClientSession, tool: str, **args) -> tuple[bool, str]:
    res = await s.call_tool(tool, args)
    return bool(res.is_error), res.content[0].text


async def everything_visible(s: ClientSession) -> str:
    """All a session can see: recall for every planted fact in every read scope, plus the recent context."""
    out = []
    for q in ALL_QUERIES:
        for scope in ("hybrid", "project", "global"):
            text = (await text_of(s, "recall", query=q, scope=scope, limit=20))[1]
            out.extend(line for line in text.splitlines() if not line.startswith("Mnemo recall for"))
    out.append((await text_of(s, "recent_context", limit=50, days=3650))[1])
    return "\n".join(out)


@pytest.mark.parametrize("origins", [("git@github.com:acme/alpha.git", "https://github.com/acme/beta"), (None, None)],
                         ids=["origin-urls", "path-hashes"])
def test_repositories_never_see_each_other(tmp_path, env, origins):
    repo_a = make_repo(tmp_path / "work" / "alpha", origins[0])
    repo_b = make_repo(tmp_path / "work" / "beta", origins[1])
    home = Path(env["HOME"])
    assert len({detect_context(p).project_id for p in (repo_a, repo_b, home)}) == 3

    async def scenario():
        async with session(repo_a, env) as a:
            a_id = MEM_ID.search((await text_of(a, "remember", text=A_FACT, kind="decision"))[1]).group(1)
            handoff = (await text_of(a, "remember", text="zeppelin hand-off: cron retries done", kind="handoff"))[1]
            a_handoff = MEM_ID.search(handoff).group(1)
        async with session(repo_b / "src", env) as b:  # a subdirectory resolves to B's git root
            b_id = MEM_ID.search((await text_of(b, "remember", text=B_FACT))[1]).group(1)
            seen = await everything_visible(b)
            assert b_id in seen
            for leaked in (a_id, a_handoff, "zeppelin"):
                assert leaked not in seen
            # Ids from another project are unknown here, whatever the tool.
            for tool, args in (("hydrate", {"item_id": a_id}), ("promote", {"memory_id": a_id, "to": "global"}),
                               ("deprecate", {"memory_id": a_id})):
                is_error, text = await text_of(b, tool, **args)
                assert is_error and "zeppelin" not in text, (tool, text)

        # Started from the home directory with no roots: a project of its own (the home path's hash).
        async with session(home, env) as nowhere:
            seen = await everything_visible(nowhere)
            assert a_id not in seen and b_id not in seen and "zeppelin" not in seen and "quokka" not in seen
            h_id = MEM_ID.search((await text_of(nowhere, "remember", text=HOME_FACT))[1]).group(1)
            assert h_id in await everything_visible(nowhere)
        if origins[0] is None:  # the roots cases below do not depend on how project ids are derived
            return

        # Started from the home directory, the client's roots decide the project.
        async with session(home, env, roots=[repo_a]) as a_via_roots:
            seen = await everything_visible(a_via_roots)
            assert a_id in seen and a_handoff in seen
            for leaked in (b_id, "quokka", h_id, "marmalade"):
                assert leaked not in seen
        async with session(home, env, roots=[repo_b]) as b_via_roots:
            seen = await everything_visible(b_via_roots)
            assert b_id in seen
            for leaked in (a_id, "zeppelin", h_id, "marmalade"):
                assert leaked not in seen

    anyio.run(scenario)
