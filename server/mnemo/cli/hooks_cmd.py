"""`mnemo hooks install|uninstall|status`, `mnemo hook EVENT`, `mnemo context`, `mnemo vscode install`:
what puts Mnemo in front of an agent without the agent asking."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from mnemo.core import environment
from mnemo.core.errors import InvalidInput, MnemoError

AGENTS = ("claude-code",)
EDITOR_CLIS = ("code", "code-insiders", "codium", "code-server")


def register(sub: argparse._SubParsersAction, common) -> None:
    _register_hooks(sub, common)
    _register_context(sub, common)
    _register_vscode(sub, common)


def _register_hooks(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("hooks", help="install Mnemo's hooks into an agent (Claude Code), or remove them",
                       description="Claude Code runs `mnemo hook ...` on session start, each prompt, each file "
                                   "read/edit and session end; Mnemo answers with the hand-off, the skills and "
                                   "memories that apply, under a token budget (docs/agents-and-teams.md).")
    hs = p.add_subparsers(dest="hooks_action", metavar="ACTION", required=True)
    for action, text in (("install", "add Mnemo's entries to Claude Code's settings (nothing else changes)"),
                         ("uninstall", "remove Mnemo's entries (and only them)")):
        q = hs.add_parser(action, help=text)
        common(q)
        q.add_argument("agent", nargs="?", default="claude-code", choices=AGENTS)
        where = q.add_mutually_exclusive_group()
        where.add_argument("--project", dest="scope", action="store_const", const="project",
                           help="this repository's .claude/settings.json (shared; the default)")
        where.add_argument("--user", dest="scope", action="store_const", const="user",
                           help="~/.claude/settings.json (every project of yours)")
        where.add_argument("--local", dest="scope", action="store_const", const="local",
                           help="this repository's .claude/settings.local.json (yours, not committed)")
        where.add_argument("--settings", type=Path, default=None, help="this settings file")
        if action == "install":
            q.add_argument("--command", default=None, metavar="CMD", dest="hook_command",
                           help="what the entries run before `hook EVENT` (default: `mnemo` for --project, this "
                                "installation's mnemo for --user/--local)")
        q.set_defaults(func=cmd_hooks, needs_service=False, scope="project")
    q = hs.add_parser("status", help="which Mnemo hooks are installed where")
    common(q)
    q.set_defaults(func=cmd_hooks, needs_service=False, scope=None)

    p = sub.add_parser("hook", help="(run by the agent) answer one hook event from its JSON on stdin",
                       description="What Claude Code runs: reads the event's JSON on stdin and prints the context "
                                   "to inject. Always exits 0 within MNEMO_HOOK_TIMEOUT (0.8 s).")
    p.add_argument("event", choices=["session-start", "prompt", "pre-tool", "session-end"])
    p.set_defaults(func=cmd_hook, needs_service=False)


def _register_context(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("context", help="print the context block for a file and request (for any agent or script)",
                       description="The block Mnemo's hooks inject: skills for the file and request, memories "
                                   "recall finds, quoted with provenance, under a token budget.")
    common(p)
    p.add_argument("--file", default=None, help="the file at hand (absolute or relative to the project)")
    p.add_argument("--message", "-m", default=None, help="the person's request")
    p.add_argument("--symbol", default=None, help="the symbol at hand in --file (its anchored memories first)")
    p.add_argument("--budget", type=int, default=None, metavar="N",
                   help="tokens (default $MNEMO_CONTEXT_BUDGET or 2000)")
    p.add_argument("--format", choices=["md", "json"], default="md")
    p.add_argument("--event", default="context", choices=["context", "session-start", "prompt", "pre-tool"],
                   help="what to gather, as a hook would (default: context)")
    p.add_argument("--session", default=None, help="a session id: nothing already given to it is repeated")
    p.add_argument("--learn", default=None, choices=["off", "confirm", "auto"],
                   help="file the corrections the message states (default $MNEMO_LEARN_CORRECTIONS or off)")
    p.add_argument("--client", default="any", choices=["any", "claude-code", "copilot"],
                   help="leave out the rule files this agent loads by itself")
    p.set_defaults(func=cmd_context)


def _register_vscode(sub: argparse._SubParsersAction, common) -> None:
    p = sub.add_parser("vscode", help="install the VS Code extension with the `code` / `code-server` CLI")
    vs = p.add_subparsers(dest="vscode_action", metavar="ACTION", required=True)
    q = vs.add_parser("install", help="build (or take) the .vsix and install it")
    common(q)
    q.add_argument("--vsix", type=Path, default=None, help="this .vsix (default: the checkout's built one)")
    q.add_argument("--build", action="store_true", help="build the .vsix again first (needs npm)")
    q.add_argument("--code", default=None, metavar="CLI", help=f"the editor CLI (default: the first of "
                   f"{', '.join(EDITOR_CLIS)} on PATH)")
    q.set_defaults(func=cmd_vscode, needs_service=False)


# -- hooks ----------------------------------------------------------------------------------------------------
def _home(args) -> Path:
    from mnemo.daemon.paths import default_home

    return Path(args.home) if getattr(args, "home", None) else default_home()


def _root(args) -> Path | None:
    from mnemo.core.identity import project_identity

    return project_identity(getattr(args, "project_root", None)).root


def cmd_hooks(args, _service) -> int:
    from mnemo.cli.output import emit_json, say
    from mnemo.hooks import claude

    if args.hooks_action == "status":
        paths = {s: claude.settings_path(s, _root(args)) for s in claude.SCOPES}
        res = claude.status(paths)
        published = _published_status(args)
        if published is not None:
            res["published"] = published
        if args.json:
            emit_json(res)
            return 0
        if published is not None:
            say(("published agent files", "bold"), f" ({published['out_of_date']} not up to date):")
            for f in published["files"]:
                say(f"    {f['path']}: ", (f["state"], "green" if f["state"] == "up to date" else "yellow"))
        for scope, st in res.items():
            if scope == "published":
                continue
            state = "error: " + st["error"] if st.get("error") else ("installed" if st.get("installed") else
                    f"{len(st['mnemo'])} of {len(claude.SPECS)} Mnemo entries" if st.get("mnemo") else
                    "not installed")
            say((f"{scope:8}", "bold"), f" {st['path']}: ", (state, "green" if st.get("installed") else "dim"),
                f" ({st.get('other_hooks', 0)} other hook(s))" if st.get("exists") else " (no file)")
            for h in st.get("mnemo", []):
                say(f"    {h['event']:17} {h['command']}", ("" if h["runs"] else "  (command not found)", "red"))
        return 0
    path = args.settings or claude.settings_path(args.scope, _root(args))
    if args.hooks_action == "install":
        res = claude.install(path, args.hook_command or claude.default_command(args.scope), _home(args))
    else:
        res = claude.uninstall(path, _home(args))
    if args.json:
        emit_json(res)
        return 0
    say((res["status"], "green"), f": {res['path']}")
    if args.hooks_action == "install":
        say("  runs: ", (f"{res['command']} hook <event>", "bold"), " on ", ", ".join(res["events"]))
        if args.scope == "project" and not args.hook_command and shutil.which("mnemo") is None:
            say(("  note: `mnemo` is not on this PATH; Claude Code must find it there (or use --user, or "
                 "--command /path/to/mnemo)", "yellow"))
    return 0


def _published_status(args) -> dict | None:
    """The agent files `mnemo publish` wrote for this project and whether each is up to date (a dry run through
    the owner), or None when this project never published."""
    from mnemo.cli.caller import close_service, make_context, make_service
    from mnemo.core.files.agent_rules import files_status, state_file

    ctx = make_context(args)
    if not state_file(_home(args), ctx["project_id"]).exists():
        return None
    service = make_service(args)
    try:
        files = files_status(service.publish(ctx, None, True))
    finally:
        close_service(service)
    return {"files": files, "out_of_date": sum(f["state"] != "up to date" for f in files)}


def cmd_hook(args, _service) -> int:
    from mnemo.hooks.entry import main

    return main([args.event])


# -- context --------------------------------------------------------------------------------------------------
def cmd_context(args, service) -> int:
    from mnemo.cli.caller import make_context
    from mnemo.cli.output import emit_json

    budget = args.budget
    if budget is None:
        raw = (environment.raw("MNEMO_CONTEXT_BUDGET") or "").strip()
        try:
            budget = int(raw) if raw else None
        except ValueError as exc:
            raise InvalidInput(f"MNEMO_CONTEXT_BUDGET={raw!r} is not a whole number of tokens",
                               hint="use 100..20000, or pass --budget") from exc
    learn = args.learn or (environment.raw("MNEMO_LEARN_CORRECTIONS") or "").strip().lower() or "off"
    res = service.context(make_context(args), file=args.file, message=args.message, event=args.event,
                          session=args.session, budget=budget, learn=learn, client=args.client, symbol=args.symbol)
    if args.json or args.format == "json":
        emit_json(res)
        return 0
    sys.stdout.write(res.get("markdown") or "")
    sys.stdout.flush()
    return 0


# -- vscode ---------------------------------------------------------------------------------------------------
def extension_dir() -> Path | None:
    """The extension's sources when Mnemo runs from a checkout (`<repo>/vscode-extension`)."""
    here = Path(__file__).resolve().parents[3] / "vscode-extension"
    return here if (here / "package.json").is_file() else None


