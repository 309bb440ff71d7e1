"""tree-sitter code context: enclosing symbols, qualified names, signatures, docstrings, anchors, large files."""

from __future__ import annotations

import threading

import pytest

from mnemo.core.files import code_symbols as cc

PY = '''import os


class PaymentsClient:
    """Talks to the payments API."""

    @retry(3)
    def post(self, path: str, body: dict) -> dict:
        """POST with an idempotency key. Retries twice."""
        key = new_key()
        return self._send(path, body, key)


def helper(x):
    return x
'''

TS = '''// Client for payments.
export class Payments {
  /** Post with retry. */
  async post(path: string): Promise<void> { return; }
  handler = async (x: number) => { return x; }
}
/** Build it. */
export const build = (a: number) => a + 1;
interface Opts { a: number }
'''

GO = '''package x
// Client does things.
type Client struct { a int }
// Post posts.
func (c *Client) Post(path string) error {
  return nil
}
'''

RUST = '''/// A client.
pub struct Client { a: i32 }
impl Client {
    /// Post it.
    pub fn post(&self, path: &str) -> Result<(), E> {
        Ok(())
    }
}
'''

JAVA = '''package x;
/** The client. */
public class Client {
    /** Posts. */
    public void post(String path) throws IOException {
        send(path);
    }
}
'''

JS = '''class A {
  m() { return 1; }
}
function f() {
  const g = function() { return 2; };
}
'''


def syms(text: str, lang: str) -> dict[str, cc.Symbol]:
    return {s.qualname: s for s in cc.symbols(cc.parse_document(text, lang))}


def test_python_symbols_signature_docstring():
    s = syms(PY, "python")
    assert set(s) == {"PaymentsClient", "PaymentsClient.post", "helper"}
    post = s["PaymentsClient.post"]
    assert post.kind == "method" and s["PaymentsClient"].kind == "class" and s["helper"].kind == "function"
    assert post.signature == "def post(self, path: str, body: dict) -> dict"
    assert post.docstring == "POST with an idempotency key. Retries twice."
    assert s["PaymentsClient"].docstring == "Talks to the payments API."
    assert post.start_line == 6  # the decorator line: where a code lens goes
    assert post.name_line == 7 and post.end_line == 10


def test_python_enclosing_chain_and_query():
    ctx, parsed = cc.context_at(PY, 9, 9, "python")
    assert [x.qualname for x in ctx.chain] == ["PaymentsClient", "PaymentsClient.post"]
    assert ctx.word == "key" and parsed is not None
    q = ctx.query()
    assert q.startswith("key payments client post path body") and q.endswith("POST with an idempotency key.")
    assert not {"def", "self", "str", "dict"} & set(q.split())  # code noise stays out of the query
    top, _ = cc.context_at(PY, 0, 3, "python")
    assert top.chain == () and top.word == "import"


@pytest.mark.parametrize("text,lang,line,col,qual,kind,sig,doc", [
    (TS, "typescript", 3, 9, "Payments.post", "method", "async post(path: string): Promise<void>", "Post with retry."),
    (TS, "typescript", 4, 30, "Payments.handler", "method", "handler = async (x: number) =>", ""),
    (TS, "typescript", 7, 20, "build", "function", "build = (a: number) =>", "Build it."),
    (TS, "tsx", 3, 9, "Payments.post", "method", "async post(path: string): Promise<void>", "Post with retry."),
    (GO, "go", 5, 4, "Client.Post", "method", "func (c *Client) Post(path string) error", "Post posts."),
    (RUST, "rust", 5, 9, "Client.post", "method", "pub fn post(&self, path: &str) -> Result<(), E>", "Post it."),
    (JAVA, "java", 5, 10, "Client.post", "method", "public void post(String path) throws IOException", "Posts."),
    (JS, "javascript", 4, 30, "f.g", "function", "g = function()", ""),
])
def test_languages(text, lang, line, col, qual, kind, sig, doc):
    ctx, _ = cc.context_at(text, line, col, lang)
    sym = ctx.symbol
    assert sym is not None and sym.qualname == qual and sym.kind == kind
    assert sym.signature == sig
    assert sym.docstring == doc


