"""What the language server registers, as plain data, and the `initialize` answer built from it without pygls.

Standard library only: the pre-handshake (`preinit.py`) answers `initialize` from here while pygls and lsprotocol
are still being imported. `create_server()` registers its LSP methods with the options declared here and refuses
to start when its registrations and these declarations disagree, so the two cannot drift; the pre-handshake also
compares its answer with the one pygls builds for the same request and logs a warning on any difference.

`initialize_result()` mirrors pygls 2.1's `ServerCapabilitiesBuilder` for the methods below. It returns None (no
early answer; pygls answers as before) when the declarations use a method it does not model, or when the request
is shaped in a way pygls might reject.
"""

from __future__ import annotations

from typing import Any, TypeGuard, TypeVar

from mnemo import __version__

SERVER_NAME = "mnemo"
TEXT_DOCUMENT_SYNC_KIND = 2  # TextDocumentSyncKind.Incremental

CODE_ACTION_KINDS = ["refactor.mnemo.remember", "refactor.mnemo.anchor", "refactor.mnemo.promote",
                     "refactor.mnemo.deprecate", "source.mnemo.showInjection", "refactor.mnemo.edit"]

# Standard LSP methods create_server() gives a handler, with their registration options as LSP JSON (None: none).
LSP_METHODS: dict[str, dict[str, object] | None] = {
    "initialize": None,
    "initialized": None,
    "shutdown": None,
    "exit": None,
    "workspace/didChangeConfiguration": None,
    "textDocument/didOpen": None,
    "textDocument/didChange": None,
    "textDocument/didSave": None,
    "textDocument/didClose": None,
    "textDocument/hover": None,
    "textDocument/codeLens": {"resolveProvider": True},
    "codeLens/resolve": None,
    "textDocument/codeAction": {"codeActionKinds": CODE_ACTION_KINDS},
}

# `workspace/executeCommand` commands, in registration order (the features' `commands()`).
COMMANDS: tuple[str, ...] = (
    "mnemo.rememberSelection", "mnemo.remember", "mnemo.anchorMemory", "mnemo.promote", "mnemo.deprecate",
    "mnemo.forget", "mnemo.restore", "mnemo.openMemory", "mnemo.showInjection", "mnemo.indexDocs",
    "mnemo.checkAnchors", "mnemo.snapshotExport", "mnemo.snapshotDiff", "mnemo.snapshotMerge", "mnemo.branchDiff",
    "mnemo.branchMerge", "mnemo.branchDelete", "mnemo.runDecay", "mnemo.compact", "mnemo.resolveReview",
    "mnemo.reconnect", "mnemo.editMemory", "mnemo.publish",
)

# Methods pygls' LanguageServerProtocol always handles itself (its `builtin_features`).
PYGLS_BUILTIN = frozenset({
    "$/setTrace", "exit", "initialize", "initialized", "notebookDocument/didChange", "notebookDocument/didClose",
    "notebookDocument/didOpen", "shutdown", "textDocument/didChange", "textDocument/didClose", "textDocument/didOpen",
    "window/workDoneProgress/cancel", "workspace/didChangeWorkspaceFolders", "workspace/executeCommand",
})

# What initialize_result() knows how to answer for; any other standard method declared above (completion,
# diagnostics, file operations ...) turns the early answer off until it is modelled here.
_MODELLED = frozenset({
    "textDocument/didOpen", "textDocument/didClose", "textDocument/didSave", "textDocument/willSave",
    "textDocument/willSaveWaitUntil", "textDocument/hover", "textDocument/codeAction", "textDocument/codeLens",
    "codeLens/resolve",
})
# Methods that add nothing to ServerCapabilities.
_NEUTRAL = frozenset({
    "initialize", "initialized", "shutdown", "exit", "$/setTrace", "$/cancelRequest", "$/progress",
    "workspace/didChangeConfiguration", "workspace/didChangeWorkspaceFolders", "workspace/executeCommand",
    "textDocument/didChange", "notebookDocument/didOpen", "notebookDocument/didChange", "notebookDocument/didClose",
    "window/workDoneProgress/cancel",
})
_ENCODINGS = ("utf-8", "utf-16", "utf-32")
_TRACE = ("off", "messages", "verbose")


def server_info() -> dict[str, str]:
    return {"name": SERVER_NAME, "version": __version__}


def _opt(d: dict, key: str, *types: type) -> bool:
    """True when `key` is absent, null or of one of `types` (bool is never an int here)."""
    value = d.get(key)
    if value is None:
        return True
    if isinstance(value, bool) and bool not in types:
        return False
    return isinstance(value, types)


