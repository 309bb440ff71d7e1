"""Over the real MCP server (stdio, the official SDK client) and a real owner: an agent edits a memory with
`update` (its history keeps the earlier version), recalls with filters and lists with a word search (issue 15)."""

from __future__ import annotations

import json
import os
import re
import sys

import anyio
from mcp import ClientSession, StdioServerParameters, stdio_client

from conftest import run_cli
from mnemo.daemon.client import DaemonService


def test_update_filtered_recall_and_list_over_mcp(tmp_path, git_repo):
    store = tmp_path / "store"
    env = {**os.environ, "MNEMO_HOME": str(store), "MNEMO_EMBEDDER": "hash", "MNEMO_IDLE_TIMEOUT": "120",
           "MNEMO_PROJECT_ROOT": str(git_repo)}
    try:
        r = run_cli("remember", "webhook retries wait 10 seconds", "--tag", "webhooks", "--kind", "decision",
                    "--json", home=store, cwd=git_repo, env=env)
        assert r.returncode == 0, r.stderr
        mid = json.loads(r.stdout)["memory"]["id"]
        assert run_cli("remember", "webhook payloads are signed with HMAC", home=store, cwd=git_repo,
                       env=env).returncode == 0

        async def scenario() -> dict[str, str]:
            params = StdioServerParameters(command=sys.executable, args=["-m", "mnemo", "mcp"], env=env,
                                           cwd=str(git_repo))
            out = {}
            with open(os.devnull, "w") as errlog:
                async with stdio_client(params, errlog=errlog) as (read, write):
                    async with ClientSession(read, write, read_timeout_seconds=60) as s:
                        await s.initialize()
                        for name, args in (
                                ("update", {"memory_id": mid, "text": "webhook retries wait 30 seconds",
                                            "reason": "the provider rate-limits"}),
                                ("recall", {"query": "webhook", "tags": ["webhooks"], "min_confidence": 0}),
                                ("recall_bad", {"query": "webhook", "source": "robot"}),
                                ("list_memories", {"search": "HMAC signed"}),
                                ("list_kind", {"kind": "decision"})):
                            tool = {"recall_bad": "recall", "list_kind": "list_memories"}.get(name, name)
                            res = await s.call_tool(tool, args)
                            out[name] = ("ERROR " if res.is_error else "") + res.content[0].text
            return out

        out = anyio.run(scenario)
        assert out["update"].startswith(f"update: {mid} · edited (version 2)"), out["update"]
        assert "webhook retries wait 30 seconds" in out["recall"] and "HMAC" not in out["recall"]
        assert out["recall_bad"].startswith("ERROR") and "agent" in out["recall_bad"]
        assert "HMAC" in out["list_memories"] and "retries" not in out["list_memories"]
        assert re.search(rf"- {mid} · project/decision", out["list_kind"]) and "HMAC" not in out["list_kind"]
        hist = json.loads(run_cli("history", mid, "--json", home=store, cwd=git_repo, env=env).stdout)
        assert [(v["text"], v["why"], v["written_by"] != "") for v in hist["versions"]] == [
            ("webhook retries wait 10 seconds", "created", True),
            ("webhook retries wait 30 seconds", "the provider rate-limits", True)]
    finally:
        DaemonService(store, autostart=False).shutdown()
