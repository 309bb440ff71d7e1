"""How a feature plugs into the language server, in esbonio's shape (`esbonio/server/feature.py`).

A feature is a `LanguageFeature` subclass in its own module under `mnemo.lsp.features`; it overrides the hooks it
serves and lists its custom commands, requests and notifications. It sees the server only through `Server`, the
typed handle declared here (with `Documents`, the open documents), so features import this module and never
`mnemo.lsp.server`: the server imports the features (`server.FEATURES`), registers each LSP method once
(`setup.py`) and fans it out to them, a failing feature logged and skipped.
`tests/unit/test_lsp_feature_seams.py` checks that the server and the documents feature provide what these
protocols promise, and that features use nothing else of the server.

Nothing here imports pygls or lsprotocol at run time (the types are for the reader and the type checker).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from pathlib import Path

    from lsprotocol import types as t

    from mnemo.core.files import code_symbols as cc
    from mnemo.editor_settings import Settings
    from mnemo.lsp.editor import EditorContext
    from mnemo.lsp.owner import OwnerLink

Handler = Callable[[dict], Awaitable[Any]]


class Snapshot(Protocol):
    """The text of a document as the client (or the disk) has it (read-only: `documents.Snapshot` is frozen)."""

    @property
    def uri(self) -> str: ...
    @property
    def text(self) -> str: ...
    @property
    def version(self) -> int | None: ...
    @property
    def language(self) -> str | None: ...


class Documents(Protocol):
    """The open documents (`features/documents.py`): content, parses, the code context at a position."""

    def set_active(self, uri: str | None) -> None: ...
    def snapshot(self, uri: str) -> Snapshot | None: ...
    async def snapshot_or_disk(self, uri: str) -> Snapshot | None: ...
    async def symbols(self, uri: str) -> list[cc.Symbol] | None: ...
    async def context_at(self, uri: str, pos: t.Position) -> tuple[cc.CodeContext, Snapshot] | None: ...
    def word_range(self, snap: Snapshot, pos: t.Position, word: str | None) -> t.Range | None: ...
    def ensure_analyzed(self, uri: str) -> None: ...
    async def check_anchors(self, uri: str, force: bool = False) -> dict: ...


class Server(Protocol):
    """What a feature may use of the language server (`language_server.MnemoLanguageServer`)."""

    settings: Settings
    settings_problems: list[str]
    editor: EditorContext
    owner: OwnerLink | None
    active_uri: str | None

    @property
    def documents(self) -> Documents: ...  # read-only here: the server's is `DocumentsFeature`

    # pygls' own (the workspace, the client's capabilities, notifications, progress)
    @property
    def workspace(self) -> Any: ...
    @property
    def protocol(self) -> Any: ...
    @property
    def client_capabilities(self) -> t.ClientCapabilities: ...
    @property
    def work_done_progress(self) -> Any: ...

    @property
    def ready(self) -> bool: ...
    def spawn(self, coro: Awaitable[Any], name: str) -> asyncio.Task: ...
    async def run_blocking(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any: ...
    async def run_cancellable(self, fn: Callable[..., Any], *args: Any, **kw: Any) -> Any: ...
    async def service(self, method: str, *args: Any, **kw: Any) -> Any: ...
    async def test_delay(self) -> None: ...
    async def until_connected(self, timeout: float) -> bool: ...
    async def fan_out(self, hook: str, *args: Any) -> list[Any]: ...
    def send_threadsafe(self, method: str, params: Any) -> None: ...
    def workspace_roots(self) -> list[Path]: ...
    def ctx_for(self, uri: str | None = None) -> dict[str, Any]: ...
    def rel_path(self, uri: str | None, ctx: dict[str, Any]) -> str | None: ...
    async def publish_state(self, *, force: bool = False, skills: bool = True) -> dict[str, Any]: ...
    def memories_changed(self, reason: str, ids: list[str] | None = None) -> None: ...
    def refresh_code_lenses(self) -> None: ...
    async def reconnect(self) -> dict[str, Any]: ...
    def status_extras(self) -> dict[str, Any]: ...


class LanguageFeature:
    """Base of a feature: override the hooks it serves (the defaults do nothing and answer None).

    LSP hooks get the lsprotocol params object; `commands()`/`requests()`/`notifications()` map custom names to
    coroutines taking the one params object (a dict)."""

    def __init__(self, server: Server):
        self.server = server

    # -- lifecycle -------------------------------------------------------------------------------------------
    async def owner_ready(self) -> None:
        """After the first connection to the owner."""

    def invalidate(self) -> None:
        """After a write (here or noticed): drop what was derived from the store."""

    # -- documents -------------------------------------------------------------------------------------------
    async def did_open(self, params: t.DidOpenTextDocumentParams) -> None: ...
    async def did_change(self, params: t.DidChangeTextDocumentParams) -> None: ...
    async def did_save(self, params: t.DidSaveTextDocumentParams) -> None: ...
    async def did_close(self, params: t.DidCloseTextDocumentParams) -> None: ...

    async def analyze(self, uri: str) -> None:
        """After a document's debounce, once it is parsed."""

    # -- requests (the first answer that is not None wins; lists are concatenated) ---------------------------
    async def hover(self, params: t.HoverParams) -> t.Hover | None:
        return None

    async def code_lens(self, params: t.CodeLensParams) -> list[t.CodeLens] | None:
        return None

    async def code_lens_resolve(self, lens: t.CodeLens) -> t.CodeLens | None:
        return None

    async def code_action(self, params: t.CodeActionParams) -> list[t.CodeAction] | None:
        return None

    # -- custom methods --------------------------------------------------------------------------------------
    def commands(self) -> dict[str, Handler]:
        return {}

    def requests(self) -> dict[str, Handler]:
        return {}

    def notifications(self) -> dict[str, Handler]:
        return {}


__all__ = ["Documents", "Handler", "LanguageFeature", "Server", "Snapshot"]
