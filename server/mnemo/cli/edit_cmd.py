"""Edits and their history: `mnemo edit ID --text ...`, `mnemo history ID`; and the filter options recall and list
share (`--kind --branch --tag --since --until --author --source --status`, `--search` for list)."""

from __future__ import annotations

import argparse
from typing import Any

from mnemo.cli.caller import make_context
from mnemo.cli.output import console, emit_json, line, say, when
from mnemo.core.models import DEFAULT_KINDS, MEMORY_TYPES, SOURCES, STATUSES


class TagsAction(argparse.Action):
    """`--tag a --tag b`, `--tags a,b`, `--tag a,b`: one spelling everywhere, every value split on commas; the
    result is the list of tags (empty when only "" was given: `edit --tags ""` removes every tag)."""

    def __call__(self, parser, namespace, values, option_string=None):
        tags = list(getattr(namespace, self.dest, None) or [])
        tags += [t.strip() for t in str(values).split(",") if t.strip()]
        setattr(namespace, self.dest, tags)


def add_tag_args(p: argparse.ArgumentParser, help: str, default: list[str] | None = None) -> None:
    p.add_argument("--tag", "--tags", action=TagsAction, dest="tags", default=default, metavar="TAG[,TAG]",
                   help=help + " (--tag or --tags, repeatable, comma-separated)")


def text_or_stdin(text: str | None) -> str | None:
    """`-` means: read the text from standard input (`printf x | mnemo remember -`), strictly as UTF-8."""
    if text != "-":
        return text
    import sys

    from mnemo.core.errors import InvalidInput

    data = sys.stdin.buffer.read()
    try:
        out = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"standard input is not valid UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                           f"{exc.start}); nothing was done", hint="pipe the text in UTF-8") from None
    out = out.rstrip("\r\n")
    if not out.strip():
        raise InvalidInput("standard input is empty; nothing was done",
                           hint="pipe the text in: printf 'the note' | mnemo remember -")
    return out


TIME_HELP = "a date (2026-11-30), a date and time, a time ago (12h, 7d, 2w) or epoch seconds"


def register(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("edit", help="change a memory's text or metadata (the previous version is kept)")
    p.add_argument("memory_id")
    p.add_argument("--text", default=None,
                   help="the new text (re-embedded and re-checked like a new memory; - reads standard input)")
    p.add_argument("--type", default=None, help=f"one of {', '.join(MEMORY_TYPES)}")
    p.add_argument("--kind", default=None, help=f"free-form; usually one of {', '.join(DEFAULT_KINDS)}")
    p.add_argument("--importance", type=float, default=None, help="0..1")
    add_tag_args(p, "the memory's tags (they replace its tags; \"\" removes every tag)")
    p.add_argument("--reason", default=None, help="why it changed (shown by `mnemo history`)")
    common(p)
    p.set_defaults(func=cmd_edit)

    p = sub.add_parser("history", help="the versions of a memory: who wrote each, when and why")
    p.add_argument("memory_id")
    common(p)
    p.set_defaults(func=cmd_history)


def add_filter_args(p: argparse.ArgumentParser, *, listing: bool) -> None:
    """The filter options of `recall` (listing False) or `list` (which has --type, --kind, --branch and
    --status already)."""
    if not listing:
        p.add_argument("--kind", default=None, help="only this kind (decision, lesson, ...)")
        p.add_argument("--branch", default=None, help="only memories written on this branch (or branch-free)")
        p.add_argument("--status", default=None, help=f"only this status: {', '.join(STATUSES)} (default active)")
    add_tag_args(p, "only memories carrying these tags (every one of them)")
    p.add_argument("--since", default=None, help=f"last written at or after: {TIME_HELP}")
    p.add_argument("--until", default=None, help=f"last written at or before: {TIME_HELP}")
    p.add_argument("--author", default=None, help="only memories written by this user")
    p.add_argument("--source", default=None, help=f"only this source: {', '.join(SOURCES)}")
    if listing:
        p.add_argument("--search", default=None, metavar="TEXT",
                       help="only memories whose text, kind or tags hold every word of TEXT")


def filter_kwargs(args, *, listing: bool) -> dict[str, Any]:
    out = {k: getattr(args, k) for k in ("tags", "since", "until", "author", "source")}
    if listing:
        out["search"] = args.search
    else:
        out.update(kind=args.kind, branch=args.branch, status=args.status)
    return out


def cmd_edit(args, service) -> int:
    res = service.update(make_context(args), args.memory_id, text_or_stdin(args.text), type=args.type,
                         kind=args.kind, importance=args.importance, tags=args.tags, reason=args.reason)
    if args.json:
        emit_json(res)
        return 0
    m = res["memory"]
    c = console()
    style = "green" if res["status"] in ("updated", "unchanged") else "yellow"
    say((res["message"], style), "  ", (m["id"], "bold"), c=c)
    say((f"{m['type']} · {m['kind']} · importance {m['importance']:g} · tags {', '.join(m['tags']) or '-'}",
         "dim"), c=c)
    for f in m.get("flags") or []:
        say(("flag:", "yellow"), " ", f, c=c)
    for conflict in res.get("conflicts") or []:
        say(("conflicts with", "yellow"), f" {conflict.get('id')}: ", str(conflict.get('text') or ''), c=c)
    return 0


def cmd_history(args, service) -> int:
    res = service.history(make_context(args), args.memory_id)
    if args.json:
        emit_json(res)
        return 0
    c = console()
    say((res["id"], "bold"), f"  {len(res['versions'])} version(s)",
        ("  forgotten (`mnemo restore` brings it back)", "yellow") if res.get("forgotten") else "", c=c)
    for v in res["versions"]:
        head = f"v{v['version']}" + (" (current)" if v.get("current") else "")
        say((head, "bold"), f"  {when(v['written_at'])} by ", (v["written_by"], "cyan"), ": ", v["why"], c=c)
        say((f"   {v['type']} · {v['kind']} · importance {v['importance']:g} · tags "
             f"{', '.join(v['tags']) or '-'}", "dim"), c=c)
        c.print(line("   ", v["text"]), soft_wrap=True)
    for e in res.get("events") or []:
        say(("event", "bold"), f"  {when(e['at'])} by ", (e["by"], "cyan"), ": ", (e["event"], "yellow"),
            f" ({e['detail']})" if e.get("detail") else "", c=c)
    return 0
