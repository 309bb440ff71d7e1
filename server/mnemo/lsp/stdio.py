"""Framing of the language server's stdio, standard library only (the pre-handshake uses it before pygls loads)."""

from __future__ import annotations

import os
import time

from mnemo.core import environment

HEADER = b"Content-Length: %d\r\nContent-Type: application/vscode-jsonrpc; charset=utf-8\r\n\r\n"


def frame(body: bytes) -> bytes:
    """`body` framed as pygls frames what it writes."""
    return HEADER % len(body) + body


class ResyncingStdin:
    """stdin for pygls's reader, hardened against malformed framing (tests/fault/test_protocol_fuzz.py).

    pygls only accepts a header line that is exactly `Content-Length: N`; what is left of a malformed message (a
    body without a newline) glues itself to the next header, so one bad message made every later one unreadable.
    This reader parses the raw stream itself and hands pygls only well-formed frames: a `Content-Length` found
    anywhere in a line (the latest one wins) starts a message, header lines are read with a bounded length, a
    blank line without a usable length is skipped, and a body larger than MNEMO_LSP_MAX_MESSAGE_BYTES (default
    64 MiB) is read and discarded in chunks (logged with the limit and how to raise it), never held in memory.
    """

    HEADER = b"Content-Length:"

    def __init__(self, raw, max_message: int | None = None):
        self.raw = raw
        self.max_message = max_message or environment.integer("MNEMO_LSP_MAX_MESSAGE_BYTES")
        self._out = b""
        self.frame_at = 0.0  # when the latest frame was read off the pipe (`time.perf_counter()`): bench traces

    def _next_frame(self) -> bytes:
        while True:
            length: int | None = None
            while True:
                line = self.raw.readline(64 * 1024)
                if not line:
                    return b""  # EOF
                i = line.find(self.HEADER)
                if i >= 0:
                    try:
                        length = int(line[i + len(self.HEADER):].strip())
                    except ValueError:
                        length = None
                    if length is not None and length < 0:
                        length = None
                    continue
                if line.strip() == b"" and line.endswith(b"\n"):
                    if length is not None:
                        break
                    continue  # a blank line without a usable header
                # another header (Content-Type) or garbage: ignored
            if length > self.max_message:
                import logging  # lazily: rare, and the pre-handshake's main thread imports nothing pygls imports

                logging.getLogger("mnemo.lsp").warning(
                    "an LSP message of %d bytes is over the limit of %d bytes and was dropped (raise "
                    "MNEMO_LSP_MAX_MESSAGE_BYTES to allow it)", length, self.max_message)
                left = length
                while left > 0:
                    chunk = self.raw.read(min(left, 1 << 20))
                    if not chunk:
                        return b""
                    left -= len(chunk)
                continue
            body = self.raw.read(length) if length else b""
            if length and len(body) < length:
                return b""  # EOF inside a body
            self.frame_at = time.perf_counter()
            return b"Content-Length: %d\r\n\r\n" % len(body) + body

    def next_frame(self) -> bytes:
        """The next well-formed frame (a `Content-Length` header, a blank line, the body), b"" at EOF: exactly
        what pygls would have read next."""
        return self._next_frame()

    @property
    def buffered(self) -> int:
        """Bytes of the current frame not read yet (read without blocking)."""
        return len(self._out)

    def push_front(self, frame: bytes) -> None:
        """Make `frame` the next bytes pygls reads (the pre-handshake's replay)."""
        self._out = frame + self._out

    def readline(self, *_args) -> bytes:
        if not self._out:
            self._out = self._next_frame()
        nl = self._out.find(b"\n")
        cut = len(self._out) if nl < 0 else nl + 1
        line, self._out = self._out[:cut], self._out[cut:]
        return line

    def read(self, n: int = -1) -> bytes:
        if n < 0:
            out, self._out = self._out, b""
            return out
        out, self._out = self._out[:n], self._out[n:]
        return out

    def __getattr__(self, name: str):
        return getattr(self.raw, name)


class FdReader:
    """stdin read with `os.read` and a buffer of its own: `readline(limit)` and `read(n)` as a binary file has them.

    The pre-handshake reads stdin in a daemon thread; a thread blocked inside a `BufferedReader` (sys.stdin.buffer)
    when the interpreter exits makes it abort ("could not acquire lock ... at interpreter shutdown", exit code -6).
    Reading the file descriptor directly holds no such lock."""

    def __init__(self, fd: int, chunk: int = 1 << 16):
        self.fd = fd
        self.chunk = chunk
        self._buf = bytearray()
        self._eof = False

    def _fill(self) -> bool:
        if self._eof:
            return False
        try:
            data = os.read(self.fd, self.chunk)
        except OSError:
            data = b""
        if not data:
            self._eof = True
            return False
        self._buf += data
        return True

    def readline(self, limit: int = -1) -> bytes:
        start = 0
        while True:
            nl = self._buf.find(b"\n", start)
            if nl >= 0 and (limit < 0 or nl < limit):
                cut = nl + 1
                break
            if 0 <= limit <= len(self._buf):
                cut = limit
                break
            start = len(self._buf)
            if not self._fill():
                cut = len(self._buf)
                break
        line = bytes(self._buf[:cut])
        del self._buf[:cut]
        return line

    def read(self, n: int = -1) -> bytes:
        while (n < 0 or len(self._buf) < n) and self._fill():
            pass
        cut = len(self._buf) if n < 0 else min(n, len(self._buf))
        data = bytes(self._buf[:cut])
        del self._buf[:cut]
        return data

    def fileno(self) -> int:
        return self.fd

    def close(self) -> None:
        pass


class QueuedStdin(ResyncingStdin):
    """pygls' stdin after the pre-handshake served the session for a while (`preinit.serve_until_loaded`): first
    `held` (the frames the client sent meanwhile, in order), then the frames the stdin thread keeps putting into
    `events` as ("frame", bytes) (other events are skipped; b"" is the end, for good). `drop(frame)` True leaves a
    frame out (a cancel of a request pygls never saw)."""

    def __init__(self, raw, events, held: list[bytes], drop=None, max_message: int | None = None):
        super().__init__(raw, max_message)
        self.events = events
        self.held = list(held)
        self.drop = drop
        self._eof = False

    def _next_frame(self) -> bytes:
        while True:
            if self.held:
                data = self.held.pop(0)
            elif self._eof:
                return b""
            else:
                kind, data = self.events.get()
                if kind != "frame":
                    continue
            if not data:
                self._eof = True
                return b""
            if self.drop is not None and self.drop(data):
                continue
            return data


__all__ = ["HEADER", "FdReader", "QueuedStdin", "ResyncingStdin", "frame"]
