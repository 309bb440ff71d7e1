"""Code context with tree-sitter: the enclosing function/class of a position, its signature and docstring.

Used to build recall queries (hover, code actions, injection preview) and to anchor memories to symbols
(`Symbol.anchor`). Grammars come from `tree_sitter_language_pack` (bundled, offline), imported lazily so the
language server answers `initialize` before any grammar is loaded.

Large documents: tree-sitter holds the GIL while it parses (a 10 MB file takes seconds), so the source is fed in
chunks through a read callback that yields the GIL between chunks (the event loop keeps running) and that can end
the parse early when the caller cancels. Above `window_threshold` bytes only a window of lines around the
position is parsed; an enclosing class that starts above the window is then missed (documented limitation).
"""

from __future__ import annotations

import hashlib
import re
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

# languageId (LSP) or file extension -> tree_sitter_language_pack name
LANGUAGE_IDS = {
    "python": "python", "typescript": "typescript", "typescriptreact": "tsx", "javascript": "javascript",
    "javascriptreact": "javascript", "go": "go", "rust": "rust", "java": "java", "c": "c", "cpp": "cpp",
    "ruby": "ruby", "php": "php", "kotlin": "kotlin",
}
EXTENSIONS = {
    ".py": "python", ".pyi": "python", ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "tsx", ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript", ".jsx": "javascript",
    ".go": "go", ".rs": "rust", ".java": "java", ".c": "c", ".h": "c", ".cc": "cpp", ".cpp": "cpp",
    ".cxx": "cpp", ".hpp": "cpp", ".hh": "cpp", ".rb": "ruby", ".php": "php", ".kt": "kotlin", ".kts": "kotlin",
}

# Node types that define a symbol, per language -> the kind reported.
_JS_LIKE = {
    "function_declaration": "function", "generator_function_declaration": "function",
    "class_declaration": "class", "abstract_class_declaration": "class", "method_definition": "method",
    "interface_declaration": "interface", "enum_declaration": "enum", "type_alias_declaration": "type",
    "function_signature": "function", "method_signature": "method", "abstract_method_signature": "method",
    "internal_module": "namespace",
}
SYMBOL_NODES: dict[str, dict[str, str]] = {
    "python": {"function_definition": "function", "class_definition": "class"},
    "typescript": _JS_LIKE, "tsx": _JS_LIKE, "javascript": _JS_LIKE,
    "go": {"function_declaration": "function", "method_declaration": "method", "type_spec": "type"},
    "rust": {"function_item": "function", "struct_item": "struct", "enum_item": "enum", "trait_item": "trait",
             "impl_item": "impl", "mod_item": "module", "function_signature_item": "function"},
    "java": {"class_declaration": "class", "interface_declaration": "interface", "enum_declaration": "enum",
             "record_declaration": "class", "method_declaration": "method", "constructor_declaration": "method",
             "annotation_type_declaration": "interface"},
    "c": {"function_definition": "function", "struct_specifier": "struct", "enum_specifier": "enum"},
    "cpp": {"function_definition": "function", "struct_specifier": "struct", "class_specifier": "class",
            "enum_specifier": "enum", "namespace_definition": "namespace"},
    "ruby": {"method": "method", "singleton_method": "method", "class": "class", "module": "module"},
    "php": {"function_definition": "function", "method_declaration": "method", "class_declaration": "class",
            "interface_declaration": "interface", "trait_declaration": "trait"},
    "kotlin": {"function_declaration": "function", "class_declaration": "class", "object_declaration": "class"},
}
# Variables bound to a function (`const handler = async () => {}`) count as functions in JS/TS.
_JS_FUNCTION_VALUES = {"arrow_function", "function_expression", "function", "generator_function"}
_NAME_TYPES = ("identifier", "type_identifier", "simple_identifier", "field_identifier", "property_identifier",
               "constant", "name", "qualified_identifier", "scoped_identifier", "destructor_name",
               "operator_name")
