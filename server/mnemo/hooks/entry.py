"""`mnemo hook session-start|prompt|pre-tool|session-end`: what Claude Code runs on each event.

Reads the event's JSON on stdin (Claude Code's hook input: `session_id`, `transcript_path`, `cwd`,
`hook_event_name`, and `source` / `prompt` / `tool_name` + `tool_input` / `reason`), asks the owner for the
context block within a deadline, and prints `{"hookSpecificOutput": {"hookEventName", "additionalContext"}}`,
which Claude Code adds to the model's context (nothing at all when there is nothing new). Session end sends the
transcript's summary for the hand-off note.

It never blocks the agent: whatever happens (a slow owner, bad input, a bug) it exits 0 within the deadline
(`MNEMO_HOOK_TIMEOUT`, default 0.8 s after its process started) with nothing on stdout and one line on stderr.
When no owner runs it starts one, which warms this project's first context as it starts (the model, the project's
skill engine), and waits for its answer up to `MNEMO_HOOK_START_WAIT` (default 4 s after the hook's process
started; 0: do not wait) — well inside the 10 s timeout `mnemo hooks install` gives Claude Code for each hook (past
its timeout Claude Code cancels a hook and goes on without it). An owner process that exits at start (a store it
cannot open) ends the wait at once; an owner that accepts and never answers costs the normal deadline. An owner
that answers the handshake saying it is still warming up (it has just started) gets the same longer bound. When no
owner can run (a damaged store, a home that is not a directory) its one line says why and what to do (`mnemo doctor
--repair`). It imports the standard library, the owner-socket client and the workspace identity only (start-up is
most of a hook's latency).

Settings (this process's environment; they travel with the request): `MNEMO_CONTEXT_BUDGET` (tokens, default
2000), `MNEMO_LEARN_CORRECTIONS` (off | confirm | auto, default confirm), `MNEMO_HOOK_TIMEOUT` (seconds),
`MNEMO_HOOK_START_WAIT` (seconds), `MNEMO_HOOKS=off` (do nothing). A bad value is refused: nothing is injected and stderr says which variable.
"""

from __future__ import annotations

import json
import os
import sys
import time

from mnemo.core import environment

TYPE_CHECKING = False
if TYPE_CHECKING:  # annotations only: importing `typing` costs a hook's start-up more than it is worth
    from typing import Any

    from mnemo import api

EVENTS = {"session-start": "SessionStart", "prompt": "UserPromptSubmit", "pre-tool": "PreToolUse",
          "session-end": "SessionEnd"}
FILE_TOOLS = frozenset({"Read", "Edit", "Write", "MultiEdit", "NotebookEdit"})
DEFAULT_TIMEOUT = 0.8     # seconds from the process's start; leaves time to exit within a second
DEFAULT_START_WAIT = 4.0  # seconds from the process's start, when it had to start the owner (installed timeout: 10)
START_POLL = 0.02
MAX_STDIN = 4 * 1024 * 1024
CLIENT = "claude-code"


class Refused(Exception):
    """A setting or an input this hook will not act on (said on stderr, nothing injected)."""


