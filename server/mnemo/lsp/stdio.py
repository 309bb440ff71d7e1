"""Framing of the language server's stdio, standard library only (the pre-handshake uses it before pygls loads)."""

from __future__ import annotations

import time

from mnemo.core import environment


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


__all__ = ["ResyncingStdin"]
