"""Minimal raw JSON-RPC clients over a child's stdio, for protocol fuzzing: LSP framing (Content-Length) and MCP
framing (one JSON object per line). They write arbitrary bytes, so malformed input really reaches the server."""

from __future__ import annotations

import json
import os
import select
import subprocess
import tempfile
import time
from typing import Any


class RawServer:
    def __init__(self, argv: list[str], env: dict, cwd: str, framing: str):
        self.framing = framing
        # stderr goes to a file: a pipe nobody reads fills up (64 KiB of tracebacks) and blocks the server
        self.stderr = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr,
                                     env=env, cwd=cwd)
        os.set_blocking(self.proc.stdout.fileno(), False)
        self._buf = b""
        self._ids = 0
        self.received: list[dict] = []

    # -- writing ---------------------------------------------------------------------------------------------
    def send_raw(self, data: bytes) -> None:
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def frame(self, body: bytes) -> bytes:
        if self.framing == "lsp":
            return b"Content-Length: %d\r\n\r\n" % len(body) + body
        return body.replace(b"\n", b" ") + b"\n"

    def send(self, obj: Any) -> None:
        self.send_raw(self.frame(json.dumps(obj).encode()))

    def request(self, method: str, params: Any = None, timeout: float = 20.0) -> dict:
        self._ids += 1
        rid = f"ok-{self._ids}"
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return self.wait_for(lambda m: m.get("id") == rid, timeout)

    def notify(self, method: str, params: Any = None) -> None:
        msg = {"jsonrpc": "2.0", "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)

    # -- reading ---------------------------------------------------------------------------------------------
    def _pump(self, timeout: float) -> None:
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if r:
            chunk = self.proc.stdout.read()
            if chunk:
                self._buf += chunk
        while True:
            msg = self._parse_one()
            if msg is None:
                return
            self.received.append(msg)

    def _parse_one(self) -> dict | None:
        if self.framing == "lsp":
            head_end = self._buf.find(b"\r\n\r\n")
            if head_end < 0:
                return None
            length = None
            for line in self._buf[:head_end].split(b"\r\n"):
                k, _, v = line.partition(b":")
                if k.strip().lower() == b"content-length":
                    length = int(v.strip())
            if length is None or len(self._buf) < head_end + 4 + length:
                return None
            body = self._buf[head_end + 4: head_end + 4 + length]
            self._buf = self._buf[head_end + 4 + length:]
        else:
            nl = self._buf.find(b"\n")
            if nl < 0:
                return None
            body, self._buf = self._buf[:nl], self._buf[nl + 1:]
            if not body.strip():
                return {}
        try:
            return json.loads(body)
        except ValueError:
            return {"_unparseable": body[:200].decode("utf-8", "replace")}

    def wait_for(self, pred, timeout: float) -> dict:
        deadline = time.monotonic() + timeout
        seen = 0
        while time.monotonic() < deadline:
            for m in self.received[seen:]:
                if pred(m):
                    self.received.remove(m)
                    return m
            seen = len(self.received)
            if self.proc.poll() is not None:
                raise AssertionError(f"server exited with {self.proc.returncode}: {self.stderr_tail()}")
            self._pump(0.05)
        raise TimeoutError(f"no answer within {timeout} s")

    def drain(self, seconds: float = 0.05) -> None:
        self._pump(seconds)

    def stderr_tail(self, n: int = 2000) -> str:
        self.stderr.seek(0)
        return self.stderr.read()[-n:].decode("utf-8", "replace")

    def alive(self) -> bool:
        return self.proc.poll() is None

    def close(self) -> None:
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(timeout=10)
        for f in (self.proc.stdout, self.stderr):
            try:
                f.close()
            except OSError:
                pass
