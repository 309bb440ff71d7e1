"""Hover relevance with the real model (all-MiniLM-L6-v2 in the owner process): the hover over a method shows the
memory about it and not unrelated ones, and a symbol nothing is about gets no hover."""

from __future__ import annotations

import pytest
from lsp_helpers import (
    BANNER_COL,
    BANNER_LINE,
    POST_COL,
    POST_LINE,
    command,
    hover,
    make_workspace,
    open_doc,
    request,
    start,
    stop,
    stop_owner,
)

pytestmark = pytest.mark.timeout(240)

MEMORIES = [
    "The payments API requires an idempotency key on every POST; retries must reuse the same key.",
    "Frontend buttons use the tailwind primary color.",
    "Database migrations run with alembic before each deploy.",
]


@pytest.mark.asyncio
async def test_hover_relevance_with_the_real_model(tmp_path):
    home = tmp_path / "home"
    root = make_workspace(tmp_path)
    client = await start(root, home, env={"MNEMO_EMBEDDER": "onnx-int8"},  # the default model
                         init_options={"hover": {"minConfidence": 0.35}})
    try:
        status = await request(client, "mnemo/status")
        assert status["owner"]["model_loaded"] in (True, False)
        for text in MEMORIES:
            assert (await command(client, "mnemo.remember", {"text": text}))["status"] == "created"
        uri = open_doc(client, root / "src" / "client.py")
        text = await hover(client, uri, POST_LINE, POST_COL)
        assert text is not None, "the idempotency memory is relevant to PaymentsClient.post"
        assert "idempotency key" in text
        assert "tailwind" not in text and "alembic" not in text
        assert "high" in text or "medium" in text  # confidence state shown on recalled cards
        assert await hover(client, uri, BANNER_LINE, BANNER_COL) is None, "nothing is about render_banner"
    finally:
        await stop(client)
        stop_owner(home)
