"""The JSON-RPC side of pygls as Mnemo needs it: the converter (custom methods keep plain dicts), the protocol
(a request with params that do not fit the LSP types gets an InvalidParams answer), and the pre-handshake's replay
of `initialize` made readable for pygls (`preinit.py`)."""

from __future__ import annotations

import logging
from typing import Any

from lsprotocol import types as t
from pygls.exceptions import JsonRpcException, JsonRpcInvalidParams
from pygls.protocol import LanguageServerProtocol

from mnemo import trace

log = logging.getLogger("mnemo.lsp")


def converter_factory():
    """pygls' converter, but params/results of custom methods stay plain dicts (not namedtuples)."""
    from pygls.protocol import JsonRPCNotification, JsonRPCRequestMessage, JsonRPCResponseMessage
    from pygls.protocol import default_converter as base

    conv = base()
    keep = lambda obj, cls: cls(**obj)  # noqa: E731
    for cls in (JsonRPCRequestMessage, JsonRPCResponseMessage, JsonRPCNotification):
        conv.register_structure_hook(cls, keep)
    return conv


class _Answered:
    """A message already answered with an error while it was being read; pygls ignores it (no `jsonrpc`)."""

    jsonrpc = None


class MnemoProtocol(LanguageServerProtocol):
    """pygls' protocol, but a request whose params do not fit the LSP types gets an InvalidParams answer instead
    of no answer at all (which would leave the client waiting)."""

    traced = frozenset({"textDocument/hover"})  # requests timed stage by stage in a bench run (MNEMO_TRACE_FILE)

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self.traces: dict[Any, Any] = {}  # request id -> its `trace.Stages` (bench runs only)

    def structure_message(self, data: Any) -> Any:
        if trace.enabled() and isinstance(data, dict) and data.get("method") in self.traced and "id" in data:
            stdin = getattr(self._server, "stdin", None)
            st = trace.stages("lsp." + data["method"].rpartition("/")[2], getattr(stdin, "frame_at", None) or None)
            st.mark("read")  # from the frame off the pipe to here: pygls' reads (thread hops) and json.loads
            self.traces[data["id"]] = st
        try:
            return super().structure_message(data)
        except JsonRpcException as exc:
            if isinstance(data, dict) and "id" in data and "method" in data:
                log.warning("malformed %s request: %s", data.get("method"), exc)
                self._send_response(data["id"], error=JsonRpcInvalidParams(
                    f"invalid params for {data.get('method')}", data={"code": "invalid_params"}).to_response_error())
                return _Answered()
            raise

    def answer_pending(self) -> None:
        """At `exit`: every request not answered yet gets its answer now, before pygls ends the process. A request
        still running (or cancelled by `shutdown`, whose answer a callback of the loop would write next) is answered
        RequestCancelled, one already finished with its result. A client that sends `shutdown` and `exit` at once
        would otherwise see the process end with those requests unanswered; each is answered exactly once (the
        future leaves ``_request_futures`` here, as pygls' own answer does)."""
        from pygls.exceptions import JsonRpcException, JsonRpcInternalError, JsonRpcRequestCancelled

        for msg_id, future in list(self._request_futures.items()):
            self._request_futures.pop(msg_id, None)
            if future.done() and not future.cancelled():
                exc = future.exception()
                if exc is None:
                    self._send_response(msg_id, result=future.result())
                elif isinstance(exc, JsonRpcException):
                    self._send_response(msg_id, error=exc.to_response_error())
                else:
                    self._send_response(msg_id, error=JsonRpcInternalError(str(exc)).to_response_error())
            else:
                self._send_response(msg_id, error=JsonRpcRequestCancelled(
                    f'Request with id "{msg_id}" is canceled').to_response_error())

    def _send_response(self, msg_id: Any, result: Any = None, error: Any = None) -> None:
        st = self.traces.pop(msg_id, None) if self.traces else None
        if st is not None:
            st.mark("answer")  # the handler's return to here (pygls' done callback)
        super()._send_response(msg_id, result, error)
        if st is not None:
            st.mark("respond")  # unstructure, json.dumps, the write to stdout
            st.done(id=msg_id, empty=result is None)

    def trace_of(self, msg_id: Any) -> Any:
        """The stages of request `msg_id` (a no-op when it is not traced)."""
        return self.traces.get(msg_id, trace.OFF) if self.traces else trace.OFF


def readable_initialize(server: Any, msg: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The pre-handshake's replay of `initialize`, made readable for pygls: the client was already told the session
    started, so a client capability section lsprotocol cannot read (pygls would answer InvalidParams and never set
    up the workspace) is dropped and named, keeping what the early answer was computed from (`positionEncodings`,
    `willSave*`). Returns (the message, the dropped sections)."""
    conv = server.protocol._converter  # noqa: SLF001

    def readable(m: dict[str, Any]) -> bool:
        try:
            conv.structure(m, t.InitializeRequest)
        except Exception:  # noqa: BLE001 - cattrs' validation errors
            return False
        return True

    if readable(msg):
        return msg, []
    params = msg.get("params")
    if not isinstance(params, dict):
        return msg, []
    caps = params.get("capabilities")
    if not isinstance(caps, dict):
        return msg, []
    kept: dict[str, Any] = {}
    dropped: list[str] = []
    for key, value in caps.items():
        if readable({**msg, "params": {**params, "capabilities": {key: value}}}):
            kept[key] = value
        else:
            dropped.append(key)
    encodings = (caps.get("general") or {}).get("positionEncodings") if isinstance(caps.get("general"), dict) else None
    if "general" in dropped and encodings is not None:
        kept["general"] = {"positionEncodings": encodings}
    text = caps.get("textDocument")
    sync = text.get("synchronization") if isinstance(text, dict) else None
    if "textDocument" in dropped and isinstance(sync, dict):
        kept["textDocument"] = {"synchronization": {k: v for k, v in sync.items()
                                                    if k in ("willSave", "willSaveWaitUntil")}}
    fixed = {**msg, "params": {**params, "capabilities": kept}}
    return (fixed, dropped) if readable(fixed) else (msg, [])


__all__ = ["MnemoProtocol", "converter_factory", "readable_initialize"]
