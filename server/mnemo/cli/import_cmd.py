"""`mnemo import FILE.jsonl`: notes from a JSON Lines file, one JSON object per line (`text`, and optionally
`type`, `kind`, `tags`, `importance`, `scope`), through the service's `remember_batch`: every check of a
`remember` (secrets, dedup, conflicts), embedded and committed in batches, with a progress bar.

Nothing is lost silently: every line is either stored (created, confirmed, held in Review) or reported with its
line number and why; a blank line is skipped. The summary comes at the end. `run_jsonl_import` is the whole import
without the terminal (tests, and the `import` command that also takes Markdown)."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mnemo.core.errors import InvalidInput, MnemoError

if TYPE_CHECKING:
    from mnemo import api

JSONL_FIELDS = ("text", "type", "kind", "tags", "importance", "scope")
BATCH = 500  # notes per `remember_batch` call (the owner takes at most MNEMO_MAX_BATCH_ITEMS, 1000 by default)
SHOWN_ERRORS = 50  # refused lines listed by the human output (all of them are in --json)


def register(sub, common) -> None:
    p = sub.add_parser("import", help="import notes: a JSON Lines file (one JSON object per line), or Markdown "
                                      "written by `mnemo export --format md` (a directory or one .md file)",
                       description="Import notes. FILE.jsonl: one JSON object per line with `text` and optionally "
                                   "`type`, `kind`, `tags`, `importance`, `scope`; each note gets every check of "
                                   "`mnemo remember`; bad lines are reported with their line number. DIR or "
                                   "FILE.md: exported Markdown read back (changed entries become edits, new entries "
                                   "new memories; memories missing from the files are reported, never deleted).")
    p.add_argument("path", metavar="FILE.jsonl|DIR|FILE.md", type=Path, help="what to import")
    p.add_argument("--on-conflict", default=None, choices=["review", "supersede", "keep_both", "keep_existing"],
                   help="JSON Lines: what a note contradicting a stored one does (default: review, or "
                        "MNEMO_ON_CONFLICT)")
    p.add_argument("--dry-run", action="store_true", help="Markdown: say what would change; write nothing")
    common(p)
    p.set_defaults(func=cmd_import)


# -- reading the file ---------------------------------------------------------------------------------------------
def parse_line(raw: bytes) -> dict[str, Any]:
    """One line's note, or InvalidInput saying what is wrong with it."""
    try:
        obj = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise InvalidInput("not UTF-8 text", hint="save the file as UTF-8") from exc
    except json.JSONDecodeError as exc:
        raise InvalidInput(f"not valid JSON ({exc.msg} at column {exc.colno})",
                           hint='each line must be one JSON object, e.g. {"text": "..."}') from exc
    if not isinstance(obj, dict):
        raise InvalidInput(f"a JSON {type(obj).__name__}, not an object", hint='write {"text": "..."} on each line')
    unknown = sorted(set(obj) - set(JSONL_FIELDS))
    if unknown:
        raise InvalidInput(f"unknown field(s) {', '.join(map(repr, unknown))}",
                           hint=f"a line takes: {', '.join(JSONL_FIELDS)}")
    if not isinstance(obj.get("text"), str):
        raise InvalidInput("no `text` string", hint='every line needs the note as {"text": "..."}')
    tags = obj.get("tags")
    if tags is not None and not (isinstance(tags, list) and all(isinstance(t, str) for t in tags)):
        raise InvalidInput("`tags` must be a list of strings", hint='e.g. "tags": ["payments", "api"]')
    for key in ("type", "kind", "scope"):
        if obj.get(key) is not None and not isinstance(obj[key], str):
            raise InvalidInput(f"`{key}` must be a string")
    imp = obj.get("importance")
    if imp is not None and (isinstance(imp, bool) or not isinstance(imp, int | float)):
        raise InvalidInput("`importance` must be a number between 0 and 1")
    return {k: v for k, v in obj.items() if v is not None}


def read_jsonl(path: Path) -> Iterator[tuple[int, dict[str, Any] | InvalidInput]]:
    """(line number, note or the reason it is refused) for every non-blank line, read as a stream."""
    with path.open("rb") as fh:
        for n, raw in enumerate(fh, 1):
            if not raw.strip():
                continue
            try:
                yield n, parse_line(raw)
            except InvalidInput as exc:
                yield n, exc


def count_lines(path: Path) -> int:
    with path.open("rb") as fh:
        return sum(1 for raw in fh if raw.strip())


# -- the import ---------------------------------------------------------------------------------------------------
def run_jsonl_import(service, ctx: api.Ctx, path: Path | str, *, on_conflict: str | None = None, batch: int = BATCH,
                     progress: Callable[[dict[str, Any]], None] | None = None) -> dict[str, Any]:
    """Import the notes of a JSON Lines file through `service.remember_batch` (source `import`: an instruction-like
    note waits in Review). Returns `{"file", "lines", "counts", "errors": [{"line", "message", "hint"}], "items":
    [{"line", "status", "id"}], "stopped"}`: `stopped` is None, or the error that ended the import early (every
    line before the batch it names is stored; running the import again confirms those instead of copying them).
    `progress({"done", "total"})` after each batch (and within one, as the owner commits its chunks)."""
    path = Path(path)
    if not path.is_file():
        raise InvalidInput(f"no such file: {path}", hint="give the path of a .jsonl file")
    total = count_lines(path)
    report: dict[str, Any] = {"file": str(path), "lines": total, "counts": {}, "errors": [], "items": [],
                              "stopped": None}
    pending: list[tuple[int, dict[str, Any]]] = []
    done = 0
    for n, note in read_jsonl(path):
        if isinstance(note, InvalidInput):
            _count(report, "error")
            report["errors"].append({"line": n, "message": note.message, "hint": note.hint})
            done += 1
        else:
            pending.append((n, note))
        if len(pending) >= batch:
            done = _send(service, ctx, pending, path, on_conflict, report, done, total, progress)
            pending = []
            if report["stopped"]:
                return report
    if pending:
        _send(service, ctx, pending, path, on_conflict, report, done, total, progress)
    report["errors"].sort(key=lambda e: e["line"])
    return report