_COMMENT_TYPES = {"comment", "line_comment", "block_comment", "doc_comment"}
_SKIP_BEFORE_DEF = {"attribute_item", "decorator", "annotation", "marker_annotation", "modifiers",
                    "inner_attribute_item"}
_CLASS_KINDS = {"class", "struct", "interface", "enum", "trait", "impl", "module", "namespace", "type"}

SIGNATURE_CHARS = 240
DOCSTRING_CHARS = 600
CHUNK = 64 * 1024
WINDOW_THRESHOLD = 256 * 1024  # above this, hovers parse a window of lines around the cursor
WINDOW_LINES_BEFORE = 1500
WINDOW_LINES_AFTER = 300

_WORD = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
_IDENT_PARTS = re.compile(r"[A-Z]+(?=[A-Z][a-z])|[A-Z]?[a-z]+|[A-Z]+|[0-9]+")


class ParseCancelled(Exception):
    """The caller cancelled a parse (its request was cancelled)."""


@dataclass(frozen=True)
class Symbol:
    name: str
    qualname: str  # "PaymentsClient.post"
    kind: str  # function | method | class | struct | interface | enum | trait | impl | module | namespace | type
    start_line: int  # 0-based, inclusive
    start_col: int  # code points
    end_line: int
    end_col: int
    signature: str
    docstring: str
    code_hash: str  # sha256 of the symbol's source text (stripped)
    name_line: int = 0
    name_col: int = 0

    def contains(self, line: int) -> bool:
        return self.start_line <= line <= self.end_line

    def anchor(self, path: str | None) -> dict[str, Any]:
        """The anchor stored on a memory (`hash` is what `check_anchors` compares to flag stale anchors)."""
        return {"path": path, "symbol": self.qualname, "kind": self.kind, "start_line": self.start_line,
                "end_line": self.end_line, "hash": self.code_hash}

    def current(self) -> dict[str, Any]:
        """This symbol as `check_anchors` wants the file's current symbols."""
        return {"name": self.qualname, "hash": self.code_hash, "start_line": self.start_line,
                "end_line": self.end_line}

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "qualname": self.qualname, "kind": self.kind,
                "range": [self.start_line, self.start_col, self.end_line, self.end_col],
                "signature": self.signature, "docstring": self.docstring, "code_hash": self.code_hash}


@dataclass(frozen=True)
class CodeContext:
    """What is at a position: the word, the enclosing symbols (outermost first), the line."""

    language: str | None
    word: str | None
    line_text: str
    chain: tuple[Symbol, ...] = ()
    windowed: bool = False

    @property
    def symbol(self) -> Symbol | None:
        return self.chain[-1] if self.chain else None

    def query(self) -> str:
        """A recall query: the identifier and the enclosing names as words, the signature's meaningful words, the
        docstring's first sentence. Code noise (`def`, `self`, `str`, `dict`, ...) is left out: it only costs BM25
        time and pulls in unrelated notes."""
        sym = self.symbol
        words = [self.word or ""]
        if sym is not None:
            words += [s.name for s in self.chain]
            words.append(sym.signature)
            return build_query(words, sym.docstring)
        return build_query([*words, self.line_text[:200]], "")


def build_query(code_parts: list[str], doc: str) -> str:
    seen: set[str] = set()
    out: list[str] = []
    for part in code_parts:
        for w in split_identifier(part or "").split():
            if len(w) > 1 and w not in CODE_NOISE and w not in seen and not w.isdigit():
                seen.add(w)
                out.append(w)
    text = " ".join(out[:40])
    sentence = first_sentence(doc) if doc else ""
    return (text + ("\n" + sentence if sentence else "")).strip()[:1000]


def symbol_query(sym: Symbol) -> str:
    """The recall query for a symbol as a whole (code lenses)."""
    return build_query([sym.qualname.replace(".", " "), sym.signature], sym.docstring)


