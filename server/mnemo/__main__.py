"""`python -m mnemo` -> the CLI."""

from mnemo.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
