"""The extension against the service contract: the result fields `vscode-extension/src/common/protocol.ts` (and the
diff shapes in `format.ts`) read are declared in `mnemo.api`, the params it sends are parameters of the service
method behind each request or command, and every call the extension makes with an object literal sends only
declared params. The TypeScript is parsed with regular expressions (the files are small and regular); the tags
are explained at the top of protocol.ts."""

from __future__ import annotations

import re
import typing
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from mnemo import api

EXT = Path(__file__).resolve().parents[2] / "vscode-extension" / "src"
TAGGED_FILES = [EXT / "common" / "protocol.ts", EXT / "common" / "format.ts"]


@dataclass
class Interface:
    name: str
    fields: list[str]
    owner: list[str] = field(default_factory=list)
    lsp: set[str] = field(default_factory=set)
    call: tuple[str, str] | None = None
    renames: dict[str, str] = field(default_factory=dict)


def _strip_comments(text: str) -> str:
    return re.sub(r"//[^\n]*", "", re.sub(r"/\*.*?\*/", "", text, flags=re.S))


def _closing(text: str, start: int, open_: str = "{", close: str = "}") -> int:
    """The index of the bracket closing the one at `start`."""
    depth = 0
    for i in range(start, len(text)):
        if text[i] == open_:
            depth += 1
        elif text[i] == close:
            depth -= 1
            if depth == 0:
                return i
    raise ValueError(f"unbalanced {open_} at {start}")