def find_vsix(args) -> Path:
    if args.vsix:
        if not args.vsix.is_file():
            raise InvalidInput(f"{args.vsix} does not exist", hint="pass the path of a built mnemo .vsix")
        return args.vsix
    env = environment.raw("MNEMO_VSIX")
    if env and Path(env).is_file() and not args.build:
        return Path(env)
    ext = extension_dir()
    built = ext / "dist" / "mnemo.vsix" if ext else None
    if built is not None and built.is_file() and not args.build:
        return built
    if ext is None:
        raise InvalidInput("no built Mnemo .vsix was found and there are no extension sources to build one from",
                           hint="pass --vsix PATH (or set MNEMO_VSIX)")
    npm = shutil.which("npm")
    if npm is None:
        raise InvalidInput(f"no built .vsix in {ext / 'dist'} and npm is not on PATH to build one",
                           hint="install Node.js 20+ and npm, or pass --vsix PATH")
    if not (ext / "node_modules").is_dir():
        _run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], ext, "npm ci")
    _run([npm, "run", "--silent", "package"], ext, "building the .vsix (npm run package)")
    if not built or not built.is_file():
        raise MnemoError(f"the build did not produce {built}", hint=f"run `npm run package` in {ext} and read its "
                                                                   "output")
    return built


def _run(cmd: list[str], cwd: Path | None, what: str) -> str:
    from mnemo.cli.output import say

    say((what + " ...", "dim"), stderr=True)
    try:
        proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=900, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise MnemoError(f"{what} failed: {exc}") from exc
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout or "").strip().splitlines()[-5:]
        raise MnemoError(f"{what} failed (exit {proc.returncode}): " + " / ".join(tail),
                         hint=f"run `{' '.join(cmd)}` yourself to see the whole output")
    return proc.stdout


