"""Mnemo's entries in Claude Code's settings files: install, uninstall, status, touching nothing else.

Claude Code reads hooks from `~/.claude/settings.json` (user), `.claude/settings.json` (project, shared) and
`.claude/settings.local.json` (local): `{"hooks": {"<Event>": [{"matcher": "...", "hooks": [{"type": "command",
"command": "...", "timeout": N}]}]}}`. Install appends one matcher group per event to the file's text (the
indentation and newline style of the file, right after the last existing entry), creating `hooks` or an event's
array only when missing; uninstall removes exactly those bytes, so install then uninstall gives back the file byte
for byte. What install created (the file, `hooks`, an event's array) and the whitespace of a container it filled
are recorded in `<store>/hooks/claude-code.json`, so uninstall removes what it created and nothing the person
had; without that record, containers left empty by the removal are removed. Mnemo's entries are recognized by
their command (`... mnemo hook <event>` or `... -m mnemo hook <event>`), wherever they are in the file.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from mnemo.core.errors import InvalidInput
from mnemo.hooks.jsonspan import JSONSyntaxError, Node, parse

# (Claude Code event, matcher, `mnemo hook` event, timeout in seconds)
SPECS = (("SessionStart", "startup|resume|clear|compact", "session-start", 10),
         ("UserPromptSubmit", None, "prompt", 10),
         ("PreToolUse", "Read|Edit|Write|MultiEdit", "pre-tool", 10),
         ("SessionEnd", None, "session-end", 30))
SCOPES = ("user", "project", "local")
OURS = re.compile(r"(?:-m\s+mnemo|(?:^|[\s/\\\"'])mnemo(?:\.exe)?[\"']?)\s+hook\s+(session-start|prompt|pre-tool|"
                  r"session-end)\b")
MAX_SETTINGS_BYTES = 4 * 1024 * 1024


def settings_path(scope: str, project_root: Path | None) -> Path:
    if scope == "user":
        base = Path(os.environ.get("CLAUDE_CONFIG_DIR") or Path.home() / ".claude")
        return base / "settings.json"
    if scope not in SCOPES:
        raise InvalidInput(f"unknown scope {scope!r}", hint="use --user, --project or --local")
    if project_root is None:
        raise InvalidInput("no project to install into", hint="run it inside the repository, or pass -C DIR")
    return Path(project_root) / ".claude" / ("settings.json" if scope == "project" else "settings.local.json")


def default_command(scope: str) -> str:
    """What the entries run. Project settings are shared: `mnemo` (each person's own, on PATH); user and local
    settings are this machine's: this Python with `-m mnemo` (it skips the console script's CLI imports: a hook
    runs on every prompt and file, bench/hook_latency.py)."""
    if scope == "project":
        return "mnemo"
    return f"{shlex.quote(sys.executable)} -m mnemo"


def entries(command: str) -> dict[str, dict[str, Any]]:
    out = {}
    for event, matcher, name, timeout in SPECS:
        group: dict[str, Any] = {}
        if matcher:
            group["matcher"] = matcher
        group["hooks"] = [{"type": "command", "command": f"{command} hook {name}", "timeout": timeout}]
        out[event] = group
    return out


def is_ours(handler: Any) -> bool:
    return isinstance(handler, dict) and isinstance(handler.get("command"), str) \
        and OURS.search(handler["command"]) is not None


# -- text editing -------------------------------------------------------------------------------------------------
@dataclass
class Style:
    unit: str
    newline: str


def style_of(text: str) -> Style:
    newline = "\r\n" if "\r\n" in text else "\n"
    indents = [m.group(1) for m in re.finditer(r"\n([ \t]+)\S", text)]
    tabs = [i for i in indents if i.startswith("\t")]
    if tabs and len(tabs) >= len(indents) / 2:
        return Style("\t", newline)
    spaces = [len(i) for i in indents if i.startswith(" ")]
    return Style(" " * (min(spaces) if spaces else 2), newline)


def line_indent(text: str, pos: int) -> str:
    start = text.rfind("\n", 0, pos) + 1
    m = re.match(r"[ \t]*", text[start:])
    return m.group(0) if m else ""


def render(value: Any, indent: str, style: Style, compact: bool) -> str:
    if compact:
        return json.dumps(value, separators=(", ", ": "), ensure_ascii=False)
    lines = json.dumps(value, indent=style.unit, ensure_ascii=False).split("\n")
    return style.newline.join([lines[0]] + [indent + line for line in lines[1:]])


def children(node: Node) -> list:
    return node.members if node.kind == "object" else node.items


def append(text: str, container: Node, key: str | None, value: Any, style: Style) -> tuple[str, str | None]:
    """`text` with `value` (as member `key` of an object, or an element of an array) appended to `container`;
    returns the new text and, when the container was empty, its original inner whitespace."""
    kids = children(container)
    prefix = (json.dumps(key, ensure_ascii=False) + ": ") if key is not None else ""
    if kids:
        last = kids[-1]
        compact = "\n" not in text[container.start:container.end]
        if compact:
            piece = ", " + prefix + render(value, "", style, True)
        else:
            ind = line_indent(text, last.start)
            piece = "," + style.newline + ind + prefix + render(value, ind, style, False)
        return text[:last.end] + piece + text[last.end:], None
    outer = line_indent(text, container.start)
    ind = outer + style.unit
    inner = text[container.start + 1:container.end - 1]
    piece = style.newline + ind + prefix + render(value, ind, style, False) + style.newline + outer
    return text[:container.start + 1] + piece + text[container.end - 1:], inner


def remove_child(text: str, container: Node, index: int) -> str:
    """`text` without the child at `index` of `container` and its separator (the bytes an append added)."""
    kids = children(container)
    if index > 0:
        return text[:kids[index - 1].end] + text[kids[index].end:]
    if len(kids) > 1:
        return text[:kids[0].start] + text[kids[1].start:]
    return text[:container.start + 1] + text[container.end - 1:]


# -- the record of what install created ---------------------------------------------------------------------------
def _record_path(home: Path) -> Path:
    return Path(home) / "hooks" / "claude-code.json"


def load_record(home: Path, settings: Path) -> dict[str, Any]:
    try:
        data = json.loads(_record_path(home).read_text(encoding="utf-8"))
        rec = data.get(str(settings.resolve())) if isinstance(data, dict) else None
        return rec if isinstance(rec, dict) else {}
    except (OSError, ValueError):
        return {}


def save_record(home: Path, settings: Path, record: dict[str, Any] | None) -> None:
    path = _record_path(home)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        data = data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        data = {}
    key = str(settings.resolve())
    if record is None:
        data.pop(key, None)
    else:
        data[key] = record
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


# -- reading and writing the settings file ------------------------------------------------------------------------
def read_settings(path: Path) -> tuple[str | None, Node | None]:
    """The file's text and parsed document (None, None when it does not exist or is empty)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None, None
    if len(raw) > MAX_SETTINGS_BYTES:
        raise InvalidInput(f"{path} is larger than 4 MiB; nothing was changed")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text; nothing was changed") from exc
    if not text.strip():
        return text, None
    try:
        root = parse(text)
    except JSONSyntaxError as exc:
        raise InvalidInput(f"{path} is not valid JSON ({exc}); nothing was changed",
                           hint="fix the file (Claude Code would not read it either), then run this again") from exc
    if root.kind != "object":
        raise InvalidInput(f"{path} does not hold a JSON object; nothing was changed")
    return text, root