def say(line: str) -> None:
    """The hook's one line on stderr (Claude Code shows it in its transcript / verbose mode)."""
    try:
        sys.stderr.write("mnemo: " + " ".join(str(line).split())[:400] + "\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


def _env_number(name: str, default: float, lo: float, hi: float, integer: bool = False) -> float:
    raw = environment.text(name).strip()
    if not raw:
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError:
        value = None
    if value is None or not lo <= value <= hi:
        kind = "a whole number" if integer else "a number"
        raise Refused(f"{name}={raw!r} is not {kind} from {lo:g} to {hi:g}; nothing was injected")
    return value


def settings() -> dict[str, Any]:
    learn = (environment.raw("MNEMO_LEARN_CORRECTIONS") or "confirm").strip().lower()
    if learn not in ("off", "confirm", "auto"):
        raise Refused(f"MNEMO_LEARN_CORRECTIONS={learn!r} is not off, confirm or auto; nothing was injected")
    return {"budget": int(_env_number("MNEMO_CONTEXT_BUDGET", 2000, 100, 20000, integer=True)),
            "learn": learn, "timeout": _env_number("MNEMO_HOOK_TIMEOUT", DEFAULT_TIMEOUT, 0.1, 30.0),
            "start_wait": _env_number("MNEMO_HOOK_START_WAIT", DEFAULT_START_WAIT, 0.0, 30.0)}


def read_input(stream=None) -> dict[str, Any]:
    raw = (stream or sys.stdin.buffer).read(MAX_STDIN + 1)
    if len(raw) > MAX_STDIN:
        raise Refused("the hook input is larger than 4 MiB; nothing was injected")
    try:
        data = json.loads(raw.decode("utf-8", "replace") or "{}")
    except ValueError as exc:
        raise Refused(f"the hook input is not JSON ({exc}); nothing was injected") from exc
    if not isinstance(data, dict):
        raise Refused("the hook input is not a JSON object; nothing was injected")
    return data


def home() -> str:
    return environment.raw("MNEMO_HOME") or os.path.join(os.path.expanduser("~"), ".mnemo")


def workspace(data: dict[str, Any]) -> api.Ctx:
    """The request's context (`detect_context` of the session's directory, mirrored in `hooks/workspace.py`)."""
    from mnemo.hooks.workspace import context

    cwd = data.get("cwd") if isinstance(data.get("cwd"), str) else None
    return context(cwd or os.environ.get("CLAUDE_PROJECT_DIR") or os.getcwd())


def _session(data: dict[str, Any]) -> str | None:
    sid = data.get("session_id")
    return sid[:200] if isinstance(sid, str) and sid.strip() else None


def tool_file(data: dict[str, Any]) -> str | None:
    """The file a Read/Edit/Write/MultiEdit/NotebookEdit call is about (None for other tools)."""
    if data.get("tool_name") not in FILE_TOOLS:
        return None
    inp: dict[str, Any] = data["tool_input"] if isinstance(data.get("tool_input"), dict) else {}
    path = inp.get("file_path") or inp.get("notebook_path")
    return path if isinstance(path, str) and path.strip() else None


def context_params(event: str, data: dict[str, Any], ctx: api.Ctx, cfg: dict[str, Any]) -> dict | None:
    """The `context` request for this event, or None when the event has nothing to ask for."""
    params: dict[str, Any] = {"ctx": ctx, "event": event, "session": _session(data), "budget": cfg["budget"],
                              "client": CLIENT, "commit": False}
    if event == "session-start":
        params["source"] = data.get("source") if isinstance(data.get("source"), str) else None
        params["learn"] = cfg["learn"]          # warms the detector for this session's prompts
    elif event == "prompt":
        prompt = data.get("prompt")
        if not isinstance(prompt, str) or not prompt.strip():
            return None
        params["message"] = prompt
        params["learn"] = cfg["learn"]
    elif event == "pre-tool":
        path = tool_file(data)
        if path is None:
            return None
        params["file"] = path
        line = edit_line(data, path)
        if line is not None:
            params["line"] = line                 # the memories on the symbol being edited come first
    return params


def edit_line(data: dict[str, Any], path: str) -> int | None:
    """The line (0-based) an Edit/MultiEdit changes: where its first `old_string` is in the file (None when not
    found, or for another tool)."""
    inp: dict[str, Any] = data["tool_input"] if isinstance(data.get("tool_input"), dict) else {}
    old = inp.get("old_string")
    if old is None and isinstance(inp.get("edits"), list) and inp["edits"] and isinstance(inp["edits"][0], dict):
        old = inp["edits"][0].get("old_string")
    if data.get("tool_name") not in ("Edit", "MultiEdit") or not isinstance(old, str) or not old.strip():
        return None
    if not os.path.isabs(path) and isinstance(data.get("cwd"), str):
        path = os.path.join(data["cwd"], path)
    try:
        if os.path.getsize(path) > MAX_STDIN:
            return None
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return None
    at = text.find(old)
    return text.count("\n", 0, at) if at >= 0 else None


def emit(event: str, markdown: str) -> None:
    if markdown:
        out = {"hookSpecificOutput": {"hookEventName": EVENTS[event], "additionalContext": markdown}}
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()


def start_owner(h: str, root: str | None = None) -> Any:
    """Start an owner in the background when none holds the store, warming `root`'s first context as it starts.
    Returns its process, True when another process holds the store already (an owner starting), or a str: the one
    line saying why no owner can start here (a home that is not a directory, ...)."""
    try:
        from pathlib import Path

        from mnemo.daemon.client import owner_lock_free, spawn_owner

        if os.path.exists(h) and not os.path.isdir(h):
            return (f"cannot start the Mnemo owner: MNEMO_HOME={h} is a file, not a directory; nothing injected. "
                    "What to do: point MNEMO_HOME at a directory (`mnemo doctor` checks it)")
        Path(h).mkdir(parents=True, exist_ok=True)
        if owner_lock_free(Path(h)):
            return spawn_owner(Path(h), warm=root)
        return True
    except Exception as exc:  # noqa: BLE001 - said in the one line, never raised into the agent
        return (f"cannot start the Mnemo owner in {h}: {exc}; nothing injected. What to do: set MNEMO_HOME to a "
                "directory this user can write (`mnemo doctor` checks it)")


def ask(h: str, deadline: float, event: str, params: dict[str, Any], ctx: api.Ctx,
        warming_deadline: float | None = None) -> dict[str, Any]:
    """The block from the owner, printed for the agent, then counted as given (all before `deadline`, or before
    `warming_deadline` when the owner says it is still warming up: it has just started)."""
    from mnemo.hooks import wire

    with wire.Owner(h, deadline, warming_deadline=warming_deadline) as owner:
        res = owner.call("context", params) or {}
        emit(event, res.get("markdown") or "")
        delivered = res.get("delivered")
        if delivered and (delivered.get("keys") or delivered.get("last_file") or delivered.get("reset")):
            owner.call("context_commit", {"ctx": ctx, **delivered})  # the agent has it: count it as given
    return res


def ask_starting(h: str, deadline: float, event: str, params: dict[str, Any], ctx: api.Ctx,
                 proc: Any) -> dict[str, Any]:
    """`ask` an owner that is starting: connect again every few milliseconds until `deadline`. An owner process
    that exited (it could not open the store) ends the wait at once: fail open, its log says why."""
    from mnemo.hooks import wire

    while True:
        try:
            return ask(h, deadline, event, params, ctx)
        except wire.OwnerUnavailable:
            code = proc.poll() if hasattr(proc, "poll") else None
            if code is not None and code != 3:
                raise
            if time.monotonic() + START_POLL >= deadline:
                raise
            if code == 3 or proc is True:  # the store was held (an owner stopping, or another one starting)
                again = start_owner(h, ctx.get("root"))  # started again once the lock is free
                if isinstance(again, str):
                    raise
                proc = again or proc
            time.sleep(START_POLL)


# -- why no owner answers: one true line, naming the fix ---------------------------------------------------------
REPAIR = "run `mnemo doctor --repair` (it keeps the damaged file aside and salvages every readable note)"
SQLITE_HEADER = b"SQLite format 3\x00"


def error_line(error: dict[str, Any], what: str = "nothing injected") -> str:
    """An error the owner answered or wrote (its `type`/`code`, `message`, `hint`) as the hook's one line."""
    message = str(error.get("message") or "the owner failed").split("; nothing can be")[0]
    if error.get("code") == "store_corrupt" or error.get("type") == "StoreCorrupt":
        return f"{message}; {what}. What to do: {REPAIR}"
    hint = error.get("hint")
    return f"{message}; {what}" + (f". What to do: {hint}" if hint else "")


def last_failure(h: str) -> dict[str, Any] | None:
    """The error the last owner that could not start wrote (owner-failed.json; an owner that starts removes it),
    unless the store file changed after it (a repair): then it no longer says anything."""
    try:
        with open(os.path.join(h, "owner-failed.json"), encoding="utf-8") as f:
            failed = json.load(f)
        error = failed.get("error") if isinstance(failed, dict) else None
        db = os.path.join(h, "mnemo.db")
        if isinstance(error, dict) and not (os.path.exists(db) and os.path.getmtime(db) > float(failed["at"]) + 1):
            return error
    except (OSError, ValueError, TypeError, KeyError):
        pass
    return None


def store_damage(h: str) -> dict[str, Any] | None:
    """The store's damage when it is known without an owner: the last owner's start failure said so, or the
    database file's header is not SQLite's. None when nothing says the store is damaged."""
    db = os.path.join(h, "mnemo.db")
    error = last_failure(h)
    if error is not None and (error.get("code") == "store_corrupt" or error.get("type") == "StoreCorrupt"):
        return error
    try:
        with open(db, "rb") as f:
            head = f.read(len(SQLITE_HEADER))
    except OSError:
        return None
    if head and head != SQLITE_HEADER:
        return {"code": "store_corrupt", "message": f"the store at {db} is damaged (the file is not an SQLite "
                                                    "database)"}
    return None


def owner_down(h: str, what: str = "nothing injected this time") -> str:
    """The one line for an event that found no owner and started one without waiting for it (its caller checked
    `store_damage` and started it): why the last owner could not start, if it could not, or the start itself."""
    failed = last_failure(h)  # another reason the last owner could not start: said, and tried again
    if failed is not None:
        return error_line({**failed, "message": f"the last Mnemo owner could not start: {failed.get('message')}"},
                          f"{what} (starting another)")
    return f"no owner was running; starting one in the background, {what}"


def session_end(data: dict[str, Any], ctx: api.Ctx, h: str, deadline: float, deferred: bool) -> None:
    from mnemo.hooks import transcript, wire

    summary: dict[str, Any] = {}
    path = data.get("transcript_path")
    if isinstance(path, str) and path and os.path.isfile(path):
        summary = transcript.summarize(path, ctx.get("root"))
        summary["transcript"] = path
    summary["reason"] = data.get("reason") if isinstance(data.get("reason"), str) else None
    params = {"ctx": ctx, "session": _session(data), "summary": summary, "client": CLIENT}
    if deferred:  # a detached process: wait for an owner as long as it takes
        from pathlib import Path

        from mnemo.daemon.client import DaemonService

        svc = DaemonService.open(Path(h), client_name="hook")
        try:
            svc.session_end(ctx, session=_session(data), summary=summary, client=CLIENT)
        finally:
            svc.close()
        return
    try:
        wire.call(h, "session_end", params, deadline)
    except wire.OwnerUnavailable:
        damage = store_damage(h)
        if damage is not None:  # no owner can open this store: the hand-off cannot wait for one
            say(error_line(damage, "the hand-off was not written"))
            return
        defer(data)
        say("no owner was running; the hand-off is written in the background once one has started")


def defer(data: dict[str, Any]) -> None:
    """Run the session end again in a detached process that waits for an owner (this one must exit now)."""
    import subprocess

    proc = subprocess.Popen([sys.executable, "-m", "mnemo", "hook", "session-end", "--deferred"],
                            stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True, close_fds=True)
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(data).encode())
    proc.stdin.close()


