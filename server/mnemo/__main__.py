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
    if sys.argv[1:3] == ["daemon", "run"]:
        # how a client starts the owner: straight to it, without building the CLI's parser of every command
        # (~0.2 s of CPU on a busy machine, on the path of every cold start; issue 22)
        from mnemo.daemon.server import main as owner_main

        code = owner_main(sys.argv[3:])
        if code is not None:
            raise SystemExit(code)
    from mnemo.cli import main

    raise SystemExit(main())
