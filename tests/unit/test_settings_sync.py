"""The extension's package.json `contributes.configuration` and `mnemo.editor_settings.SETTINGS_SCHEMA` agree.

package.json is the one source of the editor settings; the Python side mirrors it with typed defaults. This test
fails when a key, type, default, enum, range, scope or description differs on either side.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mnemo.editor_settings import SETTINGS_SCHEMA, Settings, parse_settings, to_dict

PACKAGE_JSON = Path(__file__).resolve().parents[2] / "vscode-extension" / "package.json"


@pytest.fixture(scope="module")
def properties() -> dict[str, dict]:
    data = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))
    config = data["contributes"]["configuration"]
    # VS Code allows one object or a list of sections; Mnemo keeps one section today but accept both.
    sections = config if isinstance(config, list) else [config]
    out: dict[str, dict] = {}
    for section in sections:
        for key, entry in section.get("properties", {}).items():
            assert key not in out, f"{key} is declared twice in package.json"
            out[key] = entry
    return out


def test_same_keys(properties: dict[str, dict]) -> None:
    only_json = sorted(set(properties) - set(SETTINGS_SCHEMA))
    only_python = sorted(set(SETTINGS_SCHEMA) - set(properties))
    assert not only_json, f"in package.json but not in mnemo.editor_settings: {only_json}"
    assert not only_python, f"in mnemo.editor_settings but not in package.json: {only_python}"


@pytest.mark.parametrize("key", sorted(SETTINGS_SCHEMA))
def test_same_type_default_and_constraints(properties: dict[str, dict], key: str) -> None:
    if key not in properties:
        pytest.fail(f"{key} is missing from package.json")
    ours, theirs = properties[key], SETTINGS_SCHEMA[key]
    assert ours["type"] == theirs["type"], f"{key}: type"
    assert ours["default"] == theirs["default"], f"{key}: default"
    assert type(ours["default"]) is type(theirs["default"]) or (
        theirs["type"] == "number" and isinstance(ours["default"], int | float)
    ), f"{key}: default's JSON type"
    for constraint in ("enum", "minimum", "maximum", "scope", "items"):
        assert ours.get(constraint) == theirs.get(constraint), f"{key}: {constraint}"
    description = ours.get("markdownDescription", ours.get("description"))
    assert description == theirs["description"], f"{key}: description"


def test_package_json_defaults_parse_to_python_defaults(properties: dict[str, dict]) -> None:
    """What VS Code sends when nothing is configured is exactly the typed defaults, with no problems."""
    sent = {key: entry["default"] for key, entry in properties.items()}
    settings, problems = parse_settings(sent)
    assert problems == []
    assert settings == Settings()
    assert to_dict(settings) == sent


def test_restricted_settings_exist(properties: dict[str, dict]) -> None:
    """Settings that choose what is executed are ignored in untrusted workspaces; they must be real keys."""
    data = json.loads(PACKAGE_JSON.read_text(encoding="utf-8"))
    untrusted = data["capabilities"]["untrustedWorkspaces"]
    assert untrusted["supported"] == "limited"
    for key in untrusted["restrictedConfigurations"]:
        assert key in properties, f"restricted setting {key} is not declared"