# Words that say nothing about what code is for (keywords, builtin types, common parameter names).
CODE_NOISE = frozenset("""
def self cls async await return fn func function pub public private protected static void const let var
str int float bool bytes dict list tuple set frozenset any none optional union callable iterable iterator
string number boolean object array promise undefined null true false this super new class struct impl enum
interface type mut ref usize isize u8 u16 u32 u64 i8 i16 i32 i64 f32 f64 char long short double byte final
override throws extends implements args kwargs kw arg param params val value x y i j k n
""".split())


@dataclass
class ParsedDocument:
    language: str
    tree: Any
    source: bytes
    row_offset: int = 0  # first line of the parsed window in the document
    windowed: bool = False
    symbols: list[Symbol] | None = field(default=None, repr=False)


def split_identifier(name: str) -> str:
    words: list[str] = []
    for chunk in re.split(r"[^A-Za-z0-9]+", name):
        words.extend(m.group(0).lower() for m in _IDENT_PARTS.finditer(chunk))
    return " ".join(words) or name


def first_sentence(text: str, limit: int = 200) -> str:
    flat = " ".join(text.split())
    m = re.search(r"(?<=[.!?])\s", flat)
    return (flat[: m.start()] if m else flat)[:limit]


def language_for(path_or_uri: str | None, language_id: str | None = None) -> str | None:
    if language_id and language_id in LANGUAGE_IDS:
        return LANGUAGE_IDS[language_id]
    if path_or_uri:
        return EXTENSIONS.get(PurePath(path_or_uri.split("?", 1)[0]).suffix.lower())
    return None


_parsers: dict[str, Any] = {}
_parsers_lock = threading.Lock()


def _parser(language: str):
    """One parser per language and thread (a tree-sitter Parser is not thread-safe)."""
    key = f"{language}:{threading.get_ident()}"
    with _parsers_lock:
        p = _parsers.get(key)
    if p is None:
        from tree_sitter_language_pack import get_parser

        p = get_parser(language)  # type: ignore[arg-type]
        with _parsers_lock:
            _parsers[key] = p
    return p


def parse(source: bytes, language: str, cancelled: Callable[[], bool] | None = None) -> Any:
    """Parse in chunks, yielding the GIL between chunks; raise ParseCancelled when `cancelled()` turns true."""
    parser = _parser(language)
    state = {"n": 0}

    def read(offset: int, _point) -> bytes:
        state["n"] += 1
        if state["n"] % 4 == 0:
            time.sleep(0)  # let the event loop thread run
            if cancelled is not None and cancelled():
                raise ParseCancelled()
        return source[offset: offset + CHUNK]

    if len(source) <= CHUNK:
        return parser.parse(source)
    try:
        return parser.parse(read)
    except ParseCancelled:
        raise
    except Exception as exc:  # the binding re-raises the callback's exception wrapped on some versions
        if cancelled is not None and cancelled():
            raise ParseCancelled() from exc
        raise


def parse_document(text: str, language: str, cancelled: Callable[[], bool] | None = None) -> ParsedDocument:
    data = text.encode("utf-8", errors="surrogatepass")
    return ParsedDocument(language, parse(data, language, cancelled), data)


def parse_window(text: str, language: str, line: int, cancelled: Callable[[], bool] | None = None,
                 before: int = WINDOW_LINES_BEFORE, after: int = WINDOW_LINES_AFTER) -> ParsedDocument:
    """Parse only lines [line-before, line+after] of a large document."""
    start_off = 0
    first = max(0, line - before)
    # find the offset of line `first` and of line `line+after+1` without splitting the whole text
    pos = 0
    for _ in range(first):
        nxt = text.find("\n", pos)
        if nxt < 0:
            break
        pos = nxt + 1
    start_off = pos
    for _ in range(line - first + after + 1):
        nxt = text.find("\n", pos)
        if nxt < 0:
            pos = len(text)
            break
        pos = nxt + 1
    chunk = text[start_off:pos].encode("utf-8", errors="surrogatepass")
    return ParsedDocument(language, parse(chunk, language, cancelled), chunk, row_offset=first, windowed=True)


