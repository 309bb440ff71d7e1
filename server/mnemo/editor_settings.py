"""Editor settings (`mnemo.*`): typed, frozen, parsed once, with defaults; `SETTINGS_SCHEMA` mirrors package.json.

The VS Code extension's `contributes.configuration.properties` holds the same keys (a test checks they agree).
Settings reach the language server through `initializationOptions` and `workspace/configuration` (section
`mnemo`); both nested (`{"hover": {"maxMemories": 3}}`) and dotted (`{"mnemo.hover.maxMemories": 3}`) shapes are
accepted. Bad input never fails: the offending key keeps its default and `parse_settings` says what was wrong.
See docs/settings.md.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

PREFIX = "mnemo"


def _s(default: Any, description: str, **extra: Any) -> Any:
    """A setting field: its default plus what package.json needs (description, enum, minimum, maximum)."""
    meta = {"description": description, **extra}
    if isinstance(default, list | dict):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class ServerSettings:
    extra_args: list = _s([], "Extra arguments appended to `python -m mnemo lsp`. Read by the extension only.")


@dataclass(frozen=True)
class TraceSettings:
    server: str = _s("off", "Trace the LSP messages between VS Code and the Mnemo language server "
                            "(Output > Mnemo). Read by the extension only.",
                     enum=["off", "messages", "verbose"])


@dataclass(frozen=True)
class OwnerSettings:
    autostart: bool = _s(True, "Start the Mnemo owner process (which holds the store and the model) when none "
                               "is running.")
    retry_seconds: float = _s(10.0, "While the store is unavailable, how often the language server tries to "
                                    "reconnect, in seconds.", minimum=1, maximum=600)


@dataclass(frozen=True)
class HoverSettings:
    enabled: bool = _s(True, "Show relevant memories and active skills when hovering a symbol.")
    max_memories: int = _s(3, "Most memories shown in one hover.", minimum=0, maximum=20)
    min_confidence: float = _s(0.35, "A memory appears in a hover only when its recall confidence "
                                     "(cosine, +0.1 when keywords agree) is at least this.",
                               minimum=0, maximum=1)
    include_docs: bool = _s(False, "Also show matching blocks of the repository's Markdown documentation.")
    show_skills: bool = _s(True, "List the skills active for the file under the memories.")


@dataclass(frozen=True)
class CodeLensSettings:
    enabled: bool = _s(True, "Show \"N memories · M skills\" above functions and classes that have anchored or "
                             "strongly relevant memories.")
    show_relevant: bool = _s(True, "Count strongly relevant memories too, not only memories anchored to the "
                                   "symbol.")
    min_confidence: float = _s(0.55, "Confidence a recalled (not anchored) memory needs to count in a code lens.",
                               minimum=0, maximum=1)
    max_symbols: int = _s(150, "Most functions/classes per file checked for relevant memories.",
                          minimum=0, maximum=2000)


@dataclass(frozen=True)
class SkillsSettings:
    enabled: bool = _s(True, "Activate skills for the active file (hover, code lens, status, injection preview).")
    max_active: int = _s(5, "Most skills active at once (not counting always-apply skills).",
                         minimum=0, maximum=50)
    token_budget: int = _s(6000, "Tokens the injected skills block may take; over it the least likely skills "
                                 "are left out first, and the block says which (0: no limit).",
                           minimum=0, maximum=200000)


@dataclass(frozen=True)
class InjectionSettings:
    max_memories: int = _s(5, "Memories listed by \"Show what would be injected for this file\".",
                           minimum=0, maximum=50)


@dataclass(frozen=True)
class CopilotSettings:
    instructions: bool = _s(True, "Keep Copilot's Mnemo instructions file up to date with the skills and memories "
                                  "for the file open in the editor (VS Code adds it to agent-mode requests by "
                                  "itself). Read by the extension only.")
    token_budget: int = _s(1500, "Tokens of that instructions block and of an answer of the `mnemo_context` "
                                 "tool. Read by the extension only.", minimum=100, maximum=20000)


@dataclass(frozen=True)
class DocsSettings:
    index_on_startup: bool = _s(True, "Index the workspace's Markdown documentation (changed files only) when "
                                      "the language server starts, with progress in the status bar.")


@dataclass(frozen=True)
class Settings:
    python_path: str = _s("", "Python interpreter that runs `python -m mnemo lsp` (empty: the Python "
                              "extension's interpreter, then `python3` on PATH). Read by the extension only.")
    home: str = _s("", "The Mnemo store directory (empty: $MNEMO_HOME, else ~/.mnemo). Machine-wide: every "
                       "window and agent should use the same one.", scope="machine")
    write_policy: str = _s("auto", "Agent-written memories: `auto` lands them directly (power users); `confirm` "
                                   "keeps them in Review until you accept. Your own writes always land. Sent with "
                                   "every request: the chat agents using the MCP server this extension registers "
                                   "get it as MNEMO_WRITE_POLICY, whichever process started the store's owner.",
                           enum=["auto", "confirm"])
    log_level: str = _s("info", "Language server log level (Output > Mnemo).",
                        enum=["error", "warning", "info", "debug"])
    debounce_ms: int = _s(300, "Quiet time after an edit before the language server re-reads a document's "
                               "symbols and code lenses, in milliseconds.", minimum=0, maximum=10000)
    max_parse_bytes: int = _s(1_000_000, "Documents larger than this are parsed only around the cursor "
                                         "(hover, code actions) and get no code lenses.",
                              minimum=10_000, maximum=100_000_000)
    branch_poll_seconds: float = _s(2.0, "How often the language server checks .git/HEAD to notice a branch "
                                         "switch made outside the editor (requests always read it live).",
                                    minimum=0.2, maximum=60)
    server: ServerSettings = field(default_factory=ServerSettings)
    trace: TraceSettings = field(default_factory=TraceSettings)
    owner: OwnerSettings = field(default_factory=OwnerSettings)
    hover: HoverSettings = field(default_factory=HoverSettings)
    code_lens: CodeLensSettings = field(default_factory=CodeLensSettings)
    skills: SkillsSettings = field(default_factory=SkillsSettings)
    injection: InjectionSettings = field(default_factory=InjectionSettings)
    docs: DocsSettings = field(default_factory=DocsSettings)
    copilot: CopilotSettings = field(default_factory=CopilotSettings)


def camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _json_type(tp: Any) -> str:
    return {bool: "boolean", int: "integer", float: "number", str: "string", list: "array",
            dict: "object"}[tp]


_TYPES = {"bool": bool, "int": int, "float": float, "str": str, "list": list, "dict": dict}


def _leaves(cls: type, prefix: str) -> list[tuple[str, tuple[str, ...], dataclasses.Field, type]]:
    """(dotted key, attribute path, field, python type) of every leaf setting, in declaration order."""
    out: list[tuple[str, tuple[str, ...], dataclasses.Field, type]] = []
    for f in dataclasses.fields(cls):
        key = f"{prefix}.{camel(f.name)}"
        tp = f.type if isinstance(f.type, type) else _TYPES.get(str(f.type))
        if tp is None:  # a nested settings group
            sub = globals()[str(f.type)]
            out.extend((k, (f.name, *path), ff, t) for k, path, ff, t in _leaves(sub, key))
        else:
            out.append((key, (f.name,), f, tp))
    return out


LEAVES = _leaves(Settings, PREFIX)


def _default_of(f: dataclasses.Field) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory()  # type: ignore[operator]


def _schema() -> dict[str, dict[str, Any]]:
    schema: dict[str, dict[str, Any]] = {}
    for key, _path, f, tp in LEAVES:
        entry: dict[str, Any] = {"type": _json_type(tp), "default": _default_of(f),
                                 "description": f.metadata["description"]}
        for extra in ("enum", "minimum", "maximum", "scope"):
            if extra in f.metadata:
                entry[extra] = f.metadata[extra]
        if tp is list:
            entry["items"] = {"type": "string"}
        schema[key] = entry
    return schema


SETTINGS_SCHEMA: dict[str, dict[str, Any]] = _schema()
"""`mnemo.*` key -> {type, default, description[, enum, minimum, maximum, scope, items]}: what package.json's
`contributes.configuration.properties` holds."""


def flatten(data: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """`{"hover": {"maxMemories": 3}}` or `{"mnemo.hover.maxMemories": 3}` -> `{"mnemo.hover.maxMemories": 3}`."""
    out: dict[str, Any] = {}
    for k, v in data.items():
        key = _full(f"{prefix}.{k}" if prefix else str(k))
        if key not in SETTINGS_SCHEMA and isinstance(v, Mapping):
            out.update(flatten(v, key))
        else:
            out[key] = v
    return out


def _full(key: str) -> str:
    return key if key == PREFIX or key.startswith(PREFIX + ".") else f"{PREFIX}.{key}"


def _coerce(value: Any, tp: type, meta: Mapping[str, Any]) -> Any:
    if tp is bool:
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.lower() in ("true", "false"):
            return value.lower() == "true"
        raise ValueError("expected true or false")
    if tp in (int, float):
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise ValueError("expected a number")
        try:
            num = float(value)
        except ValueError:
            raise ValueError("expected a number") from None
        if num != num:  # NaN
            raise ValueError("expected a number")
        if tp is int:
            if num != int(num):
                raise ValueError("expected a whole number")
            num = int(num)
        lo, hi = meta.get("minimum"), meta.get("maximum")
        if (lo is not None and num < lo) or (hi is not None and num > hi):
            raise ValueError(f"expected a value between {lo} and {hi}")
        return num
    if tp is str:
        if not isinstance(value, str):
            raise ValueError("expected text")
        if "enum" in meta and value not in meta["enum"]:
            raise ValueError(f"expected one of {', '.join(meta['enum'])}")
        return value
    if tp is list:
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise ValueError("expected a list of strings")
        return list(value)
    raise ValueError(f"unsupported setting type {tp}")


def parse_settings(*sources: Mapping[str, Any] | None) -> tuple[Settings, list[str]]:
    """Merge the sources (later wins) over the defaults. Returns the settings and human-readable problems."""
    merged: dict[str, Any] = {}
    problems: list[str] = []
    for src in sources:
        if src is None:
            continue
        if not isinstance(src, Mapping):
            problems.append(f"settings must be an object, got {type(src).__name__}; using defaults")
            continue
        merged.update(flatten(src))
    values: dict[tuple[str, ...], Any] = {}
    by_key = {key: (path, f, tp) for key, path, f, tp in LEAVES}
    for key, value in merged.items():
        if key not in by_key:
            if value is not None:
                problems.append(f"unknown setting {key} (ignored)")
            continue
        path, f, tp = by_key[key]
        if value is None:
            continue
        try:
            values[path] = _coerce(value, tp, f.metadata)
        except ValueError as exc:
            problems.append(f"{key} = {value!r}: {exc}; using the default {_default_of(f)!r}")
    return _build(Settings, (), values), problems


def _build(cls: type, prefix: tuple[str, ...], values: Mapping[tuple[str, ...], Any]) -> Any:
    kw = {}
    for f in dataclasses.fields(cls):
        path = (*prefix, f.name)
        if isinstance(f.type, str) and f.type in globals() and dataclasses.is_dataclass(globals()[f.type]):
            kw[f.name] = _build(globals()[f.type], path, values)
        elif path in values:
            kw[f.name] = values[path]
    return cls(**kw)


def to_dict(settings: Settings) -> dict[str, Any]:
    """The effective settings as dotted `mnemo.*` keys (for logs and `mnemo/status`)."""
    out = {}
    for key, path, _f, _tp in LEAVES:
        obj: Any = settings
        for name in path:
            obj = getattr(obj, name)
        out[key] = obj
    return out


def describe_problems(problems: list[str]) -> str:
    return "Mnemo settings: " + "; ".join(problems)


_KEY = re.compile(r"^mnemo(\.[a-z][A-Za-z0-9]*)+$")
assert all(_KEY.match(k) for k in SETTINGS_SCHEMA), "setting keys are camelCase under mnemo."

__all__ = ["SETTINGS_SCHEMA", "Settings", "parse_settings", "to_dict", "flatten", "describe_problems"]