def test_type_level_symbols():
    assert syms(GO, "go")["Client"].kind == "struct"
    assert syms(GO, "go")["Client"].docstring == "Client does things."
    r = syms(RUST, "rust")
    assert r["Client"].kind in ("struct", "impl") and r["Client"].docstring in ("A client.", "")
    assert syms(TS, "typescript")["Opts"].kind == "interface"
    assert syms(TS, "typescript")["Payments"].docstring == "Client for payments."


def test_language_for():
    assert cc.language_for("file:///a/b.py") == "python"
    assert cc.language_for("x.tsx") == "tsx" and cc.language_for("x.rs") == "rust"
    assert cc.language_for("x.unknown") is None
    assert cc.language_for("whatever", "typescriptreact") == "tsx"
    ctx, parsed = cc.context_at("some text here", 0, 6, None)
    assert ctx.word == "text" and ctx.chain == () and parsed is None


def test_anchor_and_hash_follow_the_code():
    post = syms(PY, "python")["PaymentsClient.post"]
    a = post.anchor("src/client.py")
    assert a == {"path": "src/client.py", "symbol": "PaymentsClient.post", "kind": "method", "start_line": 6,
                 "end_line": 10, "hash": post.code_hash}
    assert post.current() == {"name": "PaymentsClient.post", "hash": post.code_hash, "start_line": 6, "end_line": 10}
    moved = syms("\n\n" + PY, "python")["PaymentsClient.post"]
    assert moved.code_hash == post.code_hash and moved.start_line == 8  # moving code keeps the hash
    edited = syms(PY.replace("new_key()", "other_key()"), "python")["PaymentsClient.post"]
    assert edited.code_hash != post.code_hash
    assert syms(PY.replace("new_key()", "other_key()"), "python")["helper"].code_hash == syms(PY, "python")[
        "helper"].code_hash


def test_words_ranges_and_identifiers():
    assert cc.word_at("    key = new_key()", 5) == "key"
    assert cc.word_at("    key = new_key()", 4) == "key"
    assert cc.word_at("    key = new_key()", 11) == "new_key"
    assert cc.word_at("   ", 1) is None
    assert cc.split_identifier("retryPostHTTPRequest") == "retry post http request"
    assert cc.split_identifier("snake_case_name") == "snake case name"
    text = "ab\ncdef\nghi"
    assert cc.text_range(text, 1, 1, 2, 2) == "def\ngh"
    assert cc.line_at(text, 1) == "cdef" and cc.line_at(text, 9) == ""


def test_unicode_columns():
    text = 'def f():\n    s = "ünïcödé"; value = 1\n'
    line = cc.line_at(text, 1)
    col = line.index("value")
    ctx, _ = cc.context_at(text, 1, col, "python")
    assert ctx.word == "value" and ctx.symbol.qualname == "f"


def test_large_document_parses_a_window():
    big = PY * 6000  # ~1.9 MB: above the window threshold
    line = len(big.splitlines()) // 2
    line = line - line % PY.count("\n") + 9
    ctx, parsed = cc.context_at(big, line, 9, "python")
    assert parsed is None and ctx.windowed
    assert ctx.symbol is not None and ctx.symbol.qualname == "PaymentsClient.post"
    assert ctx.symbol.start_line == line - 3  # document line numbers, not window line numbers


def test_parse_can_be_cancelled():
    big = (PY * 4000).encode()
    flag = threading.Event()
    flag.set()
    with pytest.raises(cc.ParseCancelled):
        cc.parse(big, "python", cancelled=flag.is_set)
    assert cc.parse(big, "python").root_node.end_byte == len(big)


def test_symbol_limit_and_broken_code():
    s = cc.symbols(cc.parse_document("def broken(:\n    pass\nclass Ok:\n    pass\n", "python"))
    assert any(x.qualname == "Ok" for x in s)
    many = "".join(f"def f{i}():\n    pass\n" for i in range(50))
    assert len(cc.symbols(cc.parse_document(many, "python"), limit=10)) == 10
