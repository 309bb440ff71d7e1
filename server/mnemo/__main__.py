"""`python -m mnemo` -> the CLI."""

import sys

if __name__ == "__main__":
    if sys.argv[1:] in (["lsp"], ["lsp", "--stdio"]):
        # what editors run: straight to the language server's pre-handshake, without the CLI's argparse/pathlib
        from mnemo.lsp.preinit import run

        raise SystemExit(run())
    from mnemo.cli import main

    raise SystemExit(main())
