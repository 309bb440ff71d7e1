"""Protocol fuzz: malformed LSP, MCP and owner-socket traffic; after every burst the server is alive and answers
the next valid request.

LSP (Content-Length framing): broken headers, bodies that are not JSON, not objects, nesting bombs, invalid UTF-8,
random methods/ids/params (hypothesis), a message over MNEMO_LSP_MAX_MESSAGE_BYTES. MCP (one JSON object per
line): garbage lines, batches, wrong versions, unknown methods and tools, tool calls with hostile arguments, a huge
line. The owner's socket: garbage lines between valid calls.

Each server reports its figures when it is stopped (the LSP and MCP servers at the end of their module-scoped
fixture, the owner at the end of its test), whatever ran before: messages sent, valid requests sent after them and
how many were answered, and whether it was still the same live process.
"""

from __future__ import annotations

import json
import os
import random
import socket
import sys
import time

import pytest
from _helpers import FULL, figure, owner_pid, stop_owner
from _rpc import RawServer
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from mnemo import PROTOCOL_VERSION
from mnemo.daemon.paths import socket_path

EXAMPLES = 1000 if FULL else 150
STATS: dict[str, dict] = {}


def _stats(name: str) -> dict:
    return STATS.setdefault(name, {"sent": 0, "probes": 0, "answered": 0, "max_probe_s": 0.0})


def probe(srv: RawServer, name: str, method: str, params=None) -> dict:
    s = _stats(name)
    s["probes"] += 1
    t0 = time.monotonic()
    ans = srv.request(method, params, timeout=20)
    s["max_probe_s"] = max(s["max_probe_s"], time.monotonic() - t0)
    assert "result" in ans, ans
    s["answered"] += 1
    return ans


def report(name: str, crashed: bool, how: str) -> None:
    """The figures of one server's run, as measured."""
    s = _stats(name)
    figure(f"test_protocol_fuzz[{name}]", "malformed messages sent", s["sent"])
    figure(f"test_protocol_fuzz[{name}]", "valid requests answered after them", f"{s['answered']}/{s['probes']}",
           slowest=f"{s['max_probe_s'] * 1000:.0f} ms")
    figure(f"test_protocol_fuzz[{name}]", "server crashes", int(crashed), detail=how)


def stop_and_report(srv: RawServer, name: str) -> None:
    alive = srv.alive()
    how = "alive until stopped" if alive else f"exited with code {srv.proc.returncode}"
    tail = "" if alive else srv.stderr_tail()
    srv.close()
    report(name, not alive, how)
    assert alive, f"the {name} server died: {tail}"


def _alive(pid: int | None) -> bool:
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


@pytest.fixture(scope="module")
def env(tmp_path_factory):
    base = tmp_path_factory.mktemp("proto")
    home = base / "store"
    e = dict(os.environ, MNEMO_HOME=str(home), MNEMO_EMBEDDER="hash", HOME=str(base / "user"),
             MNEMO_LSP_MAX_MESSAGE_BYTES=str(1024 * 1024), MNEMO_IDLE_TIMEOUT="300")
    (base / "user").mkdir()
    repo = base / "repo"
    repo.mkdir()
    import subprocess
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "a.py").write_text("def f():\n    return 1\n")
    yield {"env": e, "home": home, "repo": repo}
    stop_owner(home)


# -- LSP --------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def lsp(env):
    srv = RawServer([sys.executable, "-m", "mnemo", "lsp"], env["env"], str(env["repo"]), "lsp")
    srv.request("initialize", {"processId": None, "rootUri": env["repo"].as_uri(), "capabilities": {},
                               "workspaceFolders": [{"uri": env["repo"].as_uri(), "name": "repo"}]}, timeout=60)
    srv.notify("initialized", {})
    yield srv
    stop_and_report(srv, "lsp")


