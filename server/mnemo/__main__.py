"""`python -m mnemo` -> the CLI."""

import sys

if __name__ == "__main__":
    if sys.argv[1:] in (["lsp"], ["lsp", "--stdio"]):
        # what editors run: straight to the language server's pre-handshake, without the CLI's argparse/pathlib
        from mnemo.lsp.preinit import run

        raise SystemExit(run())
    if sys.argv[1:2] == ["hook"] and sys.argv[2:3] not in (["--help"], ["-h"]):
        # what an agent runs on every prompt and file: straight to the hook, without the CLI's modules
        from mnemo.hooks.entry import main as hook_main

        raise SystemExit(hook_main(sys.argv[2:]))
    from mnemo.cli import main

    raise SystemExit(main())
