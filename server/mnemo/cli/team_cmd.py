"""`mnemo team ...`: run a team server (a Chroma server), connect this store to one, see its state."""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from mnemo.cli.output import console, emit_json, print_kv, say

DEFAULT_PORT = 8765


def register(sub: argparse._SubParsersAction, common) -> None:
    team = sub.add_parser("team", help="team memory on a Chroma server: serve, connect, status")
    tsub = team.add_subparsers(dest="team_command", metavar="ACTION", required=True)

    p = tsub.add_parser("serve", help="run a Chroma server for the team (foreground)")
    p.add_argument("--path", type=Path, default=None, help="data directory (default: <store>/team-server)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    common(p)
    p.set_defaults(func=cmd_serve, needs_service=False)

    p = tsub.add_parser("connect", help="use a team server from this store (saved in <store>/team.json)")
    p.add_argument("url", help="e.g. http://127.0.0.1:8765")
    p.add_argument("--token", default=None, help="shared token sent with every request (for an authenticating"
                                                 " proxy in front of the server)")
    p.add_argument("--namespace", default="default", help="the team's namespace on the server (default: default)")
    common(p)
    p.set_defaults(func=cmd_connect, needs_service=False)

    p = tsub.add_parser("disconnect", help="stop using the team server saved in <store>/team.json")
    common(p)
    p.set_defaults(func=cmd_disconnect, needs_service=False)

    p = tsub.add_parser("status", help="is the team server reachable; queued promotions; who shared what")
    common(p)
    p.set_defaults(func=cmd_status)


def _home(args) -> Path:
    from mnemo.core.engine import default_home

    return Path(args.home) if getattr(args, "home", None) else default_home()


def find_chroma() -> str | None:
    """The `chroma` CLI next to this interpreter (the venv), else on PATH."""
    beside = Path(sys.executable).parent / "chroma"
    if beside.exists():
        return str(beside)
    return shutil.which("chroma")


def cmd_serve(args, _service) -> int:
    from mnemo.core.errors import MnemoError

    exe = find_chroma()
    if exe is None:
        raise MnemoError("the `chroma` command was not found",
                         hint="install chromadb in this environment (`pip install chromadb`); it ships `chroma`")
    path = (args.path or _home(args) / "team-server").expanduser().resolve()
    path.mkdir(parents=True, exist_ok=True)
    url = f"http://{args.host}:{args.port}"
    err = console(stderr=True)
    err.print(f"[bold]Mnemo team server[/bold]: Chroma on {url}, data in {path}")
    err.print(f"members connect with: [cyan]mnemo team connect {url}[/cyan] (or MNEMO_TEAM_URL={url})")
    if args.host not in ("127.0.0.1", "localhost", "::1"):
        err.print("[yellow]note:[/yellow] the Chroma server itself checks no token; expose it only on a trusted "
                  "network or behind a proxy that checks the team token (see docs/agents-and-teams.md)")
    env = dict(os.environ, ANONYMIZED_TELEMETRY="False")
    sys.stdout.flush()
    sys.stderr.flush()
    # exec: the server becomes this process, so service managers and Ctrl-C reach it directly.
    os.execve(exe, [exe, "run", "--path", str(path), "--host", args.host, "--port", str(args.port)], env)
    return 0  # not reached


def _probe(url: str, token: str | None) -> tuple[bool, str]:
    import httpx

    from mnemo.core.team import TeamSettings, connect_timeout

    s = TeamSettings(url, token)
    try:
        r = httpx.get(f"{s.base_url()}/api/v2/heartbeat", headers=s.headers(),
                      timeout=httpx.Timeout(connect_timeout() * 2, connect=connect_timeout()))
        return r.status_code == 200, f"HTTP {r.status_code}"
    except httpx.HTTPError as exc:
        return False, f"{type(exc).__name__}: {exc}"


def cmd_connect(args, _service) -> int:
    from mnemo.core.team import save_settings

    home = _home(args)
    path = save_settings(home, args.url, args.token, args.namespace)
    ok, detail = _probe(args.url, args.token)
    res = {"saved": str(path), "url": args.url, "namespace": args.namespace,
           "token": "set" if args.token else "not set", "reachable": ok, "detail": detail}
    if os.environ.get("MNEMO_TEAM_URL"):
        res["note"] = "MNEMO_TEAM_URL is set in this environment and takes precedence over the saved setting"
    if args.json:
        emit_json(res)
        return 0
    c = console()
    say(("connected", "green"), f" this store to {args.url} (namespace {args.namespace}); saved in {path}", c=c)
    if ok:
        say("server: ", ("reachable", "green"), c=c)
    else:
        say("server: ", ("not reachable now", "yellow"), f" ({detail}); promotions will be queued until it answers",
            c=c)
    if res.get("note"):
        say(("note:", "yellow"), f" {res['note']}", c=c)
    return 0


def cmd_disconnect(args, _service) -> int:
    from mnemo.core.team import clear_settings

    removed = clear_settings(_home(args))
    if args.json:
        emit_json({"disconnected": removed})
    else:
        say("disconnected from the team server" if removed else "no team server was saved")
    return 0


def cmd_status(args, service) -> int:
    from mnemo.cli import make_context

    res = service.team_status(make_context(args))
    if args.json:
        emit_json(res)
        return 0
    if not res.get("configured"):
        say(("no team server configured", "yellow"), f": {res.get('hint', '')}")
        return 0
    recent = res.pop("recent", [])
    print_kv(f"Mnemo team · {res.get('url')} · {'reachable' if res.get('reachable') else 'UNREACHABLE'}", res)
    if recent:
        c = console()
        c.print("[bold]recently shared[/bold]")
        for r in recent:
            mark = " [deprecated]" if r.get("deprecated") else ""
            say(f"  {r['id']}  ", (str(r["author"]), "cyan"), f" · {r['project_name']}: {r['text']}{mark}", c=c)
    return 0 if res.get("reachable") else 1