LSP_FRAMING = {
    "non-numeric length": b"Content-Length: abc\r\n\r\n{}",
    "negative length": b"Content-Length: -5\r\n\r\n{}",
    "no blank line": b"Content-Length: 2\r\n{}",
    "garbage lines": b"hello\r\nworld\r\n\r\n",
    "binary": bytes(range(256)),
    "long header line": b"X-Junk: " + b"a" * 200_000 + b"\r\n\r\n",
    "body not JSON": b"Content-Length: 17\r\n\r\n{this is not json",
    "body a list": b"Content-Length: 5\r\n\r\n[1,2]",
    "invalid UTF-8": b"Content-Length: 4\r\n\r\n\xff\xfe\xfd\xfc",
    "nesting bomb": b"Content-Length: 200000\r\n\r\n" + b"[" * 200_000,
    "truncated JSON": b'Content-Length: 30\r\n\r\n{"jsonrpc": "2.0", "id": 9, "m',
    "unknown header": b"Content-Type: application/x-junk\r\n\r\n",
    "over the message limit": b"Content-Length: 2000000\r\n\r\n" + b" " * 2_000_000,
}


def test_lsp_survives_malformed_framing(lsp):
    for name, raw in LSP_FRAMING.items():
        lsp.send_raw(raw)
        _stats("lsp")["sent"] += 1
        if name in ("truncated JSON",):  # the body is 30 bytes as announced: complete, just not valid JSON
            pass
        probe(lsp, "lsp", "mnemo/status", {})
    assert lsp.alive()


LSP_METHODS = ["textDocument/hover", "textDocument/codeLens", "textDocument/codeAction", "textDocument/didOpen",
               "textDocument/didChange", "textDocument/didClose", "workspace/executeCommand", "codeLens/resolve",
               "mnemo/status", "mnemo/listMemories", "mnemo/getMemory", "mnemo/recall", "mnemo/activeSkills",
               "mnemo/reviewQueue", "mnemo/injectionPreview", "mnemo/stats", "mnemo/branchDiff",
               "mnemo/didChangeActiveEditor", "workspace/didChangeConfiguration", "$/cancelRequest",
               "initialize", "no/such/method", "mnemo/noSuchRequest"]
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63) | st.floats(allow_nan=False) | st.text(max_size=30),
    lambda kids: st.lists(kids, max_size=4) | st.dictionaries(st.text(max_size=10), kids, max_size=4),
    max_leaves=10)
lsp_params = st.one_of(
    json_values,
    st.fixed_dictionaries({"textDocument": json_values | st.fixed_dictionaries({"uri": st.text(max_size=40)}),
                           "position": json_values | st.fixed_dictionaries({"line": st.integers(-5, 10**9),
                                                                            "character": st.integers(-5, 10**9)})}),
    st.fixed_dictionaries({"command": st.sampled_from(["mnemo.remember", "mnemo.promote", "mnemo.forget",
                                                       "mnemo.snapshotMerge", "mnemo.branchDelete", "nope"]),
                           "arguments": st.lists(json_values, max_size=3)}),
)
lsp_message = st.fixed_dictionaries({
    "jsonrpc": st.sampled_from(["2.0", "2.0", "1.0", 2]),
    "method": st.sampled_from(LSP_METHODS) | st.text(max_size=20),
    "params": lsp_params,
}, optional={"id": st.one_of(st.integers(-10, 10**6), st.text(max_size=10), st.none(), st.just({"x": 1}))})


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not FULL, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(msgs=st.lists(lsp_message, min_size=1, max_size=5))
def test_lsp_survives_random_messages(lsp, msgs):
    for m in msgs:
        if m.get("method") in ("exit", "shutdown"):
            continue
        lsp.send(m)
        _stats("lsp")["sent"] += 1
    probe(lsp, "lsp", "mnemo/status", {})
    lsp.drain()


# -- MCP --------------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def mcp(env):
    srv = RawServer([sys.executable, "-m", "mnemo", "mcp"], env["env"], str(env["repo"]), "mcp")
    srv.request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {},
                               "clientInfo": {"name": "fuzz", "version": "0"}}, timeout=60)
    srv.notify("notifications/initialized", {})
    yield srv
    stop_and_report(srv, "mcp")


