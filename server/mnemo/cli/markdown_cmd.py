"""`mnemo export --format md [--scope S] DIR`, and the Markdown half of `mnemo import` (cli/import_cmd.py dispatches a
directory or a .md file here): the memories as Markdown
a person reads and edits (format: core/sharing/markdown_format.py; operations: core/sharing/markdown_files.py).

`run_markdown_import` is the whole import command as a function, so a command that dispatches on the path (a
`.jsonl` bulk import elsewhere) can call it.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from mnemo.cli.caller import make_context
from mnemo.cli.output import emit_json, say

FORMATS = ("md",)

if TYPE_CHECKING:
    from mnemo import api


def register(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("export", help="write the memories as Markdown files to read and edit (one per scope/type)")
    p.add_argument("dir", metavar="DIR", help="directory to write <scope>-<type>.md files into (created if missing)")
    p.add_argument("--format", default="md", choices=FORMATS, help="md: readable Markdown (a full-fidelity "
                   "portable file is `mnemo snapshot export`)")
    p.add_argument("--scope", action="append", dest="scopes", choices=("project", "global"), default=None,
                   help="project and/or global (repeatable; default both)")
    common(p)
    p.set_defaults(func=cmd_export)


def _abs(path: str) -> str:
    return os.path.abspath(os.path.expanduser(path))  # the owner runs elsewhere: send an absolute path


def cmd_export(args, service) -> int:
    res = service.markdown_export(make_context(args), _abs(args.dir), args.scopes)
    if args.json:
        emit_json(res)
        return 0
    say(("exported", "green"), f" {res['memories']} memories to ", (res["path"], "bold"))
    for f in res["files"]:
        say(f"  {f['name']}: {f['memories']}")
    return 0


def _print_import(res: dict[str, Any]) -> None:
    verb = "would" if res["dry_run"] else "did"
    say((f"import ({'dry run' if res['dry_run'] else 'done'})", "green"), f": {len(res['files'])} file(s) · "
        f"{len(res['edited'])} edited · {len(res['restored'])} restored · {len(res['created'])} new · "
        f"{res['unchanged']} unchanged · {len(res['skipped'])} skipped · {len(res['removed'])} removed from files")
    for e in res["edited"]:
        status = e.get("status", "edited")
        say(f"  edit {e['id']} ({', '.join(e['fields'])}) at {e['where']}" +
            ("" if status in ("edited", "unchanged") else f" [{status}: {e.get('message', '')}]"))
    for r in res.get("restored_detail") or []:
        say(f"  restore {r['id']} at {r['where']} (branch {r.get('branch') or 'all'}): {r['title']}")
    for c in res["created"]:
        say(f"  new  {c.get('id') or '(new)'} at {c['where']}" + (f" [{c['status']}]" if c.get("status") else "")
            + (f": {c['reason']}" if c.get("reason") else ""))
    for s in res["skipped"]:
        say(("  skip ", "yellow"), f"{s.get('id') or ''} at {s.get('where') or '?'}: {s['reason']}")
    for r in res["removed"]:
        say(("  not in the files ", "yellow"), f"{r['id']} ({r['file']}): {r['title']}")
    for u in res.get("unreadable") or []:
        say(("  unreadable ", "yellow"), f"{u['file']}: {u['reason']}")
    if res.get("ignored"):
        say((f"  left alone (not Mnemo memories files): {', '.join(res['ignored'])}", "dim"))
    if res["removed"]:
        say((f"  {verb} not delete them: `mnemo forget ID` if they should go", "dim"))


def run_markdown_import(service, ctx: api.Ctx, path: str, *, dry_run: bool = False,
                        as_json: bool = False) -> int:
    """Import a directory of exported Markdown files (or one file) and print what it did; returns the exit code."""
    res = service.markdown_import(ctx, _abs(path), dry_run)
    if as_json:
        emit_json(res)
    else:
        _print_import(res)
    return 0


