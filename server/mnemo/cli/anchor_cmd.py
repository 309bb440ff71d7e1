"""`mnemo anchor ID --file F [--symbol S | --line N]`, `mnemo unanchor ID [--file F [--symbol S]]` and
`mnemo anchors check [FILE ...] [--all] [--json]`.

`anchors check` compares the anchored code with the working tree (for scripts, CI and after a `git pull`): the
named files, else the files git reports changed in the working tree, or with `--all` every file a memory of the
project is anchored into. A changed or vanished anchor is filed in Review once (an item already there is not filed
again). Exit code: 0 when no checked anchor is stale, 1 when some are (CI can fail on it), 2 on an error.

`code_anchor` reads the file where the caller is (the CLI, the MCP server) and finds the symbol with tree-sitter
(`mnemo.core.files.code_symbols`), so the anchor carries the hash of the code: a later save of a changed symbol marks
the memory stale (`check_anchors`). The MCP `anchor` tool uses it too.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from mnemo.cli.caller import make_context
from mnemo.cli.output import emit_json, say
from mnemo.core.errors import InvalidInput

MAX_SOURCE_BYTES = 4 * 1024 * 1024  # a larger file is anchored without parsing it (file + lines)


def register(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("anchor", help="tie a memory to code: a file, a symbol in it, or the symbol at a line")
    p.add_argument("memory_id")
    p.add_argument("--file", required=True, help="the file (relative to the current directory or absolute)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--symbol", default=None, help="a function, class or method in the file (Class.method)")
    where.add_argument("--line", type=int, default=None,
                       help="a line (1-based): the symbol around it, else the line itself")
    common(p)
    p.set_defaults(func=cmd_anchor)

    p = sub.add_parser("anchors", help="anchors of memories to code: `mnemo anchors check` against the working tree")
    asub = p.add_subparsers(dest="anchors_action", required=True)
    c = asub.add_parser("check", help="flag memories whose anchored code changed or vanished (exit 1 when any did)")
    c.add_argument("files", nargs="*", help="only these files (default: those git reports changed in the working "
                                           "tree; see --all)")
    c.add_argument("--all", action="store_true", help="every file a memory of this project is anchored into")
    common(c)
    c.set_defaults(func=cmd_anchors_check)

    p = sub.add_parser("unanchor", help="detach a memory from code (every anchor, or those in --file)")
    p.add_argument("memory_id")
    p.add_argument("--file", default=None, help="only the anchors into this file")
    p.add_argument("--symbol", default=None, help="only the anchor on this symbol of --file")
    common(p)
    p.set_defaults(func=cmd_unanchor)


def _resolve(root: str | None, file: str) -> Path:
    """The file as a path: absolute, else relative to the current directory (or to the project root when it is
    not there)."""
    p = Path(os.path.expanduser(file))
    if p.is_absolute():
        return p
    here = Path.cwd() / p
    return here if here.exists() or not root else Path(root) / p


def _symbols(path: Path) -> list[Any] | None:
    """The symbols of a source file tree-sitter knows (None: another language, too large or unreadable)."""
    from mnemo.core.files import code_symbols as cc  # lazy: tree-sitter grammars load on first use

    language = cc.language_for(str(path))
    if language is None or not path.is_file() or path.stat().st_size > MAX_SOURCE_BYTES:
        return None
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None
    return cc.symbols(cc.parse_document(text, language))


def code_anchor(root: str | None, file: str, symbol: str | None = None, line: int | None = None) -> dict[str, Any]:
    """The anchor for `file` (`symbol`: a symbol of it by name or qualified name; `line`: 1-based, the innermost
    symbol around it, else that line). Refused with the names it has when the symbol is not in the file."""
    if symbol is not None and line is not None:
        raise InvalidInput("give --symbol or --line, not both")
    if line is not None and (isinstance(line, bool) or line < 1):
        raise InvalidInput(f"line {line} is not a line number", hint="lines count from 1")
    path = _resolve(root, file)
    anchor: dict[str, Any] = {"path": str(path)}
    if symbol is None and line is None:
        return anchor
    if line is not None and path.is_file() and path.stat().st_size <= MAX_SOURCE_BYTES:
        count = len(path.read_bytes().splitlines())
        if line > count:
            raise InvalidInput(f"{file} has {count} lines; there is no line {line}", hint="lines count from 1")
    syms = _symbols(path)
    if syms is None:
        if symbol is not None:
            raise InvalidInput(f"cannot read symbols of {file}",
                               hint="the file must exist and be source code Mnemo parses (Python, TypeScript, Go, "
                                    "Rust, Java, C/C++, Ruby, PHP, Kotlin); or anchor with --line")
        assert line is not None  # no symbol: a line was given
        return {**anchor, "start_line": line - 1, "end_line": line - 1}
    if symbol is not None:
        found = [s for s in syms if s.qualname == symbol] or [s for s in syms if s.name == symbol]
        if len(found) != 1:
            names = ", ".join(sorted({s.qualname for s in syms})[:12]) or "none"
            what = "no symbol" if not found else f"{len(found)} symbols named"
            raise InvalidInput(f"{what} {symbol!r} in {file}",
                               hint=f"use a qualified name (Class.method); symbols there: {names}")
        return found[0].anchor(str(path))
    assert line is not None  # no symbol: a line was given
    around = [s for s in syms if s.contains(line - 1)]
    if around:
        return min(around, key=lambda s: s.end_line - s.start_line).anchor(str(path))
    return {**anchor, "start_line": line - 1, "end_line": line - 1}


def _where(a: dict[str, Any]) -> str:
    lines = f" (lines {a['start_line'] + 1}-{a['end_line'] + 1})" if a.get("start_line") is not None else ""
    return f"{a.get('path')}" + (f" › {a['symbol']}" if a.get("symbol") else "") + lines


def cmd_anchor(args, service) -> int:
    ctx = make_context(args)
    a = code_anchor(ctx.get("root"), args.file, args.symbol, args.line)
    res = service.anchor(ctx, args.memory_id, a)
    if args.json:
        emit_json(res)
        return 0
    placed = next((x for x in res["memory"]["anchors"] if x.get("symbol") == a.get("symbol")
                   and str(a["path"]).endswith(str(x.get("path")))), a)
    say(("anchored", "green"), f" {res['memory']['id']} to ", (_where(placed), "bold"))
    return 0


def cmd_unanchor(args, service) -> int:
    if args.symbol is not None and args.file is None:
        raise InvalidInput("--symbol needs --file", hint="mnemo unanchor ID --file F --symbol S")
    ctx = make_context(args)
    path = str(_resolve(ctx.get("root"), args.file)) if args.file else None
    res = service.unanchor(ctx, args.memory_id, path, args.symbol)
    if args.json:
        emit_json(res)
        return 0
    left = res["memory"]["anchors"]
    say(("unanchored", "green"), f" {res['memory']['id']}: {res.get('message', '')}",
        (f"; still anchored to {', '.join(_where(a) for a in left)}" if left else "", "dim"))
    return 0


def changed_files(root: str) -> list[str]:
    """The files git reports changed in the working tree of `root` (modified, added, deleted, renamed: both names;
    untracked too), relative to the root."""
    import subprocess

    try:
        p = subprocess.run(["git", "-C", root, "status", "--porcelain=v1", "-z", "--untracked-files=all"],
                           capture_output=True, timeout=30, check=False)
    except (OSError, subprocess.SubprocessError) as exc:
        raise InvalidInput(f"cannot ask git which files changed: {exc}",
                           hint="name the files (mnemo anchors check FILE ...) or pass --all") from exc
    if p.returncode != 0:
        raise InvalidInput(f"{root} is not a git working tree (git: {p.stderr.decode(errors='replace').strip()})",
                           hint="name the files (mnemo anchors check FILE ...) or pass --all")
    out, parts = [], p.stdout.decode("utf-8", "replace").split("\0")
    i = 0
    while i < len(parts):
        entry = parts[i]
        i += 1
        if len(entry) < 4:
            continue
        out.append(entry[3:])
        if entry[0] in "RC":  # a rename or copy: the old name follows
            out.append(parts[i])
            i += 1
    return list(dict.fromkeys(out))


def cmd_anchors_check(args, service) -> int:
    ctx = make_context(args)
    root = ctx.get("root")
    if args.all and args.files:
        raise InvalidInput("give files or --all, not both")
    if args.all:
        paths = None
    elif args.files:
        paths = [str(_resolve(root, f)) for f in args.files]
    else:
        if not root:
            raise InvalidInput("not inside a project", hint="run it inside the repository, or pass -C DIR")
        paths = changed_files(root)
    res = service.check_anchor_files(ctx, paths)
    if args.json:
        emit_json(res)
        return 1 if res["stale"] else 0
    what = "every anchored file" if args.all else ("the files named" if args.files else "the changed files")
    say(f"checked {res['checked']} anchor{'s' if res['checked'] != 1 else ''} in {res['checked_files']} file"
        f"{'s' if res['checked_files'] != 1 else ''} ({what})")
    new = {(x["memory_id"], x["path"], x["anchor"].get("symbol")) for x in res["flagged"]}
    for x in res["stale"]:
        filed = "filed in Review" if (x["memory_id"], x["path"], x["anchor"].get("symbol")) in new \
            else "already in Review"
        say(("stale", "yellow"), f" {x['memory_id']} ", (_where({**x["anchor"], "path": x["path"]}), "bold"),
            f" {x['reason']} — {x['title']} ({filed})")
    for x in res["cleared"]:
        say(("fixed", "green"), f" {x['memory_id']} ", (_where({**x["anchor"], "path": x["path"]}), "bold"),
            " is back as it was anchored")
    for path in res["skipped"]:
        say(("skipped", "dim"), f" {path}: not a language Mnemo parses (or too large)")
    if not res["stale"]:
        say(("ok", "green"), " no stale anchors")
    return 1 if res["stale"] else 0
