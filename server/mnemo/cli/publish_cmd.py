"""`mnemo publish [--to T,...] [--dry-run] [--budget N] [--sync] [--json]`: the reviewed memories into the rule
files agents read (core/sharing/publish.py), after reading a person's edits of them back."""

from __future__ import annotations

import argparse
import sys
from typing import Any

from mnemo.cli.caller import make_context
from mnemo.cli.output import emit_json, say
from mnemo.core.files.agent_rules import TARGETS
from mnemo.core.text import visible


def register(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser(
        "publish", help="write the reviewed memories into the rule files agents read (CLAUDE.md, AGENTS.md, "
                        "Cursor, Copilot, Windsurf, Continue)",
        description="Writes this project's active, trusted memories meant for agents into each tool's own place: a "
                    "managed section in CLAUDE.md and AGENTS.md, and mnemo*.mdc / mnemo*.instructions.md / "
                    ".windsurf/rules/mnemo*.md / .continue/rules/mnemo*.md files with globs from the memories' "
                    "anchors. A person's edits inside the sections are read back first (edits, deletions to "
                    "Review, additions). docs/agents-and-teams.md, 'Publishing to agent files'.")
    p.add_argument("--to", default=None, metavar="TARGETS",
                   help=f"comma-separated: {','.join(TARGETS)} or all (default: the targets published before; the "
                        "first time AGENTS.md and the tools this repository already uses)")
    p.add_argument("--dry-run", action="store_true", help="write nothing: print the unified diff, what would be "
                   "left out and why, and what the hand edits would do")
    p.add_argument("--budget", type=int, default=None, metavar="N",
                   help="tokens per file (default 1500): the most confirmed and most important memories first")
    p.add_argument("--sync", action="store_true",
                   help="read the hand edits of the published sections back and refresh only the files published "
                        "before")
    common(p)
    p.set_defaults(func=cmd_publish)


def cmd_publish(args, service) -> int:
    targets = None if args.to is None else [t for t in args.to.split(",") if t.strip()]
    res = service.publish(make_context(args), targets, bool(args.dry_run), args.budget, bool(args.sync))
    if args.json:
        emit_json(res)
        return 0
    print_report(res)
    return 0


def print_report(res: dict[str, Any]) -> None:
    s = res["sync"]
    if any(s.values()):
        say(("read back", "bold"), f": {len(s['edited'])} edited · {len(s['removed'])} deleted (to Review) · "
            f"{len(s['added'])} added" + (" (dry run: nothing done)" if res["dry_run"] else ""))
        for e in s["edited"]:
            st = e.get("status", "would edit")
            say(f"  edit {e['id']} at {e['where']}" + ("" if st in ("updated", "would edit") else
                                                       f" [{st}: {e.get('message', '')}]"))
        for r in s["removed"]:
            say(f"  deleted {r['id']} from {r['file']}: " + (f"Review item {r['review_id']} (deprecate?)"
                                                             if r.get("review_id") else "would ask in Review"))
        for a in s["added"]:
            say(f"  new {a.get('id') or '(new memory)'} from {a['where']}" +
                (f" [{a['status']}{': ' + a['message'] if a.get('message') else ''}]" if a.get("status") else ""))
        for k in s["skipped"]:
            say(("  not read back ", "yellow"), f"{k.get('where', '')}: {k['reason']}: “{k.get('text', '')}”")
        for m in s["sections_missing"]:
            say(("  section gone ", "yellow"), f"{m['file']}: the managed section was removed; publishing writes it "
                "again (leave the target out of --to to stop)")
    verb = "would write" if res["dry_run"] else "published"
    say((verb, "green"), f" {res['published']} memories to {', '.join(res['targets']) or 'no target'} "
        f"(budget {res['budget']} tokens a file)")
    for f in res["files"]:
        glob = ", ".join(f["globs"]) or "every file"
        say(f"  {f['status']:9} {f['path']}  ({f['tool']}; {glob}; {f['memories']} memories, ~{f['tokens']} tokens)"
            + (f" - {f['reason']}" if f["reason"] else ""))
    if res["left_out"]:
        say(("left out", "yellow"), f" ({len(res['left_out'])}):")
        for d in res["left_out"]:
            say(f"  {d['id']} “{d['text']}”: {d['reason']}")
    if res["dry_run"]:
        if res["diff"]:
            sys.stdout.write(visible(res["diff"]))  # a file's text is data: no terminal control codes
            sys.stdout.flush()
        else:
            say(("no change", "dim"))