def _node_text(src: bytes, node) -> str:
    return src[node.start_byte: node.end_byte].decode("utf-8", errors="replace")


def _col(src: bytes, node_byte: int, point_col: int) -> int:
    """Byte column -> code-point column."""
    line_start = node_byte - point_col
    return len(src[line_start: node_byte].decode("utf-8", errors="replace"))


def _name_node(node, language: str):
    n = node.child_by_field_name("name")
    if n is None and language in ("c", "cpp") and node.type == "function_definition":
        d = node.child_by_field_name("declarator")
        while d is not None and d.child_by_field_name("declarator") is not None and d.type not in (
                "identifier", "qualified_identifier", "field_identifier", "destructor_name", "operator_name"):
            d = d.child_by_field_name("declarator")
        return d
    if n is None and node.type == "impl_item":
        return node.child_by_field_name("type")
    if n is None:
        for child in node.named_children:
            if child.type in _NAME_TYPES:
                return child
    return n


def _js_variable_function(node) -> tuple[Any, Any] | None:
    """`const f = () => {}` / `f = function() {}` / class field `f = () => {}` -> (name node, function node)."""
    if node.type in ("variable_declarator", "public_field_definition", "field_definition"):
        value = node.child_by_field_name("value")
        name = node.child_by_field_name("name") or node.child_by_field_name("property")
        if value is not None and value.type in _JS_FUNCTION_VALUES and name is not None:
            return name, value
    return None


def _signature(src: bytes, node, language: str, binding=None) -> str:
    """The definition up to its body, on one line. `binding`: the `const f =` declarator of a JS function value."""
    body = node.child_by_field_name("body")
    end = body.start_byte if body is not None else node.end_byte
    start = binding.start_byte if binding is not None else node.start_byte
    text = src[start: end].decode("utf-8", errors="replace")
    if body is None:
        text = text.split("\n", 1)[0]
    text = " ".join(text.split()).rstrip("{:= ").strip()
    return text[:SIGNATURE_CHARS]


def _strip_comment(text: str) -> str:
    lines = []
    for raw in text.splitlines():
        s = raw.strip()
        s = re.sub(r"^(///?!?|/\*\*?|\*/|\*|#+|--)\s?", "", s)
        s = re.sub(r"\*/$", "", s).strip()
        lines.append(s)
    return "\n".join(line for line in lines).strip()


def _docstring(src: bytes, node, language: str, outer) -> str:
    if language == "python":
        body = node.child_by_field_name("body")
        if body is not None and body.named_children:
            first = body.named_children[0]
            if first.type == "expression_statement" and first.named_children:
                first = first.named_children[0]
            if first.type == "string":
                content = [c for c in first.named_children if c.type == "string_content"]
                raw = "".join(_node_text(src, c) for c in content) if content else _node_text(src, first)
                raw = re.sub(r'^[rRbBuUfF]*("""|\'\'\'|"|\')', "", raw)
                raw = re.sub(r'("""|\'\'\'|"|\')$', "", raw)
                return _clean_doc(raw)
        return ""
    # Other languages: the comment block right above the definition (or above its export/decorators).
    anchor = outer
    prev = anchor.prev_named_sibling
    while prev is not None and prev.type in _SKIP_BEFORE_DEF:
        prev = prev.prev_named_sibling
    comments = []
    expected_row = anchor.start_point.row
    while prev is not None and prev.type in _COMMENT_TYPES and prev.end_point.row >= expected_row - 1:
        comments.append(_node_text(src, prev))
        expected_row = prev.start_point.row
        prev = prev.prev_named_sibling
    if language == "ruby" and not comments:
        return ""
    return _clean_doc(_strip_comment("\n".join(reversed(comments))))


def _clean_doc(text: str) -> str:
    lines = [line.strip() for line in text.strip().splitlines()]
    return "\n".join(lines).strip()[:DOCSTRING_CHARS]


