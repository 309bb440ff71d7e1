"""`mnemo.publish` over the language server (pytest-lsp, the real `mnemo lsp` and owner): the sidebar's "Publish to
Agent Files" asks for the dry run (its diff, nothing written), then publishes; a hand edit read back through it
tells the views that memories changed."""

from __future__ import annotations

import lsp_helpers
import pytest
from lsp_helpers import command, wait_for
from pygls.exceptions import JsonRpcException

home, lsp = lsp_helpers.home, lsp_helpers.lsp  # the shared fixtures (lsp_helpers.py), used by name

pytestmark = pytest.mark.timeout(180)


@pytest.mark.asyncio
async def test_publish_dry_run_then_publish_then_a_hand_edit(lsp):
    root = lsp.root
    assert "mnemo.publish" in lsp.init_result.capabilities.execute_command_provider.commands
    mem = (await command(lsp, "mnemo.remember", {"text": "Use Decimal for money amounts, never float.",
                                                 "type": "feedback", "kind": "decision"}))["memory"]
    dry = await command(lsp, "mnemo.publish", {"dryRun": True, "targets": ["agents", "cursor"]})
    assert dry["dry_run"] is True and "+++ b/AGENTS.md" in dry["diff"]
    assert "+++ b/.cursor/rules/mnemo.mdc" in dry["diff"]
    assert not (root / "AGENTS.md").exists()
    done = await command(lsp, "mnemo.publish", {"targets": ["agents", "cursor"]})
    assert sorted(done["written"]) == [".cursor/rules/mnemo.mdc", "AGENTS.md"]
    assert f"<!-- mnemo:{mem['id'][4:14]} -->" in (root / "AGENTS.md").read_text()
    agents = root / "AGENTS.md"
    agents.write_text(agents.read_text().replace("money amounts", "money values"))
    before = len(lsp.changes)
    synced = await command(lsp, "mnemo.publish", {"sync": True})
    assert [e["id"] for e in synced["sync"]["edited"]] == [mem["id"]]
    assert "money values" in (root / ".cursor/rules/mnemo.mdc").read_text()
    await wait_for(lambda: any(c.get("reason") == "publish" and mem["id"] in c.get("ids", [])
                               for c in lsp.changes[before:]), what="mnemo/memoriesChanged after the sync")
    with pytest.raises(JsonRpcException, match="targets"):
        await command(lsp, "mnemo.publish", {"targets": "agents"})
