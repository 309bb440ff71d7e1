"""`mnemo config list|get|set|unset`: the store-wide settings in `<store>/config.json` (core/store_settings.py)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from mnemo.cli.output import emit_json
from mnemo.core import environment


def register(sub: argparse._SubParsersAction, common) -> None:
    cfg = sub.add_parser("config", help="store-wide settings (decay, backups, idle timeout, model ...): "
                                        "list, get, set, unset")
    csub = cfg.add_subparsers(dest="config_command", metavar="ACTION", required=True)
    p = csub.add_parser("list", help="every store-wide setting: value, where it comes from, default")
    common(p)
    p.set_defaults(func=cmd_list, needs_service=False)
    p = csub.add_parser("get", help="one setting's value and where it comes from")
    p.add_argument("key")
    common(p)
    p.set_defaults(func=cmd_get, needs_service=False)
    p = csub.add_parser("set", help="store a setting for every client of this store (validated)")
    p.add_argument("key")
    p.add_argument("value")
    common(p)
    p.set_defaults(func=cmd_set, needs_service=False)
    p = csub.add_parser("unset", help="back to the default")
    p.add_argument("key")
    common(p)
    p.set_defaults(func=cmd_unset, needs_service=False)


def _home(args) -> Path:
    from mnemo.daemon.paths import default_home

    return Path(args.home) if getattr(args, "home", None) else default_home()


def running_owner(home: Path) -> dict[str, Any] | None:
    """The running owner's `health` (its applied settings), or None; never starts one."""
    from mnemo.core.errors import MnemoError
    from mnemo.daemon.client import DaemonService

    svc = DaemonService.open(home, autostart=False, client_name="config", on_warning=lambda _m: None)
    try:
        svc.connect()
        return dict(svc.owner)
    except (MnemoError, OSError):
        return None
    finally:
        svc.close()


def _team_row(home: Path) -> dict[str, Any]:
    from mnemo.core.team.address import load_settings

    s = load_settings(home)
    return {"value": s.url, "source": {"env": "env", "file": "file"}.get(s.source, "default"),
            "note": "set with `mnemo team connect URL` (it checks the server and keeps the token in team.json)"}


def cmd_list(args, _service) -> int:
    from mnemo.core import store_settings as config

    home = _home(args)
    owner = running_owner(home)
    rows = config.report(home, owner)
    team = _team_row(home)
    if args.json:
        emit_json({"home": str(home), "file": str(config.path(home)), "owner_pid": (owner or {}).get("pid"),
                   "settings": rows, "team_url": team, "not_applied": config.mismatches(owner or {})})
        return 0
    out = [f"Store-wide settings of {home} (stored in {config.path(home)}); "
           + (f"the running owner (pid {owner.get('pid')}) applies them." if owner else "no owner is running.")]
    for name, r in rows.items():
        extra = "" if r["applies"] == "live" else "  [applies at the owner's next start]"
        out.append(f"  {name} = {config.show(r['value'])}  ({r['source']}; default {config.show(r['default'])};"
                   f" env {r['env']}){extra}")
        out.extend(f"      note: {n}" for n in r["notes"])
    out.append(f"  team_url = {team['value'] or '-'}  ({team['source']}; {team['note']})")
    out.extend(f"warning: {m}" for m in config.mismatches(owner or {}))
    sys.stdout.write("\n".join(out) + "\n")
    return 0


def cmd_get(args, _service) -> int:
    from mnemo.core import store_settings as config

    home = _home(args)
    config.key(args.key)  # unknown keys are refused with the list of known ones
    row = config.report(home, running_owner(home))[args.key]
    if args.json:
        emit_json({"key": args.key, **row})
    else:
        sys.stdout.write(f"{config.show(row['value'])}\n")
        for n in row["notes"]:
            sys.stderr.write(f"note: {n}\n")
    return 0


def _after_write(home: Path, name: str) -> list[str]:
    """What happens to the change now: applied by the running owner, or when it restarts; env overrides."""

    from mnemo.core import store_settings as config

    k = config.key(name)
    notes = []
    owner = running_owner(home)
    if owner is not None:
        theirs = ((owner.get("config") or {}).get("settings") or {}).get(name) or {}
        if k.applies == "restart":
            notes.append(f"the running owner (pid {owner.get('pid')}) applies it at its next start: stop it with "
                         "`mnemo daemon stop` (the next command starts a new one)")
        elif theirs.get("source") == "env":
            notes.append(f"the running owner (pid {owner.get('pid')}) has {k.env} in its environment, which "
                         "overrides the stored value: stop it (`mnemo daemon stop`) and start it without "
                         f"{k.env}")
        elif theirs.get("value") == config.stored(name, home):
            notes.append(f"applied by the running owner (pid {owner.get('pid')})")
        else:
            notes.append(f"the running owner (pid {owner.get('pid')}) reports {name} = "
                         f"{config.show(theirs.get('value'))}: see `mnemo config list`")
    if environment.raw(k.env):
        notes.append(f"{k.env} is set in this environment and overrides the stored value for processes "
                     "started from here")
    return notes


def cmd_set(args, _service) -> int:
    from mnemo.core import store_settings as config

    home = _home(args)
    val = config.set_value(home, args.key, args.value)
    notes = _after_write(home, args.key)
    if args.json:
        emit_json({"key": args.key, "value": val, "file": str(config.path(home)), "notes": notes})
    else:
        sys.stdout.write(f"{args.key} = {config.show(val)} (saved in {config.path(home)})\n")
        sys.stdout.writelines(f"  {n}\n" for n in notes)
    return 0


def cmd_unset(args, _service) -> int:
    from mnemo.core import store_settings as config

    home = _home(args)
    config.unset(home, args.key)
    notes = _after_write(home, args.key)
    default = config.KEYS[args.key].default
    if args.json:
        emit_json({"key": args.key, "value": default, "file": str(config.path(home)), "notes": notes})
    else:
        sys.stdout.write(f"{args.key} is back to its default ({config.show(default)})\n")
        sys.stdout.writelines(f"  {n}\n" for n in notes)
    return 0
