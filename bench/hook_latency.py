"""Hook latency: the real `mnemo hook <event>` command, as Claude Code runs it, against a warm owner.

    python bench/hook_latency.py --memories 500 --runs 40

Set-up (not timed): a fresh store holding N synthetic developer notes (real MiniLM embeddings), this repository as
the project (its skills and the starter skills), an owner started and warmed up (model, skill vectors, the
corrections detector). Timed, from the caller's side: the whole process, spawn to exit, with the event's JSON on
stdin and its output read, for each event (`session-start`, `prompt` with a realistic request, `pre-tool` Read of a
repository file), each run in a new session (so the full block is built, nothing is skipped as already sent), for
each way of running it: `python -m mnemo hook ...` (what `mnemo hooks install --user` writes when no `mnemo`
script is found) and the `mnemo` console script (next to this Python). Also: the interpreter alone (`python -c
pass`), the hook's imports alone, the owner's own time for the block (`elapsed_ms`), and the fail-open case (an owner
that accepts and never answers).

Cold starts (issue 20: "from the first prompt"): the store holds a hand-off from an earlier session and the owner is
stopped (it exits after its idle time). `cold_session_start_ms`: the installed command (`python -m mnemo hook
session-start`, default settings) with Claude Code's SessionStart input, spawn to exit, its output holding the
hand-off (it starts the owner and waits for it); `cold_first_prompt_ms`: right after, the same session's first
prompt (`hook prompt`) against the owner just started, to its block. `--cold-runs` times each, the owner stopped
before every run. Mnemo's modules are byte-compiled first, as an installed package's are (a checkout
run with PYTHONDONTWRITEBYTECODE=1 compiles them on every start: `--no-bytecode` measures that). The last line is
one JSON object.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import socket
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from scratch import scratch_dir  # bench/ is on sys.path when run as a script

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "server"))
sys.path.insert(0, str(REPO / "bench"))

PROMPTS = [
    "Add retries with backoff to the webhook sender and make them idempotent",
    "why does the recall test fail on CI but not locally?",
    "refactor the skills registry so the watcher thread can be stopped cleanly",
    "no, use pnpm, not npm",
    "write a unit test for the snapshot merge with the keep_both strategy",
    "speed up the language server's hover, it is slow on big files",
    "document the new setting in docs/settings.md",
    "always run ruff before committing",
]
FILES = ["server/mnemo/core/engine.py", "tests/unit/test_engine.py", "vscode-extension/src/extension.ts",
         "docs/architecture.md", "bench/recall_latency.py", "scripts/test.sh", "README.md"]


def pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, max(0, round(p / 100 * (len(xs) - 1))))]


def summary(xs: list[float]) -> dict[str, float]:
    return {"p50_ms": round(statistics.median(xs), 1), "p95_ms": round(pct(xs, 95), 1),
            "max_ms": round(max(xs), 1), "n": len(xs)}


def seed(home: Path, n: int) -> None:
    from lsp_latency import synth_notes
    from mnemo.core.engine import Engine
    from mnemo.core.identity import detect_context
    from mnemo.core.memory.write import remember

    eng = Engine(home)
    ctx = detect_context(REPO)
    try:
        for text in synth_notes(n):
            remember(eng, ctx, text, type="project", kind="fact")
    finally:
        eng.close()


def run(cmd: list[str], payload: dict, env: dict) -> tuple[float, str, str]:
    t0 = time.perf_counter()
    p = subprocess.run(cmd, input=json.dumps(payload), capture_output=True, text=True, env=env, cwd=REPO,
                       timeout=60)
    return (time.perf_counter() - t0) * 1000, p.stdout, p.stderr


def payload(event: str, i: int) -> dict:
    base = {"session_id": f"bench-{uuid.uuid4().hex}", "transcript_path": "/nonexistent", "cwd": str(REPO),
            "permission_mode": "default"}
    if event == "session-start":
        return {**base, "hook_event_name": "SessionStart", "source": "startup"}
    if event == "prompt":
        return {**base, "hook_event_name": "UserPromptSubmit", "prompt": PROMPTS[i % len(PROMPTS)]}
    return {**base, "hook_event_name": "PreToolUse", "tool_name": "Read",
            "tool_input": {"file_path": str(REPO / FILES[i % len(FILES)])}, "tool_use_id": f"toolu_{i}"}


def measure(cmd: list[str], event: str, runs: int, env: dict) -> dict:
    run(cmd + [event], payload(event, 0), env)            # one untimed run per event
    times, empty, errors = [], 0, []
    for i in range(runs):
        ms, stdout, stderr = run(cmd + [event], payload(event, i), env)
        times.append(ms)
        empty += not stdout.strip()
        if stderr.strip():
            errors.append(stderr.strip())
    return {**summary(times), "empty": empty, "stderr": errors[:2]}


class Silent:
    """An owner socket that accepts and never answers."""

    def __init__(self, home: Path):
        from mnemo.daemon.paths import socket_path

        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(str(socket_path(home)))
        self.sock.listen(16)
        self.held: list[socket.socket] = []
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self) -> None:
        while True:
            try:
                self.held.append(self.sock.accept()[0])
            except OSError:
                return

    def close(self) -> None:
        self.sock.close()
        for c in self.held:
            c.close()


def stop_owner(env: dict) -> None:
    """`mnemo daemon stop`, then wait until the store's owner lock is free (the owner has really exited)."""
    from mnemo.daemon.client import owner_lock_free

    subprocess.run([sys.executable, "-m", "mnemo", "daemon", "stop"], env=env, cwd=REPO, capture_output=True)
    deadline = time.monotonic() + 60
    while not owner_lock_free(Path(env["MNEMO_HOME"])) and time.monotonic() < deadline:
        time.sleep(0.05)


