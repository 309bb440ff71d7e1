"""A strict JSON parser that remembers where every value is, so a settings file can be edited in place.

`json.loads` + `json.dumps` would rewrite a whole file (indentation, escapes, number forms, key spacing); editing
someone's settings must touch only the bytes of what is added or removed. `parse` returns the document as `Node`s
with their character spans; `insert`/`remove` helpers are in `mnemo.hooks.claude`. RFC 8259 only (no comments, no
trailing commas); a syntax error says the line and column.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

WS = " \t\n\r"
MAX_DEPTH = 200


class JSONSyntaxError(ValueError):
    def __init__(self, msg: str, text: str, pos: int):
        line = text.count("\n", 0, pos) + 1
        col = pos - (text.rfind("\n", 0, pos) + 1) + 1
        super().__init__(f"{msg} at line {line}, column {col}")
        self.line, self.col = line, col


@dataclass
class Node:
    kind: str                      # object | array | string | number | true | false | null
    start: int                     # first character of the value
    end: int                       # one past its last character
    value: Any = None              # scalars: the Python value
    items: list[Node] = field(default_factory=list)          # array elements
    members: list[Member] = field(default_factory=list)      # object members, in order

    def get(self, key: str) -> Member | None:
        for m in self.members:
            if m.key == key:
                return m
        return None

    def to_python(self) -> Any:
        if self.kind == "object":
            return {m.key: m.value.to_python() for m in self.members}
        if self.kind == "array":
            return [i.to_python() for i in self.items]
        return self.value


@dataclass
class Member:
    key: str
    key_start: int
    value: Node

    @property
    def start(self) -> int:
        return self.key_start

    @property
    def end(self) -> int:
        return self.value.end


class _Parser:
    def __init__(self, text: str):
        self.t = text
        self.i = 0

    def error(self, msg: str, pos: int | None = None) -> JSONSyntaxError:
        return JSONSyntaxError(msg, self.t, self.i if pos is None else pos)

    def ws(self) -> None:
        t, n = self.t, len(self.t)
        while self.i < n and t[self.i] in WS:
            self.i += 1

    def value(self, depth: int) -> Node:
        if depth > MAX_DEPTH:
            raise self.error("nesting too deep")
        self.ws()
        if self.i >= len(self.t):
            raise self.error("unexpected end of the document")
        c = self.t[self.i]
        if c == "{":
            return self.obj(depth)
        if c == "[":
            return self.arr(depth)
        if c == '"':
            s = self.i
            return Node("string", s, self.string_end(), self.decode(s))
        for word, val in (("true", True), ("false", False), ("null", None)):
            if self.t.startswith(word, self.i):
                s = self.i
                self.i += len(word)
                return Node(word, s, self.i, val)
        return self.number()

    def decode(self, start: int) -> str:
        try:
            return json.loads(self.t[start:self.i])
        except ValueError as exc:
            raise self.error("invalid escape in a string", start) from exc

    def string_end(self) -> int:
        t, n = self.t, len(self.t)
        self.i += 1
        while self.i < n:
            c = t[self.i]
            if c == '"':
                self.i += 1
                return self.i
            if c == "\\":
                self.i += 2
                continue
            if ord(c) < 0x20:
                raise self.error("control character in a string")
            self.i += 1
        raise self.error("unterminated string")

    def number(self) -> Node:
        import re

        m = re.compile(r"-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?").match(self.t, self.i)
        if not m or m.end() == self.i:
            raise self.error(f"unexpected character {self.t[self.i]!r}")
        s, self.i = self.i, m.end()
        return Node("number", s, self.i, json.loads(self.t[s:self.i]))

    def obj(self, depth: int) -> Node:
        node = Node("object", self.i, -1)
        self.i += 1
        self.ws()
        if self.t.startswith("}", self.i):
            self.i += 1
            node.end = self.i
            return node
        while True:
            self.ws()
            if not self.t.startswith('"', self.i):
                raise self.error("expected a member name in double quotes")
            ks = self.i
            self.string_end()
            key = self.decode(ks)
            self.ws()
            if not self.t.startswith(":", self.i):
                raise self.error("expected ':' after the member name")
            self.i += 1
            node.members.append(Member(key, ks, self.value(depth + 1)))
            self.ws()
            if self.t.startswith(",", self.i):
                self.i += 1
                continue
            if self.t.startswith("}", self.i):
                self.i += 1
                node.end = self.i
                return node
            raise self.error("expected ',' or '}'")

    def arr(self, depth: int) -> Node:
        node = Node("array", self.i, -1)
        self.i += 1
        self.ws()
        if self.t.startswith("]", self.i):
            self.i += 1
            node.end = self.i
            return node
        while True:
            node.items.append(self.value(depth + 1))
            self.ws()
            if self.t.startswith(",", self.i):
                self.i += 1
                continue
            if self.t.startswith("]", self.i):
                self.i += 1
                node.end = self.i
                return node
            raise self.error("expected ',' or ']'")


def parse(text: str) -> Node:
    p = _Parser(text)
    root = p.value(0)
    p.ws()
    if p.i != len(text):
        raise p.error("unexpected text after the document")
    return root


__all__ = ["JSONSyntaxError", "Member", "Node", "parse"]
