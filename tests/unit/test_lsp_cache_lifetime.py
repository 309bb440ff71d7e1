"""The language server's one cache lifetime rule (issue 23, `mnemo/lsp/editor.py`): every answer of the owner it
keeps — hover answers, active skills, a file's anchors, the symbols' relevance for code lenses — is used for
`CACHE_LIFETIME_S` after it arrived, then asked again; a `forget()` (a write through this server, a settings or
branch change, the owner back) drops them all, and an answer arriving after it is used but not kept; only the
background views (anchors, relevance) are shown past the lifetime while the new answer is asked for.

The owner is a recording stand-in here (what is tested is when the editor asks it, on a controlled clock); the
end-to-end side (a new memory at the next hover, with real processes) is in tests/e2e/test_lsp_hover_context.py."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

from mnemo.editor_settings import Settings
from mnemo.lsp import editor
from mnemo.lsp.editor import CACHE_LIFETIME_S, AnswerCache, EditorContext

LSP = Path(editor.__file__).parent
CTX = {"project_id": "p1", "branch": "main"}


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


class FakeServer:
    """Records the owner calls; answers with a counter so a re-asked answer differs from a cached one."""

    def __init__(self) -> None:
        self.settings = Settings()
        self.calls: list[tuple[str, dict]] = []
        self.gate: asyncio.Event | None = None

    async def service(self, method: str, *args, **kw):
        self.calls.append((method, kw))
        if self.gate is not None:
            await self.gate.wait()
        n = len(self.calls)
        return {"cards": [{"item_id": f"mem-{n}"}], "anchored": [], "file_anchors": {"f": [f"mem-{n}"]},
                "skills": {"activations": [{"name": f"skill-{n}"}], "total_tokens": 1} if kw.get("skills") else None,
                "activations": [{"name": f"skill-{n}"}], "total_tokens": 1}


def make() -> tuple[EditorContext, FakeServer, Clock]:
    server = FakeServer()
    ed = EditorContext(server)  # type: ignore[arg-type]
    clock = Clock()
    for cache in ed.caches():
        cache.clock = clock
    return ed, server, clock


async def hover(ed: EditorContext, symbol: str = "f", skills: bool = True) -> dict:
    return await ed.hover(CTX, "a.py", symbol=symbol, line=1, query="f query", limit=6, include_docs=True,
                          min_confidence=None, skills=skills)


def test_one_lifetime_for_every_cache_and_no_other_lifetime_in_the_language_server():
    ed, _, _ = make()
    assert len(ed.caches()) == 4 and all(isinstance(c, AnswerCache) for c in ed.caches())
    # no module of the language server declares a lifetime of its own (the 15/20/30 s of before)
    for path in LSP.rglob("*.py"):
        src = path.read_text()
        assert not re.search(r"\b[A-Z_]*TTL\b\s*=", src), path
    assert CACHE_LIFETIME_S == 15.0


def test_a_hover_answer_is_reused_within_its_lifetime_and_asked_again_after():
    async def run():
        ed, server, clock = make()
        first = await hover(ed)
        assert [m for m, _ in server.calls] == ["hover_context"] and server.calls[0][1]["skills"] is True
        clock.now += CACHE_LIFETIME_S - 0.1
        assert await hover(ed) == first and len(server.calls) == 1
        clock.now += 0.2  # past the lifetime: asked again, and the new answer shown
        again = await hover(ed)
        assert len(server.calls) == 2 and again["cards"] != first["cards"]
    asyncio.run(run())


def test_skills_are_never_shown_past_their_lifetime_inside_a_younger_hover_answer():
    async def run():
        ed, server, clock = make()
        await hover(ed, "f")  # skills cached at t0
        clock.now += CACHE_LIFETIME_S - 1
        await hover(ed, "g")  # another symbol of the file: its hover cached at t0+14, the skills from the cache
        assert server.calls[-1][1]["skills"] is False
        clock.now += 2  # the skills are 16 s old, g's answer 2 s: the owner is asked, skills included
        res = await hover(ed, "g")
        assert len(server.calls) == 3 and server.calls[-1][1]["skills"] is True
        assert res["skills"]["activations"][0]["name"] == "skill-3"
    asyncio.run(run())


def test_forget_drops_every_cache_and_a_late_answer_is_not_kept():
    async def run():
        ed, server, clock = make()
        await hover(ed)
        ed.relevance.put(("p1", "main", "f", "h"), ["mem-1"])
        assert all(len(c) for c in ed.caches())
        ed.forget()
        assert not any(len(c) for c in ed.caches())
        server.gate = asyncio.Event()  # an answer in flight while a write happens
        pending = asyncio.ensure_future(hover(ed))
        await asyncio.sleep(0)
        ed.forget()
        server.gate.set()
        res = await pending
        assert res["cards"]  # used ...
        assert not len(ed.hovers) and not len(ed.skills)  # ... but not kept
        server.gate = None
        await hover(ed)
        assert len(server.calls) == 3
    asyncio.run(run())


def test_anchors_are_shown_past_their_lifetime_while_they_are_asked_again():
    async def run():
        ed, server, clock = make()
        first = await ed.anchors.for_path(CTX, "a.py")
        assert first == {"f": ["mem-1"]} and len(server.calls) == 1
        clock.now += CACHE_LIFETIME_S - 0.1
        assert await ed.anchors.for_path(CTX, "a.py") == first and len(server.calls) == 1
        clock.now += 0.2
        assert await ed.anchors.for_path(CTX, "a.py") == first  # the old answer, at once ...
        await asyncio.sleep(0.01)
        assert len(server.calls) == 2  # ... while it is asked again
        assert await ed.anchors.for_path(CTX, "a.py") == {"f": ["mem-2"]}
    asyncio.run(run())


def test_the_relevance_of_code_lenses_follows_the_same_rule():
    ed, _, clock = make()
    key = ("p1", "main", "f", "hash")
    ed.relevance.put(key, ["mem-1"])
    assert ed.relevance.get(key) == ["mem-1"]
    clock.now += CACHE_LIFETIME_S
    assert ed.relevance.get(key) is None  # a lens pass asks again
    assert ed.relevance.get_stale(key) == (["mem-1"], False)  # the lens shows it meanwhile


def test_a_files_skills_are_asked_once_when_a_hover_and_the_state_want_them_at_once():
    """The first hover of a session and the state published when the owner link comes up both want the active
    file's skills: one owner request answers both (either may come first)."""
    async def run(hover_first: bool):
        ed, server, _ = make()
        server.gate = asyncio.Event()
        server.rel_path = lambda uri, ctx: "a.py"

        async def state():
            return await ed.active_skills("file:///ws/a.py", ctx=CTX)

        first, second = (hover(ed), state()) if hover_first else (state(), hover(ed))
        a = asyncio.ensure_future(first)
        await asyncio.sleep(0)
        b = asyncio.ensure_future(second)
        await asyncio.sleep(0)
        server.gate.set()
        res_a, res_b = await asyncio.gather(a, b)
        asked = [kw.get("skills", True) for m, kw in server.calls if m in ("hover_context", "activate_skills")
                 and (m == "activate_skills" or kw.get("skills"))]
        assert len(asked) == 1, server.calls
        hovered, stated = (res_a, res_b) if hover_first else (res_b, res_a)
        assert hovered["skills"]["activations"] == stated["activations"]
    asyncio.run(run(True))
    asyncio.run(run(False))