def cold_starts(cmd: list[str], runs: int, env: dict) -> dict:
    """Session start with the owner stopped (to the hand-off), then the first prompt (to its block)."""
    transcript = Path(env["MNEMO_HOME"]).parent / "transcript.jsonl"
    transcript.write_text((REPO / "tests" / "fixtures" / "claude_code" / "transcript.jsonl").read_text()
                          .replace("$CWD", str(REPO)))
    base = {"transcript_path": str(transcript), "cwd": str(REPO), "permission_mode": "default"}
    end = {**base, "session_id": "bench-earlier", "hook_event_name": "SessionEnd", "reason": "other"}
    r = subprocess.run(cmd + ["session-end"], input=json.dumps(end), capture_output=True, text=True,
                       env={**env, "MNEMO_HOOK_TIMEOUT": "30"}, cwd=REPO, timeout=60)
    assert not r.stderr.strip(), r.stderr  # the hand-off the next sessions receive
    start_ms, prompt_ms, handoff, block, errors = [], [], 0, 0, []
    for i in range(runs):
        stop_owner(env)
        sid = f"bench-cold-{uuid.uuid4().hex}"
        ms, out, err = run(cmd + ["session-start"], {**base, "session_id": sid, "hook_event_name": "SessionStart",
                                                     "source": "startup"}, env)
        start_ms.append(ms)
        handoff += "Hand-off from the last session" in out
        ms, out, err2 = run(cmd + ["prompt"], {**base, "session_id": sid, "hook_event_name": "UserPromptSubmit",
                                               "prompt": PROMPTS[i % len(PROMPTS)]}, env)
        prompt_ms.append(ms)
        block += bool(out.strip())
        errors += [e.strip() for e in (err, err2) if e.strip()]
    return {"cold_session_start_ms": summary(start_ms), "cold_session_start_handoff": handoff,
            "cold_first_prompt_ms": summary(prompt_ms), "cold_first_prompt_block": block, "cold_runs": runs,
            "cold_stderr": errors[:3]}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--memories", type=int, default=500)
    ap.add_argument("--runs", type=int, default=40, help="timed runs per event and command form")
    ap.add_argument("--cold-runs", type=int, default=5, help="cold starts (owner stopped) to time; 0: none")
    ap.add_argument("--only-cold", action="store_true", help="time the cold starts only")
    ap.add_argument("--no-bytecode", action="store_true",
                    help="keep PYTHONDONTWRITEBYTECODE (every run compiles Mnemo's modules from source)")
    args = ap.parse_args(argv)
    tmp = scratch_dir("mnemo-hook-bench-")
    home = tmp / "home"
    env = {**os.environ, "MNEMO_HOME": str(home), "MNEMO_IDLE_TIMEOUT": "900",
           "PYTHONPATH": str(REPO / "server") + os.pathsep + os.environ.get("PYTHONPATH", "")}
    env.pop("MNEMO_HOOK_TIMEOUT", None)
    if not args.no_bytecode:  # an installed package has its .pyc files (pip compiles them); so does this run
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(REPO / "server" / "mnemo")], env=env,
                       capture_output=True, check=False)
    seed(home, args.memories)
    subprocess.run([sys.executable, "-m", "mnemo", "daemon", "start"], env=env, cwd=REPO, check=True,
                   capture_output=True)
    forms = {"python -m mnemo": [sys.executable, "-m", "mnemo", "hook"]}
    script = Path(sys.executable).with_name("mnemo")
    if script.is_file():
        forms["mnemo (console script)"] = [str(script), "hook"]
    out: dict = {"memories": args.memories, "runs": args.runs, "bytecode": not args.no_bytecode}
    if args.only_cold:
        try:
            subprocess.run([sys.executable, "-m", "mnemo", "context", "-m", PROMPTS[0], "--format", "json"],
                           env=env, cwd=REPO, capture_output=True, check=True)  # as a used store: skill vectors
            out.update(cold_starts(forms["python -m mnemo"], args.cold_runs, env))
        finally:
            stop_owner(env)
        out.update({"machine": f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
                    "load_avg_1m": round(os.getloadavg()[0], 2)})
        print(json.dumps(out))
        return 0
    try:
        warm = json.loads(subprocess.run(
            [sys.executable, "-m", "mnemo", "context", "-m", PROMPTS[0], "--learn", "confirm", "--format", "json"],
            env=env, cwd=REPO, capture_output=True, text=True, check=True).stdout)
        out["owner_block_ms_first"] = warm["elapsed_ms"]
        for form, cmd in forms.items():
            out[form] = {event: measure(cmd, event, args.runs, env) for event in ("session-start", "prompt",
                                                                                  "pre-tool")}
        owner = []
        for i in range(args.runs):
            r = subprocess.run([sys.executable, "-m", "mnemo", "context", "-m", PROMPTS[i % len(PROMPTS)],
                                "--event", "prompt", "--format", "json"], env=env, cwd=REPO, capture_output=True,
                               text=True, check=True)
            owner.append(json.loads(r.stdout)["elapsed_ms"])
        out["owner_block_ms_prompt"] = summary(owner)
        base = [run([sys.executable, "-c", "pass"], {}, env)[0] for _ in range(args.runs)]
        imports = [run([sys.executable, "-c", "import mnemo.hooks.entry, mnemo.hooks.wire, mnemo.core.identity"], {},
                       env)[0] for _ in range(args.runs)]
        out["python_alone"] = summary(base)
        out["hook_imports_alone"] = summary(imports)
        if args.cold_runs > 0:
            out.update(cold_starts(forms["python -m mnemo"], args.cold_runs, env))
    finally:
        stop_owner(env)
    slow_home = tmp / "silent"
    slow_home.mkdir()
    silent = Silent(slow_home)
    try:
        senv = {**env, "MNEMO_HOME": str(slow_home)}
        slow = [run(forms["python -m mnemo"] + ["prompt"], payload("prompt", i), senv)[0] for i in range(10)]
        out["silent_owner"] = summary(slow)
    finally:
        silent.close()
    out.update({"machine": f"{platform.machine()} {os.cpu_count()} cpu, Python {platform.python_version()}",
                "load_avg_1m": round(os.getloadavg()[0], 2)})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
