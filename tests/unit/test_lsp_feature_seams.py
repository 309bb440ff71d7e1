"""The language server's feature seams (`mnemo.lsp.feature`, `mnemo.lsp.setup`, `mnemo.lsp.server`), in process:
features register through `LanguageFeature` and see the server only through the typed `Server` handle (no feature
module imports the server), the server provides what that handle promises, each LSP method is registered once and
fanned out in order with a failing feature skipped, and a registration that differs from `capabilities.py` stops
the server from starting."""

from __future__ import annotations

import ast
import asyncio
import inspect
import logging
from pathlib import Path
from typing import Protocol

import pytest

import mnemo.lsp
from mnemo.lsp import capabilities, feature, setup
from mnemo.lsp.feature import LanguageFeature
from mnemo.lsp.features.documents import DocumentsFeature
from mnemo.lsp.language_server import MnemoLanguageServer
from mnemo.lsp.server import FEATURES, create_server

LSP_DIR = Path(mnemo.lsp.__file__).parent
SERVER_SIDE = {"mnemo.lsp.server", "mnemo.lsp.language_server", "mnemo.lsp.setup"}


def _imports(path: Path) -> set[str]:
    """Every module `path` imports, inside functions included (TYPE_CHECKING blocks too: stricter)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


def test_no_feature_imports_the_server():
    """The server imports the features, never the other way round (`feature.py` is the features' seam)."""
    modules = [*sorted((LSP_DIR / "features").glob("*.py")), LSP_DIR / "feature.py", LSP_DIR / "editor.py"]
    for path in modules:
        assert not _imports(path) & SERVER_SIDE, (path.name, _imports(path) & SERVER_SIDE)
    assert {f"mnemo.lsp.features.{m}" for m in ("hover", "code_lens", "code_actions", "commands", "sidebar")} <= \
        _imports(LSP_DIR / "server.py")


def _members(proto: type) -> dict[str, object]:
    names = {n for klass in proto.__mro__ if klass not in (Protocol, object) for n in vars(klass)
             if not n.startswith("_")} | set(getattr(proto, "__annotations__", {}))
    return {n: inspect.getattr_static(proto, n, None) for n in sorted(names)}


@pytest.mark.parametrize(("proto", "impl"), [(feature.Server, MnemoLanguageServer),
                                             (feature.Documents, DocumentsFeature)])
def test_the_server_provides_what_the_handle_promises(proto, impl):
    """Every member of the typed handle exists on the real class, methods with the same parameters."""
    server = create_server()
    obj = server if impl is MnemoLanguageServer else server.documents
    assert isinstance(obj, impl)
    for name, declared in _members(proto).items():
        # (pygls' properties such as `client_capabilities` raise before `initialize`: looked up on the class)
        assert hasattr(type(obj), name) or name in vars(obj), \
            f"{impl.__name__} has no `{name}` ({proto.__name__} promises it)"
        if inspect.isfunction(declared):
            real = inspect.signature(getattr(obj, name))
            promised = inspect.signature(declared)
            assert list(real.parameters) == [p for p in promised.parameters if p != "self"], name
            assert inspect.iscoroutinefunction(getattr(obj, name)) == inspect.iscoroutinefunction(declared), name


def test_features_register_in_order_each_lsp_method_once():
    server = create_server()
    assert [type(f) for f in server.features] == [DocumentsFeature, *FEATURES]
    assert server.features[0] is server.documents
    assert all(isinstance(f, LanguageFeature) and f.server is server for f in server.features)
    fm = server.protocol.fm
    assert {m for m, _hook, _combine in setup.FANNED_OUT} <= set(fm.features)
    assert list(fm.commands) == list(capabilities.COMMANDS)
    for _method, hook, _combine in setup.FANNED_OUT:  # every fanned-out hook is a LanguageFeature hook
        assert inspect.iscoroutinefunction(getattr(LanguageFeature, hook)), hook


class _Broken(LanguageFeature):
    async def hover(self, params):
        raise RuntimeError("this feature is broken")


class _Answers(LanguageFeature):
    async def hover(self, params):
        return f"answer to {params}"

    async def code_action(self, params):
        return ["b"]


class _AlsoActs(LanguageFeature):
    async def code_action(self, params):
        return ["a"]


def test_fan_out_skips_a_failing_feature_and_combines_answers(caplog):
    server = MnemoLanguageServer()
    for cls in (_Broken, _AlsoActs, _Answers):
        server.add_feature(cls(server))
    combine = {hook: c for _m, hook, c in setup.FANNED_OUT}
    with caplog.at_level(logging.ERROR, logger="mnemo.lsp"):
        hovers = asyncio.run(server.fan_out("hover", "p"))
    assert hovers == [None, "answer to p"]  # the broken one is skipped, the base hook answers None
    assert "_Broken.hover failed" in caplog.text
    assert combine["hover"](hovers, "p") == "answer to p"
    assert combine["code_action"](asyncio.run(server.fan_out("code_action", "p")), "p") == ["a", "b"]
    assert combine["code_lens_resolve"]([None, None], "the lens") == "the lens"


def test_a_registration_not_declared_stops_the_server(monkeypatch):
    class _Extra(LanguageFeature):
        def commands(self):
            return {"mnemo.undeclared": self.run}

        async def run(self, p):
            return None

    monkeypatch.setattr("mnemo.lsp.server.FEATURES", (*FEATURES, _Extra))
    with pytest.raises(RuntimeError, match="mnemo.undeclared"):
        create_server()


def _server_uses(path: Path) -> tuple[set[str], set[str]]:
    """What a module reads of `self.server` / `server`, and of `<server>.documents`."""
    def is_server(node: ast.AST) -> bool:
        return (isinstance(node, ast.Name) and node.id == "server") or (
            isinstance(node, ast.Attribute) and node.attr == "server" and isinstance(node.value, ast.Name)
            and node.value.id == "self")

    used, docs = set(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Attribute) and is_server(node.value):
            used.add(node.attr)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Attribute) \
                and node.value.attr == "documents" and is_server(node.value.value):
            docs.add(node.attr)
    return used, docs


def test_features_use_only_the_typed_handle():
    """A feature reaching past `Server` (or `Documents`) for something the server happens to have fails here."""
    for path in [*sorted((LSP_DIR / "features").glob("*.py")), LSP_DIR / "editor.py"]:
        used, docs = _server_uses(path)
        assert used <= set(_members(feature.Server)), (path.name, used - set(_members(feature.Server)))
        assert docs <= set(_members(feature.Documents)), (path.name, docs - set(_members(feature.Documents)))
