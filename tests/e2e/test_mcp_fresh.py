"""Issue 20 point 5 over MCP (the official SDK's stdio client against `mnemo mcp`): the `context` tool with a file
puts the memories anchored to it first, and the anchored code is checked when memories are read (no editor, no
save): after the code changes, `context` warns and `recall` marks the card stale."""

from __future__ import annotations

import re

import anyio
from test_mcp_stdio import call, mcp_session, server_env, workspace  # noqa: F401 - pytest fixtures

from conftest import git

MEM_ID = re.compile(r"\b(mem-[0-9a-f]{20})\b")
PAYMENTS = 'def charge(amount):\n    return post("/charge", amount)\n\n\ndef refund(charge_id):\n    return None\n'
NOTE = "charge() takes the amount in cents as an int; the provider rejects floats"


def test_context_over_mcp_brings_the_anchored_note_first_and_warns_when_its_code_changed(workspace, server_env):  # noqa: F811
    (workspace / "shop").mkdir()
    (workspace / "shop" / "payments.py").write_text(PAYMENTS)
    git(workspace, "add", "-A")
    git(workspace, "commit", "-q", "-m", "payments")

    async def scenario():
        async with mcp_session(workspace, server_env) as s:
            mid = MEM_ID.search(await call(s, "remember", text=NOTE, kind="fact")).group(1)
            await call(s, "remember", text="The nightly export writes CSV files to the finance bucket")
            assert "anchored to shop/payments.py › charge" in await call(s, "anchor", memory_id=mid,
                                                                          file="shop/payments.py", symbol="charge")
            block = await call(s, "context", file="shop/payments.py", request="add retries to the POST calls")
            assert "### Memories about `shop/payments.py`" in block
            assert block.index("### Memories about `shop/payments.py`") < block.index(NOTE)
            assert "Warning:" not in block
            (workspace / "shop" / "payments.py").write_text(PAYMENTS.replace('"/charge"', '"/v2/charge"'))
            block = await call(s, "context", file="shop/payments.py", request="add retries to the POST calls")
            assert "Warning: the code this note is anchored to (`shop/payments.py` › `charge`) changed" in block
            recalled = await call(s, "recall", query="amount in cents floats")
            assert mid in recalled and "STALE: the anchored code changed" in recalled

    anyio.run(scenario)
