"""A second real LSP client: headless neovim (Debian's 0.7: `vim.lsp.start_client`) gets a hover with a memory in
it from `python -m mnemo lsp`. Skipped when `nvim` is not installed (`apt-get install neovim`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
from lsp_helpers import POST_COL, POST_LINE, make_workspace, server_env, stop_owner

pytestmark = pytest.mark.timeout(180)

HOVER_LUA = r"""
local root = vim.env.MNEMO_NVIM_ROOT
vim.cmd('edit ' .. vim.fn.fnameescape(root .. '/src/client.py'))
local buf = vim.api.nvim_get_current_buf()
local client_id = vim.lsp.start_client({
  name = 'mnemo',
  cmd = {vim.env.MNEMO_NVIM_PYTHON, '-m', 'mnemo', 'lsp'},
  root_dir = root,
  init_options = {docs = {indexOnStartup = false}, hover = {minConfidence = 0}},
})
vim.lsp.buf_attach_client(buf, client_id)
local text, err = nil, nil
local deadline = vim.loop.now() + 90000
while vim.loop.now() < deadline and not text do
  local results = vim.lsp.buf_request_sync(buf, 'textDocument/hover', {
    textDocument = {uri = vim.uri_from_bufnr(buf)},
    position = {line = tonumber(vim.env.MNEMO_NVIM_LINE), character = tonumber(vim.env.MNEMO_NVIM_COL)},
  }, 10000)
  for _, r in pairs(results or {}) do
    if r.err then err = vim.inspect(r.err) end
    if r.result and r.result.contents then
      text = r.result.contents.value or vim.inspect(r.result.contents)
    end
  end
  if not text then vim.wait(250) end
end
local f = io.open(vim.env.MNEMO_NVIM_OUT, 'w')
f:write(vim.fn.json_encode({hover = text, err = err}))
f:close()
vim.lsp.stop_client(client_id)
vim.wait(300)
vim.cmd('qa!')
"""


def test_neovim_hover_shows_a_memory(tmp_path):
    nvim = shutil.which("nvim")
    if nvim is None:
        pytest.skip("neovim is not installed (Debian: apt-get install -y neovim); CI installs it")
    from mnemo.core.identity import detect_context
    from mnemo.daemon.client import DaemonService

    root = make_workspace(tmp_path)
    home = tmp_path / "home"
    env = server_env(home)
    for key in ("XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_STATE_HOME", "XDG_CACHE_HOME"):
        env[key] = str(tmp_path / "xdg" / key.lower())
    old = dict(os.environ)
    os.environ.update({k: env[k] for k in ("MNEMO_HOME", "MNEMO_EMBEDDER", "MNEMO_USER_SKILLS",
                                           "MNEMO_IDLE_TIMEOUT")})
    try:
        svc = DaemonService(home, client_name="test")
        ctx = detect_context(root).to_dict()
        svc.remember(ctx, "neovim sees this: post must send an idempotency key",
                     anchors=[{"path": "src/client.py", "symbol": "PaymentsClient.post"}])
        svc.close()
        script = tmp_path / "hover.lua"
        script.write_text(HOVER_LUA)
        out = tmp_path / "hover.json"
        env.update({"MNEMO_NVIM_ROOT": str(root), "MNEMO_NVIM_PYTHON": sys.executable, "MNEMO_NVIM_OUT": str(out),
                    "MNEMO_NVIM_LINE": str(POST_LINE), "MNEMO_NVIM_COL": str(POST_COL)})
        proc = subprocess.run([nvim, "--headless", "-u", "NONE", "-i", "NONE", "-n", "-c", f"luafile {script}"],
                              env=env, cwd=root, capture_output=True, text=True, timeout=150)
        assert out.exists(), f"neovim wrote no result (rc {proc.returncode}): {proc.stderr[-2000:]}"
        result = json.loads(out.read_text())
        assert result.get("hover"), f"no hover from neovim: {result}"
        assert "post must send an idempotency key" in result["hover"]
        assert "PaymentsClient.post" in result["hover"] and "anchored here" in result["hover"]
    finally:
        os.environ.clear()
        os.environ.update(old)
        stop_owner(home)