def _top_level(text: str, sep: str) -> list[str]:
    """`text` split at `sep` outside brackets."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "{([":
            depth += 1
        elif ch in "})]":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    return [p.strip() for p in parts if p.strip()]


def parse_interfaces(path: Path) -> dict[str, Interface]:
    text = path.read_text()
    out = {}
    for m in re.finditer(r"(/\*\*(?:(?!\*/).)*?\*/\s*)?export interface (\w+)[^{]*\{", text, flags=re.S):
        body = _strip_comments(text[m.end(): _closing(text, m.end() - 1)])
        names = [f.group(1) for seg in _top_level(body.replace("\n", ";"), ";")
                 if (f := re.match(r"(\w+)\??\s*:", seg))]
        doc = m.group(1) or ""
        iface = Interface(m.group(2), names)
        if owner := re.search(r"@owner\s+([\w|]+)", doc):
            iface.owner = owner.group(1).split("|")
        if lsp := re.search(r"@lsp\s+([\w ]+)", doc):
            iface.lsp = set(lsp.group(1).split())
        if call := re.search(r"@call\s+(\S+)\s+(\w+)((?:[ \t]+\w+=\w+)*)", doc):
            iface.call = (call.group(1), call.group(2))
            iface.renames = dict(r.split("=") for r in call.group(3).split())
        out[iface.name] = iface
    return out


def parse_constants() -> dict[str, str]:
    """`Requests.listMemories` -> `mnemo/listMemories`, `ServerCommands.promote` -> `mnemo.promote`."""
    text = (EXT / "common" / "constants.ts").read_text()
    out = {}
    for group in ("Requests", "ServerCommands"):
        m = re.search(rf"export const {group} = \{{", text)
        body = text[m.end(): _closing(text, m.end() - 1)]
        out.update({f"{group}.{k}": v for k, v in re.findall(r"(\w+):\s*\"([^\"]+)\"", body)})
    return out


def object_keys(expr: str) -> set[str] | None:
    """The keys of every object literal in an argument expression (`{ id, reason }`, `c ? {..} : {..}`, spreads);
    None when there is none (a variable: not checkable here)."""
    keys: set[str] = set()
    found = False
    i = 0
    while (start := expr.find("{", i)) != -1:
        end = _closing(expr, start)
        found = True
        for entry in _top_level(expr[start + 1: end], ","):
            if entry.startswith("..."):
                keys |= object_keys(entry[3:]) or set()
            elif m := re.match(r"(\w+)\s*(:|$)", entry):
                keys.add(m.group(1))
        i = end + 1
    return keys if found else None


def call_sites() -> list[tuple[str, str, set[str]]]:
    """(file:line, request or command constant, keys sent) of every `server.request` / `server.command` call with
    an object literal."""
    out = []
    for path in sorted(EXT.rglob("*.ts")):
        if "test" in path.relative_to(EXT).parts:
            continue
        text = path.read_text()
        for m in re.finditer(r"\.server\.(?:request|command)\s*(?:<(?:[^<>]|<[^<>]*>)*>)?\(\s*"
                             r"((?:Requests|ServerCommands)\.\w+)\s*,", text):
            open_paren = text.rfind("(", 0, m.start(1))
            args = text[m.end(): _closing(text, open_paren, "(", ")")]
            keys = object_keys(_strip_comments(args))
            if keys is not None:
                out.append((f"{path.relative_to(EXT)}:{text.count(chr(10), 0, m.start()) + 1}", m.group(1), keys))
    return out


def snake(name: str) -> str:
    return re.sub(r"(?<!^)([A-Z])", r"_\1", name).lower()


def typed_keys(names: list[str]) -> set[str]:
    keys: set[str] = set()
    for n in names:
        tp = getattr(api.records, n, None) or getattr(api.results, n, None)
        assert tp is not None and typing.is_typeddict(tp), f"@owner {n}: no such TypedDict in mnemo/api/"
        keys |= set(typing.get_type_hints(tp))
    return keys


INTERFACES = {name: i for path in TAGGED_FILES for name, i in parse_interfaces(path).items()}


def test_the_parser_reads_the_files():
    memory = INTERFACES["Memory"]
    assert memory.owner == ["Memory"] and {"id", "text", "anchors", "flags"} <= set(memory.fields)
    assert INTERFACES["RememberSelectionParams"].fields == ["uri", "range", "text", "type", "kind", "tags",
                                                            "importance"]
    assert INTERFACES["PromoteParams"].call == ("mnemo.promote", "promote")
    assert INTERFACES["PromoteParams"].renames == {"id": "memory_id"}
    assert object_keys("reason ? { id, reason } : { id }") == {"id", "reason"}
    assert object_keys("{ ...(uri ? { uri } : {}), position: { line: 1, character: 2 } }") == {"uri", "position"}
    assert object_keys("arg") is None


# What the extension shows from the owner: these interfaces must stay tied to the declaration.
OWNER_SHAPES = {"Memory", "Anchor", "Card", "ReviewItem", "ReviewQueueResult", "Activation", "ActiveSkillsResult",
                "SkillMiss", "Skill", "SkillProblem", "SkillsCheck", "SkillsResult", "ListMemoriesResult",
                "WriteResult", "MergedBranch", "MergedBranchesResult", "OwnerInfo", "DiffEntry", "SnapshotDiff",
                "BranchDiff"}


def test_every_result_field_the_extension_reads_is_declared():
    tagged = {name for name, i in INTERFACES.items() if i.owner}
    assert OWNER_SHAPES <= tagged, f"untagged: {sorted(OWNER_SHAPES - tagged)}"
    wrong = []
    for name in sorted(tagged):
        i = INTERFACES[name]
        keys = typed_keys(i.owner)
        wrong += [f"{name}.{f}: not a key of {'|'.join(i.owner)}" for f in i.fields if f not in i.lsp | keys]
        wrong += [f"{name}.{f}: tagged @lsp but the owner sends it" for f in i.lsp if f in keys]
        wrong += [f"{name}.{f}: tagged @lsp but not a field" for f in i.lsp if f not in i.fields]
    assert wrong == []


CALLS = sorted((i for i in INTERFACES.values() if i.call), key=lambda i: i.name)


@pytest.mark.parametrize("iface", CALLS, ids=[i.name for i in CALLS])
def test_params_are_parameters_of_the_service_method(iface):
    lsp_name, method = iface.call
    assert method in api.SERVICE_METHODS, f"{iface.name}: no service method {method}"
    takes = set(api.parameters(method)) - {"ctx"} - api.LOCAL_ONLY
    assert set(iface.renames) <= set(iface.fields)
    sent = {f: iface.renames.get(f, snake(f)) for f in iface.fields if f not in iface.lsp}
    assert {f: py for f, py in sent.items() if py not in takes} == {}, f"{method} takes {sorted(takes)}"


def test_the_extension_sends_only_declared_params():
    names = parse_constants()
    params = {i.call[0]: i for i in CALLS}
    sites = call_sites()
    assert len(sites) >= 15, sites  # the parser still finds the calls (19 when this was written)
    wrong = []
    for where, const, keys in sites:
        name = names.get(const)
        if name is None:
            wrong.append(f"{where}: {const} is not in constants.ts")
        elif name not in params:
            wrong.append(f"{where}: {name} has no `...Params` interface with `@call {name} <method>`")
        elif keys - set(params[name].fields):
            wrong.append(f"{where}: {name} sends {sorted(keys - set(params[name].fields))}, "
                         f"not in {params[name].name}")
    assert wrong == []
