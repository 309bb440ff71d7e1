"""A Claude Code session transcript (JSON Lines) summarized for the hand-off note, without a model.

Each line is an entry: `{"type": "user" | "assistant" | ..., "message": {"role", "content"}, ...}`; `content` is a
string or a list of blocks (`text`, `tool_use {id, name, input}`, `tool_result {tool_use_id, content, is_error}`).
The summary keeps the person's last requests (not tool results, not meta or command lines), the files the agent
edited (Edit/Write/MultiEdit/NotebookEdit `file_path`), the shell commands whose result was an error, and the
start of the agent's last reply. Only the transcript's last `MAX_BYTES` are read; broken lines are skipped.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

MAX_BYTES = 8 * 1024 * 1024
EDIT_TOOLS = frozenset({"Edit", "Write", "MultiEdit", "NotebookEdit"})
SHELL_TOOLS = frozenset({"Bash"})


def _lines(path: Path) -> list[str]:
    with open(path, "rb") as f:
        size = f.seek(0, os.SEEK_END)
        start = max(0, size - MAX_BYTES)
        f.seek(start)
        data = f.read()
    if start:
        data = data.split(b"\n", 1)[1] if b"\n" in data else b""
    return data.decode("utf-8", "replace").splitlines()


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


def _is_request(entry: dict[str, Any], text: str) -> bool:
    if entry.get("isMeta") or entry.get("isSidechain") or not text.strip():
        return False
    t = text.lstrip()
    return not (t.startswith("<command-") or t.startswith("<local-command") or t.startswith("Caveat:")
                or t.startswith("[Request interrupted"))


def _first_line(content: Any) -> str:
    text = content if isinstance(content, str) else _text_of(content) if isinstance(content, list) else ""
    for line in text.splitlines():
        if line.strip():
            return line.strip()[:200]
    return ""


def summarize(path: str | Path, cwd: str | None = None) -> dict[str, Any]:
    """{requests, files_edited, failed_commands, last_reply, turns} of the transcript at `path`."""
    requests: list[str] = []
    files: list[str] = []
    commands: dict[str, str] = {}
    failed: list[dict[str, str]] = []
    last_reply = ""
    for raw in _lines(Path(path)):
        try:
            entry = json.loads(raw)
        except ValueError:
            continue
        if not isinstance(entry, dict):
            continue
        msg: dict[str, Any] = entry["message"] if isinstance(entry.get("message"), dict) else {}
        content = msg.get("content")
        if entry.get("type") == "user":
            text = content if isinstance(content, str) else _text_of(content)
            if _is_request(entry, text):
                requests.append(text.strip())
            for b in content if isinstance(content, list) else []:
                if isinstance(b, dict) and b.get("type") == "tool_result" and b.get("is_error") \
                        and b.get("tool_use_id") in commands:
                    failed.append({"command": commands[b["tool_use_id"]], "error": _first_line(b.get("content"))})
        elif entry.get("type") == "assistant":
            for b in content if isinstance(content, list) else []:
                if not isinstance(b, dict):
                    continue
                if b.get("type") == "text" and b.get("text", "").strip():
                    last_reply = b["text"].strip()
                elif b.get("type") == "tool_use":
                    inp: dict[str, Any] = b["input"] if isinstance(b.get("input"), dict) else {}
                    if b.get("name") in EDIT_TOOLS and isinstance(inp.get("file_path"), str):
                        p = _relative(inp["file_path"], cwd)
                        if p in files:
                            files.remove(p)
                        files.append(p)
                    elif b.get("name") in SHELL_TOOLS and isinstance(inp.get("command"), str):
                        commands[str(b.get("id"))] = inp["command"].strip()
    return {"requests": requests[-3:], "files_edited": files[-50:], "failed_commands": failed[-4:],
            "last_reply": last_reply[:600], "turns": len(requests)}


def _relative(path: str, cwd: str | None) -> str:
    if cwd and os.path.isabs(path):
        rel = os.path.relpath(path, cwd)
        if not rel.startswith(".."):
            return rel
    return path
