"""`remember`'s options are declared once (core/api_types/requests.py): the service's signature, the CLI's options
and the MCP tool's input schema are built from that declaration and cannot drift from it - a field added to it
appears in `mnemo remember --help` and in the MCP schema, with its default and help."""

from __future__ import annotations

import asyncio
import contextlib
import io
import re
from typing import Annotated

import pytest
from mcp.server.mcpserver import MCPServer

from conftest import run_cli
from mnemo import api
from mnemo.cli import build_parser
from mnemo.core.api_types import requests
from mnemo.core.api_types.requests import Param, RememberOptions
from mnemo.core.errors import InvalidInput
from mnemo.mcp.tools import add_tools


def remember_help() -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        build_parser().parse_args(["remember", "--help"])
    return " ".join(out.getvalue().split())  # argparse wraps the help text


def mcp_schema(tool: str) -> dict:
    server = MCPServer("test")
    add_tools(server, backend=None, workspace=None)
    return next(t for t in asyncio.run(server.list_tools()) if t.name == tool).input_schema


def test_the_cli_offers_every_declared_cli_option_with_its_help_and_default(tmp_path):
    r = run_cli("remember", "--help", home=tmp_path / "home")  # the real command line
    assert r.returncode == 0, r.stderr
    text = " ".join(r.stdout.split())
    for f in requests.offered(RememberOptions, "cli"):
        assert f"--{f.name.replace('_', '-')}" in text, f.name
        assert " ".join(f.param.help.split()) in text, f.name
        if f.param.default is not None:
            assert f"(default {f.param.default})" in text, f.name
    for f in requests.fields(RememberOptions):  # and nothing the declaration keeps from the command line
        if "cli" not in f.param.on:
            assert f"--{f.name.replace('_', '-')} " not in text, f.name


def test_the_mcp_schema_holds_every_declared_mcp_option_with_its_help_default_and_bounds():
    props = mcp_schema("remember")["properties"]
    offered = requests.offered(RememberOptions, "mcp")
    assert set(props) == {"text", "file"} | {f.name for f in offered}
    for f in offered:
        assert props[f.name]["description"] == f.param.help
        assert props[f.name]["default"] == f.param.default
        if f.param.choices:
            assert props[f.name]["enum"] == list(f.param.choices)
        if f.param.ge is not None:
            assert props[f.name]["minimum"] == f.param.ge and props[f.name]["maximum"] == f.param.le
    note = mcp_schema("remember_batch")["$defs"]["BatchNoteIn"]["properties"]
    assert set(note) == {"text"} | {f.name for f in requests.offered(requests.NoteFields, "mcp")}


def test_the_service_signature_is_the_declaration():
    sig = api.signature("remember")
    assert list(sig.parameters) == ["ctx", "text", *(f.name for f in requests.fields(RememberOptions))]
    for f in requests.fields(RememberOptions):
        assert sig.parameters[f.name].default == f.param.default
        assert sig.parameters[f.name].kind is sig.parameters[f.name].KEYWORD_ONLY
    assert api.call_arguments("remember", ({"project_id": "p"}, "x"), {"importance": 0.9}) == {
        "ctx": {"project_id": "p"}, "text": "x", "importance": 0.9}
    with pytest.raises(InvalidInput, match="remember does not take `colour`"):
        api.call_arguments("remember", ({"project_id": "p"}, "x"), {"colour": "red"})


def test_the_core_fills_the_declared_defaults_and_refuses_an_undeclared_option():
    assert requests.filled(RememberOptions, {"kind": "lesson"}) == {
        **{f.name: f.param.default for f in requests.fields(RememberOptions)}, "kind": "lesson"}
    with pytest.raises(InvalidInput) as err:
        requests.filled(RememberOptions, {"colour": "red"})
    assert "importance" in err.value.hint  # it names what is accepted


def test_a_field_added_to_the_declaration_appears_on_every_surface(monkeypatch):
    class Extended(RememberOptions, total=False):
        colour: Annotated[str, Param("red", "the colour of the note, for the drift test", choices=("red", "blue"))]

    assert "--colour" not in remember_help()
    monkeypatch.setattr(requests, "RememberOptions", Extended)
    text = remember_help()
    assert re.search(r"--colour \{red,blue\} the colour of the note, for the drift test; one of red, blue "
                     r"\(default red\)", text), text
    prop = mcp_schema("remember")["properties"]["colour"]
    assert prop["description"] == "the colour of the note, for the drift test"
    assert prop["default"] == "red" and prop["enum"] == ["red", "blue"]
    parsed = build_parser().parse_args(["remember", "x", "--colour", "blue"])
    from mnemo.cli.options import option_values

    assert option_values(parsed, Extended)["colour"] == "blue"  # and the parsed value goes to the service
