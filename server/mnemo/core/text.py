"""Text utilities shared by recall and skills: normalization, tokenization, a small in-memory BM25, and RRF."""

from __future__ import annotations

import functools
import hashlib
import math
import re
import threading
import unicodedata
from collections import Counter
from collections.abc import Iterable, Sequence

# Small English stop-word list: keeps BM25 focused on content words in natural-language queries.
STOPWORDS = frozenset(
    """a an and are as at be been but by can could do does did for from had has have how i if in into is it its
    me my of on or our should so that the their them then there these they this to was we were what when where
    which who why will with would you your about after all also any before each just more most not only other
    over same some such than too very via use using used want need make get""".split()
)

_TOKEN_RE = re.compile(r"[a-z0-9]+")
_CAMEL_RE = re.compile(r"(?<=[a-z0-9])(?=[A-Z])")


def normalize_text(text: str) -> str:
    """Canonical form used for content hashes: NFKC, collapsed whitespace, lower case, no trailing period."""
    text = unicodedata.normalize("NFKC", text)
    text = " ".join(text.split()).lower()
    return text.rstrip(" .!")


def content_hash(text: str) -> str:
    return hashlib.sha256(normalize_text(text).encode("utf-8")).hexdigest()[:32]


_stemmers = threading.local()


@functools.lru_cache(maxsize=200_000)
def _stem(tok: str) -> str:
    """Snowball (Porter 2) English stemming via PyStemmer; its stemmer objects are per thread (not thread-safe)."""
    st = getattr(_stemmers, "st", None)
    if st is None:
        import Stemmer

        st = _stemmers.st = Stemmer.Stemmer("english")
    return st.stemWord(tok)


def tokenize(text: str, *, stem: bool = True, keep_stopwords: bool = False) -> list[str]:
    """Lower-case word tokens; camelCase and snake_case identifiers are split as well as kept whole."""
    out: list[str] = []
    for raw in re.findall(r"[A-Za-z0-9_]+", text):
        parts = [p for p in _CAMEL_RE.sub(" ", raw).replace("_", " ").split() if p]
        words = [raw.lower()] if len(parts) > 1 else []
        words += [p.lower() for p in parts]
        for w in words:
            if not keep_stopwords and w in STOPWORDS:
                continue
            if len(w) == 1 and not w.isdigit():
                continue
            out.append(_stem(w) if stem else w)
    return out


def rrf(rankings: Sequence[Sequence[str]], k: int = 60, weights: Sequence[float] | None = None) -> dict[str, float]:
    """Reciprocal rank fusion: sum over rankings of weight / (k + rank), rank starting at 1."""
    scores: dict[str, float] = {}
    for i, ranking in enumerate(rankings):
        w = 1.0 if weights is None else weights[i]
        for rank, key in enumerate(ranking, start=1):
            scores[key] = scores.get(key, 0.0) + w / (k + rank)
    return scores


class BM25:
    """Okapi BM25 over a small in-memory corpus (skills, a conversation): O(query terms x postings)."""

    def __init__(self, docs: Iterable[Sequence[str]], k1: float = 1.2, b: float = 0.75):
        self.k1, self.b = k1, b
        self.doc_len: list[int] = []
        self.postings: dict[str, list[tuple[int, int]]] = {}
        for i, toks in enumerate(docs):
            self.doc_len.append(len(toks))
            for term, tf in Counter(toks).items():
                self.postings.setdefault(term, []).append((i, tf))
        self.n = len(self.doc_len)
        self.avgdl = (sum(self.doc_len) / self.n) if self.n else 0.0

    def idf(self, term: str) -> float:
        df = len(self.postings.get(term, ()))
        return math.log(1 + (self.n - df + 0.5) / (df + 0.5))

    def scores(self, query_tokens: Sequence[str]) -> dict[int, float]:
        out: dict[int, float] = {}
        if not self.n:
            return out
        for term in set(query_tokens):
            plist = self.postings.get(term)
            if not plist:
                continue
            idf = self.idf(term)
            for doc, tf in plist:
                dl = self.doc_len[doc]
                denom = tf + self.k1 * (1 - self.b + self.b * dl / (self.avgdl or 1))
                out[doc] = out.get(doc, 0.0) + idf * tf * (self.k1 + 1) / denom
        return out

    def top(self, query_tokens: Sequence[str], n: int) -> list[tuple[int, float]]:
        s = self.scores(query_tokens)
        return sorted(s.items(), key=lambda kv: (-kv[1], kv[0]))[:n]


def estimate_tokens(text: str) -> int:
    """Rough token count (~4 chars per token for English/code), used for prompt budgets and token cost."""
    return max(1, math.ceil(len(text) / 4)) if text else 0


# -- showing stored text on a terminal or to a model -----------------------------------------------------------
# C0 controls (ESC starts every CSI/OSC sequence: colours, cursor moves, screen clears, OSC 8 links), DEL, C1
# controls (U+009B is a one-character CSI), line/paragraph separators, and bidi controls (Trojan Source).
_CONTROL_RE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def visible(text: object, keep: str = "\n\t") -> str:
    """`text` with every control character made visible as an escape (`\\x1b`, `\\u202e`), so a stored note can
    never drive the terminal (clear the screen, hide text behind a link, reorder a line). Characters in `keep`
    (newline and tab by default) stay as they are; a CRLF line end is a newline."""
    s = str(text).replace("\r\n", "\n")

    def show(m: re.Match) -> str:
        ch = m.group(0)
        if ch in keep:
            return ch
        return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"

    return _CONTROL_RE.sub(show, s)


def strip_controls(text: object, keep: str = "\n\t") -> str:
    """`text` without control characters (those of `visible`), for text handed to a model."""
    return _CONTROL_RE.sub(lambda m: m.group(0) if m.group(0) in keep else "", str(text).replace("\r\n", "\n"))


def lone_surrogate(obj: object, path: str = "") -> tuple[str, str] | None:
    """(where, the character) of the first lone UTF-16 surrogate in a decoded JSON value (a key or a string at any
    depth), or None. A lone surrogate is half of a pair: not Unicode, so no store, socket or encoder takes it; it
    comes from `\\udcff` in JSON or from bytes that are not UTF-8 (Python's surrogateescape)."""
    if isinstance(obj, str):
        bad = next((ch for ch in obj if 0xD800 <= ord(ch) <= 0xDFFF), None)
        return (path or "the value", bad) if bad else None
    items = obj.items() if isinstance(obj, dict) else enumerate(obj) if isinstance(obj, list | tuple) else ()
    for key, value in items:
        where = f"{path}.{key}" if path and isinstance(key, str) else f"{path}[{key}]" if path else str(key)
        found = lone_surrogate(key, f"a name in {path or 'the message'}") if isinstance(key, str) else None
        found = found or lone_surrogate(value, where)
        if found:
            return found
    return None
