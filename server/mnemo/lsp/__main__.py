"""`python -m mnemo.lsp`: the language server without the CLI (same as `mnemo lsp`)."""

from mnemo.lsp.server import main

if __name__ == "__main__":
    raise SystemExit(main())
