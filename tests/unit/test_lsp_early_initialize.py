"""The language server's pre-handshake (`mnemo.lsp.preinit`, `mnemo.lsp.capabilities`), in process: the early
`initialize` answer equals what pygls' own capabilities builder makes for the same client capabilities, the
registrations match the declarations, the stdout filter drops only the replayed answer, and the pre-handshake only
answers requests pygls would accept. The end-to-end side (real processes) is tests/e2e/test_lsp_preinit.py (this
file's name differs: pytest needs unique basenames)."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path

import pytest
import pytest_lsp
from hypothesis import given, settings
from hypothesis import strategies as st

from mnemo.lsp import capabilities, preinit
from mnemo.lsp.stdio import ResyncingStdin

CLIENTS = Path(pytest_lsp.__file__).parent / "clients"


@pytest.fixture(scope="module")
def server():
    from mnemo.lsp.server import create_server

    return create_server()


def pygls_capabilities(server, caps: dict) -> dict:
    """What pygls' `lsp_initialize` builds for `caps` (the same builder call, without the event loop)."""
    from lsprotocol import types as t
    from pygls.capabilities import ServerCapabilitiesBuilder

    conv = server.protocol._converter
    client = conv.structure(caps, t.ClientCapabilities)
    fm = server.protocol.fm
    built = ServerCapabilitiesBuilder(
        client, set({**fm.features, **fm.builtin_features}.keys()), fm.feature_options, list(fm.commands.keys()),
        server._text_document_sync_kind, server._notebook_document_sync,
        ServerCapabilitiesBuilder.choose_position_encoding(client)).build()
    return json.loads(json.dumps(built, default=server.protocol._serialize_message))


def real_clients() -> dict[str, dict]:
    return {p.stem: json.loads(p.read_text())["capabilities"] for p in sorted(CLIENTS.glob("*.json"))}


CAPS = {
    "minimal": {},
    "utf-16 only": {"general": {"positionEncodings": ["utf-16"]}},
    "utf-8 first": {"general": {"positionEncodings": ["utf-8", "utf-16"]}},
    "utf-32 first": {"general": {"positionEncodings": ["utf-32", "utf-8"]}},
    "unknown encodings": {"general": {"positionEncodings": ["utf-7", "latin-1"]}},
    "no encodings": {"general": {"positionEncodings": []}},
    "null general": {"general": None},
    "will save": {"textDocument": {"synchronization": {"willSave": True, "willSaveWaitUntil": True}}},
    "will save false": {"textDocument": {"synchronization": {"willSave": False, "willSaveWaitUntil": False}}},
    "file operations": {"workspace": {"fileOperations": {"didCreate": True, "willRename": True}}},
    "rename prepare": {"textDocument": {"rename": {"prepareSupport": True}}},
    "notebooks": {"notebookDocument": {"synchronization": {"dynamicRegistration": True}}},
    **real_clients(),
}


def test_registrations_match_declarations(server):
    fm = server.protocol.fm
    assert list(fm.commands) == list(capabilities.COMMANDS)
    custom = {n for f in server.features for n in (*f.requests(), *f.notifications())}
    assert {m for m in fm.features if m not in custom} == set(capabilities.LSP_METHODS)
    assert set(fm.builtin_features) == capabilities.PYGLS_BUILTIN  # pygls' own handlers: re-check on upgrades
    assert server.name == capabilities.SERVER_NAME


@pytest.mark.parametrize("name", sorted(CAPS))
def test_early_capabilities_equal_pygls(server, name):
    caps = CAPS[name]
    assert capabilities.server_capabilities(caps) == pygls_capabilities(server, caps)


_flag = st.none() | st.booleans()
_caps = st.fixed_dictionaries({}, optional={
    "general": st.none() | st.fixed_dictionaries({}, optional={
        "positionEncodings": st.none() | st.lists(st.sampled_from(["utf-8", "utf-16", "utf-32", "utf-7", ""]),
                                                  max_size=4)}),
    "textDocument": st.none() | st.fixed_dictionaries({}, optional={
        "synchronization": st.none() | st.fixed_dictionaries({}, optional={
            "willSave": _flag, "willSaveWaitUntil": _flag, "didSave": _flag, "dynamicRegistration": _flag}),
        "hover": st.fixed_dictionaries({}, optional={"contentFormat": st.lists(st.sampled_from(["markdown",
                                                                                               "plaintext"]))}),
        "rename": st.fixed_dictionaries({}, optional={"prepareSupport": _flag})}),
    "workspace": st.none() | st.fixed_dictionaries({}, optional={
        "configuration": _flag, "workspaceFolders": _flag,
        "fileOperations": st.fixed_dictionaries({}, optional={k: _flag for k in (
            "didCreate", "willCreate", "didRename", "willRename", "didDelete", "willDelete")})}),
    "notebookDocument": st.none() | st.just({"synchronization": {}}),
    "experimental": st.none() | st.integers() | st.text(max_size=5),
})


