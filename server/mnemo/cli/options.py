"""A command's options built from a request's declaration (core/api_types/requests.py): every field offered on the
CLI becomes `--name` with its declared default, help and choices, and the parsed values go back to the service
under the same names. Adding a field to the declaration adds it here."""

from __future__ import annotations

import argparse
from types import UnionType
from typing import Any, Union, get_args, get_origin

from mnemo.cli.edit_cmd import TagsAction
from mnemo.core.api_types.requests import Field, offered


def _base(tp: Any) -> Any:
    """`X | None` -> X."""
    if get_origin(tp) in (Union, UnionType):
        args = [a for a in get_args(tp) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return tp


def _help(f: Field) -> str:
    p = f.param
    out = p.help
    if p.choices and len(p.choices) > 1:
        out += f"; one of {', '.join(p.choices)}"
    if p.default not in (None, [], ""):
        out += f" (default {p.default})"
    return out.replace("%", "%%")  # argparse formats help with %


def add_options(parser: argparse.ArgumentParser, decl: type) -> None:
    """`--name` for every field of `decl` the CLI offers (a list of words: `--tag a --tag b`, `--tags a,b`)."""
    for f in offered(decl, "cli"):
        flag = "--" + f.name.replace("_", "-")
        tp = _base(f.type)
        if get_origin(tp) is list and get_args(tp) == (str,):
            singular = flag[:-1] if flag.endswith("s") else flag
            parser.add_argument(*dict.fromkeys((singular, flag)), action=TagsAction, dest=f.name,
                                default=f.param.default, metavar=f"{f.name[:-1].upper()}[,{f.name[:-1].upper()}]",
                                help=_help(f) + f" ({singular} or {flag}, repeatable, comma-separated)")
        elif tp in (str, int, float):
            parser.add_argument(flag, dest=f.name, type=tp, default=f.param.default, choices=f.param.choices,
                                help=_help(f))
        else:  # refused, not skipped: a field the CLI cannot offer is declared without "cli"
            raise TypeError(f"the CLI cannot offer {f.name}: {f.type!r}; declare it with on=('mcp',) or on=()")


def option_values(args: argparse.Namespace, decl: type) -> dict[str, Any]:
    """The values of the options `add_options` added, by their declared names."""
    return {f.name: getattr(args, f.name) for f in offered(decl, "cli")}