def _outer(node):
    """The node a comment/decorator attaches to: `export ...`, `@decorated`, `pub` wrappers."""
    parent = node.parent
    while parent is not None and parent.type in ("export_statement", "decorated_definition", "lexical_declaration",
                                                  "variable_declaration", "type_declaration"):
        node, parent = parent, parent.parent
    return node


def _make_symbol(src: bytes, node, name_node, kind: str, qual_prefix: tuple[str, ...], language: str,
                 row_offset: int, def_node=None) -> Symbol:
    name = _node_text(src, name_node).strip() if name_node is not None else "<anonymous>"
    if language == "go" and node.type == "method_declaration":
        recv = node.child_by_field_name("receiver")
        if recv is not None:
            rtype = re.sub(r"[^A-Za-z0-9_]", " ", _node_text(src, recv)).split()
            if rtype:
                qual_prefix = (*qual_prefix, rtype[-1])
    qualname = ".".join((*qual_prefix, name)) if qual_prefix else name
    outer = _outer(node)
    span = outer if outer.type == "decorated_definition" else node
    text = _node_text(src, node).strip()
    doc_node = def_node if def_node is not None else node
    return Symbol(
        name=name, qualname=qualname, kind=kind,
        start_line=span.start_point.row + row_offset, start_col=_col(src, span.start_byte, span.start_point.column),
        end_line=node.end_point.row + row_offset, end_col=_col(src, node.end_byte, node.end_point.column),
        signature=_signature(src, doc_node, language, node if def_node is not None and def_node is not node else None),
        docstring=_docstring(src, doc_node, language, outer),
        code_hash=hashlib.sha256(text.encode("utf-8", errors="surrogatepass")).hexdigest(),
        name_line=(name_node.start_point.row + row_offset) if name_node is not None else node.start_point.row,
        name_col=_col(src, name_node.start_byte, name_node.start_point.column) if name_node is not None else 0,
    )


def _classify(node, language: str, parent_kinds: tuple[str, ...]):
    """(kind, name node, definition node) when `node` defines a symbol, else None."""
    kinds = SYMBOL_NODES.get(language, {})
    kind = kinds.get(node.type)
    if kind is not None:
        if language in ("c", "cpp") and kind in ("struct", "class", "enum") and \
                node.child_by_field_name("body") is None:
            return None  # a use (`struct foo x;`), not a definition
        if kind == "function" and parent_kinds and parent_kinds[-1] in _CLASS_KINDS:
            kind = "method"
        if language == "go" and node.type == "type_spec":
            t = node.child_by_field_name("type")
            kind = {"struct_type": "struct", "interface_type": "interface"}.get(t.type if t else "", "type")
        return kind, _name_node(node, language), node
    if language in ("typescript", "tsx", "javascript"):
        hit = _js_variable_function(node)
        if hit is not None:
            name, value = hit
            in_class = bool(parent_kinds) and parent_kinds[-1] in _CLASS_KINDS
            return ("method" if in_class else "function"), name, value
    return None


def iter_symbols(doc: ParsedDocument, limit: int = 100_000,
                 cancelled: Callable[[], bool] | None = None) -> Iterator[Symbol]:
    """Every symbol definition in document order, with qualified names."""
    src, language = doc.source, doc.language
    stack: list[tuple[Any, tuple[str, ...], tuple[str, ...]]] = [(doc.tree.root_node, (), ())]
    count = 0
    visited = 0
    while stack:
        node, prefix, parent_kinds = stack.pop()
        visited += 1
        if visited % 2000 == 0:
            time.sleep(0)  # yield the GIL: the event loop thread keeps answering
            if cancelled is not None and cancelled():
                raise ParseCancelled()
        hit = _classify(node, language, parent_kinds)
        child_prefix, child_kinds = prefix, parent_kinds
        if hit is not None:
            kind, name_node, def_node = hit
            sym = _make_symbol(src, node, name_node, kind, prefix, language, doc.row_offset, def_node)
            yield sym
            count += 1
            if count >= limit:
                return
            child_prefix, child_kinds = (*prefix, sym.name), (*parent_kinds, kind)
        for child in reversed(node.named_children):
            stack.append((child, child_prefix, child_kinds))