@settings(max_examples=150, deadline=None)
@given(caps=_caps)
def test_early_capabilities_equal_pygls_random(server, caps):
    assert capabilities.server_capabilities(caps) == pygls_capabilities(server, caps)


def test_initialize_result_has_server_info():
    from mnemo import __version__

    res = capabilities.initialize_result({"processId": None, "rootUri": None, "capabilities": {}})
    assert res["serverInfo"] == {"name": "mnemo", "version": __version__}
    assert res["capabilities"]["positionEncoding"] == "utf-16"


_json = st.recursive(st.none() | st.booleans() | st.integers() | st.text(max_size=8),
                     lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=6), kids, max_size=3),
                     max_leaves=8)
_params = st.fixed_dictionaries({"capabilities": _caps | _json}, optional={
    "processId": st.none() | st.integers() | st.text(max_size=3) | st.booleans(),
    "rootUri": st.none() | st.just("file:///tmp/x") | st.integers(),
    "rootPath": st.none() | st.just("/tmp/x") | st.integers(),
    "locale": st.none() | st.just("en") | st.integers(),
    "trace": st.none() | st.sampled_from(["off", "messages", "verbose", "loud"]) | st.integers(),
    "clientInfo": st.none() | st.fixed_dictionaries({"name": st.text(max_size=4) | st.integers()},
                                                    optional={"version": st.none() | st.text(max_size=3)}),
    "workspaceFolders": st.none() | st.lists(st.fixed_dictionaries({"uri": st.just("file:///w") | st.integers(),
                                                                    "name": st.just("w")}), max_size=2),
    "initializationOptions": _json,
    "workDoneToken": st.none() | st.integers() | st.text(max_size=3),
}) | _json


@settings(max_examples=300, deadline=None)
@given(params=_params)
def test_early_answer_only_for_what_pygls_accepts(server, params):
    """Whenever the pre-handshake answers, pygls structures the same request without error (so its replay of the
    request cannot fail where the client was already told it succeeded)."""
    if capabilities.initialize_result(params) is None:
        return
    msg = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params}
    structured = server.protocol.structure_message(msg)
    assert getattr(structured, "method", None) == "initialize"


@pytest.mark.parametrize("body, ok", [
    (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}', True),
    (b'{"jsonrpc": "2.0", "id": "abc", "method": "initialize", "params": {"capabilities": {}}}', True),
    (b'{"jsonrpc": "2.0", "method": "initialize", "params": {"capabilities": {}}}', False),  # a notification
    (b'{"jsonrpc": "2.0", "id": true, "method": "initialize", "params": {"capabilities": {}}}', False),
    (b'{"jsonrpc": "2.0", "id": null, "method": "initialize", "params": {"capabilities": {}}}', False),
    (b'{"jsonrpc": "1.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}', False),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "shutdown"}', False),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize"}', False),  # no params
    (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": 5}}', False),
    (b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}, "processId": "x"}}', False),
    (b"{this is not json", False),
    (b"\xff\xfe\xfd", False),
    (b"[1, 2]", False),
    (b"[" * 100_000, False),
])
def test_which_first_messages_are_answered(body, ok):
    msg = preinit.parse_initialize(preinit.frame(body))
    assert (msg is not None and preinit.answer(msg) is not None) is ok


def test_answer_and_replay_frames():
    msg = preinit.parse_initialize(preinit.frame(json.dumps({
        "jsonrpc": "2.0", "id": 7, "method": "initialize",
        "params": {"capabilities": {}, "initializationOptions": {"hover": {"maxMemories": 2}}}}).encode()))
    data, result = preinit.answer(msg)
    head, _, body = data.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"Content-Length: %d" % len(body)
    assert json.loads(body) == {"id": 7, "jsonrpc": "2.0", "result": result}
    again = preinit.replay(msg, "mnemo-preinit-x")
    replayed = json.loads(again.partition(b"\r\n\r\n")[2])
    assert replayed == {**msg, "id": "mnemo-preinit-x"}