def run(argv: list[str], started: float) -> int:
    event = argv[0] if argv else ""
    if event not in EVENTS:
        say(f"unknown hook event {event!r}; use one of {', '.join(EVENTS)}")
        return 0
    if (environment.raw("MNEMO_HOOKS") or "").strip().lower() in ("off", "0", "false", "no"):
        return 0
    from mnemo.hooks import wire

    cfg = settings()
    data = read_input()
    ctx = workspace(data)
    h = home()
    deadline = started + cfg["timeout"]
    if event == "session-end":
        session_end(data, ctx, h, deadline, "--deferred" in argv)
        return 0
    params = context_params(event, data, ctx, cfg)
    if params is None:
        return 0
    try:
        res = ask(h, deadline, event, params, ctx, started + max(cfg["start_wait"], cfg["timeout"]))
    except wire.OwnerUnavailable:
        damage = store_damage(h)
        if damage is not None:  # no owner can open it: say so and name the fix, start none
            say(error_line(damage, "nothing injected this time"))
            return 0
        proc = start_owner(h, ctx.get("root"))
        wait = cfg["start_wait"]
        if isinstance(proc, str):
            say(proc)
            return 0
        if proc is None or wait <= 0:
            say(owner_down(h))
            return 0
        try:  # a cold start: the owner warms this project's first context as it starts
            res = ask_starting(h, started + max(wait, cfg["timeout"]), event, params, ctx, proc)
        except wire.OwnerUnavailable:
            failed = last_failure(h)  # the owner started here could not open the store: say why and the fix
            if failed is not None:
                say(error_line(failed, "nothing injected this time"))
            else:
                say(f"no owner was running and the one started did not answer within {wait:g} s (see `mnemo "
                    "doctor`); nothing injected this time")
            return 0
        except wire.OwnerSlow:
            say(f"no owner was running; the one started did not answer within {wait:g} s; nothing injected")
            return 0
    except wire.OwnerSlow:
        say(f"the owner did not answer within {cfg['timeout']:g} s; nothing injected")
        return 0
    for w in (res.get("warnings") or [])[:1]:
        say(w)
    return 0


def process_age() -> float:
    """Seconds since this process started (Linux: /proc), so the deadline counts Python's own start-up."""
    try:
        with open("/proc/self/stat", encoding="ascii") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime", encoding="ascii") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, min(5.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK")))
    except (OSError, ValueError, IndexError):
        return 0.0


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic() - process_age()
    try:
        return run(sys.argv[2:] if argv is None else argv, started)
    except Refused as exc:
        say(str(exc))
    except KeyboardInterrupt:
        pass
    except Exception as exc:  # noqa: BLE001 - a hook must never block or break the agent
        from mnemo.hooks import wire

        if isinstance(exc, wire.OwnerError):  # e.g. the owner runs on a store found damaged: say it and the fix
            say(error_line(exc.error))
        else:
            say(f"hook failed, nothing injected: {type(exc).__name__}: {exc}")
    return 0


__all__ = ["EVENTS", "main"]