def find_editor_cli(choice: str | None) -> str:
    if choice:
        found = shutil.which(choice) or (choice if os.access(choice, os.X_OK) else None)
        if not found:
            raise InvalidInput(f"{choice!r} is not an executable on PATH", hint="pass --code with the path of "
                               "`code` or `code-server`")
        return found
    for name in EDITOR_CLIS:
        found = shutil.which(name)
        if found:
            return found
    raise InvalidInput(f"no VS Code command line found on PATH (looked for {', '.join(EDITOR_CLIS)})",
                       hint="in VS Code run \"Shell Command: Install 'code' command in PATH\" from the Command "
                            "Palette, or install code-server, or pass --code /path/to/code; or install the "
                            ".vsix from the Extensions view (… > Install from VSIX)")


def cmd_vscode(args, _service) -> int:
    from mnemo.cli.output import emit_json, say

    cli = find_editor_cli(args.code)   # first: say what is missing before any build
    vsix = find_vsix(args)
    out = _run([cli, "--install-extension", str(vsix), "--force"], None, f"installing {vsix.name} with {cli}")
    res: dict[str, Any] = {"vsix": str(vsix), "cli": cli, "output": out.strip()}
    if args.json:
        emit_json(res)
        return 0
    say(("installed", "green"), f" {vsix} with {cli}")
    if out.strip():
        say((out.strip().splitlines()[-1], "dim"))
    say("Reload the VS Code window; Copilot's agent mode then gets Mnemo's tools and instructions.")
    return 0
