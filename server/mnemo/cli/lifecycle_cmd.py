"""Lifecycle and sharing commands: snapshot export|diff|merge, branch diff|merge|delete|merged, decay, compact,
review (list and resolve), restore. Human output by default, `--json` prints one object."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from mnemo.cli.caller import make_context
from mnemo.cli.output import age, console, emit_json, say

STRATEGIES = ("local_wins", "remote_wins", "newer_wins", "keep_both")


def register(sub: argparse._SubParsersAction, common) -> None:
    _register_snapshot(sub, common)
    _register_branch(sub, common)
    _register_lifecycle(sub, common)


def _register_snapshot(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("snapshot", help="export / diff / merge a portable snapshot of the memory")
    ssub = p.add_subparsers(dest="snapshot_action", metavar="ACTION", required=True)
    q = ssub.add_parser("export", help="write this project's memories (and global) to one file, atomically")
    q.add_argument("file")
    q.add_argument("--scope", action="append", dest="scopes", default=None,
                   help="project | global | all (every project); repeatable (default project + global)")
    q.add_argument("--branch", action="append", dest="branches", default=None,
                   help="only these branches' memories (repeatable)")
    common(q)
    q.set_defaults(func=cmd_snapshot_export)
    q = ssub.add_parser("diff", help="what merging FILE would do; writes nothing")
    q.add_argument("file")
    q.add_argument("--strategy", default="newer_wins", choices=STRATEGIES)
    common(q)
    q.set_defaults(func=cmd_snapshot_diff)
    q = ssub.add_parser("merge", help="import FILE (checked first; one transaction; duplicates skipped)")
    q.add_argument("file")
    q.add_argument("--strategy", default="newer_wins", choices=STRATEGIES,
                   help="on the same memory changed on both sides (default newer_wins)")
    common(q)
    q.set_defaults(func=cmd_snapshot_merge)


def _register_branch(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("branch", help="branch memory: diff / merge / delete a branch's memories")
    bsub = p.add_subparsers(dest="branch_action", metavar="ACTION", required=True)
    q = bsub.add_parser("diff", help="what merging SOURCE's memories into the current branch would do")
    q.add_argument("source")
    common(q)
    q.set_defaults(func=cmd_branch_diff)
    q = bsub.add_parser("merge", help="copy SOURCE's memories into the current branch")
    q.add_argument("source")
    common(q)
    q.set_defaults(func=cmd_branch_merge)
    q = bsub.add_parser("delete", help="delete NAME's branch memories (tombstones kept; global untouched)")
    q.add_argument("name")
    q.add_argument("--force", action="store_true", help="also for the default or the checked-out branch")
    common(q)
    q.set_defaults(func=cmd_branch_delete)
    q = bsub.add_parser("merged", help="branches git merged into the default branch whose memories are not merged")
    q.add_argument("--no-queue", action="store_true", help="do not add them to the review queue")
    common(q)
    q.set_defaults(func=cmd_branch_merged)


def _register_lifecycle(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("decay", help="age importance (half-life), move faded memories to the cold tier")
    p.add_argument("--now", default=None, help="evaluate at this time (epoch seconds or ISO 8601; a future time "
                                               "needs --force)")
    p.add_argument("--dry-run", action="store_true", help="report what would change; write nothing")
    p.add_argument("--force", action="store_true", help="allow a --now in the future (cannot be undone)")
    common(p)
    p.set_defaults(func=cmd_decay)

    p = sub.add_parser("compact", help="merge near-duplicates, summarize verbose notes, re-tier; report moves")
    common(p)
    p.set_defaults(func=cmd_compact)

    p = sub.add_parser("review", help="the review queue: conflicts, overrides, pending writes, stale anchors ...")
    p.add_argument("action", nargs="?", default="list", choices=["list", "resolve"])
    p.add_argument("review_id", nargs="?", default=None)
    p.add_argument("resolution", nargs="?", default=None)
    p.add_argument("--kind", default=None, help="only this kind of item")
    p.add_argument("--all", action="store_true", dest="include_resolved", help="include resolved items")
    common(p)
    p.set_defaults(func=cmd_review)

    p = sub.add_parser("restore", help="bring an archived (cold) or a forgotten memory back into recall")
    p.add_argument("memory_id")
    common(p)
    p.set_defaults(func=cmd_restore)


def _ctx(args):
    return make_context(args)


def _abs(path: str) -> str:
    return str(Path(path).expanduser().resolve())


def _print_resolved(r: dict[str, Any]) -> None:
    say(("resolved", "green"), f" #{r['id']} ({r['kind']}): {r['resolution']}")
    if r.get("message"):
        say((str(r["message"]), "yellow"))


def _done(args, res: dict[str, Any], human) -> int:
    if args.json:
        emit_json(res)
    else:
        human(res)
    return 0


# -- snapshot --------------------------------------------------------------------------------------------------
def cmd_snapshot_export(args, service) -> int:
    res = service.snapshot_export(_ctx(args), _abs(args.file), scopes=args.scopes, branches=args.branches)

    def human(r):
        c = console()
        say(("exported", "green"), f" {r['memories']} memories to ", (r["path"], "bold"),
            f" ({r['bytes']:,} bytes, model {r['model_id']})", c=c)
        scopes = ", ".join(f"{k} {v}" for k, v in sorted(r["by_scope"].items()))
        branches = ", ".join(f"{k} {v}" for k, v in sorted(r["by_branch"].items()))
        say((f"scopes: {scopes or '-'} · branches: {branches or '-'} · sha256 {r['sha256'][:16]}…", "dim"), c=c)
        for w in r.get("withheld_secrets", []):
            say(("withheld", "yellow"), f" {w['id']}: it holds what looks like a secret ({', '.join(w['secrets'])})",
                c=c)

    return _done(args, res, human)


def _print_merge(r: dict[str, Any], dry: bool) -> None:
    c = console()
    info = r["snapshot"]
    src = info.get("source") or {}
    say((info["file"], "bold"), f" from {src.get('project_name')} ({src.get('user')}, "
        f"{age(info.get('created_at'))}), model {info.get('model_id')}", c=c)
    verb = "would import" if dry else "imported"
    say((verb, "green"), f" {r['imported']} · replaced {r['replaced']} · skipped duplicates "
        f"{r['skipped_duplicates']} · skipped forgotten {r['skipped_forgotten']} · conflicts {r['conflicts']} "
        f"(strategy {r['strategy']})", c=c)
    if r.get("skipped_secrets"):
        say((f"skipped {r['skipped_secrets']} record(s) holding what looks like a secret", "yellow"), c=c)
    res = r["resolutions"]
    if r["conflicts"]:
        say(f"  kept local {res['kept_local']} · took remote {res['took_remote']} · kept both {res['kept_both']}", c=c)
    for cd in r.get("conflict_details", [])[:20]:
        say("  ", ("conflict", "yellow"), f" {cd['id']}: local “{cd['local']['text'][:60]}” vs remote "
            f"“{cd['text'][:60]}” → {cd['reason']}", c=c)
    if dry:
        for n in r.get("new", [])[:20]:
            say("  ", ("+", "green"), f" {n['id']} {n['scope']}/{n['branch'] or '*'}: {n['text'][:80]}", c=c)
        if len(r.get("new", [])) > 20:
            say("  ", (f"… and {len(r['new']) - 20} more", "dim"), c=c)
        c.print("[dim]nothing was written (diff)[/dim]")


def cmd_snapshot_diff(args, service) -> int:
    res = service.snapshot_diff(_ctx(args), _abs(args.file), strategy=args.strategy)
    return _done(args, res, lambda r: _print_merge(r, True))


def cmd_snapshot_merge(args, service) -> int:
    res = service.snapshot_merge(_ctx(args), _abs(args.file), strategy=args.strategy)
    return _done(args, res, lambda r: _print_merge(r, False))


# -- branch ----------------------------------------------------------------------------------------------------
def _print_branch(r: dict[str, Any], dry: bool) -> None:
    c = console()
    verb = "would copy" if dry else "copied"
    say((f"{r['source']} → {r['target']}", "bold"), f": {verb} {r['imported']} · skipped duplicates "
        f"{r['skipped_duplicates']} · pending (not merged) {r['skipped_pending']} · supersedes {r['supersedes']}", c=c)
    for n in r["new"][:30]:
        say("  ", ("+", "green"), f" {n['id']} {n['type']}/{n['kind']}: {n['text'][:80]}", c=c)
    for s in r["superseded"][:30]:
        say("  ", ("~", "yellow"), f" {s['memory']['id']} “{s['memory']['text'][:60]}” superseded", c=c)
    if dry:
        c.print("[dim]nothing was written (diff)[/dim]")


def cmd_branch_diff(args, service) -> int:
    return _done(args, service.branch_diff(_ctx(args), args.source), lambda r: _print_branch(r, True))


def cmd_branch_merge(args, service) -> int:
    return _done(args, service.branch_merge(_ctx(args), args.source), lambda r: _print_branch(r, False))


def cmd_branch_delete(args, service) -> int:
    res = service.branch_delete(_ctx(args), args.name, force=args.force)

    def human(r):
        c = console()
        say(("deleted", "green"), f" {r['deleted']} memories of branch ", (r["branch"], "bold"),
            " (tombstones kept; global and branch-independent memories untouched)", c=c)
        if r["unmerged"]:
            say((f"{r['unmerged']} of them were not merged anywhere", "yellow"), c=c)

    return _done(args, res, human)


def cmd_branch_merged(args, service) -> int:
    res = service.merged_branches(_ctx(args), queue=not args.no_queue)

    def human(r):
        c = console()
        if not r["branches"]:
            say((f"no branch memories besides {r.get('default_branch')}", "dim"), f" {r.get('note', '')}", c=c)
        for b in r["branches"]:
            extra = ""
            if b["state"] == "merged":
                extra = f" · {b.get('unmerged_memories', 0)} memories to merge"
                if b.get("review_id"):
                    extra += f" (review #{b['review_id']}: `mnemo review resolve {b['review_id']} merge`)"
            say(f"{b['branch']}: {b['state']} · {b['memories']} memories{extra}", c=c)

    return _done(args, res, human)


# -- decay, compact, restore -----------------------------------------------------------------------------------
def cmd_decay(args, service) -> int:
    res = service.decay(_ctx(args), now=args.now, dry_run=args.dry_run, force=args.force)

    def human(r):
        c = console()
        if r.get("dry_run"):
            say(("dry run:", "yellow"), " nothing was written; this is what `mnemo decay` would do", c=c)
        say(f"scanned {r['scanned']} · decayed {r['decayed']} · untouched {r['untouched']} · "
            f"to cold {len(r['moved_to_cold'])} (half-life {r['half_life_hours']:g} h, threshold "
            f"{r['tombstone_threshold']})", c=c)
        for m in r["moved_to_cold"][:30]:
            say("  ", ("cold", "blue"), f" {m['id']} {m['title']}: {m['reason']}", c=c)
        _print_moves(r["tier_moves"])
        _print_tiers(r["tiers"])

    return _done(args, res, human)


def _print_moves(moves: list[dict[str, Any]]) -> None:
    c = console()
    for mv in moves[:30]:
        say(f"  {mv['from_tier']} → {mv['to_tier']} {mv['id']} {mv['title']}: {mv['reason']}", c=c)


def _print_tiers(t: dict[str, int]) -> None:
    say((f"tiers: hot {t['hot']} · warm {t['warm']} · cold {t['cold']}", "dim"))


def cmd_compact(args, service) -> int:
    res = service.compact(_ctx(args))

    def human(r):
        c = console()
        say(f"merged {len(r['merged'])} groups · summarized {len(r['summarized'])} · "
            f"tier moves {len(r['tier_moves'])}", c=c)
        for g in r["merged"]:
            say("  ", ("merged", "green"), f" {', '.join(g['merged'])} into {g['kept']} “{g['title']}” "
                f"(confirmed {g['confirmations']}x): {g['reason']}", c=c)
        for s in r["summarized"]:
            say("  ", ("summarized", "green"), f" {s['from']} → {s['to']} ({s['chars_before']} → "
                f"{s['chars_after']} chars): {s['reason']}", c=c)
        _print_moves(r["tier_moves"])
        _print_tiers(r["tiers"])

    return _done(args, res, human)


def cmd_restore(args, service) -> int:
    res = service.restore(_ctx(args), args.memory_id)
    return _done(args, res, lambda r: say((r["status"], "green"), f" {r['memory']['id']}: {r['message']}"))


# -- review ----------------------------------------------------------------------------------------------------
def cmd_review(args, service) -> int:
    from mnemo.core.errors import InvalidInput

    ctx = _ctx(args)
    if args.action == "resolve":
        if args.review_id is None or args.resolution is None:
            raise InvalidInput("review resolve needs an id and a resolution",
                               hint="e.g. `mnemo review resolve 3 supersede` (see `mnemo review` for ids)")
        res = service.review_resolve(ctx, args.review_id, args.resolution)
        return _done(args, res, _print_resolved)
    res = service.review_list(ctx, kind=args.kind, include_resolved=args.include_resolved)

    def human(r):
        c = console()
        if not r["items"]:
            c.print("[dim]the review queue is empty[/dim]")
            return
        for it in r["items"]:
            state = (" " + str(it["resolution"]), "dim") if it.get("resolution") else ""
            say((f"#{it['id']}", "bold"), " ", (it["kind"], "cyan"), f" {it['summary']} ",
                (age(it["created_at"]), "dim"), state, c=c)
            if not it.get("resolution"):
                say("     ", (f"resolve with: {' | '.join(it['resolutions'])}", "dim"), c=c)
        say((f"{r['total']} item(s): " + ", ".join(f"{k} {v}" for k, v in sorted(r["by_kind"].items())), "dim"),
            c=c)

    return _done(args, res, human)
