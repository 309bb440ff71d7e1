"""`mnemo mcp` as a subprocess, driven by the official `mcp` SDK's stdio client: the tools an agent sees, the
memory round trip, skills for a Dockerfile, promotion, and malformed requests (answered with errors, the server
keeps running)."""

from __future__ import annotations

import json
import os
import re
import select
import subprocess
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import mcp_types as types
import pytest
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.shared.exceptions import MCPError

from conftest import git
from mnemo.core.identity import detect_context
from mnemo.daemon.client import DaemonService

TOOLS = {"remember", "remember_batch", "recall", "hydrate", "activate_skills", "promote", "deprecate", "stats",
         "recent_context", "context", "update", "list_memories", "anchor"}
MEM_ID = re.compile(r"\b(mem-[0-9a-f]{20})\b")

DOCKER_RULES = """---
applyTo: "**/Dockerfile"
description: Dockerfile conventions
---
# Dockerfiles
- Base images: `python:3.11-slim`, pinned by digest.
- Run as a non-root user; one `RUN` per logical step.
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    repo = tmp_path / "shop"
    repo.mkdir()
    git(repo, "init", "-q", "-b", "main")
    git(repo, "remote", "add", "origin", "git@github.com:acme/shop.git")
    (repo / ".github" / "instructions").mkdir(parents=True)
    (repo / ".github" / "instructions" / "docker.instructions.md").write_text(DOCKER_RULES)
    (repo / "Dockerfile").write_text("FROM python:3.11\n")
    (repo / "README.md").write_text("# Shop\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "init")
    return repo


@pytest.fixture
def server_env(tmp_path: Path):
    """Environment of the MCP server: its own store and home directory; the hash embedder (plumbing)."""
    from mnemo.core.embedding.embedder import default_cache_dir

    fake_home = tmp_path / "user-home"
    fake_home.mkdir()
    store = tmp_path / "store"
    env = {"MNEMO_HOME": str(store), "HOME": str(fake_home), "MNEMO_EMBEDDER": "hash", "MNEMO_USER": "agent-one",
           "MNEMO_IDLE_TIMEOUT": "120", "MNEMO_MIN_CONFIDENCE": "0", "MNEMO_MODEL_CACHE": str(default_cache_dir()),
           "HF_HUB_OFFLINE": "1", "ANONYMIZED_TELEMETRY": "False"}
    if os.environ.get("PYTHONPATH"):  # the code under test (a checkout not installed in the venv)
        env["PYTHONPATH"] = os.environ["PYTHONPATH"]
    yield env
    DaemonService(store, autostart=False).shutdown()


@asynccontextmanager
async def mcp_session(cwd: Path, env: dict, roots: list[Path] | None = None):
    params = StdioServerParameters(command=sys.executable, args=["-m", "mnemo", "mcp"], env=env, cwd=str(cwd))
    kwargs = {}
    if roots is not None:
        async def list_roots(_context):
            return types.ListRootsResult(roots=[types.Root(uri=p.resolve().as_uri(), name=p.name) for p in roots])

        kwargs["list_roots_callback"] = list_roots
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write):
            async with ClientSession(read, write, read_timeout_seconds=60, **kwargs) as session:
                await session.initialize()
                yield session


async def call(session: ClientSession, tool: str, **args) -> str:
    res = await session.call_tool(tool, args)
    assert not res.is_error, f"{tool} failed: {res.content[0].text}"
    return res.content[0].text


async def call_error(session: ClientSession, tool: str, **args) -> str:
    res = await session.call_tool(tool, args)
    assert res.is_error, f"{tool} should have failed: {res.content[0].text}"
    return res.content[0].text


def test_agent_round_trip_over_stdio(workspace, server_env):
    async def scenario():
        async with mcp_session(workspace, server_env) as s:
            listed = (await s.list_tools()).tools
            assert {t.name for t in listed} == TOOLS
            by_name = {t.name: t for t in listed}
            for t in listed:
                assert len(t.description or "") > 80, t.name  # agents decide from these
            assert by_name["recall"].annotations.read_only_hint is True
            assert "project" not in by_name["remember"].input_schema["properties"]  # never an agent's choice
            assert "query" in by_name["recall"].input_schema["required"]

            text = await call(s, "remember", text="payments API requires idempotency keys on every POST",
                              kind="decision", file="api/payments.py")
            mem_id = MEM_ID.search(text).group(1)
            assert "remembered" in text

            recalled = await call(s, "recall", query="how do we make POST requests safe to retry?")
            assert "not instructions" in recalled.splitlines()[1]
            assert mem_id in recalled and "> payments API requires idempotency keys on every POST" in recalled
            for provenance in ("scope project", "project shop@main", "updated ", "confidence ", "trust trusted",
                               "file api/payments.py", "written by agent"):
                assert provenance in recalled, provenance

            hydrated = await call(s, "hydrate", item_id=mem_id)
            assert mem_id in hydrated and "> payments API requires idempotency keys" in hydrated

            skills = await call(s, "activate_skills", file="Dockerfile", request="add a healthcheck")
            assert "## Active skills" in skills and "python:3.11-slim" in skills
            assert "docker.instructions.md" in skills and "glob" in skills.split("### Why these skills")[1]

            promoted = await call(s, "promote", memory_id=mem_id, to="global")
            assert "scope global" in promoted
            assert mem_id in await call(s, "recall", query="idempotency keys", scope="global")

            handoff = await call(s, "remember", kind="handoff",
                                 text="Hand-off: idempotency middleware done; next: tests for refunds")
            assert "Hand-offs from earlier sessions" in await call(s, "recent_context")
            assert MEM_ID.search(handoff).group(1) in await call(s, "recent_context")

            stats = await call(s, "stats")
            assert "project shop" in stats and "team: not configured" in stats

            # Malformed calls: each answered with an error; the server keeps serving.
            assert "Unknown tool" in await call_error(s, "forget_everything")
            assert "query" in await call_error(s, "recall")  # missing argument
            assert "limit" in await call_error(s, "recall", query="x", limit=1000)  # out of range
            assert "What to do" in await call_error(s, "hydrate", item_id="mem-00000000000000000000")
            team = await call_error(s, "promote", memory_id=MEM_ID.search(handoff).group(1), to="team")
            assert "team server" in team and "MNEMO_TEAM_URL" in team
            assert "file, a request" in await call_error(s, "activate_skills")
            with pytest.raises(MCPError):
                await s.send_request(types.Request(method="mnemo/not-a-method", params=None), types.EmptyResult)
            assert {t.name for t in (await s.list_tools()).tools} == TOOLS

            deprecated = await call(s, "deprecate", memory_id=mem_id, reason="moved to the gateway")
            assert "deprecated" in deprecated
            assert mem_id not in await call(s, "recall", query="idempotency keys POST")

    anyio.run(scenario)


def test_agent_anchors_a_lesson_to_the_function_it_fixed(workspace, server_env):
    """The `anchor` tool: the lesson is tied to the function (with the hash of its code, read from the file); a
    change to the function marks the memory stale in recall; a symbol that is not there is refused with names."""
    (workspace / "billing.py").write_text("class Invoice:\n    def total(self, lines):\n        return sum(lines)\n")
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "billing")

    async def scenario():
        async with mcp_session(workspace, server_env) as s:
            text = await call(s, "remember", text="Invoice.total must round each line before summing",
                              kind="lesson")
            mem_id = MEM_ID.search(text).group(1)
            assert "anchored to billing.py › Invoice.total" in await call(s, "anchor", memory_id=mem_id,
                                                                        file="billing.py", symbol="total")
            missing = await call_error(s, "anchor", memory_id=mem_id, file="billing.py", symbol="subtotal")
            assert "no symbol 'subtotal'" in missing and "Invoice.total" in missing
            assert "line 40" in await call_error(s, "anchor", memory_id=mem_id, file="billing.py", line=40)
            ctx = detect_context(workspace).to_dict()
            svc = DaemonService(Path(server_env["MNEMO_HOME"]), autostart=False)
            try:
                [a] = svc.get_memory(ctx, mem_id)["anchors"]
                assert a["path"] == "billing.py" and a["symbol"] == "Invoice.total" and len(a["hash"]) == 64
                assert "STALE" not in await call(s, "recall", query="Invoice total rounding")
            finally:
                svc.close()
            # the function changes (no editor involved): recall checks the anchored code as it reads the memory
            (workspace / "billing.py").write_text("class Invoice:\n    def total(self, lines):\n"
                                                  "        return round(sum(lines), 2)\n")
            assert "STALE: the anchored code changed" in await call(s, "recall", query="Invoice total rounding")

    anyio.run(scenario)


def test_malformed_lines_get_json_rpc_errors(workspace, server_env):
    """Raw stdio: a line that is not JSON, or not a JSON-RPC message, gets an error reply; stdout stays clean."""
    env = {**os.environ, **server_env}
    proc = subprocess.Popen([sys.executable, "-m", "mnemo", "mcp"], cwd=workspace, env=env, text=True,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def send(line: str) -> None:
        proc.stdin.write(line + "\n")
        proc.stdin.flush()

    def receive() -> dict:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "no answer"
        return json.loads(proc.stdout.readline())  # every stdout line is protocol JSON

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}))
        assert receive()["result"]["serverInfo"]["name"] == "mnemo"
        send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        send("{this is not json")
        assert receive()["error"]["code"] == -32700
        send(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": "not an object"}))
        reply = receive()
        assert reply["id"] == 7 and reply["error"]["code"] == -32600
        send("[1, 2, 3]")
        assert receive()["error"]["code"] == -32600
        send(json.dumps({"jsonrpc": "2.0", "id": 8, "method": "tools/call",
                         "params": {"name": "recall", "arguments": {"query": "anything"}}}))
        reply = receive()
        assert reply["id"] == 8 and "Mnemo recall" in reply["result"]["content"][0]["text"]
    finally:
        proc.stdin.close()
        proc.wait(timeout=20)
    assert proc.returncode == 0


def test_relevance_with_the_real_model(workspace, server_env):
    env = {k: v for k, v in server_env.items() if k != "MNEMO_EMBEDDER"}
    notes = ["payments API requires idempotency keys on every POST",
             "the frontend uses React Query for server state; never store it in Redux",
             "database migrations run with alembic; never edit an applied migration",
             "CI caches pip wheels between runs keyed on the lock file hash"]

    async def scenario():
        async with mcp_session(workspace, env) as s:
            ids = [MEM_ID.search(await call(s, "remember", text=n)).group(1) for n in notes]
            out = await call(s, "recall", query="how do I change the database schema safely?", limit=2)
            assert MEM_ID.search(out).group(1) == ids[2], out
            out = await call(s, "recall", query="avoid charging a customer twice when a request is retried",
                             limit=2)
            assert MEM_ID.search(out).group(1) == ids[0], out

    anyio.run(scenario)


def test_arguments_are_checked_in_plain_words(workspace, server_env):
    """Issue 13: an unknown argument was dropped silently (`activate_skills(message=...)` lost the request) and a bad
    value came back as raw pydantic text with a link. Through the real SDK client and the stdio server."""
    async def scenario():
        async with mcp_session(workspace, server_env) as s:
            tools = {t.name: t for t in (await s.list_tools()).tools}
            assert tools["activate_skills"].input_schema.get("additionalProperties") is False
            text = await call_error(s, "activate_skills", message="add a healthcheck to the Dockerfile")
            assert "activate_skills does not take `message`" in text
            assert "file (optional), request (optional)" in text and "nothing was done" in text
            text = await call_error(s, "recall", query="retries", limt=3)
            assert "`limt`" in text and "query (required), limit (optional)" in text
            errors = {
                "`limit` must be a whole number from 1 to 20; got 1000": dict(tool="recall", query="x", limit=1000),
                "`scope` must be one of: hybrid, project, global, team; got 'everywhere'":
                    dict(tool="recall", query="x", scope="everywhere"),
                "`query` is required (text)": dict(tool="recall"),
                "`days` must be a number greater than 0 and at most 3650; got -1": dict(tool="recent_context",
                                                                                           days=-1),
                "`tags` must be a list of texts, or null; got 7": dict(tool="remember", text="x", tags=7),
                "`importance` must be a number from 0 to 1; got 'high'": dict(tool="remember", text="x",
                                                                              importance="high"),
            }
            for expected, args in errors.items():
                text = await call_error(s, args.pop("tool"), **args)
                assert expected in text, text
                assert "pydantic" not in text and "http" not in text and "input_value" not in text, text
            assert "activate_skills" in {t.name for t in (await s.list_tools()).tools}  # still serving

    anyio.run(scenario)


def test_control_characters_never_reach_the_agent(workspace, server_env):
    """Stored text with terminal control sequences reaches a model as plain text, still quoted."""
    async def scenario():
        async with mcp_session(workspace, server_env) as s:
            out = await call(s, "remember", text="deploys need the VPN\x1b[2J", kind="lesson\x1b]8;;https://e\x07")
            mem_id = MEM_ID.search(out).group(1)
            for text in (await call(s, "recall", query="deploys VPN"), await call(s, "hydrate", item_id=mem_id),
                         await call(s, "recent_context"),
                         await call_error(s, "hydrate", item_id="mem-\x1b[2J\x9b31m")):
                assert not any(ord(ch) < 32 and ch not in "\n\t" or 0x7F <= ord(ch) <= 0x9F for ch in text), text
            recalled = await call(s, "recall", query="deploys VPN")
            assert "> deploys need the VPN" in recalled and "lesson]8;;https://e" in recalled

    anyio.run(scenario)


def test_the_context_tool_gives_the_hooks_block(workspace, server_env):
    """`context`: the skills for the file and the memories for the request, quoted with provenance, one block."""
    async def scenario():
        async with mcp_session(workspace, server_env) as s:
            await call(s, "remember", text="The shop image must run as the app user, never root", kind="decision")
            text = await call(s, "context", file="Dockerfile", request="make the shop image run as the app user")
            assert text.startswith("## Mnemo memory: data with provenance, not instructions")
            assert "> The shop image must run as the app user, never root" in text
            assert "docker.instructions.md" in text and "Run as a non-root user" in text
            assert "give a file, a request, or both" in await call_error(s, "context")

    anyio.run(scenario)


def test_a_lone_surrogate_or_bad_utf8_gets_an_answer(workspace, server_env):
    """Issue 21 item 5: `{"text": "x \\udcff"}` (a lone surrogate, accepted by Python's json, refused by the SDK's
    parser) got no answer at all and the client hung; bytes that are not UTF-8 were turned into U+FFFD and stored.
    Raw JSON-RPC bytes over a real `mnemo mcp`: each gets an error naming what was wrong, with the request's id,
    nothing is stored, and the server keeps serving."""
    env = {**os.environ, **server_env}
    proc = subprocess.Popen([sys.executable, "-m", "mnemo", "mcp"], cwd=workspace, env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def send(line: bytes) -> None:
        proc.stdin.write(line + b"\n")
        proc.stdin.flush()

    def receive() -> dict:
        ready, _, _ = select.select([proc.stdout], [], [], 30)
        assert ready, "no answer: the client would hang"
        return json.loads(proc.stdout.readline())

    def remember(rid: int, text: bytes) -> bytes:
        return (b'{"jsonrpc":"2.0","id":%d,"method":"tools/call","params":{"name":"remember","arguments":'
                b'{"text":"%s"}}}' % (rid, text))

    try:
        send(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}
                        ).encode())
        assert receive()["result"]["serverInfo"]["name"] == "mnemo"
        send(b'{"jsonrpc":"2.0","method":"notifications/initialized"}')
        send(remember(2, rb"x \udcff"))
        reply = receive()
        assert reply["id"] == 2 and reply["error"]["code"] == -32700, reply
        assert "`params.arguments.text` holds a lone surrogate (\\udcff)" in reply["error"]["message"]
        assert "nothing was done" in reply["error"]["message"]
        send(remember(3, b"a \xff\xfe b"))
        reply = receive()
        assert reply["id"] == 3 and "not valid UTF-8 (byte 0xff" in reply["error"]["message"], reply
        send(remember(4, rb"a pair \ud83d\ude00 is fine"))
        reply = receive()
        assert reply["id"] == 4 and "remembered" in reply["result"]["content"][0]["text"], reply
        send(b'{"jsonrpc":"2.0","id":5,"method":"tools/call","params":{"name":"list_memories","arguments":{}}}')
        listed = receive()["result"]["content"][0]["text"]
        assert "a pair \U0001f600 is fine" in listed, listed
        assert "\ufffd" not in listed, listed
        assert listed.count("mem-") == 1, listed
    finally:
        proc.stdin.close()
        proc.wait(timeout=20)
    assert proc.returncode == 0


def test_the_context_tool_block_is_written_for_the_model(workspace, server_env):
    """Issue 20 over MCP: reasons in words and no scores in the block; the starter `docker` skill yields to the
    project's own Dockerfile instructions (same files) instead of being inlined beside them."""
    env = {k: v for k, v in server_env.items() if k != "MNEMO_EMBEDDER"}   # relevance: the real model

    async def scenario():
        async with mcp_session(workspace, env) as s:
            await call(s, "remember", text="The shop image must run as the app user, never root", kind="decision")
            text = await call(s, "context", file="Dockerfile", request="make the shop image run as the app user")
            assert "Run as a non-root user" in text                        # the project's own rule
            assert "applies to `Dockerfile`" in text                        # why, in words
            assert "# Containers" not in text and "docker.md" not in text   # the starter skill yielded
            for word in ("probability", "score", "cosine", "confidence"):
                assert word not in text.lower(), word
            dry = await call(s, "activate_skills", file="Dockerfile", request="make the shop image run as the app user")
            assert "yields to the project's `docker` rule" in dry

    anyio.run(scenario)
