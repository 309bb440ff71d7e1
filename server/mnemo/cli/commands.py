"""The memory commands: remember, recall, hydrate, promote, deprecate, forget, list, stats, index, daemon, doctor
(and quickstart, in cli/quickstart.py)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mnemo.cli import quickstart
from mnemo.cli.caller import make_context
from mnemo.cli.edit_cmd import add_filter_args, filter_kwargs, text_or_stdin
from mnemo.cli.options import add_options, option_values
from mnemo.cli.output import (
    console,
    emit_json,
    flag_warning,
    flat,
    line,
    print_cards,
    print_kv,
    print_memories,
    say,
)
from mnemo.core.api_types import requests
from mnemo.core.models import MEMORY_TYPES, READ_SCOPES, STATUSES


def register(sub: argparse._SubParsersAction, common) -> None:
    _register_read_write(sub, common)
    _register_changes(sub, common)
    _register_store(sub, common)
    quickstart.register(sub, common)


def _register_read_write(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("remember", help="store a memory in this project")
    p.add_argument("text", help="the note (- reads it from standard input)")
    add_options(p, requests.RememberOptions)  # declared once, with the service's and the MCP tool's
    common(p)
    p.set_defaults(func=cmd_remember)

    p = sub.add_parser("recall", help="find memories and docs by meaning and keywords")
    p.add_argument("query")
    p.add_argument("--scope", default="hybrid", help=f"one of {', '.join(READ_SCOPES)} (default hybrid)")
    p.add_argument("--limit", "-n", type=int, default=5)
    p.add_argument("--type", action="append", dest="types",
                   help=f"only these memory types (repeatable): {', '.join(MEMORY_TYPES)}")
    p.add_argument("--no-docs", action="store_true", help="memories only, no Markdown blocks")
    p.add_argument("--cold", action="store_true", help="search the cold tier (archive) too")
    p.add_argument("--min-confidence", type=float, default=None, metavar="C",
                   help="hide hits below this confidence, 0..1 (default 0.15 or MNEMO_MIN_CONFIDENCE; with a filter "
                        "such as --kind or --tag: 0, every match shown with its confidence; 0 shows all)")
    add_filter_args(p, listing=False)
    common(p)
    p.set_defaults(func=cmd_recall)

    p = sub.add_parser("hydrate", help="bounded surrounding context of a recall hit")
    p.add_argument("item_id")
    p.add_argument("--mode", default="default", choices=["default", "related"])
    common(p)
    p.set_defaults(func=cmd_hydrate)


def _register_changes(sub: argparse._SubParsersAction, common) -> None:
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

    p = sub.add_parser("forget", help="delete a memory (its tombstone keeps it for `mnemo restore ID` for a while)")
    p.add_argument("memory_id")
    p.add_argument("--reason", default=None)
    common(p)
    p.set_defaults(func=cmd_forget)

    p = sub.add_parser("list", help="list memories")
    p.add_argument("--scope", default="hybrid", help=f"one of {', '.join(READ_SCOPES)} (default hybrid)")
    p.add_argument("--type", default=None, help=f"one of {', '.join(MEMORY_TYPES)}")
    p.add_argument("--kind", default=None)
    p.add_argument("--branch", default=None)
    p.add_argument("--all-branches", action="store_true")
    p.add_argument("--deprecated", action="store_true", help="include deprecated and superseded memories")
    p.add_argument("--cold", action="store_true", help="include the cold tier")
    p.add_argument("--status", default="active", help=f"one of {', '.join(STATUSES)} (default active)")
    p.add_argument("--limit", type=int, default=50)
    add_filter_args(p, listing=True)
    common(p)
    p.set_defaults(func=cmd_list)


def _register_store(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("stats", help="what the store holds for this project, like an index of the memory")
    common(p)
    p.set_defaults(func=cmd_stats)

    p = sub.add_parser("reembed", help="after a change of the embedder setting: follow the owner re-embedding the "
                                       "store with the new model (a progress bar; it resumes where it stopped)")
    p.add_argument("--timeout", type=float, default=1800.0, help="seconds to follow it before giving up "
                   "(the owner carries on; run it again)")
    common(p)
    p.set_defaults(func=cmd_reembed)

    p = sub.add_parser("index", help="index the repository's Markdown docs (heading-path blocks)")
    p.add_argument("root", nargs="?", default=None)
    common(p)
    p.set_defaults(func=cmd_index)

    p = sub.add_parser("daemon", help="the owner process of the store")
    p.add_argument("action", choices=["start", "stop", "status", "run"])
    p.add_argument("--idle-timeout", type=float, default=None, help="seconds (default $MNEMO_IDLE_TIMEOUT or 900)")
    p.add_argument("--warm", default=None, metavar="ROOT",
                   help="run: prepare this project's first context as the owner starts (model, skills)")
    common(p)
    p.set_defaults(func=cmd_daemon, needs_service=False)

    p = sub.add_parser("doctor", help="check the model, the store, the index and the lock; say what to fix")
    p.add_argument("--repair", action="store_true",
                   help="if the store is damaged: stop the owner, salvage every readable row, merge the newest good "
                        "backup, keep the damaged file aside and list what could not be recovered")
    common(p)
    p.set_defaults(func=cmd_doctor, needs_service=False)


def _ctx(args):
    return make_context(args)


def cmd_remember(args, service) -> int:
    res = service.remember(_ctx(args), text_or_stdin(args.text), **option_values(args, requests.RememberOptions))
    if args.json:
        emit_json(res)
        return 0
    m = res["memory"]
    c = console()
    say((res["message"], "green"), "  ", (m["id"], "bold"), c=c)
    say((f"{m['scope']} · {m['type']} · {m['kind']} · branch {m['branch'] or '*'} · {m['project_name']}", "dim"),
        c=c)
    for f in m.get("flags") or []:
        say(("flag:", "yellow"), " ", f, c=c)
    return 0


def cmd_recall(args, service) -> int:
    res = service.recall(_ctx(args), args.query, scope=args.scope, limit=args.limit, types=args.types,
                         include_docs=not args.no_docs, include_cold=args.cold, min_confidence=args.min_confidence,
                         **filter_kwargs(args, listing=False))
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
        say((res["source_path"], "bold"), c=c)
        for b in res["blocks"]:
            say((" › ".join(b["heading_path"]), "cyan"), f" (lines {b['lines'][0]}-{b['lines'][1]})", c=c)
            c.print(line((b["text"], "" if b["is_hit"] else "dim")))
            c.print()
    else:
        m = res["memory"]
        say((m["id"], "bold"), f"  {m['scope']} · {m['type']} · {m['kind']}", c=c)
        warning = flag_warning(m.get("flags"))
        if warning:
            say((warning, "bold red"), c=c)
        c.print(line(m["text"]))
        if m.get("provenance"):
            say((f"provenance: {m['provenance']}", "dim"), c=c)
        if res["related"]:
            c.print("\n[bold]related[/bold]")
            print_cards(res["related"])
    return 0


def _print_status(args, res: dict[str, Any], moved: bool = False) -> int:
    """`promoted ID → team`, `deprecated ID (project scope)`: the scope the change took effect in
    (`res["scope"]`), never the local memory's when the note went to the team; the result's message after it."""
    if args.json:
        emit_json(res)
        return 0
    m = res.get("memory") or {}
    scope = res.get("scope") or m.get("scope")
    where = ""
    if scope:
        where = f" → {scope}" if moved else f" ({scope} scope)"
    style = "green" if res["status"] not in ("queued",) else "yellow"
    say((res["status"], style), f" {m.get('id') or res.get('id')}{where}")
    if res.get("message"):
        say((str(res["message"]), "dim"))
    return 0


def cmd_promote(args, service) -> int:
    return _print_status(args, service.promote(_ctx(args), args.memory_id, args.to), moved=True)


def cmd_deprecate(args, service) -> int:
    return _print_status(args, service.deprecate(_ctx(args), args.memory_id, args.reason))


def cmd_forget(args, service) -> int:
    res = service.forget(_ctx(args), args.memory_id, args.reason)
    _print_status(args, res)
    if not args.json and res.get("restorable"):
        say((f"undo with `mnemo restore {res['id']}` (until the forget retention passes)", "dim"))
    return 0


def cmd_list(args, service) -> int:
    res = service.list_memories(_ctx(args), scope=args.scope, type=args.type, kind=args.kind, branch=args.branch,
                                all_branches=args.all_branches, include_deprecated=args.deprecated,
                                include_cold=args.cold, status=args.status, limit=args.limit,
                                **filter_kwargs(args, listing=True))
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


def cmd_reembed(args, service) -> int:
    """The owner re-embeds vectors another model made when it starts (core/engine.py); this starts it when needed
    and follows it until the dense index serves the new model's vectors."""
    import time

    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    ctx = _ctx(args)

    def state() -> tuple[dict | None, dict]:
        res = service.stats(ctx)
        return res["index"].get("reembed"), res

    def settled(re: dict | None, res: dict) -> bool:
        idx = res["index"]
        return res.get("model_id") is not None and not (re and re.get("running")) and idx["ready"] \
            and idx["indexed_seq"] >= idx["store_seq"]

    deadline = time.monotonic() + args.timeout
    re, res = state()
    if args.json:
        while not settled(re, res) and time.monotonic() < deadline:
            time.sleep(0.5)
            re, res = state()
        emit_json({"model_id": res["model_id"], "reembed": re, "index": res["index"],
                   "done": settled(re, res)})
        return 0 if settled(re, res) else 1
    with Progress(TextColumn("re-embedding"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console(stderr=True), transient=True) as bar:
        task = bar.add_task("", total=None)
        while not settled(re, res) and time.monotonic() < deadline:
            if re:
                bar.update(task, total=re["total"], completed=re["done"])
            time.sleep(0.5)
            re, res = state()
    if not settled(re, res):
        done = f"{re['done']:,} of {re['total']:,} items" if re else "the index"
        say(("not finished", "yellow"), f" after {args.timeout:.0f} s ({done}; index: "
            f"{res['index'].get('last_error') or 'catching up'}); the owner carries on: run `mnemo reembed` again, "
            "or `mnemo doctor`", stderr=True)
        return 1
    if re:
        say(("re-embedded", "green"), f" {re['done']:,} of {re['total']:,} items with {res['model_id']}")
    else:
        say(("up to date", "green"), f": every vector is {res['model_id']}'s")
    return 0


def cmd_index(args, service) -> int:
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    root = str(Path(args.root).resolve()) if args.root else None
    if args.json:
        emit_json(service.index_docs(_ctx(args), root))
        return 0
    with Progress(TextColumn("indexing docs"), BarColumn(), MofNCompleteColumn(),
                  TextColumn("{task.description}", style="dim", markup=False), console=console(stderr=True),
                  transient=True) as bar:
        task = bar.add_task("", total=None)

        def progress(p):
            bar.update(task, total=p["total"], completed=p["done"], description=flat(p.get("path") or ""))

        res = service.index_docs(_ctx(args), root, progress=progress)
    say(("indexed", "green"), f" {res['files']} Markdown files: {res['added']} new, {res['updated']} "
        f"changed, {res['unchanged']} unchanged, {res['removed']} removed; {res['blocks_written']} blocks written")
    for prob in res["problems"]:
        say(("skipped", "yellow"), f" {prob['path']}: {prob['reason']}", stderr=True)
    found = res.get("secrets") or []
    if found:
        where = ", ".join(f"{s['path']}:{s['line']} ({s['kind']})" for s in found[:5])
        say(("redacted", "yellow"), f" {len(found)} secret{'s' if len(found) != 1 else ''} in the indexed docs "
            f"(stored as [REDACTED]; the files are unchanged): {where}" + (" …" if len(found) > 5 else ""))
    return 0


def cmd_daemon(args, _service) -> int:
    from mnemo.daemon.client import DaemonService, owner_status
    from mnemo.daemon.paths import default_home

    home = Path(args.home) if args.home else default_home()
    if args.action == "run":
        from mnemo.daemon.server import run_owner

        return run_owner(home, idle_timeout=args.idle_timeout, warm=args.warm)
    if args.action == "start":
        svc = DaemonService.open(home, client_name="cli")
        try:
            svc.connect()
            res = {"running": True, **svc.owner}
        finally:
            svc.close()
    elif args.action == "stop":
        svc = DaemonService.open(home, autostart=False)
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
    res = _with_settings(home, res, args.json)
    if args.json:
        emit_json(res)
    else:
        print_kv("Mnemo owner", res)
    return 0


def _with_settings(home: Path, res: dict[str, Any], full: bool) -> dict[str, Any]:
    """The store-wide settings the owner applies (or would apply when started from here), and what is not."""
    from mnemo.cli.config_cmd import running_owner
    from mnemo.core import store_settings as config

    res = {k: v for k, v in res.items() if k != "config"}
    owner = running_owner(home) if res.get("running") else None
    rows = config.report(home, owner)
    res["settings"] = rows if full else {n: f"{config.show(r['value'])} ({r['source']})" for n, r in rows.items()}
    not_applied = config.mismatches(owner or {})
    if not_applied:
        res["not_applied"] = not_applied if full else {str(i): m for i, m in enumerate(not_applied, 1)}
    return res


def cmd_doctor(args, _service) -> int:
    from mnemo.daemon.doctor import doctor_report
    from mnemo.daemon.paths import default_home

    home = Path(args.home) if getattr(args, "home", None) else default_home()
    res = doctor_report(home, getattr(args, "project_root", None), bool(getattr(args, "repair", False)))
    if args.json:
        emit_json(res)
    else:
        c = console()
        marks = {"ok": ("ok", "green"), "warn": ("warn", "yellow"), "fail": ("FAIL", "red")}
        for check in res["checks"]:
            word, style = marks.get(check["status"], (str(check["status"]), ""))
            say((f"{word:>4}", style), "  ", (str(check["name"]), "bold"), f": {check['detail']}", c=c)
            if check.get("fix"):
                say(" " * 6, ("fix:", "yellow"), f" {check['fix']}", c=c)
        _print_lost(c, (res.get("repair") or {}).get("restore") or {})
    return 0 if res["ok"] else 1


def _print_lost(c, restore: dict) -> None:
    """The ids a repair could not recover, one a line, with what named them (`--json` has the full report)."""
    lost = restore.get("lost_memories") or []
    if lost:
        say(" " * 6, f"could not recover {len(lost)} memories:", c=c)
    for entry in lost:
        say(" " * 8, f"{entry['id']}  (named by {', '.join(entry['named_by'])})", c=c)
