"""The shape of `server/mnemo`: every import points down the layer order, no module imports itself back through
others, and SQL runs only in the store.

The import graph is read from the sources (AST), with the imports inside functions (a lazy import is still an
arrow) and without those under `if TYPE_CHECKING:` (annotations only, never executed). docs/architecture.md
("Layers and floors") shows the same map.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

SERVER = Path(__file__).resolve().parents[2] / "server"
PACKAGE = SERVER / "mnemo"

# Module -> rank; "pkg.*" names a package and everything in it. An import may point to its own rank or below:
# surfaces 50 > daemon 40 > service 30 > core operations 20-29 > core resources 10-19 > floor 0 (data and pure
# functions: no store, no model, no network) 0-9. Inside the core the ranks order the modules too, lowest first.
# Every package of the core is one room on one floor ("pkg.*"): a module added to a room takes its floor.
LAYERS: dict[str, int] = {
    # surfaces (mnemo.hooks: the Claude Code hooks' stdlib-only fast path)
    "mnemo.__main__": 50, "mnemo.cli.*": 50, "mnemo.lsp.*": 50, "mnemo.mcp.*": 50, "mnemo.hooks.*": 50,
    # the owner process, its client, the checks around it
    "mnemo.daemon.*": 40,
    # the one API: its declaration (mnemo.api: the typed Service, records, results) and the in-process service
    "mnemo.service": 30, "mnemo.api.*": 30,
    # core operations, bottom to top
    "mnemo.core.search": 20, "mnemo.core.cards": 20, "mnemo.core.skills.*": 20,
    "mnemo.core.team.*": 21,
    "mnemo.core.engine": 22,
    "mnemo.core.memory.*": 23, "mnemo.core.documents.*": 23,
    "mnemo.core.lifecycle.*": 25, "mnemo.core.edits": 25,
    "mnemo.core.sharing.*": 26,
    "mnemo.core.review": 27,
    "mnemo.core.agent.*": 28, "mnemo.core.recovery.*": 28,
    # core resources: the store (every table and statement) at the bottom, the models and indexes on it
    "mnemo.core.store.*": 10,
    "mnemo.core.embedding.*": 11, "mnemo.core.indexes.*": 11,
    # floor 0
    "mnemo": 0, "mnemo.native": 0, "mnemo.editor_settings": 0, "mnemo.trace": 0, "mnemo.core": 0, "mnemo.core.api_types.*": 0,
    "mnemo.core.files.*": 0, "mnemo.core.errors": 0, "mnemo.core.environment": 0, "mnemo.core.text": 0,
    "mnemo.core.models": 1, "mnemo.core.relation.*": 1, "mnemo.core.identity": 2,
    "mnemo.core.store_settings": 3, "mnemo.core.safety.*": 3, "mnemo.core.policy": 4,
}
NAMES = {0: "floor 0", 1: "core resources", 2: "core operations", 3: "service", 4: "daemon", 5: "surfaces"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SERVER).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


MODULES = {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def rank(module: str) -> int | None:
    """The rank LAYERS gives `module`: its own entry, else that of the nearest "pkg.*" holding it (or naming it)."""
    if module in LAYERS:
        return LAYERS[module]
    name = module
    while name:
        if f"{name}.*" in LAYERS:
            return LAYERS[f"{name}.*"]
        name = name.rpartition(".")[0]
    return None


def _type_checking(node: ast.If) -> bool:
    t = node.test
    return (isinstance(t, ast.Name) and t.id == "TYPE_CHECKING") or (
        isinstance(t, ast.Attribute) and t.attr == "TYPE_CHECKING")


def _resolve(name: str) -> str | None:
    """The module an imported name lives in (the longest known module prefix)."""
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(module: str) -> list[tuple[str, int]]:
    """(imported mnemo module, line) for every import of `module`, inside functions included, TYPE_CHECKING not."""
    path = MODULES[module]
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    out: list[tuple[str, int]] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "mnemo":
                    out.append((_resolve(alias.name), node.lineno))
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if mod.split(".")[0] == "mnemo":
                for alias in node.names:
                    sub = f"{mod}.{alias.name}"
                    out.append((sub if sub in MODULES else _resolve(mod), node.lineno))
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return [(m, line) for m, line in out if m is not None and m != module]


GRAPH = {m: imports_of(m) for m in MODULES}


def test_every_module_has_a_layer():
    assert len(MODULES) > 60  # the scan really saw the package
    missing = [m for m in MODULES if rank(m) is None]
    assert not missing, f"add these modules to LAYERS (and to docs/architecture.md): {missing}"


def test_imports_point_down_the_layers():
    wrong = []
    for src, targets in GRAPH.items():
        for dst, line in targets:
            if rank(dst) > rank(src):
                wrong.append(f"{MODULES[src].relative_to(SERVER)}:{line} {src} ({NAMES[rank(src) // 10]} "
                             f"{rank(src)}) imports {dst} ({NAMES[rank(dst) // 10]} {rank(dst)})")
    assert not wrong, "imports against the layer order:\n" + "\n".join(wrong)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = 0
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on.add(root)
        while work:
            node, it = work[-1]
            nxt = next(it, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.append(w)
                    if w == node:
                        break
                if len(comp) > 1:
                    out.append(sorted(comp))
    return out


def test_no_import_cycles():
    cycles = _cycles({m: {d for d, _ in targets} for m, targets in GRAPH.items()})
    assert not cycles, "modules that import each other (directly or around a circle):\n" + "\n".join(
        " <-> ".join(c) for c in cycles)


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_core_never_imports_a_surface_the_daemon_or_the_service():
    up = ("mnemo.service", "mnemo.daemon", "mnemo.cli", "mnemo.lsp", "mnemo.mcp")
    bad = [f"{src} imports {dst} (line {line})" for src, targets in GRAPH.items() if src.startswith("mnemo.core")
           for dst, line in targets if dst.startswith(up)]
    assert not bad, bad


# -- rooms ----------------------------------------------------------------------------------------------------------
CORE = PACKAGE / "core"
DOC = SERVER.parent / "docs" / "architecture.md"


def test_each_core_package_is_one_room_on_one_floor():
    pkgs = [module_name(p) for p in sorted(CORE.rglob("__init__.py")) if p.parent != CORE]
    assert len(pkgs) >= 10
    missing = [p for p in pkgs if f"{p}.*" not in LAYERS]
    assert not missing, f"give each core package one floor in LAYERS (\"pkg.*\"): {missing}"
    split = [k for k in LAYERS if any(k.startswith(p + ".") and k != f"{p}.*" for p in pkgs)]
    assert not split, f"a module inside a room has a floor of its own (move it, or give the room one floor): {split}"


def test_the_core_top_holds_at_most_a_dozen_modules():
    top = sorted(p.stem for p in CORE.glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 12, f"{len(top)} modules at the core's top; put them in rooms: {top}"


def test_no_core_module_imports_the_service_even_for_annotations():
    bad = []
    for m, path in MODULES.items():
        if not m.startswith("mnemo.core"):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else \
                [f"{node.module}.{a.name}" for a in node.names] if isinstance(node, ast.ImportFrom) and node.module \
                else []
            bad += [f"{m}:{node.lineno} {n}" for n in names if n == "mnemo.service" or n.startswith("mnemo.service.")]
    assert not bad, "the core calls no service (a callback the service hands in is an arrow up too):\n" + "\n".join(bad)


def floor_table() -> str:
    """docs/architecture.md's rank table, from LAYERS (`python tests/unit/test_architecture.py` prints it)."""
    rows = ["| rank | modules |", "|---|---|"]
    for r in sorted(set(LAYERS.values()), reverse=True):
        names = [k.replace("mnemo.core.", "core.") for k, v in LAYERS.items() if v == r]
        rows.append(f"| {r} | " + ", ".join(f"`{n}`" for n in names) + " |")
    return "\n".join(rows) + "\n"