MCP_LINES = {
    "garbage": b"hello world\n",
    "binary": bytes(b for b in range(256) if b != 10) + b"\n",
    "invalid UTF-8": b"\xff\xfe{}\n",
    "not an object": b"[1, 2, 3]\n",
    "empty batch": b"[]\n",
    "wrong version": b'{"jsonrpc": "1.0", "id": 5, "method": "tools/list"}\n',
    "no method": b'{"jsonrpc": "2.0", "id": 6}\n',
    "unknown method": b'{"jsonrpc": "2.0", "id": 7, "method": "no/such"}\n',
    "unknown tool": b'{"jsonrpc": "2.0", "id": 8, "method": "tools/call", "params": {"name": "rm", "arguments": {}}}\n',
    "bad arguments": b'{"jsonrpc": "2.0", "id": 9, "method": "tools/call", "params": {"name": "recall", '
                     b'"arguments": {"query": 5, "limit": "x"}}}\n',
    "nesting bomb": b"[" * 100_000 + b"\n",
    "huge line": b'{"jsonrpc": "2.0", "id": 10, "method": "tools/call", "params": {"name": "remember", '
                 b'"arguments": {"text": "' + b"a" * 3_000_000 + b'"}}}\n',
    "null id": b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}\n',
    "object id": b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}\n',
    "blank lines": b"\n\n\n",
}


def test_mcp_survives_malformed_lines(mcp):
    for _name, raw in MCP_LINES.items():
        mcp.send_raw(raw)
        _stats("mcp")["sent"] += 1
        probe(mcp, "mcp", "tools/list", {})
    assert mcp.alive()


TOOLS = ["remember", "remember_batch", "recall", "hydrate", "activate_skills", "promote", "deprecate", "stats", "recent_context",
         "context", "no_such_tool"]
mcp_message = st.one_of(
    st.fixed_dictionaries({"jsonrpc": st.just("2.0"), "id": st.integers(1000, 10**6), "method": st.just("tools/call"),
                           "params": st.fixed_dictionaries({"name": st.sampled_from(TOOLS),
                                                            "arguments": st.dictionaries(
                                                                st.sampled_from(["text", "query", "id", "limit",
                                                                                 "mode", "to", "reason", "file",
                                                                                 "message", "days", "x"]),
                                                                json_values, max_size=4)})}),
    st.fixed_dictionaries({"jsonrpc": st.sampled_from(["2.0", "1.0"]), "method": st.text(max_size=20),
                           "params": json_values}, optional={"id": json_values}),
)


@settings(max_examples=EXAMPLES, deadline=None, derandomize=not FULL, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(msgs=st.lists(mcp_message, min_size=1, max_size=4))
def test_mcp_survives_random_messages(mcp, msgs):
    for m in msgs:
        mcp.send(m)
        _stats("mcp")["sent"] += 1
    probe(mcp, "mcp", "tools/list", {})
    mcp.drain()


# -- the owner's socket -------------------------------------------------------------------------------------------
def test_owner_socket_survives_garbage(env, monkeypatch):
    from mnemo.daemon.client import DaemonService

    monkeypatch.setenv("MNEMO_HOME", str(env["home"]))
    monkeypatch.setenv("MNEMO_EMBEDDER", "hash")
    DaemonService(env["home"]).connect()  # make sure an owner runs
    pid = owner_pid(env["home"])
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.connect(str(socket_path(env["home"])))
    f = s.makefile("rb")

    def call(obj) -> dict:
        s.sendall(json.dumps(obj).encode() + b"\n")
        while True:
            msg = json.loads(f.readline())
            if msg.get("id") == obj.get("id"):
                return msg

    assert "result" in call({"id": 1, "method": "hello", "params": {"protocol": PROTOCOL_VERSION}})
    rnd = random.Random(3)
    garbage = [b"not json", b"[1,2]", b"{}", b'{"id": 2, "method": "__init__"}', b'{"id": 3, "method": "engine"}',
               b'{"id": 4, "method": "remember", "params": []}', b'{"id": 5, "method": "remember", "params": '
               b'{"ctx": 1, "text": 2}}', b"\xff\xfe", b"[" * 50_000] + [rnd.randbytes(200).replace(b"\n", b" ")
                                                                     for _ in range(20)]
    st = _stats("owner socket")
    try:
        for i, g in enumerate(garbage):
            s.sendall(g + b"\n")
            st["sent"] += 1
            st["probes"] += 1
            t0 = time.monotonic()
            ans = call({"id": 100 + i, "method": "health", "params": {}})
            st["max_probe_s"] = max(st["max_probe_s"], time.monotonic() - t0)
            assert "result" in ans
            st["answered"] += 1
    finally:
        s.close()
        same = owner_pid(env["home"]) == pid and _alive(pid)
        report("owner socket", not same, f"pid {pid} " + ("alive throughout" if same else "gone or replaced"))
    assert same
