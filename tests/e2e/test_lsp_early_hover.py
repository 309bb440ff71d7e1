"""The first hover answered while pygls loads (mnemo/lsp/early_hover.py, preinit.serve_until_loaded), end to end:
- through a raw stdio client read strictly and through pytest-lsp's client: the early answer equals the answer of
  pygls' path (the same session's later hover, and a server without the pre-handshake): same Markdown, same range;
  `mnemo/status` says it was answered early (`lsp.preinit.earlyHover`);
- every message sent during the handover (hovers, a code lens, a cancel, status, shutdown, exit) is answered
  exactly once, the process exits 0, nothing but frames on stdout;
- a hover the early path cannot answer (a file not opened) goes to pygls in its place;
- the handover itself (`serve_until_loaded`), deterministic: a late early answer is given back to pygls at its place
  in the stream, exactly once.
Real `mnemo lsp` and owner processes (hash embedder: plumbing; the Markdown is compared, not relevance)."""

from __future__ import annotations

import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import lsp_helpers
import pytest
from lsp_helpers import (
    POST_COL,
    POST_LINE,
    PY_SOURCE,
    hover,
    make_workspace,
    open_doc,
    request,
    server_env,
    stop,
)
from test_lsp_preinit import Raw, helper_capabilities, initialize

home = lsp_helpers.home  # the shared fixture (lsp_helpers.py), used by name

pytestmark = pytest.mark.timeout(180)

NOTE = "early hover test: PaymentsClient.post must send an idempotency key"


def remember_anchored(home: Path, root: Path) -> None:
    """A memory anchored to `PaymentsClient.post`, written through the owner (started if needed)."""
    from mnemo.core.identity import detect_context
    from mnemo.daemon.client import DaemonService

    old = dict(os.environ)
    os.environ.update({k: v for k, v in server_env(home).items() if k.startswith("MNEMO_")})
    try:
        svc = DaemonService(home, client_name="test")
        svc.remember(detect_context(root).to_dict(), NOTE,
                     anchors=[{"path": "src/client.py", "symbol": "PaymentsClient.post"}])
        svc.close()
    finally:
        os.environ.clear()
        os.environ.update(old)


def hover_msg(msg_id, uri: str, line: int = POST_LINE, col: int = POST_COL) -> dict:
    return {"jsonrpc": "2.0", "id": msg_id, "method": "textDocument/hover",
            "params": {"textDocument": {"uri": uri}, "position": {"line": line, "character": col}}}


def opening(uri: str, text: str = PY_SOURCE) -> list[dict]:
    return [{"jsonrpc": "2.0", "method": "initialized", "params": {}},
            {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
                "uri": uri, "languageId": "python", "version": 1, "text": text}}}]


def status(srv: Raw) -> dict:
    srv.send({"jsonrpc": "2.0", "id": "st", "method": "mnemo/status", "params": {}})
    return srv.answer("st")["result"]


def first_and_next_hover(srv: Raw, root: Path, uri: str) -> tuple[dict, dict, dict]:
    """What an editor does: initialize, then initialized + didOpen + hover at once; then `mnemo/status` and the same
    hover again (pygls' path by then). (first answer, status, second answer)."""
    srv.send(initialize(1, root, helper_capabilities()))
    srv.answer(1)
    srv.send(*opening(uri), hover_msg(2, uri))
    first = srv.answer(2)
    st = status(srv)
    srv.send(hover_msg(3, uri))
    return first, st, srv.answer(3)


def answers(srv: Raw, msg_id) -> list[dict]:
    return [m for m in srv.messages if m.get("id") == msg_id and "method" not in m]