def test_stdin_replays_then_reads_on():
    rest = preinit.frame(b'{"jsonrpc": "2.0", "method": "initialized", "params": {}}')
    first = preinit.frame(b'{"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"capabilities": {}}}')
    reader = ResyncingStdin(io.BufferedReader(io.BytesIO(b"junk\r\n\r\n" + first + rest)))
    got = reader.next_frame()
    assert got == b"Content-Length: %d\r\n\r\n" % len(first.partition(b"\r\n\r\n")[2]) + first.partition(
        b"\r\n\r\n")[2]
    reader.push_front(b"Content-Length: 2\r\n\r\n{}")
    assert reader.readline() == b"Content-Length: 2\r\n"
    assert reader.readline() == b"\r\n"
    assert reader.read(2) == b"{}"
    assert reader.readline().startswith(b"Content-Length: ")
    assert reader.readline() == b"\r\n"
    assert json.loads(reader.read(10_000))["method"] == "initialized"


class _Sink:
    def __init__(self):
        self.data = b""

    def write(self, data):
        self.data += data
        return len(data)

    def flush(self):
        pass


def test_replay_filter_drops_only_the_replayed_answer(caplog):
    sent = capabilities.initialize_result({"capabilities": {}})
    sink, report = _Sink(), {"answered": True}
    out = preinit.ReplayFilter(sink, "mnemo-preinit-abc", sent, report)
    notif = preinit.frame(b'{"method": "window/logMessage", "jsonrpc": "2.0", "params": {"message": '
                          b'"\\"mnemo-preinit-abc\\" mentioned"}}')
    out.write(notif)
    replayed = preinit.frame(json.dumps({"id": "mnemo-preinit-abc", "jsonrpc": "2.0", "result": sent}).encode())
    with caplog.at_level(logging.WARNING):
        assert out.write(replayed) == len(replayed)
    later = preinit.frame(json.dumps({"id": "mnemo-preinit-abc", "jsonrpc": "2.0", "result": None}).encode())
    out.write(later)  # only the first answer to the private id is the replay's
    assert sink.data == notif + later
    assert report == {"answered": True, "agreed": True, "differences": []}
    assert not caplog.records


def test_replay_filter_reports_differences(caplog):
    sent = capabilities.initialize_result({"capabilities": {}})
    theirs = json.loads(json.dumps(sent))
    theirs["capabilities"]["positionEncoding"] = "utf-8"
    del theirs["capabilities"]["hoverProvider"]
    sink, report = _Sink(), {}
    out = preinit.ReplayFilter(sink, "mnemo-preinit-d", sent, report)
    with caplog.at_level(logging.WARNING):
        out.write(preinit.frame(json.dumps({"id": "mnemo-preinit-d", "jsonrpc": "2.0", "result": theirs}).encode()))
    assert sink.data == b""
    assert report == {"agreed": False, "differences": ["capabilities.hoverProvider",
                                                       "capabilities.positionEncoding"]}
    assert any("capabilities.positionEncoding" in r.getMessage() and r.levelno == logging.WARNING
               for r in caplog.records)
    # an error answer to the replay is a difference too
    report2 = {}
    out2 = preinit.ReplayFilter(_Sink(), "mnemo-preinit-e", sent, report2)
    out2.write(preinit.frame(b'{"id": "mnemo-preinit-e", "jsonrpc": "2.0", "error": {"code": -32602, '
                             b'"message": "bad"}}'))
    assert report2["agreed"] is False and report2["differences"] == ["error"]


def test_differences():
    assert capabilities.differences({"a": {"b": 1, "c": [1]}}, {"a": {"b": 1, "c": [1]}}) == []
    assert capabilities.differences({"a": {"b": 1}}, {"a": {"b": True}}) == ["a.b"]
    assert capabilities.differences({"a": 1}, {"b": 1}) == ["a", "b"]
    assert capabilities.differences([1], [2]) == ["(root)"]


def test_disabled_by_env(monkeypatch):
    for value, on in (("0", False), ("false", False), ("off", False), ("1", True), ("", True)):
        monkeypatch.setenv("MNEMO_LSP_PREINIT", value)
        assert preinit.enabled() is on
    monkeypatch.delenv("MNEMO_LSP_PREINIT")
    assert preinit.enabled()
