"""The memory commands: remember, recall, hydrate, promote, deprecate, forget, list, stats, index, daemon, doctor,
quickstart."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mnemo.cli.output import console, emit_json, print_cards, print_kv, print_memories
from mnemo.core.models import DEFAULT_KINDS, MEMORY_TYPES, READ_SCOPES


def register(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("remember", help="store a memory in this project")
    p.add_argument("text")
    p.add_argument("--type", default="project", help=f"one of {', '.join(MEMORY_TYPES)} (default project)")
    p.add_argument("--kind", default="fact", help=f"free-form; usually one of {', '.join(DEFAULT_KINDS)}")
    p.add_argument("--tag", action="append", dest="tags", default=[], help="a tag (repeatable)")
    p.add_argument("--importance", type=float, default=0.5, help="0..1 (default 0.5)")
    p.add_argument("--scope", default="project", help="always project; global/team are reached by promote")
    p.add_argument("--source", default="user", choices=["user", "agent"], help="who writes it (default user)")
    common(p)
    p.set_defaults(func=cmd_remember)

    p = sub.add_parser("recall", help="find memories and docs by meaning and keywords")
    p.add_argument("query")
    p.add_argument("--scope", default="hybrid", help=f"one of {', '.join(READ_SCOPES)} (default hybrid)")
    p.add_argument("--limit", "-n", type=int, default=5)
    p.add_argument("--type", action="append", dest="types", help="only these memory types (repeatable)")
    p.add_argument("--no-docs", action="store_true", help="memories only, no Markdown blocks")
    p.add_argument("--cold", action="store_true", help="search the cold tier (archive) too")
    p.add_argument("--min-confidence", type=float, default=None, metavar="C",
                   help="hide hits below this confidence, 0..1 (default 0.15 or MNEMO_MIN_CONFIDENCE; 0 shows all)")
    common(p)
    p.set_defaults(func=cmd_recall)

    p = sub.add_parser("hydrate", help="bounded surrounding context of a recall hit")
    p.add_argument("item_id")
    p.add_argument("--mode", default="default", choices=["default", "related"])
    common(p)
    p.set_defaults(func=cmd_hydrate)

    p = sub.add_parser("promote", help="promote a project memory to global (keeps promoted_from)")
    p.add_argument("memory_id")
    p.add_argument("--to", default="global", choices=["global", "team"])
    common(p)
    p.set_defaults(func=cmd_promote)

    p = sub.add_parser("deprecate", help="take a memory out of recall, keep it in history")
    p.add_argument("memory_id")
    p.add_argument("--reason", default=None)
    common(p)
    p.set_defaults(func=cmd_deprecate)

    p = sub.add_parser("forget", help="delete a memory explicitly (leaves a tombstone)")
    p.add_argument("memory_id")
    p.add_argument("--reason", default=None)
    common(p)
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser("list", help="list memories")
    p.add_argument("--scope", default="hybrid")
    p.add_argument("--type", default=None)
    p.add_argument("--kind", default=None)
    p.add_argument("--branch", default=None)
    p.add_argument("--all-branches", action="store_true")
    p.add_argument("--deprecated", action="store_true", help="include deprecated and superseded memories")
    p.add_argument("--cold", action="store_true", help="include the cold tier")
    p.add_argument("--status", default="active", help="active | pending | rejected")
    p.add_argument("--limit", type=int, default=50)
    common(p)
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("stats", help="what the store holds for this project, like an index of the memory")
    common(p)
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("index", help="index the repository's Markdown docs (heading-path blocks)")
    p.add_argument("root", nargs="?", default=None)
    common(p)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("daemon", help="the owner process of the store")
    p.add_argument("action", choices=["start", "stop", "status", "run"])
    p.add_argument("--idle-timeout", type=float, default=None, help="seconds (default $MNEMO_IDLE_TIMEOUT or 900)")
    common(p)
    p.set_defaults(func=cmd_daemon, needs_service=False)

    p = sub.add_parser("doctor", help="check the model, the store, the index and the lock; say what to fix")
    p.add_argument("--repair", action="store_true",
                   help="stop the owner and restore the newest good backup if the store is damaged")
    common(p)
    p.set_defaults(func=cmd_doctor, needs_service=False)

    p = sub.add_parser("quickstart", help="index this repo's docs, remember and recall a few notes, show the cards")
    common(p)
    p.set_defaults(func=cmd_quickstart)


def _ctx(args):
    from mnemo.cli import make_context

    return make_context(args)


def cmd_remember(args, service) -> int:
    res = service.remember(_ctx(args), args.text, type=args.type, kind=args.kind, tags=args.tags,
                           importance=args.importance, scope=args.scope, source=args.source)
    if args.json:
        emit_json(res)
        return 0
    m = res["memory"]
    c = console()
    c.print(f"[green]{res['message']}[/green]  [bold]{m['id']}[/bold]")
    c.print(f"[dim]{m['scope']} · {m['type']} · {m['kind']} · branch {m['branch'] or '*'} · {m['project_name']}[/dim]")
    for f in m.get("flags") or []:
        c.print(f"[yellow]flag:[/yellow] {f}")
    return 0


def cmd_recall(args, service) -> int:
    res = service.recall(_ctx(args), args.query, scope=args.scope, limit=args.limit, types=args.types,
                         include_docs=not args.no_docs, include_cold=args.cold, min_confidence=args.min_confidence)
    if args.json:
        emit_json(res)
        return 0
    print_cards(res["cards"], res.get("warnings"), res.get("took_ms"))
    if res.get("hidden_low_confidence"):
        console().print(f"{res['hidden_low_confidence']} weaker hit(s) hidden (confidence below "
                        f"{res['min_confidence']:g}); `--min-confidence 0` shows every hit", style="dim")
    return 0


def cmd_hydrate(args, service) -> int:
    res = service.hydrate(_ctx(args), args.item_id, args.mode)
    if args.json:
        emit_json(res)
        return 0
    c = console()
    if res["source_kind"] == "markdown":
        c.print(f"[bold]{res['source_path']}[/bold]")
        for b in res["blocks"]:
            style = "" if b["is_hit"] else "dim"
            c.print(f"[cyan]{' › '.join(b['heading_path'])}[/cyan] (lines {b['lines'][0]}-{b['lines'][1]})")
            c.print(b["text"], style=style, markup=False)
            c.print()
    else:
        m = res["memory"]
        c.print(f"[bold]{m['id']}[/bold]  {m['scope']} · {m['type']} · {m['kind']}")
        c.print(m["text"], markup=False)
        if m.get("provenance"):
            c.print(f"[dim]provenance: {m['provenance']}[/dim]")
        if res["related"]:
            c.print("\n[bold]related[/bold]")
            print_cards(res["related"])
    return 0


def _print_status(args, res: dict[str, Any]) -> int:
    if args.json:
        emit_json(res)
        return 0
    m = res.get("memory") or {}
    console().print(f"[green]{res['status']}[/green] {m.get('id') or res.get('id')}"
                    + (f" → {m['scope']}" if m.get("scope") else ""))
    return 0


def cmd_promote(args, service) -> int:
    return _print_status(args, service.promote(_ctx(args), args.memory_id, args.to))


def cmd_deprecate(args, service) -> int:
    return _print_status(args, service.deprecate(_ctx(args), args.memory_id, args.reason))


def cmd_forget(args, service) -> int:
    return _print_status(args, service.forget(_ctx(args), args.memory_id, args.reason))


def cmd_list(args, service) -> int:
    res = service.list_memories(_ctx(args), scope=args.scope, type=args.type, kind=args.kind, branch=args.branch,
                                all_branches=args.all_branches, include_deprecated=args.deprecated,
                                include_cold=args.cold, status=args.status, limit=args.limit)
    if args.json:
        emit_json(res)
        return 0
    print_memories(res["memories"], res["total"])
    return 0


def cmd_stats(args, service) -> int:
    res = service.stats(_ctx(args))
    if args.json:
        emit_json(res)
        return 0
    print_kv(f"Mnemo · {res['project']['name']} ({res['project']['branch'] or 'no git'})", res)
    return 0


def cmd_index(args, service) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    root = str(Path(args.root).resolve()) if args.root else None
    if args.json:
        emit_json(service.index_docs(_ctx(args), root))
        return 0
    with Progress(TextColumn("indexing docs"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("[dim]{task.description}"), console=console(stderr=True), transient=True) as bar:
        task = bar.add_task("", total=None)

        def progress(p):
            bar.update(task, total=p["total"], completed=p["done"], description=p.get("path") or "")

        res = service.index_docs(_ctx(args), root, progress=progress)
    console().print(f"[green]indexed[/green] {res['files']} Markdown files: {res['added']} new, {res['updated']} "
                    f"changed, {res['unchanged']} unchanged, {res['removed']} removed; "
                    f"{res['blocks_written']} blocks written")
    for prob in res["problems"]:
        console(stderr=True).print(f"[yellow]skipped[/yellow] {prob['path']}: {prob['reason']}")
    return 0


def cmd_daemon(args, _service) -> int:
    from mnemo.core.engine import default_home
    from mnemo.daemon.client import DaemonService, owner_status

    home = Path(args.home) if args.home else default_home()
    if args.action == "run":
        from mnemo.daemon.server import run_owner

        return run_owner(home, idle_timeout=args.idle_timeout)
    if args.action == "start":
        svc = DaemonService(home, client_name="cli")
        try:
            svc.connect()
            res = {"running": True, **svc.owner}
        finally:
            svc.close()
    elif args.action == "stop":
        svc = DaemonService(home, autostart=False)
        stopped = svc.shutdown()
        res = {"stopped": bool(stopped), **(stopped or {})}
        if stopped:
            import time

            from mnemo.daemon.client import owner_lock_free
            from mnemo.daemon.paths import socket_path
            from mnemo.daemon.server import probe

            for _ in range(400):  # stopped means: socket gone and the store's lock released
                if not probe(socket_path(home)) and owner_lock_free(home):
                    break
                time.sleep(0.05)
    else:
        res = owner_status(home)
    if args.json:
        emit_json(res)
    else:
        print_kv("Mnemo owner", res)
    return 0


def cmd_doctor(args, _service) -> int:
    from mnemo.core.doctor import doctor_report

    res = doctor_report(args)
    if args.json:
        emit_json(res)
    else:
        c = console()
        for check in res["checks"]:
            mark = {"ok": "[green]ok[/green]", "warn": "[yellow]warn[/yellow]", "fail": "[red]FAIL[/red]"}
            c.print(f"{mark[check['status']]:>18}  [bold]{check['name']}[/bold]: {check['detail']}")
            if check.get("fix"):
                c.print(f"{'':>8}[yellow]fix:[/yellow] {check['fix']}")
    return 0 if res["ok"] else 1


QUICKSTART_MEMORIES = [
    ("payments API requires idempotency keys on every POST", "project", "decision"),
    ("Run the tests with `bash .ci/run`; it installs everything it needs first", "project", "fact"),
    ("I prefer small commits with imperative subject lines", "user", "pattern"),
]
QUICKSTART_QUERIES = [
    "how do I make POST requests safe to retry?",
    "how are memories stored and who owns the store?",
]


def cmd_quickstart(args, service) -> int:
    ctx = _ctx(args)
    c = console()
    c.rule(f"[bold]Mnemo quickstart · {ctx['project_name']} ({ctx.get('branch') or 'no git'})")
    res = service.index_docs(ctx, None)
    c.print(f"[green]indexed[/green] {res['files']} Markdown files into {res['blocks_written']} new blocks "
            f"({res['unchanged']} unchanged)")
    for text, typ, kind in QUICKSTART_MEMORIES:
        r = service.remember(ctx, text, type=typ, kind=kind)
        c.print(f"[green]{r['message']}[/green] {r['memory']['id']}: {text}")
    for q in QUICKSTART_QUERIES:
        c.rule(f"recall: {q}")
        out = service.recall(ctx, q, limit=3)
        print_cards(out["cards"], out.get("warnings"), out.get("took_ms"))
    c.rule("connect an editor or agent")
    c.print("VS Code: install the extension from vscode-extension/ (see README); it starts `python -m mnemo lsp`.\n"
            "Any LSP editor: run `mnemo lsp` (stdio). Agents: `mnemo mcp` (stdio MCP server).\n"
            "CLI: `mnemo recall \"...\"`, `mnemo remember \"...\"`, `mnemo stats`, `mnemo doctor`.")
    return 0
