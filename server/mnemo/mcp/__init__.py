"""MCP stdio server (official `mcp` SDK) over the Service API: `mnemo mcp`. See `mnemo.mcp.server`."""


def main(*args, **kwargs) -> int:
    from mnemo.mcp.server import main as _main

    return _main(*args, **kwargs)


__all__ = ["main"]