def test_first_hover_equals_pygls_hover_raw(tmp_path, home):
    """Raw stdio: initialize, then initialized + didOpen + hover sent at once, as an editor does. With the
    pre-handshake the hover is answered before pygls is loaded; its answer equals pygls' (the same session's next
    hover on the same spot, and a server with MNEMO_LSP_PREINIT=0)."""
    root = make_workspace(tmp_path)
    remember_anchored(home, root)  # the owner is running
    uri = (root / "src" / "client.py").as_uri()

    def one(mode: str) -> dict:
        srv = Raw(root, server_env(home, MNEMO_LSP_PREINIT=mode))
        try:
            first, st, again = first_and_next_hover(srv, root, uri)
            rc = srv.close()
            return {"first": first, "again": again, "status": st, "rc": rc, "srv": srv}
        finally:
            if srv.proc.poll() is None:
                srv.proc.kill()

    with ThreadPoolExecutor(2) as pool:
        fast, plain = pool.map(one, ("1", "0"))
    early = fast["status"]["lsp"]["preinit"]["earlyHover"]
    assert early["answered"] == 1 and early["last"] == "answered", early
    assert fast["first"]["result"] is not None and NOTE in fast["first"]["result"]["contents"]["value"]
    assert fast["first"]["result"] == fast["again"]["result"]  # pygls' path, same session
    assert fast["first"]["result"] == plain["first"]["result"]  # pygls alone
    assert fast["first"]["result"]["range"] == lsp_helpers.rng(POST_LINE, 8, POST_LINE, 12)
    # the command link the client declared it runs (capabilities.experimental), as pygls' path renders it
    assert "command:mnemo.editMemory" in fast["first"]["result"]["contents"]["value"]
    for r in (fast, plain):
        srv = r["srv"]
        assert r["rc"] == 0 and srv.violations == [] and srv.leaked() == []
        assert len(answers(srv, 2)) == 1 and len(answers(srv, 3)) == 1
    # the early answer came before pygls' own first answer of the session could (it is the first frame after
    # initialize's); pygls' state got the document and the active file from the replayed didOpen
    assert fast["srv"].messages[1]["id"] == 2
    assert fast["status"]["activeFile"] == "src/client.py"


@pytest.mark.asyncio
async def test_first_hover_through_pytest_lsp(tmp_path, home):
    """pytest-lsp's client (what the bench drives): initialize_session, didOpen, hover: answered early, and the
    same Markdown as the same session's hover once pygls serves it."""
    root = make_workspace(tmp_path)
    remember_anchored(home, root)
    client = await lsp_helpers.start(root, home, wait_ready=False)
    try:
        uri = open_doc(client, root / "src" / "client.py")
        first = await hover(client, uri, POST_LINE, POST_COL)
        st = await request(client, "mnemo/status")
        assert st["lsp"]["preinit"]["earlyHover"]["answered"] == 1, st["lsp"]["preinit"]
        assert first is not None and NOTE in first
        assert await hover(client, uri, POST_LINE, POST_COL) == first
    finally:
        await stop(client)


def test_first_hover_when_the_language_server_starts_the_owner(tmp_path, home):
    """No owner running: the pre-handshake starts it (OwnerStarter) and the early hover waits for its socket while
    pygls loads. Whoever answers the first hover (the early path, or pygls when the owner came up too late), the
    answer is the one the same session's next hover gets, and exactly one owner was started."""
    root = make_workspace(tmp_path)
    remember_anchored(home, root)
    lsp_helpers.stop_owner(home)
    from mnemo.daemon.client import owner_lock_free

    deadline = time.monotonic() + 30
    while not owner_lock_free(home) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert owner_lock_free(home)
    uri = (root / "src" / "client.py").as_uri()
    srv = Raw(root, server_env(home))
    try:
        first, st, again = first_and_next_hover(srv, root, uri)
        # (set once pygls' start-up joined the starter: after its `workspace/configuration` request, which this
        # client leaves unanswered until the server's 5 s timeout)
        n = 0
        while "ownerStart" not in st["lsp"]["preinit"] and n < 100:
            time.sleep(0.2)
            n += 1
            srv.send({"jsonrpc": "2.0", "id": f"st{n}", "method": "mnemo/status", "params": {}})
            st = srv.answer(f"st{n}")["result"]
        assert st["lsp"]["preinit"].get("ownerStart") == "started", st["lsp"]["preinit"]
        early = st["lsp"]["preinit"]["earlyHover"]
        assert early["answered"] + early["steppedAside"] == 1 or early.get("off"), early
        assert first["result"] is not None and NOTE in first["result"]["contents"]["value"], (first, early)
        assert first["result"] == again["result"]
        assert srv.close() == 0
        assert srv.violations == [] and srv.leaked() == [] and len(answers(srv, 2)) == 1
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