def test_docs_floor_table_is_layers():
    assert floor_table() in DOC.read_text(encoding="utf-8"), (
        "docs/architecture.md's rank table is not LAYERS: paste `python tests/unit/test_architecture.py`")


# -- SQL only in the store ---------------------------------------------------------------------------------------
STORE = PACKAGE / "core" / "store"
SQL_METHODS = {"execute", "executemany", "executescript"}


def sql_calls(path: Path) -> list[int]:
    """Lines that call `.execute(`, `.executemany(` or `.executescript(` (on a connection or a cursor)."""
    tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
    return [n.lineno for n in ast.walk(tree) if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute)
            and n.func.attr in SQL_METHODS]


def test_sql_runs_only_in_the_store():
    assert STORE.is_dir()
    inside = sum(len(sql_calls(p)) for p in STORE.rglob("*.py"))
    assert inside > 50  # the scan really sees the statements
    outside = [f"{p.relative_to(SERVER)}:{line}" for p in sorted(PACKAGE.rglob("*.py")) if STORE not in p.parents
               for line in sql_calls(p)]
    assert not outside, "SQL outside mnemo/core/store:\n" + "\n".join(outside)


@pytest.mark.parametrize("src", ["conn.execute('SELECT 1')", "self.store.conn().executemany(q, rows)",
                                 "db.executescript(SCHEMA)"])
def test_the_sql_scan_sees_a_statement(tmp_path, src):
    f = tmp_path / "m.py"
    f.write_text(f"def f(conn, db, q, rows, SCHEMA, self):\n    {src}\n")
    assert sql_calls(f) == [2]


if __name__ == "__main__":
    print(floor_table(), end="")