def _count(report: dict[str, Any], status: str) -> None:
    report["counts"][status] = report["counts"].get(status, 0) + 1


def _send(service, ctx: api.Ctx, pending: list[tuple[int, dict[str, Any]]], path: Path, on_conflict: str | None,
          report: dict[str, Any], done: int, total: int, progress) -> int:
    """One `remember_batch` call; its items mapped back to line numbers. Returns the lines done so far."""
    items = [{**note, "provenance": {"imported_from": {"source": path.name, "line": n}}} for n, note in pending]

    def inner(p: dict[str, Any]) -> None:
        if progress is not None:
            progress({"done": done + p["done"], "total": total})

    try:
        res = service.remember_batch(ctx, items, source="import", on_conflict=on_conflict, progress=inner)
    except MnemoError as exc:
        report["stopped"] = {"line": pending[0][0], "message": exc.message, "hint": exc.hint}
        return done
    for (n, _), it in zip(pending, res["items"], strict=True):
        _count(report, it["status"])
        if it["status"] == "error":
            report["errors"].append({"line": n, "message": it["message"], "hint": it.get("hint")})
        else:
            report["items"].append({"line": n, "status": it["status"], "id": it["id"]})
    done += len(pending)
    if progress is not None:
        progress({"done": done, "total": total})
    return done


# -- the command --------------------------------------------------------------------------------------------------
def cmd_import(args, service) -> int:
    from mnemo.cli.caller import make_context
    from mnemo.cli.output import console, emit_json

    path: Path = args.path
    if not path.exists():
        raise InvalidInput(f"no such file or directory: {path} does not exist", hint="give a .jsonl file, or a directory (or .md file) written "
                                                          "by `mnemo export --format md`")
    if path.is_dir() or path.suffix.lower() in (".md", ".markdown"):
        if args.on_conflict is not None:
            raise InvalidInput("--on-conflict applies to a JSON Lines import",
                               hint="a Markdown import's edits and new entries use MNEMO_ON_CONFLICT")
        from mnemo.cli.markdown_cmd import run_markdown_import

        return run_markdown_import(service, make_context(args), str(path), dry_run=args.dry_run, as_json=args.json)
    if path.suffix.lower() not in (".jsonl", ".ndjson"):
        raise InvalidInput(f"{path} is neither a JSON Lines file (.jsonl) nor exported Markdown (a directory or .md)",
                           hint='give a .jsonl file with one {"text": ...} object per line, or a directory written '
                                "by `mnemo export --format md`")
    if args.dry_run:
        raise InvalidInput("--dry-run applies to a Markdown import",
                           hint="a JSON Lines import has no dry run yet: try it on a copy of the store "
                                "(MNEMO_HOME=/tmp/try mnemo import FILE.jsonl)")
    ctx = make_context(args)
    if args.json:
        report = run_jsonl_import(service, ctx, path, on_conflict=args.on_conflict)
        emit_json(report)
        return _exit_code(report)
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    with Progress(TextColumn("importing"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
                  console=console(stderr=True), transient=True) as bar:
        task = bar.add_task("", total=None)
        report = run_jsonl_import(service, ctx, path, on_conflict=args.on_conflict,
                                  progress=lambda p: bar.update(task, total=p["total"], completed=p["done"]))
    print_report(report)
    return _exit_code(report)


def _exit_code(report: dict[str, Any]) -> int:
    return 2 if report["stopped"] else 1 if report["errors"] else 0


def print_report(report: dict[str, Any]) -> None:
    from mnemo.cli.output import say

    c = report["counts"]
    stored = sum(v for k, v in c.items() if k != "error")
    parts = [f"{c[k]} {label}" for k, label in (("created", "new"), ("confirmed", "confirmed (already known)"),
                                                ("conflict", "conflicting (in Review)"),
                                                ("pending", "pending (in Review)"),
                                                ("kept_existing", "not stored (keep_existing)")) if c.get(k)]
    say(("imported", "green"), f" {stored} of {report['lines']} notes from ", report["file"],
        f": {', '.join(parts) or 'nothing new'}")
    for e in report["errors"][:SHOWN_ERRORS]:
        say(("line", "yellow"), f" {e['line']}: ", e["message"], (f" ({e['hint']})" if e.get("hint") else "", "dim"),
            stderr=True)
    if len(report["errors"]) > SHOWN_ERRORS:
        say(f"... and {len(report['errors']) - SHOWN_ERRORS} more refused lines (`--json` lists them all)",
            stderr=True)
    if report["errors"]:
        say(("refused", "yellow"), f" {len(report['errors'])} lines: fix them and import the file again (the "
            "stored notes are confirmed, not copied)", stderr=True)
    if report["stopped"]:
        s = report["stopped"]
        say(("stopped", "red"), f" at line {s['line']}: ", s["message"], stderr=True)
        if s.get("hint"):
            say(("hint:", "dim"), " ", s["hint"], stderr=True)
        say("the lines before it are stored; import the file again to continue (stored notes are confirmed, not "
            "copied)", stderr=True)
