"""The session's first hover through a raw stdio client, old and new trees alternating (Linux).

    python bench/first_hover_raw.py HOME TREE[,TREE...] REPS LINE:COL

HOME: a store whose owner is running (e.g. the one `bench/lsp_latency.py --home HOME` filled); each TREE is a Mnemo
checkout whose `server/` is put on PYTHONPATH. Per session: spawn `python -m mnemo lsp` (the repository's own
engine.py opened, its workspace this repository), `initialize`, then `initialized` + `didOpen` + a hover at
LINE:COL (0-based, a definition with content) written at once, as an editor does; timed from spawn to the hover's
answer (wall clock), with the language server's CPU time at that moment (`/proc/<pid>/stat`: what the box's load
does not change much) and who answered it (`lsp.preinit.earlyHover`; None before it existed), with the server's own
clock for `initialize`'s answer, the early hover ready, and its answer (`server_ms`, from the process' start). One JSON line per
tree: medians and samples. The client is the strict raw one of tests/e2e/test_lsp_preinit.py.
"""
import json
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(REPO / "tests" / "e2e"), str(REPO / "tests")]
from test_lsp_preinit import Raw  # noqa: E402

home = Path(sys.argv[1])
trees = sys.argv[2].split(",")
reps = int(sys.argv[3])
target = REPO / "server/mnemo/core/engine.py"
src = target.read_text()
uri = target.as_uri()
line, col = [int(x) for x in sys.argv[4].split(":")]


def cpu_ms(pid):
    with open(f"/proc/{pid}/stat") as fh:
        f = fh.read().rsplit(")", 1)[1].split()
    return (int(f[11]) + int(f[12])) * 1000 / os.sysconf("SC_CLK_TCK")


res = {t: {"wall": [], "cpu": [], "content": [], "early": [], "server_ms": []} for t in trees}
load_start = os.getloadavg()
for _ in range(reps):
    for tree in trees:
        env = dict(os.environ, MNEMO_HOME=str(home), MNEMO_IDLE_TIMEOUT="300", HF_HUB_OFFLINE="1",
                   MNEMO_USER_SKILLS=str(home / "user-skills"), PYTHONPATH=f"{tree}/server")
        for name in ("MNEMO_EMBEDDER", "MNEMO_LSP_PREINIT", "PYTHONDONTWRITEBYTECODE"):
            env.pop(name, None)
        srv = Raw(REPO, env)
        srv.send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"processId": os.getpid(), "rootUri": REPO.as_uri(), "capabilities": {}, "workspaceFolders": [{"uri": REPO.as_uri(), "name": REPO.name}], "initializationOptions": {"docs": {"indexOnStartup": False}}}})
        srv.answer(1)
        srv.send({"jsonrpc": "2.0", "method": "initialized", "params": {}},
                 {"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {"uri": uri, "languageId": "python", "version": 1, "text": src}}},
                 {"jsonrpc": "2.0", "id": 2, "method": "textDocument/hover", "params": {"textDocument": {"uri": uri}, "position": {"line": line, "character": col}}})
        a = srv.answer(2)
        wall = srv.times[srv.messages.index(a)] * 1000
        cpu = cpu_ms(srv.proc.pid)
        srv.send({"jsonrpc": "2.0", "id": "st", "method": "mnemo/status", "params": {}})
        st = srv.answer("st")["result"]["lsp"]["preinit"]
        srv.close()
        d = res[tree]
        d["wall"].append(round(wall))
        d["cpu"].append(round(cpu))
        d["content"].append(a.get("result") is not None)
        eh = st.get("earlyHover") or {}
        d["early"].append(eh.get("last"))
        # the server's clock, from its process' start: initialize answered, the early hover prepared, answered
        d["server_ms"].append([st.get("answeredAfterMs"), eh.get("preparedAfterMs"), eh.get("answeredAfterMs")])
        time.sleep(0.3)
for t, d in res.items():
    print(json.dumps({"tree": t, "wall_median": statistics.median(d["wall"]), "cpu_median": statistics.median(d["cpu"]),
                      **d, "load_avg_at_start": [round(x, 2) for x in load_start],
                      "load_avg_at_end": [round(x, 2) for x in os.getloadavg()]}))