def symbols(doc: ParsedDocument, limit: int = 100_000, cancelled: Callable[[], bool] | None = None) -> list[Symbol]:
    if doc.symbols is None or limit < 100_000:
        result = list(iter_symbols(doc, limit, cancelled))
        if limit >= 100_000:
            doc.symbols = result
        return result
    return doc.symbols


def enclosing(doc: ParsedDocument, line: int, col_bytes: int) -> tuple[Symbol, ...]:
    """The symbols enclosing (line, byte column), outermost first."""
    row = line - doc.row_offset
    if row < 0:
        return ()
    root = doc.tree.root_node
    node = root.descendant_for_point_range((row, col_bytes), (row, col_bytes))
    chain_nodes = []
    while node is not None:
        chain_nodes.append(node)
        node = node.parent
    chain_nodes.reverse()
    out: list[Symbol] = []
    prefix: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    for n in chain_nodes:
        hit = _classify(n, doc.language, kinds)
        if hit is None:
            continue
        kind, name_node, def_node = hit
        sym = _make_symbol(doc.source, n, name_node, kind, prefix, doc.language, doc.row_offset, def_node)
        out.append(sym)
        prefix, kinds = (*prefix, sym.name), (*kinds, kind)
    return tuple(out)


def word_at(line_text: str, col: int) -> str | None:
    """The identifier at code-point column `col` of the line (or just before it), if any."""
    for m in _WORD.finditer(line_text):
        if m.start() <= col <= m.end():
            return m.group(0)
        if m.start() > col:
            break
    return None


def text_range(text: str, start_line: int, start_col: int, end_line: int, end_col: int) -> str:
    """The text between two (line, code-point column) positions, without splitting the whole document."""
    def offset(line: int, col: int) -> int:
        pos = 0
        for _ in range(line):
            nxt = text.find("\n", pos)
            if nxt < 0:
                return len(text)
            pos = nxt + 1
        end = text.find("\n", pos)
        end = len(text) if end < 0 else end
        return min(pos + col, end)

    a, b = offset(start_line, start_col), offset(end_line, end_col)
    return text[min(a, b): max(a, b)]


def line_at(text: str, line: int) -> str:
    """Line `line` of `text` without splitting the whole document."""
    pos = 0
    for _ in range(line):
        nxt = text.find("\n", pos)
        if nxt < 0:
            return ""
        pos = nxt + 1
    end = text.find("\n", pos)
    return text[pos: end if end >= 0 else len(text)].rstrip("\r")


def context_at(text: str, line: int, col: int, language: str | None, *, parsed: ParsedDocument | None = None,
               window_threshold: int = WINDOW_THRESHOLD,
               cancelled: Callable[[], bool] | None = None) -> tuple[CodeContext, ParsedDocument | None]:
    """The code context at (line, code-point col). Returns the parsed document too, for caching (None when the
    document was parsed as a window, or not parsed)."""
    line_text = line_at(text, line)
    word = word_at(line_text, col)
    if language is None:
        return CodeContext(None, word, line_text), None
    col_bytes = len(line_text[:col].encode("utf-8", errors="surrogatepass"))
    keep = parsed
    if parsed is None:
        if len(text) > window_threshold:
            parsed = parse_window(text, language, line, cancelled)
            keep = None
        else:
            parsed = parse_document(text, language, cancelled)
            keep = parsed
    chain = enclosing(parsed, line, col_bytes)
    return CodeContext(language, word, line_text, chain, parsed.windowed), keep


__all__ = ["CodeContext", "ParsedDocument", "ParseCancelled", "Symbol", "context_at", "enclosing",
           "iter_symbols", "language_for", "line_at", "parse_document", "parse_window", "split_identifier",
           "symbols", "word_at"]
