"""`mnemo team ...`: run a team server (Chroma; behind a token-checking nginx beyond loopback, see
core/team/server.py), connect this store to one, see its state."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from mnemo.cli.caller import make_context
from mnemo.cli.output import console, emit_json, print_kv, say
from mnemo.core import environment

DEFAULT_PORT = 8765


def register(sub: argparse._SubParsersAction, common) -> None:
    team = sub.add_parser("team", help="team memory on a Chroma server: serve, connect, status")
    tsub = team.add_subparsers(dest="team_command", metavar="ACTION", required=True)

    p = tsub.add_parser("serve", help="run a Chroma server for the team (foreground); beyond loopback it sits"
                                      " behind nginx, which checks the team token")
    p.add_argument("--path", type=Path, default=None, help="data directory (default: <store>/team-server)")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1, tokenless; any"
                                                       " other address requires the team token)")
    p.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    p.add_argument("--token", default=None, help="the team token (default: the one saved in <path>/team-token,"
                                                 " else a new one, shown once)")
    p.add_argument("--token-file", type=Path, default=None, help="read the team token from this file")
    p.add_argument("--auth", action="store_true", help="require the token on loopback too")
    p.add_argument("--tls-cert", type=Path, default=None, help="serve HTTPS with this PEM certificate (chain)")
    p.add_argument("--tls-key", type=Path, default=None, help="the certificate's PEM private key")
    common(p)
    p.set_defaults(func=cmd_serve, needs_service=False)

    p = tsub.add_parser("connect", help="use a team server from this store (saved in <store>/team.json)")
    p.add_argument("url", help="e.g. http://127.0.0.1:8765")
    p.add_argument("--token", default=None, help="the team token (printed by `mnemo team serve`), sent with"
                                                 " every request")
    p.add_argument("--token-file", type=Path, default=None, help="read the team token from this file")
    p.add_argument("--ca-cert", type=Path, default=None, help="for an https URL: the CA (or self-signed)"
                                                              " certificate to trust, PEM")
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
    from mnemo.daemon.paths import default_home

    return Path(args.home) if getattr(args, "home", None) else default_home()


def _read_token(args) -> str | None:
    from mnemo.core.errors import InvalidInput

    if args.token and args.token_file:
        raise InvalidInput("pass --token or --token-file, not both")
    if args.token_file is None:
        return args.token
    try:
        return args.token_file.expanduser().read_text().strip() or None
    except OSError as exc:
        raise InvalidInput(f"cannot read the token file {args.token_file}: {exc.strerror}") from exc


def cmd_serve(args, _service) -> int:
    import signal
    import threading

    from mnemo.core.errors import MnemoError
    from mnemo.core.team.server import TeamServer, find_chroma, find_nginx, plan_serve

    exe = find_chroma()
    if exe is None:
        raise MnemoError("the `chroma` command was not found",
                         hint="install chromadb in this environment (`pip install chromadb`); it ships `chroma`")
    path = (args.path or _home(args) / "team-server").expanduser().resolve()
    nginx = find_nginx()
    plan = plan_serve(path, args.host, args.port, _read_token(args), args.auth, args.tls_cert, args.tls_key,
                      nginx)
    server = TeamServer(plan, exe, nginx if plan.proxied else None)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda *_: stop.set())
    try:
        server.start(stop=stop)
    except MnemoError as exc:
        _print_log_tail(exc)
        raise
    if not stop.is_set():
        _announce(args, plan)
    died = server.wait(stop)
    server.stop()
    if died is not None:
        from mnemo.core.team.server import ServeFailed, log_tail

        failed = ServeFailed(f"{died} stopped unexpectedly, so the team server stopped",
                             hint=f"see {server.logs[died]}", log_tail=log_tail(server.logs[died]))
        _print_log_tail(failed)
        raise failed
    say("team server stopped", stderr=True)
    return 0


def _print_log_tail(exc) -> None:
    tail = (getattr(exc, "details", None) or {}).get("log_tail")
    if tail:
        say(tail, stderr=True)


def _announce(args, plan) -> None:
    """Where it listens and how members connect; a generated token is shown this once."""
    url = plan.url()
    ca = f" --ca-cert {plan.tls_cert}" if plan.tls_cert else ""
    info = {"status": "serving", "url": url, "data": str(plan.data), "proxied": plan.proxied,
            "token": plan.token_how, "token_file": str(plan.token_file) if plan.proxied else None,
            "logs": str(plan.serve_dir)}
    if plan.token_how == "generated":
        info["new_token"] = plan.token
    if args.json:
        emit_json(info)
        sys.stdout.flush()
        return
    err = console(stderr=True)
    if not plan.proxied:
        say(("Mnemo team server", "bold"), f": Chroma on {url}, data in {plan.data} (loopback only, no token: only this"
            " machine can reach it; pass --auth to require one)", c=err)
        say("members connect with: ", (f"mnemo team connect {url}", "cyan"), f" (or MNEMO_TEAM_URL={url})", c=err)
    else:
        say(("Mnemo team server", "bold"), f": nginx on {url} checks the team token, Chroma behind it on"
            f" 127.0.0.1:{plan.internal_port}; data in {plan.data}, logs in {plan.serve_dir}", c=err)
        if plan.token_how == "generated":
            say(f"new team token (shown once, saved in {plan.token_file}, mode 0600): ", (plan.token, "bold"), c=err)
            say("members connect with: ", (f"mnemo team connect {url} --token {plan.token}{ca}", "cyan"), c=err)
        else:
            say(f"team token: in {plan.token_file}; members connect with: ",
                (f"mnemo team connect {url} --token <token>{ca}", "cyan"), c=err)
    say("stop with Ctrl-C or SIGTERM", c=err)


def _probe(settings) -> tuple[bool, str, int | None]:
    import httpx

    from mnemo.core.team.address import connect_timeout

    try:
        r = httpx.get(f"{settings.base_url()}/api/v2/heartbeat", headers=settings.headers(),
                      verify=settings.verify(),
                      timeout=httpx.Timeout(connect_timeout() * 2, connect=connect_timeout()))
        return r.status_code == 200, f"HTTP {r.status_code}", r.status_code
    except httpx.HTTPError as exc:
        return False, f"{type(exc).__name__}: {exc}", None


def cmd_connect(args, _service) -> int:
    from mnemo.core.errors import InvalidInput
    from mnemo.core.team.address import TeamSettings, check_namespace, save_settings

    home = _home(args)
    token = _read_token(args)
    ca = str(args.ca_cert.expanduser().resolve()) if args.ca_cert else None
    settings = TeamSettings(args.url, token, check_namespace(args.namespace), "file", ca)
    settings.validate()
    ok, detail, status = _probe(settings)
    if status in (401, 403):  # reachable, and it says no: saving would only queue promotions forever
        raise InvalidInput(f"the team server at {args.url} refused {'the' if token else 'a missing'} token"
                           f" ({detail}); nothing was saved",
                           hint="pass the token that `mnemo team serve` printed (or that is in its"
                                " <data>/team-token file): --token or --token-file")
    path = save_settings(home, args.url, token, args.namespace, ca)
    res = {"saved": str(path), "url": args.url, "namespace": args.namespace,
           "token": "set" if token else "not set", "ca_cert": ca, "reachable": ok, "detail": detail}
    if environment.raw("MNEMO_TEAM_URL"):
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
    from mnemo.core.team.address import clear_settings

    removed = clear_settings(_home(args))
    if args.json:
        emit_json({"disconnected": removed})
    else:
        say("disconnected from the team server" if removed else "no team server was saved")
    return 0


def cmd_status(args, service) -> int:
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
