"""The MCP server's stdio transport: the protocol alone on the real stdout, malformed lines answered instead of
dropped, oversized ones refused without being held in memory."""

import json
import logging
import os
import threading
from typing import IO, Any, cast

import anyio
from mcp.server.mcpserver import MCPServer

from mnemo.core import environment

log = logging.getLogger("mnemo.mcp")


class _WireWriter:
    """The protocol's stdout: whole lines under a lock (the SDK's writer and our error replies share it)."""

    def __init__(self, raw):
        self.raw = raw
        self._lock = threading.Lock()

    def write(self, text: str) -> int:
        data = text.encode("utf-8")
        with self._lock:
            self.raw.write(data)
        return len(text)

    def flush(self) -> None:
        with self._lock:
            self.raw.flush()

    def reply(self, obj: dict[str, Any]) -> None:
        with self._lock:
            self.raw.write((json.dumps(obj) + "\n").encode("utf-8"))
            self.raw.flush()


def _request_id(obj: Any) -> str | int | None:
    rid = obj.get("id") if isinstance(obj, dict) else None
    return rid if isinstance(rid, str | int) and not isinstance(rid, bool) else None


def _error(rid: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def protocol_error(line: str) -> dict[str, Any] | None:
    """The JSON-RPC error reply for a line that is not a valid message (the SDK drops such lines silently, which
    leaves a client waiting forever); None for a valid message. A line the SDK's own parser would refuse (a lone
    surrogate such as `\\udcff`, which Python's json accepts) is answered here too, with the request's id when it
    has one, so the client waiting for that id gets its answer."""
    import mcp_types

    try:
        obj = json.loads(line)
    except (ValueError, RecursionError) as exc:  # RecursionError: a nesting bomb ([[[[...) must not kill us
        return _error(None, -32700, f"Parse error: {exc}")
    rid = _request_id(obj)
    from mnemo.core.text import lone_surrogate

    try:
        lone = lone_surrogate(obj)
    except RecursionError:
        lone = None
    if lone is not None:
        where, ch = lone
        return _error(rid, -32700, f"Parse error: `{where}` holds a lone surrogate (\\u{ord(ch):04x}), half of a "
                                   "UTF-16 pair, which is not valid Unicode; nothing was done. Send the text as "
                                   "valid UTF-8 (or a complete \\ud8xx\\udcxx pair)")
    try:
        mcp_types.jsonrpc_message_adapter.validate_python(obj, by_name=False)
    except Exception:  # noqa: BLE001 - any validation failure is an invalid request
        what = "a JSON object" if not isinstance(obj, dict) else "a JSON-RPC 2.0 request, notification or response"
        return _error(rid, -32600, f"Invalid Request: expected {what}")
    try:  # what the SDK runs on the line: anything it would drop is answered instead
        mcp_types.jsonrpc_message_adapter.validate_json(line, by_name=False)
    except Exception as exc:  # noqa: BLE001
        first: dict[str, Any] = (getattr(exc, "errors", lambda: [{}])() or [{}])[0]
        return _error(rid, -32700, f"Parse error: {first.get('msg') or exc}")
    return None


class _GuardedStdin:
    """Lines from the real stdin; malformed ones are answered with a JSON-RPC error and never reach the SDK."""

    def __init__(self, raw, out: _WireWriter):
        self.raw = raw
        self.out = out
        self.max_line = environment.integer("MNEMO_MCP_MAX_MESSAGE_BYTES")

    def readline(self) -> str:
        while True:
            data = self.raw.readline(self.max_line + 1)
            if not data:
                return ""
            if len(data) > self.max_line and not data.endswith(b"\n"):  # never hold an unbounded line in memory
                while True:
                    more = self.raw.readline(1 << 20)
                    if not more or more.endswith(b"\n"):
                        break
                self.out.reply({"jsonrpc": "2.0", "id": None, "error": {
                    "code": -32600, "message": f"Invalid Request: a message larger than {self.max_line:,} bytes "
                                               "(raise MNEMO_MCP_MAX_MESSAGE_BYTES to allow it)"}})
                continue
            try:
                line = data.decode("utf-8")
            except UnicodeDecodeError as exc:  # answered, never turned into U+FFFD and stored as if sent
                rid = None
                try:
                    rid = _request_id(json.loads(data.decode("utf-8", errors="replace")))
                except (ValueError, RecursionError):
                    pass
                self.out.reply(_error(rid, -32700, f"Parse error: the message is not valid UTF-8 (byte "
                                                   f"0x{data[exc.start]:02x} at offset {exc.start}); nothing was "
                                                   "done. Send the message as UTF-8"))
                continue
            if not line.strip():
                continue
            err = protocol_error(line)
            if err is None:
                return line
            log.info("malformed message answered with %s", err["error"]["code"])
            self.out.reply(err)


async def run_stdio(server: MCPServer) -> None:
    """Serve on stdin/stdout. The real descriptors are moved aside first: fd 1 then points at stderr and fd 0 at
    /dev/null, so a stray print or a child process can never corrupt or steal the protocol stream."""
    from mcp.server.stdio import stdio_server

    wire_out = os.fdopen(os.dup(1), "wb")
    wire_in = os.fdopen(os.dup(0), "rb", buffering=0)
    os.dup2(2, 1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    writer = _WireWriter(wire_out)
    stdin = anyio.wrap_file(cast(IO[str], _GuardedStdin(wire_in, writer)))  # each reads/writes lines like a file
    stdout = anyio.wrap_file(cast(IO[str], writer))
    lowlevel = server._lowlevel_server  # what MCPServer.run_stdio_async runs, over our guarded streams
    async with stdio_server(stdin=stdin, stdout=stdout) as (read_stream, write_stream):
        await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())


__all__ = ["protocol_error", "run_stdio"]
