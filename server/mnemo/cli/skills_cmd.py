"""`mnemo skills list | check | activate`: the skills the project has, the files that could not be read, and
which skills apply to a file and a request (with why). Human tables by default, `--json` prints one object."""

from __future__ import annotations

import argparse
import os
from typing import Any

from mnemo.cli.output import console, emit_json


def register(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("skills", help="skills and rules: list, check, activate")
    ssub = p.add_subparsers(dest="skills_action", metavar="ACTION", required=True)

    q = ssub.add_parser("list", help="every skill and rule file read in this project (all formats)")
    common(q)
    q.set_defaults(func=run_list)

    q = ssub.add_parser("check", help="read every skill source and report files that cannot be used (and why)")
    q.add_argument("--dir", action="append", dest="dirs", default=None, metavar="PATH",
                   help="check this folder instead of the project (repeatable; runs locally)")
    q.add_argument("--format", default=None,
                   help="source format of --dir files (default: detected per file name): mnemo, copilot, cursor, "
                        "continue, windsurf, claude-skill ...")
    q.add_argument("--strict", action="store_true", help="exit 1 on warnings too (not only on skipped files)")
    common(q)
    q.set_defaults(func=run_check)

    q = ssub.add_parser("activate", help="which skills apply to a file and a request, with scores and why")
    q.add_argument("--file", default=None, help="the active file (relative to the current directory or absolute)")
    q.add_argument("--message", "-m", default=None, help="the user's request")
    q.add_argument("--max", type=int, default=None, dest="max_skills", help="at most N skills (besides always-apply)")
    q.add_argument("--budget", type=int, default=None, dest="token_budget",
                   help="tokens the injected block may take (least likely skills left out first; 0: no limit)")
    q.add_argument("--prompt", action="store_true", help="print the 'Active skills' block an agent receives")
    common(q)
    q.set_defaults(func=run_activate)


def _ctx(args) -> dict[str, Any]:
    from mnemo.cli import make_context

    return make_context(args)


def _short(text: str, n: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= n else text[: n - 1] + "…"


def run_list(args, service) -> int:
    res = service.skills_list(_ctx(args))
    if args.json:
        emit_json(res)
        return 0
    from rich.table import Table

    skills = res.get("skills", [])
    t = Table(title=f"{len(skills)} skills", show_lines=False)
    for col in ("name", "format", "activates by", "globs", "tokens", "source"):
        t.add_column(col, overflow="fold")
    for s in skills:
        modes = []
        if s.get("always_apply"):
            modes.append("always")
        if s.get("globs"):
            modes.append(f"glob ({s.get('glob_mode')})")
        if s.get("keywords") or s.get("triggers"):
            modes.append("keyword")
        if not s.get("manual_only"):
            modes.append("semantic")
        else:
            modes.append("by name")
        t.add_row(s["name"], s["source_format"], ", ".join(modes), _short(", ".join(s.get("globs") or []), 40),
                  str(s.get("token_cost", "")), s["id"])
    console().print(t)
    return 0


def _check_dirs(args) -> dict[str, Any]:
    from mnemo.core.skills import SkillRegistry

    extra = [(d, args.format) if args.format else d for d in args.dirs]
    reg = SkillRegistry(None, use_user_dir=False, extra_dirs=extra)
    return reg.load().to_dict(skills=False)


def run_check(args, service) -> int:
    res = _check_dirs(args) if args.dirs else service.skills_check(_ctx(args))
    res.pop("skills", None)
    errors = [p for p in res.get("problems", []) if p.get("severity") == "error"]
    warnings = [p for p in res.get("problems", []) if p.get("severity") == "warning"]
    code = 1 if errors or (args.strict and warnings) else 0
    if args.json:
        emit_json(res)
        return code
    c = console()
    by = ", ".join(f"{k} {v}" for k, v in res.get("by_format", {}).items()) or "none"
    c.print(f"[bold]{res['files_seen']}[/bold] skill files: [green]{res['loaded']} loaded[/green] ({by}), "
            f"[{'red' if errors else 'green'}]{res['skipped']} skipped[/], "
            f"[{'yellow' if warnings else 'green'}]{len(warnings)} warnings[/]")
    for p in errors:
        c.print(f"[red]skipped[/red] {p['path']}:{p['line']}: {p['reason']}")
    for p in warnings:
        c.print(f"[yellow]warning[/yellow] {p['path']}:{p['line']}: {p['reason']}")
    for s in res.get("shadowed", []):
        c.print(f"[dim]shadowed[/dim] {s['path']} (same name as {s['by']})")
    from rich.markup import escape

    for h in res.get("held", []):
        if h.get("state") == "accepted":
            c.print(f"[green]accepted[/green] {escape(h['path'])}: reads like a prompt injection, accepted in review")
        else:
            c.print(f"[red]held[/red] {escape(h['path'])}: reads like a prompt injection; not activated until you "
                    "accept it (`mnemo review`, kind skill_held)")
    return code


def run_activate(args, service) -> int:
    file = os.path.abspath(args.file) if args.file else None
    kw: dict[str, Any] = {}
    if args.max_skills is not None:
        kw["max_skills"] = args.max_skills
    if args.token_budget is not None:
        kw["token_budget"] = args.token_budget
    res = service.activate_skills(_ctx(args), file=file, message=args.message, **kw)
    if args.json:
        emit_json(res)
        return 0
    c = console()
    if args.prompt:
        c.print(res.get("prompt_block", ""), markup=False, highlight=False)
        return 0
    acts = res.get("activations", [])
    if not acts:
        c.print("[dim]no skill applies to this file and request[/dim]")
    else:
        c.print(f"[bold]Active skills[/bold] ({len(acts)}, ~{res.get('total_tokens', 0)} tokens injected, "
                f"threshold {res.get('threshold', 0):.2f}, {res.get('elapsed_ms', 0):.0f} ms)")
        for i, a in enumerate(acts, start=1):
            _print_activation(c, i, a)
    _print_why_not(c, res)
    return 0


def _print_activation(c, i: int, a: dict[str, Any]) -> None:
    from rich.markup import escape

    sig = a.get("signals", {})
    left_out = "" if a.get("injected", True) else "  [yellow]left out of the block (token budget)[/yellow]"
    c.print(f"[bold]{i}. {escape(a['name'])}[/bold]  probability [bold]{a['score']:.2f}[/bold]  "
            f"activated by [cyan]{' + '.join(a['activated_by']) or '-'}[/cyan]  ~{a['token_cost']} tokens{left_out}")
    details = [f"{k} {float(sig[k]):.2f}" for k in ("glob", "keyword", "cosine") if k in sig]
    c.print(f"   {' · '.join(details)} · {a['source_format']} · {escape(a['source_path'])}", style="dim")
    c.print(f"   why: {escape(a['reason'])}")


def _print_why_not(c, res: dict[str, Any]) -> None:
    """The nearest misses with their probability and the threshold they missed; held and budget-dropped skills."""
    from rich.markup import escape

    for d in res.get("dropped", [])[:5]:
        c.print(f"[dim]not active: {escape(str(d['name']))} — {escape(d['why'])}[/dim]")
    for d in (res.get("budget") or {}).get("dropped", []):
        c.print(f"[yellow]left out by the token budget[/yellow]: {escape(str(d['name']))} (~{d['token_cost']} tokens, "
                f"probability {d['score']:.2f})")
    for h in res.get("held", []):
        c.print(f"[red]held[/red] {escape(str(h['name']))} ({escape(h['source_path'])}): {escape(h['why'])}")
