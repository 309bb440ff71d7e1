"""Every `MNEMO_*` variable is declared once (core/environment.py `VARIABLES`, or a store-wide key in
core/store_settings.py `KEYS`), only core/environment.py reads `os.environ` for one, and docs/settings.md's
environment-variable part is what the declarations generate."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

from mnemo.core import environment, store_settings

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "server" / "mnemo"
READER = PACKAGE / "core" / "environment.py"
DECLARED = set(environment.VARIABLES) | {k.env for k in store_settings.KEYS.values()}


def _env_reads(path: Path) -> list[tuple[int, str]]:
    """(line, name) of every `os.environ.get("MNEMO_...")`, `os.environ["MNEMO_..."]`, `os.getenv("MNEMO_...")`."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    out = []
    for node in ast.walk(tree):
        arg = None
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
            f = node.func
            if (f.attr == "get" and isinstance(f.value, ast.Attribute) and f.value.attr == "environ") or \
                    f.attr == "getenv":
                arg = node.args[0]
        elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "environ":
            arg = node.slice
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("MNEMO_"):
            out.append((node.lineno, arg.value))
    return out


def test_only_the_environment_module_reads_a_mnemo_variable():
    files = [p for p in sorted(PACKAGE.rglob("*.py")) if p != READER]
    assert len(files) > 100
    bad = [f"{p.relative_to(ROOT)}:{line} reads {name}" for p in files for line, name in _env_reads(p)]
    assert not bad, "read it through mnemo.core.environment (raw/text/integer/number):\n" + "\n".join(bad)


def test_the_read_scan_sees_each_form(tmp_path):
    f = tmp_path / "m.py"
    f.write_text('import os\na = os.environ.get("MNEMO_X")\nb = os.environ["MNEMO_Y"]\nc = os.getenv("MNEMO_Z")\n'
                 'd = os.environ.get("HOME")\n')
    assert _env_reads(f) == [(2, "MNEMO_X"), (3, "MNEMO_Y"), (4, "MNEMO_Z")]


def test_every_variable_the_package_names_is_declared_once():
    both = set(environment.VARIABLES) & {k.env for k in store_settings.KEYS.values()}
    assert not both, f"declared twice (environment.VARIABLES and store_settings.KEYS): {both}"
    named = set()
    for p in PACKAGE.rglob("*.py"):
        # a name ending in "_" or "*" is a family (`MNEMO_TEAM_*`, `MNEMO_PROJECT_` prefixes), not a variable
        named |= {m for m in re.findall(r"MNEMO_[A-Z0-9_]*[A-Z0-9]\b(?![_*])", p.read_text(encoding="utf-8"))}
    assert len(named) > 50
    assert not named - DECLARED, f"declare these in core/environment.py: {sorted(named - DECLARED)}"
    assert not DECLARED - named, f"declared but never read: {sorted(DECLARED - named)}"


def test_each_declaration_is_complete():
    for v in environment.VARIABLES.values():
        assert v.kind in environment.KINDS and v.read in ("live", "start") and v.doc and v.type, v.name


def test_a_limit_that_is_not_a_number_is_refused_with_what_to_do(monkeypatch):
    monkeypatch.setenv("MNEMO_MAX_TEXT_CHARS", "lots")
    with pytest.raises(ValueError, match=r"MNEMO_MAX_TEXT_CHARS='lots' is not a whole number; unset it"):
        environment.integer("MNEMO_MAX_TEXT_CHARS")
    monkeypatch.setenv("MNEMO_MAX_TEXT_CHARS", "")
    assert environment.integer("MNEMO_MAX_TEXT_CHARS") == 20000
    monkeypatch.setenv("MNEMO_START_TIMEOUT", "2.5")
    assert environment.number("MNEMO_START_TIMEOUT") == 2.5
    monkeypatch.setenv("MNEMO_SNAPSHOT_MAX_RECORDS", "many")  # a lenient read keeps its default
    assert environment.env_int("MNEMO_SNAPSHOT_MAX_RECORDS") == 500_000


def test_the_kinds_the_daemon_and_the_owner_use_come_from_the_declaration():
    from mnemo.daemon.client import REQUEST_SHAPED_ENV

    assert set(REQUEST_SHAPED_ENV) == {"MNEMO_PROJECT_ROOT", "MNEMO_PROJECT_ID", "MNEMO_PROJECT_NAME",
                                       "MNEMO_DEFAULT_BRANCH", "MNEMO_USER", "MNEMO_WRITE_POLICY",
                                       "MNEMO_ON_CONFLICT", "MNEMO_SECRETS"}
    assert "MNEMO_MAX_TEXT_CHARS" in store_settings.OWNER_ENV and "MNEMO_HOME" not in store_settings.OWNER_ENV


def test_docs_settings_md_holds_what_the_declarations_generate():
    doc = (ROOT / "docs" / "settings.md").read_text(encoding="utf-8")
    begin, end = doc.index(store_settings.DOC_BEGIN), doc.index(store_settings.DOC_END) + len(store_settings.DOC_END)
    generated = subprocess.run([sys.executable, "-m", "mnemo.core.store_settings", "--markdown"], capture_output=True,
                               text=True, check=True).stdout
    assert doc[begin:end] + "\n" == generated, (
        "docs/settings.md is not what the declarations say: run `python -m mnemo.core.store_settings --markdown` "
        "and paste it between the markers")
    for name in DECLARED:
        assert f"`{name}`" in generated, name


def test_a_typed_read_names_a_variable_declared_with_its_default():
    """`text`, `integer`, `number`, `env_int`, `env_float` take the default from `environment.VARIABLES`; a store-wide
    key's variable (declared in `KEYS`, whose default is the stored value) is read with `raw`."""
    typed = {"text", "integer", "number", "env_int", "env_float"}
    bad = []
    for p in sorted(PACKAGE.rglob("*.py")):
        for node in ast.walk(ast.parse(p.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and node.args and isinstance(node.args[0], ast.Constant)):
                continue
            f = node.func
            name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
            if name in typed and str(node.args[0].value).startswith("MNEMO_") and \
                    node.args[0].value not in environment.VARIABLES:
                bad.append(f"{p.relative_to(ROOT)}:{node.lineno} {name}({node.args[0].value!r})")
    assert not bad, bad