def test_everything_during_the_handover_answered_once(tmp_path, home):
    """Sent at once before pygls is loaded: hovers (one answered early, one for pygls), a cancel of the first, a
    code lens, a status request, a hover on a file that was never opened (pygls reads it from disk), shutdown and
    exit: each request answered exactly once, in a clean exit."""
    root = make_workspace(tmp_path)
    remember_anchored(home, root)
    uri = (root / "src" / "client.py").as_uri()
    other = (root / "src" / "other.py")
    other.write_text(PY_SOURCE)
    srv = Raw(root, server_env(home))
    try:
        srv.send(initialize(1, root, helper_capabilities()))
        srv.answer(1)
        srv.send(*opening(uri), hover_msg(2, uri),
                 {"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}},
                 hover_msg(3, uri),
                 hover_msg(4, other.as_uri()),
                 {"jsonrpc": "2.0", "id": 5, "method": "textDocument/codeLens",
                  "params": {"textDocument": {"uri": uri}}},
                 {"jsonrpc": "2.0", "id": 6, "method": "mnemo/status", "params": {}},
                 {"jsonrpc": "2.0", "id": 7, "method": "shutdown"},
                 {"jsonrpc": "2.0", "method": "exit"})
        srv.proc.stdin.close()
        assert srv.proc.wait(60) == 0, srv.stderr_text()[-3000:]
        srv._thread.join(10)
        for msg_id in (2, 3, 4, 5, 6, 7):
            got = answers(srv, msg_id)
            assert len(got) == 1, (msg_id, got, srv.messages)
        assert "error" not in answers(srv, 7)[0], answers(srv, 7)
        # the cancelled hover: answered (a result is a valid answer to a cancelled request) or RequestCancelled;
        # the requests still running when `shutdown` came: answered, or cancelled by pygls' shutdown
        for msg_id in (2, 3, 4, 5, 6):
            got = answers(srv, msg_id)[0]
            assert "result" in got or got["error"]["code"] == -32800, got
        assert srv.violations == [] and srv.leaked() == []
        st = answers(srv, 6)[0].get("result")
        early = st["lsp"]["preinit"]["earlyHover"] if st else None
        if early == {"answered": 1, "steppedAside": 0, "last": "answered"}:  # hover 2, the first one handed over
            assert "Cancel notification for unknown message id" not in srv.stderr_text()  # its cancel was kept back
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


@pytest.mark.parametrize("ending", ["exit", "end of input"])
def test_exit_or_end_of_input_during_the_handover(tmp_path, home, ending):
    """The client leaves while pygls loads: `exit` without `shutdown`, or its end of the pipe closed right after the
    hover (exit code 0 both ways, as pygls alone gives). The server exits by itself, the hover answered at most once, nothing
    but frames on stdout (no abort of the interpreter by the stdin thread)."""
    root = make_workspace(tmp_path)
    remember_anchored(home, root)
    uri = (root / "src" / "client.py").as_uri()
    srv = Raw(root, server_env(home))
    try:
        srv.send(initialize(1, root, helper_capabilities()))
        srv.answer(1)
        srv.send(*opening(uri), hover_msg(2, uri),
                 *([{"jsonrpc": "2.0", "method": "exit"}] if ending == "exit" else []))
        srv.proc.stdin.close()
        rc = srv.proc.wait(60)
        srv._thread.join(10)
        assert rc == 0, (rc, srv.stderr_text()[-3000:])
        assert len(answers(srv, 2)) <= 1 and srv.violations == [] and srv.leaked() == []
        assert "Fatal Python error" not in srv.stderr_text()
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


def test_a_hover_it_cannot_answer_goes_to_pygls(tmp_path, home):
    """A first hover on a file the client did not open: the early path steps aside, pygls answers (from disk)."""
    root = make_workspace(tmp_path)
    remember_anchored(home, root)
    uri = (root / "src" / "client.py").as_uri()
    srv = Raw(root, server_env(home))
    try:
        srv.send(initialize(1, root, helper_capabilities()))
        srv.answer(1)
        srv.send({"jsonrpc": "2.0", "method": "initialized", "params": {}}, hover_msg(2, uri))
        first = srv.answer(2)
        st = status(srv)
        early = st["lsp"]["preinit"]["earlyHover"]
        assert early["answered"] == 0, early
        if early["steppedAside"]:  # (pygls may be loaded before the hover arrives on a fast box)
            assert early["last"] == "stepped aside: not the active opened document", early
        assert first["result"] is not None and NOTE in first["result"]["contents"]["value"]
        assert srv.close() == 0
        assert len(answers(srv, 2)) == 1 and srv.violations == []
    finally:
        if srv.proc.poll() is None:
            srv.proc.kill()


# -- the handover, deterministic -----------------------------------------------------------------------------------
class _Loaded:
    def __init__(self) -> None:
        self.done = threading.Event()


class _SlowHover:
    """An early hover that takes a hover and answers it only when told (`release`), as the real one answers from
    its own thread: the handover must not wait for it past the grace, nor let both answer."""

    def __init__(self) -> None:
        self.report = {"answered": 0, "steppedAside": 0, "last": None}
        self.jobs: list = []
        self.stopped = False

    def wants(self, msg) -> bool:
        return isinstance(msg, dict) and msg.get("method") == "textDocument/hover"

    def observe(self, msg) -> None:
        pass

    def submit(self, job) -> None:
        self.jobs.append(job)

    def stop(self) -> None:
        self.stopped = True


def _frame(msg: dict) -> bytes:
    import json

    from mnemo.lsp.preinit import frame

    return frame(json.dumps(msg).encode())


class _Out:
    def __init__(self) -> None:
        self.data = b""

    def write(self, data: bytes) -> int:
        self.data += data
        return len(data)

    def flush(self) -> None:
        pass


@pytest.mark.parametrize("answered", [True, False])
def test_handover_exactly_once(monkeypatch, answered):
    """pygls is loaded while the early hover is still out: if it answers within the grace, pygls never sees the
    request (nor its cancel); if not, pygls gets it back in its place and a late answer is never written."""
    from mnemo.lsp import preinit

    monkeypatch.setattr(preinit, "HOVER_GRACE_S", 0.3)
    events: queue.Queue = queue.Queue()
    loader, hover_, out = _Loaded(), _SlowHover(), _Out()
    opened = _frame({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {}})
    asked = _frame(hover_msg(2, "file:///x.py"))
    cancel = _frame({"jsonrpc": "2.0", "method": "$/cancelRequest", "params": {"id": 2}})
    after = _frame({"jsonrpc": "2.0", "id": 3, "method": "shutdown"})
    for f in (opened, asked, cancel, after):
        events.put(("frame", f))
    events.put(("loaded", None))  # pygls is loaded after these frames came
    answer = _frame({"id": 2, "jsonrpc": "2.0", "result": None})
    if answered:
        threading.Timer(0.1, lambda: hover_.jobs[0].finish(answer, None)).start()
    frames, early_ids = preinit.serve_until_loaded(events, loader, hover_, out)
    assert hover_.stopped and len(hover_.jobs) == 1
    if answered:
        assert frames == [opened, after] and early_ids == {2} and out.data == answer
        assert hover_.report["answered"] == 1
    else:
        assert frames == [opened, asked, cancel, after] and early_ids == set() and out.data == b""
        hover_.jobs[0].finish(answer, None)  # too late: never written
        assert out.data == b"" and hover_.report["steppedAside"] == 1
