"""Registration, in esbonio's shape (`esbonio/server/setup.py`): each standard LSP method is registered once and
fanned out to the features' hooks (`LanguageFeature`), the features' custom commands, requests and notifications
are registered with one error mapping, and the result is checked against `capabilities.py` (the pre-handshake
answers `initialize` from those declarations, so `create_server()` refuses to start when they differ).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from lsprotocol import types as t
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams

from mnemo.core.errors import MnemoError
from mnemo.lsp import capabilities, convert
from mnemo.lsp.feature import Handler
from mnemo.lsp.jsonrpc import MnemoProtocol

if TYPE_CHECKING:
    from mnemo.lsp.language_server import MnemoLanguageServer

log = logging.getLogger("mnemo.lsp")


def _first(results: list[Any], params: Any) -> Any:
    return next((r for r in results if r is not None), None)


def _first_or_params(results: list[Any], params: Any) -> Any:
    return next((r for r in results if r is not None), params)


def _every(results: list[Any], params: Any) -> list[Any]:
    return [item for r in results for item in (r or [])]


# Standard methods answered by the features: (LSP method, `LanguageFeature` hook, how the answers combine, given
# (answers, params); None: a notification). An unresolved code lens comes back as it was.
FANNED_OUT: tuple[tuple[str, str, Callable[..., Any] | None], ...] = (
    (t.TEXT_DOCUMENT_DID_OPEN, "did_open", None),
    (t.TEXT_DOCUMENT_DID_CHANGE, "did_change", None),
    (t.TEXT_DOCUMENT_DID_SAVE, "did_save", None),
    (t.TEXT_DOCUMENT_DID_CLOSE, "did_close", None),
    (t.TEXT_DOCUMENT_HOVER, "hover", _first),
    (t.TEXT_DOCUMENT_CODE_LENS, "code_lens", _every),
    (t.CODE_LENS_RESOLVE, "code_lens_resolve", _first_or_params),
    (t.TEXT_DOCUMENT_CODE_ACTION, "code_action", _every),
)

# lsprotocol types of the registration options declared (as LSP JSON) in capabilities.LSP_METHODS
_OPTION_TYPES = {t.TEXT_DOCUMENT_CODE_LENS: t.CodeLensOptions, t.TEXT_DOCUMENT_CODE_ACTION: t.CodeActionOptions,
                 t.TEXT_DOCUMENT_HOVER: t.HoverOptions, t.TEXT_DOCUMENT_DID_SAVE: t.SaveOptions}


def configure(server: MnemoLanguageServer) -> None:
    """Register every handler of `server` (its features already added)."""
    _lifecycle(server)
    for method, hook, combine in FANNED_OUT:
        server.feature(method, _options(server, method))(_fanned_out(server, hook, combine))
    for feature in server.features:
        for name, fn in feature.commands().items():
            server.command(name)(_command(server, name, fn))
        for name, fn in feature.requests().items():
            server.feature(name)(_request(server, name, fn))
        for name, fn in feature.notifications().items():
            server.feature(name)(_notification(name, fn))
    check_declarations(server)


def _lifecycle(server: MnemoLanguageServer) -> None:
    @server.feature(t.INITIALIZE)
    def on_initialize(params: t.InitializeParams) -> None:
        server.on_initialize(params)

    @server.feature(t.INITIALIZED)
    async def on_initialized(params: t.InitializedParams) -> None:
        await server.on_initialized()

    @server.feature(t.SHUTDOWN)
    async def on_shutdown(params: Any) -> None:
        await server.on_shutdown()

    @server.feature(t.EXIT)
    def on_exit(params: Any) -> None:  # synchronous: pygls exits right after it, reading no further message
        protocol = server.protocol
        if isinstance(protocol, MnemoProtocol):
            protocol.answer_pending()

    @server.feature(t.WORKSPACE_DID_CHANGE_CONFIGURATION)
    async def on_configuration(params: t.DidChangeConfigurationParams) -> None:
        await server.on_configuration(params)


def _fanned_out(server: MnemoLanguageServer, hook: str, combine: Callable[[list[Any], Any], Any] | None):
    async def handler(params: Any) -> Any:
        results = await server.fan_out(hook, params)
        return None if combine is None else combine(results, params)

    handler.__name__ = f"lsp_{hook}"
    return handler


def _options(server: MnemoLanguageServer, method: str) -> Any:
    value = capabilities.LSP_METHODS.get(method)
    return None if value is None else server.protocol._converter.structure(value, _OPTION_TYPES[method])  # noqa: SLF001


def check_declarations(server: MnemoLanguageServer) -> None:
    """The registrations must be what capabilities.py declares: the pre-handshake answers `initialize` from there."""
    fm = server.protocol.fm
    custom = {name for f in server.features for name in (*f.requests(), *f.notifications())}
    standard = [m for m in fm.features if m not in custom]
    problems = []
    if set(standard) != set(capabilities.LSP_METHODS):
        problems.append(f"LSP methods registered {sorted(set(standard) ^ set(capabilities.LSP_METHODS))} "
                        "differ from capabilities.LSP_METHODS")
    if list(fm.commands) != list(capabilities.COMMANDS):
        problems.append(f"commands registered {list(fm.commands)} differ from capabilities.COMMANDS")
    if problems:
        raise RuntimeError("mnemo.lsp.capabilities is out of date: " + "; ".join(problems))


# -- custom methods: one params object, Mnemo errors as LSP errors ---------------------------------------------------
def _command(server: MnemoLanguageServer, name: str, fn: Handler):
    async def handler(*args: Any) -> Any:
        server.link_cancellation()
        params = convert.params_object(list(args), name)
        await server.test_delay()
        return await _call(name, fn, params)

    handler.__name__ = f"command_{name}"
    return handler


def _request(server: MnemoLanguageServer, name: str, fn: Handler):
    async def handler(params: Any) -> Any:
        p = convert.params_object(params, name)
        await server.test_delay()
        return await _call(name, fn, p)

    handler.__name__ = f"request_{name}"
    return handler


def _notification(name: str, fn: Handler):
    async def handler(params: Any) -> None:
        try:
            await fn(convert.params_object(params, name))
        except (JsonRpcException, MnemoError) as exc:
            log.warning("%s: %s", name, exc)

    handler.__name__ = f"notification_{name}"
    return handler


async def _call(name: str, fn: Handler, params: dict) -> Any:
    try:
        return await fn(params)
    except MnemoError as exc:
        log.info("%s failed: %s", name, exc)
        raise convert.lsp_error(exc) from exc
    except (TypeError, KeyError, ValueError) as exc:
        if isinstance(exc, JsonRpcException):
            raise
        log.info("%s: bad params: %s", name, exc)
        raise JsonRpcInvalidParams(f"{name}: {exc}", data={"code": "invalid_params"}) from exc


__all__ = ["FANNED_OUT", "check_declarations", "configure"]
