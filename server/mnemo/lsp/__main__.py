"""`python -m mnemo.lsp`: the language server over stdio without the CLI (same as `mnemo lsp`)."""

from mnemo.lsp.preinit import run

if __name__ == "__main__":
    raise SystemExit(run())
