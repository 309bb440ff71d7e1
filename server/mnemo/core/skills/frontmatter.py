"""Frontmatter: split a Markdown file into header and body, parse the header safely and tolerantly.

Real rule files are often not valid YAML (``globs: **/*.ts`` starts a YAML alias; ``description: a: b`` is a
nested mapping error). We try ``yaml.safe_load`` first (size-capped, with a loader that refuses anchors/aliases
and huge or deeply nested documents), and fall back to a line-based ``key: value`` reader that keeps what the
author meant. Nothing here raises anything but :class:`FrontmatterError` (a refused or unreadable header).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import yaml

from mnemo.core import environment

MAX_FRONTMATTER_BYTES = environment.integer("MNEMO_MAX_FRONTMATTER_BYTES")
MAX_YAML_NODES = environment.integer("MNEMO_MAX_FRONTMATTER_NODES")
MAX_YAML_DEPTH = 20
_TOO_BIG = "frontmatter larger than {kib} KiB (a header is a few lines; raise MNEMO_MAX_FRONTMATTER_BYTES if you must)"

_KEY_RE = re.compile(r"^([A-Za-z_][\w.-]*)\s*:(?:\s+(.*)|\s*)$")
_LIST_ITEM_RE = re.compile(r"^\s*-\s*(.*)$")


class FrontmatterError(Exception):
    """The header cannot be used: ``line`` is 1-based within the file."""

    def __init__(self, reason: str, line: int = 1):
        super().__init__(reason)
        self.reason = reason
        self.line = line


@dataclass
class Frontmatter:
    data: dict[str, object] = field(default_factory=dict)
    body: str = ""
    body_line: int = 1  # 1-based line number where the body starts
    present: bool = False  # the file has a header at all
    yaml_valid: bool | None = None  # None: no header; False: parsed with the tolerant reader
    warnings: list[tuple[int, str]] = field(default_factory=list)


class _GuardedLoader(yaml.SafeLoader):
    """SafeLoader that refuses aliases to defined anchors (alias bombs) and caps node count and depth."""

    def __init__(self, stream):
        super().__init__(stream)
        self._nodes = 0
        self._depth = 0

    def compose_node(self, parent, index):  # noqa: D401 - PyYAML hook
        if self.check_event(yaml.AliasEvent):
            event = self.peek_event()
            if event.anchor in self.anchors:
                raise FrontmatterError(
                    "YAML aliases (*name) are refused in frontmatter (alias bombs); write the value out",
                    event.start_mark.line + 1,
                )
        self._nodes += 1
        if self._nodes > MAX_YAML_NODES:
            raise FrontmatterError(f"frontmatter has more than {MAX_YAML_NODES} YAML nodes (raise "
                                   "MNEMO_MAX_FRONTMATTER_NODES if you must)", 1)
        self._depth += 1
        try:
            if self._depth > MAX_YAML_DEPTH:
                raise FrontmatterError(f"frontmatter is nested deeper than {MAX_YAML_DEPTH} levels (write a flatter "
                                       "header)", 1)
            return super().compose_node(parent, index)
        finally:
            self._depth -= 1


def safe_yaml(text: str) -> object:
    """``yaml.safe_load`` with size, node, depth and alias guards. Raises FrontmatterError or yaml.YAMLError."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_FRONTMATTER_BYTES:
        raise FrontmatterError(_TOO_BIG.format(kib=MAX_FRONTMATTER_BYTES // 1024), 1)
    loader = _GuardedLoader(text)
    try:
        return loader.get_single_data()
    finally:
        loader.dispose()


def _unquote(v: str) -> str:
    v = v.strip()
    if len(v) >= 2 and v[0] == v[-1] and v[0] in "\"'":
        inner = v[1:-1]
        return inner.replace("''", "'") if v[0] == "'" else inner.replace('\\"', '"')
    return v


def _flow_list(v: str) -> list[str] | None:
    v = v.strip()
    if not (v.startswith("[") and v.endswith("]")):
        return None
    inner = v[1:-1]
    items, cur, depth, quote = [], [], 0, ""
    for ch in inner:
        if quote:
            cur.append(ch)
            if ch == quote:
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth = max(0, depth - 1)
        if ch == "," and depth == 0:
            items.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    items.append("".join(cur))
    return [_unquote(i) for i in items if i.strip()]


def tolerant_parse(header: str, first_line: int = 2) -> tuple[dict[str, object], list[tuple[int, str]]]:
    """Line-based ``key: value`` reader for headers that are not valid YAML. Values stay strings (quotes removed);
    ``- item`` lines under a key and ``[a, b]`` flow lists become lists; indented lines continue a value."""
    data: dict[str, object] = {}
    warnings: list[tuple[int, str]] = []
    key: str | None = None
    block: list[str] = []
    items: list[str] = []

    def flush() -> None:
        nonlocal key, block, items
        if key is not None:
            if items:
                data[key] = items
            else:
                text = " ".join(s.strip() for s in block if s.strip())
                data[key] = _unquote(text) if text else ""
        key, block, items = None, [], []

    for i, line in enumerate(header.split("\n")):
        lineno = first_line + i
        stripped = line.strip()
        if not stripped or stripped.startswith("#"):
            continue
        indented = line[:1] in (" ", "\t")
        m = None if indented else _KEY_RE.match(line.rstrip())
        if m:
            flush()
            key, value = m.group(1), (m.group(2) or "").strip()
            if value and value not in ("|", ">", "|-", ">-", "|+", ">+"):
                flow = _flow_list(value)
                if flow is not None:
                    data[key] = flow
                    key = None
                else:
                    block = [value]  # a plain scalar; indented lines may continue it
            continue
        if key is not None:
            li = _LIST_ITEM_RE.match(line)
            if li and not block:
                items.append(_unquote(li.group(1)))
                continue
            if indented:
                block.append(stripped)
                continue
        warnings.append((lineno, f"frontmatter line not understood: {stripped[:60]!r}"))
    flush()
    return data, warnings


def split_frontmatter(text: str) -> Frontmatter:
    """Split ``---`` header / body. Raises FrontmatterError only for an unterminated or oversized header."""
    if text.startswith("\ufeff"):
        text = text[1:]
    lines = text.split("\n")
    if not lines or lines[0].strip() != "---":
        return Frontmatter(data={}, body=text, body_line=1, present=False, yaml_valid=None)
    end = None
    size = 0
    for i in range(1, len(lines)):
        size += len(lines[i]) + 1
        if lines[i].rstrip() in ("---", "..."):
            end = i
            break
        if size > MAX_FRONTMATTER_BYTES:
            raise FrontmatterError(_TOO_BIG.format(kib=MAX_FRONTMATTER_BYTES // 1024), 1)
    if end is None:
        raise FrontmatterError("frontmatter opened with '---' on line 1 is never closed", 1)
    header = "\n".join(lines[1:end])
    body = "\n".join(lines[end + 1:])
    fm = Frontmatter(body=body, body_line=end + 2, present=True)
    if not header.strip():
        fm.yaml_valid = True
        return fm
    try:
        loaded = safe_yaml(header)
        if loaded is None:
            loaded = {}
        if not isinstance(loaded, dict):
            raise yaml.YAMLError("frontmatter is not a mapping")
        fm.data = {str(k): v for k, v in loaded.items()}
        fm.yaml_valid = True
    except FrontmatterError:
        raise
    except RecursionError as exc:
        raise FrontmatterError("frontmatter is nested too deeply", 1) from exc
    except yaml.YAMLError as exc:
        data, warnings = tolerant_parse(header, first_line=2)
        if not data:
            mark = getattr(exc, "problem_mark", None)
            line = (mark.line + 2) if mark is not None else 2
            reason = getattr(exc, "problem", None) or str(exc).split("\n")[0]
            raise FrontmatterError(f"frontmatter is neither YAML nor 'key: value' lines ({reason})", line) from exc
        fm.data = data
        fm.yaml_valid = False
        fm.warnings.extend(warnings)
    return fm
