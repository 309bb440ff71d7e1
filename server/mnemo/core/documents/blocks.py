"""Repository Markdown -> heading-delimited blocks, each with its heading path and line range."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from mnemo.core import environment

MAX_DOC_BYTES = environment.integer("MNEMO_MAX_DOC_BYTES")  # a Markdown file larger than this is skipped
MAX_BLOCK_CHARS = 4000
SKIP_DIRS = frozenset({".git", "node_modules", ".venv", "venv", "__pycache__", "dist", "build", ".tox", ".mypy_cache",
                       ".pytest_cache", ".ruff_cache", "site-packages", ".tools", "test-artifacts"})
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


@dataclass(frozen=True)
class Block:
    source_path: str
    ordinal: int
    title: str
    heading_path: tuple[str, ...]
    text: str
    start_line: int
    end_line: int


def split_blocks(text: str, source_path: str) -> list[Block]:
    """Split at headings (outside fenced code). Long sections are cut at paragraph breaks near MAX_BLOCK_CHARS."""
    lines = text.splitlines()
    blocks: list[Block] = []
    stack: list[tuple[int, str]] = []
    cur: list[str] = []
    cur_start = 1
    in_fence = False
    heading_first = False  # cur starts with its heading line
    title_default = Path(source_path).stem

    def flush(end_line: int) -> None:
        body = "\n".join(cur).strip()
        under = cur[1:] if heading_first else cur
        if not any(ch.isalnum() for line in under for ch in line):  # a heading with nothing under it: noise
            return
        path = tuple(h for _, h in stack) or (title_default,)
        for chunk_start, chunk in _chunks(body):
            blocks.append(Block(source_path, len(blocks), path[-1], path, chunk, cur_start + chunk_start, end_line))

    for i, line in enumerate(lines, start=1):
        if _FENCE.match(line):
            in_fence = not in_fence
        m = None if in_fence else _HEADING.match(line)
        if m:
            flush(i - 1)
            level, title = len(m.group(1)), m.group(2).strip() or "(untitled)"
            while stack and stack[-1][0] >= level:
                stack.pop()
            stack.append((level, title))
            cur = [line]
            cur_start = i
            heading_first = True
        else:
            cur.append(line)
    flush(len(lines))
    return blocks


def _chunks(body: str) -> Iterator[tuple[int, str]]:
    if len(body) <= MAX_BLOCK_CHARS:
        yield 0, body
        return
    paras = re.split(r"\n\s*\n", body)
    buf: list[str] = []
    size = 0
    line_off = 0
    start_off = 0
    for p in paras:
        if buf and size + len(p) > MAX_BLOCK_CHARS:
            yield start_off, "\n\n".join(buf)
            start_off = line_off
            buf, size = [], 0
        buf.append(p[:MAX_BLOCK_CHARS])
        size += len(p) + 2
        line_off += p.count("\n") + 2
    if buf:
        yield start_off, "\n\n".join(buf)


def block_id(project_id: str, source_path: str, ordinal: int, text: str) -> str:
    h = hashlib.sha256(f"{project_id}\0{source_path}\0{ordinal}\0{text}".encode()).hexdigest()[:20]
    return f"blk-{h}"


def file_hash(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:32]


def find_markdown_files(root: Path) -> list[Path]:
    """Markdown files git tracks (or, outside git, found by walking), skipping vendored and build folders."""
    root = Path(root)
    files: list[Path] = []
    if (root / ".git").exists():
        try:
            out = subprocess.run(["git", "-C", str(root), "ls-files", "-z", "--cached", "--others",
                                  "--exclude-standard", "--", "*.md", "*.markdown"],
                                 capture_output=True, timeout=30, check=True).stdout
            for rel in out.decode("utf-8", "replace").split("\0"):
                if rel and not any(part in SKIP_DIRS for part in Path(rel).parts):
                    p = root / rel
                    if p.is_file():
                        files.append(p)
            return sorted(files)
        except (OSError, subprocess.SubprocessError):
            pass
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.startswith(".")]
        for f in filenames:
            if f.lower().endswith((".md", ".markdown")):
                files.append(Path(dirpath) / f)
    return sorted(files)
