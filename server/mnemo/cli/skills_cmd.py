"""`mnemo skills list | check | activate`: the skills the project has, the files that could not be read, and
which skills apply to a file and a request (with why). Human tables by default, `--json` prints one object."""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING, Any

from mnemo.cli.caller import make_context

if TYPE_CHECKING:
    from mnemo import api
from mnemo.cli.output import console, emit_json, line, say


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


def _ctx(args) -> api.Ctx:
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
    c = console()
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
        t.add_row(*(line(str(v)) for v in (s["name"], s["source_format"], ", ".join(modes),
                                            _short(", ".join(s.get("globs") or []), 40), s.get("token_cost", ""),
                                            s["id"])))
    c.print(t, soft_wrap=False)
    return 0


def _check_dirs(args) -> dict[str, Any]:
    from mnemo.core.errors import InvalidInput
    from mnemo.core.skills import SkillRegistry
    from mnemo.core.skills.registry import FORMATS

    if args.format is not None and args.format not in FORMATS:
        raise InvalidInput(f"unknown skill format {args.format!r}", hint=f"use one of: {', '.join(FORMATS)}")

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
    say((str(res["files_seen"]), "bold"), " skill files: ", (f"{res['loaded']} loaded", "green"), f" ({by}), ",
        (f"{res['skipped']} skipped", "red" if errors else "green"), ", ",
        (f"{len(warnings)} warnings", "yellow" if warnings else "green"), c=c)
    for p in errors:
        say(("skipped", "red"), f" {p['path']}:{p['line']}: {p['reason']}", c=c)
    for p in warnings:
        say(("warning", "yellow"), f" {p['path']}:{p['line']}: {p['reason']}", c=c)
    for s in res.get("shadowed", []):
        say(("shadowed", "dim"), f" {s['path']} (same name as {s['by']})", c=c)
    for h in res.get("held", []):
        if h.get("state") == "accepted":
            say(("accepted", "green"), f" {h['path']}: reads like a prompt injection, accepted in review", c=c)
        else:
            say(("held", "red"), f" {h['path']}: reads like a prompt injection; not activated until you accept it "
                "(`mnemo review`, kind skill_held)", c=c)
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
        c.print(line(res.get("prompt_block", "")), soft_wrap=True)
        return 0
    acts = res.get("activations", [])
    if not acts:
        say(("no skill applies to this file and request", "dim"), c=c)
    else:
        say(("Active skills", "bold"), f" ({len(acts)}, ~{res.get('total_tokens', 0)} tokens injected, "
            f"threshold {res.get('threshold', 0):.2f}, {res.get('elapsed_ms', 0):.0f} ms)", c=c)
        for i, a in enumerate(acts, start=1):
            _print_activation(c, i, a)
    _print_why_not(c, res)
    return 0


def _print_activation(c, i: int, a: dict[str, Any]) -> None:
    sig = a.get("signals", {})
    left_out = [] if a.get("injected", True) else [("  left out of the block (token budget)", "yellow")]
    say((f"{i}. {a['name']}", "bold"), "  probability ", (f"{a['score']:.2f}", "bold"), "  activated by ",
        (" + ".join(a["activated_by"]) or "-", "cyan"), f"  ~{a['token_cost']} tokens", *left_out, c=c)
    details = [f"{k} {float(sig[k]):.2f}" for k in ("glob", "keyword", "cosine") if k in sig]
    say((f"   {' · '.join(details)} · {a['source_format']} · {a['source_path']}", "dim"), c=c)
    say(f"   why: {a['reason']}", c=c)


def _print_why_not(c, res: dict[str, Any]) -> None:
    """The nearest misses with their probability and the threshold they missed; held and budget-dropped skills."""
    for d in res.get("dropped", [])[:5]:
        say((f"not active: {d['name']} — {d['why']}", "dim"), c=c)
    for d in (res.get("budget") or {}).get("dropped", []):
        say(("left out by the token budget", "yellow"), f": {d['name']} (~{d['token_cost']} tokens, "
            f"probability {d['score']:.2f})", c=c)
    for h in res.get("held", []):
        say(("held", "red"), f" {h['name']} ({h['source_path']}): {h['why']}", c=c)