def acceptable(params: object) -> TypeGuard[dict[str, Any]]:
    """The InitializeParams fields pygls structures, checked strictly: an early answer is only sent for a request
    pygls will accept too (anything odd goes the slow way, where pygls answers it)."""
    if not isinstance(params, dict):
        return False
    caps = params.get("capabilities")
    if not isinstance(caps, dict):
        return False
    if not (_opt(params, "processId", int) and _opt(params, "rootUri", str) and _opt(params, "rootPath", str)
            and _opt(params, "locale", str) and _opt(params, "workDoneToken", int, str)):
        return False
    if params.get("trace") is not None and params.get("trace") not in _TRACE:
        return False
    info = params.get("clientInfo")
    if info is not None and not (isinstance(info, dict) and isinstance(info.get("name"), str)
                                 and _opt(info, "version", str)):
        return False
    folders = params.get("workspaceFolders")
    if folders is not None:
        if not isinstance(folders, list):
            return False
        for f in folders:
            if not (isinstance(f, dict) and isinstance(f.get("uri"), str) and isinstance(f.get("name"), str)):
                return False
    for key, value in caps.items():
        if key != "experimental" and value is not None and not isinstance(value, dict):
            return False
    general = caps.get("general") or {}
    encodings = general.get("positionEncodings")
    if encodings is not None and not (isinstance(encodings, list) and all(isinstance(e, str) for e in encodings)):
        return False
    sync = (caps.get("textDocument") or {}).get("synchronization")
    if sync is not None:
        if not isinstance(sync, dict):
            return False
        if not (_opt(sync, "willSave", bool) and _opt(sync, "willSaveWaitUntil", bool)):
            return False
    return True


def position_encoding(caps: dict) -> str:
    """pygls' choice: the client's first encoding among utf-8/16/32, else utf-16."""
    encodings = (caps.get("general") or {}).get("positionEncodings")
    for enc in encodings or ():
        if enc in _ENCODINGS:
            return enc
    return "utf-16"


_T = TypeVar("_T")


def _client(caps: dict, *path: str) -> object:
    """pygls' `get_capability`: the nested value, None when a level is missing or null."""
    value: object = caps
    for key in path:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


def server_capabilities(caps: dict) -> dict[str, object] | None:
    """The `capabilities` pygls builds for client capabilities `caps` (LSP JSON, null fields left out)."""
    features = set(LSP_METHODS) | PYGLS_BUILTIN
    if features - _MODELLED - _NEUTRAL:
        return None

    def options(method: str, default: _T) -> dict[str, object] | _T | None:
        if method not in features:
            return None
        value = LSP_METHODS.get(method)
        return dict(value) if isinstance(value, dict) else default

    out: dict[str, object] = {"positionEncoding": position_encoding(caps)}
    sync: dict[str, object] = {
        "openClose": "textDocument/didOpen" in features or "textDocument/didClose" in features,
        "change": TEXT_DOCUMENT_SYNC_KIND,
    }
    # `client_value and registered`, as pygls writes it: null stays out, false stays false
    for key, method in (("willSave", "textDocument/willSave"), ("willSaveWaitUntil", "textDocument/willSaveWaitUntil")):
        value = _client(caps, "textDocument", "synchronization", key)
        value = value and method in features
        if value is not None:
            sync[key] = value
    sync["save"] = options("textDocument/didSave", True) if "textDocument/didSave" in features else False
    out["textDocumentSync"] = sync
    hover = options("textDocument/hover", True)
    if hover is not None:
        out["hoverProvider"] = hover
    action = options("textDocument/codeAction", True)
    if action is not None:
        out["codeActionProvider"] = action
    no_lens_options: dict[str, object] = {}
    lens = options("textDocument/codeLens", no_lens_options)
    if lens is not None:
        lens["resolveProvider"] = "codeLens/resolve" in features
        out["codeLensProvider"] = lens
    out["executeCommandProvider"] = {"commands": list(COMMANDS)}
    out["workspace"] = {"workspaceFolders": {"supported": True, "changeNotifications": True}, "fileOperations": {}}
    return out


def initialize_result(params: object) -> dict[str, object] | None:
    """The InitializeResult pygls would answer for `params`, or None when this request must go the slow way."""
    if not acceptable(params):
        return None
    caps = server_capabilities(params["capabilities"])
    if caps is None:
        return None
    return {"capabilities": caps, "serverInfo": server_info()}


def differences(a: object, b: object, path: str = "") -> list[str]:
    """Dotted paths where two JSON values differ (lists compared whole)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out: list[str] = []
        for key in sorted(set(a) | set(b)):
            sub = f"{path}.{key}" if path else str(key)
            if key not in a or key not in b:
                out.append(sub)
            else:
                out.extend(differences(a[key], b[key], sub))
        return out
    return [] if a == b and type(a) is type(b) else [path or "(root)"]


__all__ = ["CODE_ACTION_KINDS", "COMMANDS", "LSP_METHODS", "SERVER_NAME", "TEXT_DOCUMENT_SYNC_KIND",
           "acceptable", "differences", "initialize_result", "position_encoding", "server_capabilities",
           "server_info"]