def write_settings(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = None
    with contextlib.suppress(OSError):
        mode = path.stat().st_mode & 0o777
    tmp = path.with_name(f".{path.name}.mnemo-{os.getpid()}.tmp")
    tmp.write_bytes(text.encode("utf-8"))
    if mode is not None:
        os.chmod(tmp, mode)
    os.replace(tmp, path)


def _hooks_obj(root: Node, path: Path) -> Node | None:
    m = root.get("hooks")
    if m is None:
        return None
    if m.value.kind != "object":
        raise InvalidInput(f"`hooks` in {path} is not an object; nothing was changed")
    return m.value


def find_ours(root: Node) -> list[tuple[str, list[int]]]:
    """(event, path of indices) of every Mnemo handler: [group index, handler index] under hooks.<event>."""
    hooks = root.get("hooks")
    out: list[tuple[str, list[int]]] = []
    if hooks is None or hooks.value.kind != "object":
        return out
    for m in hooks.value.members:
        if m.value.kind != "array":
            continue
        for gi, group in enumerate(m.value.items):
            hs = group.get("hooks") if group.kind == "object" else None
            if hs is None or hs.value.kind != "array":
                continue
            for hi, h in enumerate(hs.value.items):
                if is_ours(h.to_python()):
                    out.append((m.key, [gi, hi]))
    return out


# -- install / uninstall ------------------------------------------------------------------------------------------
def _remove_one(text: str, root: Node, event: str, gi: int, hi: int, record: dict[str, Any]) -> str:
    created, inner = set(record.get("created") or []), record.get("inner") or {}
    known = bool(record)
    hooks_m = root.get("hooks")
    assert hooks_m is not None  # `find_ours` found the handler under it
    ev_i = next(i for i, m in enumerate(hooks_m.value.members) if m.key == event)
    ev_arr = hooks_m.value.members[ev_i].value
    group = ev_arr.items[gi]
    hs_m = group.get("hooks")
    assert hs_m is not None
    hs = hs_m.value
    if len(hs.items) > 1:                                 # a group shared with other handlers: only ours goes
        return remove_child(text, hs, hi)
    if len(ev_arr.items) > 1:
        return remove_child(text, ev_arr, gi)
    if (f"hooks/{event}" in created) or not known:        # the event's array is left empty: ours to remove?
        if len(hooks_m.value.members) > 1:
            return remove_child(text, hooks_m.value, ev_i)
        if "hooks" in created or not known:
            if len(root.members) == 1:
                return _restore(text, root, inner.get("", ""))
            idx = next(i for i, m in enumerate(root.members) if m.key == "hooks")
            return remove_child(text, root, idx)
        return _restore(text, hooks_m.value, inner.get("hooks", ""))
    return _restore(text, ev_arr, inner.get(f"hooks/{event}", ""))


def _restore(text: str, container: Node, ws: str) -> str:
    return text[:container.start + 1] + ws + text[container.end - 1:]


def strip_ours(text: str, record: dict[str, Any]) -> tuple[str, int]:
    removed = 0
    while True:
        root = parse(text)
        found = find_ours(root)
        if not found:
            return text, removed
        event, (gi, hi) = found[-1]
        text = _remove_one(text, root, event, gi, hi, record)
        removed += 1


def _fresh_document(command: str) -> str:
    return json.dumps({"hooks": {ev: [g] for ev, g in entries(command).items()}}, indent=2) + "\n"


def install(path: Path, command: str, home: Path) -> dict[str, Any]:
    """Add Mnemo's four entries to the settings file at `path` (replacing older Mnemo entries)."""
    text, root = read_settings(path)
    record = load_record(home, path)
    if root is None:
        if text is not None:  # a file of whitespace only: not a JSON object, refuse
            raise InvalidInput(f"{path} is empty but not a JSON object; nothing was changed",
                               hint="delete it or write {} in it, then run this again")
        made = ["file", "hooks", *(f"hooks/{e}" for e, *_ in SPECS)]
        if not path.parent.exists():
            made.append("dir")
        write_settings(path, _fresh_document(command))
        save_record(home, path, {"created": made, "inner": {}, "command": command,
                                 "installed_at": time.time()})
        return {"path": str(path), "status": "created", "events": [e for e, *_ in SPECS], "command": command}
    current = {h["command"] for h in _handlers(root) if is_ours(h)}
    wanted = {f"{command} hook {name}" for *_, name, _t in SPECS}
    if current == wanted and len(find_ours(root)) == len(SPECS):
        return {"path": str(path), "status": "unchanged", "events": [e for e, *_ in SPECS], "command": command}
    assert text is not None  # a document was parsed from it
    original = text
    text, replaced = strip_ours(text, record)
    created = set(record.get("created") or []) if replaced else set()
    inner = dict(record.get("inner") or {}) if replaced else {}
    style = style_of(original)
    for event, group in entries(command).items():
        root = parse(text)
        hooks = _hooks_obj(root, path)
        if hooks is None:
            text, ws = append(text, root, "hooks", {event: [group]}, style)
            created |= {"hooks", f"hooks/{event}"}
            if ws is not None:
                inner[""] = ws
            continue
        ev = hooks.get(event)
        if ev is None:
            text, ws = append(text, hooks, event, [group], style)
            created.add(f"hooks/{event}")
            if ws is not None and "hooks" not in created:
                inner["hooks"] = ws
            continue
        if ev.value.kind != "array":
            raise InvalidInput(f"`hooks.{event}` in {path} is not a list; nothing was changed")
        text, ws = append(text, ev.value, None, group, style)
        if ws is not None:
            inner[f"hooks/{event}"] = ws
    write_settings(path, text)
    save_record(home, path, {"created": sorted(created), "inner": inner, "command": command,
                             "installed_at": time.time()})
    return {"path": str(path), "status": "replaced" if replaced else "installed",
            "events": [e for e, *_ in SPECS], "command": command}


def uninstall(path: Path, home: Path) -> dict[str, Any]:
    """Remove Mnemo's entries (and what installing them created) from the settings file at `path`."""
    text, root = read_settings(path)
    record = load_record(home, path)
    if root is None or not find_ours(root):
        save_record(home, path, None)
        return {"path": str(path), "status": "not installed", "removed": 0}
    assert text is not None  # a document was parsed from it
    text, removed = strip_ours(text, record)
    created = set(record.get("created") or [])
    if "file" in created and not parse(text).members:
        path.unlink()
        if "dir" in created:
            with contextlib.suppress(OSError):
                path.parent.rmdir()
        status = "removed the file it had created"
    else:
        write_settings(path, text)
        status = "uninstalled"
    save_record(home, path, None)
    return {"path": str(path), "status": status, "removed": removed}


def _handlers(root: Node) -> list[dict[str, Any]]:
    hooks = root.get("hooks")
    out: list[dict[str, Any]] = []
    if hooks is None or hooks.value.kind != "object":
        return out
    for m in hooks.value.members:
        for group in m.value.items if m.value.kind == "array" else []:
            hs = group.get("hooks") if group.kind == "object" else None
            for h in hs.value.items if hs is not None and hs.value.kind == "array" else []:
                d = h.to_python()
                if isinstance(d, dict):
                    out.append({**d, "event": m.key})
    return out


def status(paths: dict[str, Path]) -> dict[str, Any]:
    """Per settings file: Mnemo's entries (event, command, whether the command's program is found) and how many
    other hooks the file holds."""
    out: dict[str, dict[str, Any]] = {}
    for scope, path in paths.items():
        try:
            _text, root = read_settings(path)
        except InvalidInput as exc:
            out[scope] = {"path": str(path), "error": exc.message}
            continue
        hs = _handlers(root) if root is not None else []
        ours = [h for h in hs if is_ours(h)]
        out[scope] = {"path": str(path), "exists": path.exists(),
                      "mnemo": [{"event": h["event"], "command": h["command"], "runs": _runs(h["command"])}
                                for h in ours],
                      "installed": sorted({h["event"] for h in ours}) == sorted(e for e, *_ in SPECS),
                      "other_hooks": len(hs) - len(ours)}
    return out


def _runs(command: str) -> bool:
    try:
        prog = shlex.split(command)[0]
    except (ValueError, IndexError):
        return False
    return shutil.which(prog) is not None or (os.path.isabs(prog) and os.access(prog, os.X_OK))


__all__ = ["SCOPES", "SPECS", "default_command", "entries", "install", "is_ours", "settings_path", "status",
           "uninstall"]
