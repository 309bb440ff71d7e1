"""How a new note relates to an existing one it is close to: the same claim again, a contradiction, or another fact.

No language model: the cosine of the real embedder (MiniLM), text features of the two notes, and a small logistic
regression over them whose coefficients are stored below (`MODEL`, fit on the tune split).

- Cues (each names what changed):
  - signals: a number, version or duration replaced (`30 s` -> `60 s`, `PostgreSQL 14` -> `16`; `24 hours` equals
    `one day`), a negation added or removed over the same statement (`run` -> `do not run`; words that say no by
    themselves count: `disabled`, `excluded`, `outside`, `out of`; a negation inside a clause only the new note has,
    "..., never the production one", is new detail), a listed alternative swapped (`ALTERNATIVES`, in
    relation_words.py with the other word lists: tabs/spaces, pytest/unittest, ...), an identifier replaced (a command, a path, a URL, a channel), a change marker ("moved
    to", "no longer") or two preferred items in swapped order;
  - the replaced slot: the two notes aligned word by word (light verbs like "uses" / "is written in" left out) differ
    in one span of at most `SLOT_WORDS` words ("dayjs" / "date-fns", "optimistic" / "pessimistic", "Okta" / "Google
    Workspace SSO"): whether both sides are names (capitalized, rare for the embedder's vocabulary, identifiers,
    numbers), whether a number or a name is on one side only, whether it follows a preposition;
  - an opposite by form (signed/unsigned, read-only/read-write, inside/outside) and the same words in swapped order
    around "over", "before", "to", ... ("prefer X over Y" / "prefer Y over X").
- A pair with a cue is a conflict when the model says so: P(conflict) from the cosine, the cue kinds, the slot's
  features, how many words were replaced in place with no signal to explain them ("retry webhooks 5 times" / "retry
  emails 3 times" changes the number AND the subject: another fact), how many words differ, how many are shared.
  Nothing in it is embedded again: the model was fit with the masked cosine (the notes without the signal's
  tokens, embedded) and the cosine of a slot's two sides too, and decides the test split the same without them
  (and the tune split better), while they cost a model run per pair they were needed for, as much as the new
  note's own embedding (issue 22, third pass; docs/benchmarks.md).
- Exchanged roles: the same things in each other's places, every other word in its place ("Caroline taught
  Melanie to paint" / "Melanie taught Caroline to paint"; not "X and Y" / "Y and X", a symmetric pair) and a claim
  about every X next to one about a qualified X ("the checkout service logs in JSON" / "every service logs in
  JSON") are another fact: both can hold, neither says the other (a confirmation would lose one).
- A pair without a cue is never a conflict. It is the same claim (a paraphrase, or a refinement that adds detail)
  when its cosine is high, or when one note's content words are (nearly) all in the other and the cosine is
  moderate; anything else is another fact about something nearby (stored on its own). Two or more short spans
  replaced are a rewording only when none of them holds a name, an identifier or a number and the real model's
  cosine reaches `two_slot_cosine` ("requires ... request" / "needs ... call"); "the frontend team deploys on
  Mondays" / "the backend team ... Wednesdays" stays two facts. A pair with a cue the model
  does not call a conflict is never folded into a confirmation either.

The model and the thresholds are fit on the tune split of `bench/data/conflict_pairs.jsonl` (`python
bench/conflict_decision.py --fit`, each round of pairs held out in turn to choose the regularization and the
decision threshold); the held-out test split is reported in docs/reliability.md.
"""

from __future__ import annotations

import functools
import hashlib
import marshal
import math
import os
import re
import threading
from collections.abc import Callable, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from itertools import repeat
from typing import NamedTuple

from mnemo.core.relation.words import (
    _ALT_INDEX,
    CHANGE_MARKERS,
    NEGATIONS,
    PREFER_VERBS,
    STOP,
    Token,
    _norm_word,
    tokens,
)
from mnemo.core.text import _stem


# -- thresholds (fit on the tune split; see bench/conflict_decision.py) ----------------------------------------
@dataclass(frozen=True)
class Thresholds:
    signal_min_cosine: float = 0.34  # below this two notes are not about the same thing, whatever the words
    dup_cosine: float = 0.74  # a paraphrase: no contradiction cue and at least this close
    refine_cosine: float = 0.42  # or: one note's content words nearly all in the other, and at least this close
    refine_contain: float = 0.80
    max_added: int = 2  # content words a confirmation may add (a rewording); more is new detail, never dropped
    two_slot_cosine: float = 0.74  # two or more short spans replaced, none a name or value ("requires" / "needs",
    #                               "request" / "call"): a rewording from this cosine on (the real model's)


DEFAULT = Thresholds()
SIGNAL_MIN_COSINE = DEFAULT.signal_min_cosine


@dataclass
class Features:
    cosine: float
    signals: list[str] = field(default_factory=list)  # what changed, e.g. "number 30 -> 60"
    explained: set[str] = field(default_factory=set)  # normalized tokens the signals account for
    contain: float = 0.0  # share of the shorter note's content words found in the other
    one_slot: bool = False  # the same words in the same order but one slot replaced (a value, or a synonym)
    added: int = 0  # content words only the new note has
    removed: int = 0  # content words only the old note has
    kinds: set[str] = field(default_factory=set)  # the kinds of the signals: value | negation | listed
    slot: tuple[str, str] | None = None  # the one replaced span of otherwise identical notes ("yarn", "pnpm")
    slot_names: bool = False  # ... and each side of it holds a name (a tool, a product, a person)
    opposite: str | None = None  # a replaced word and its opposite by form ("read-only -> read-write")
    reordered: str | None = None  # the same words, two of them swapped around "over", "before", "to", ...
    diff_words: int = 0  # content words that differ, aligned in order (light verbs left out)
    slot_words: int = 0  # the longer side of the slot, in words (1 to SLOT_WORDS)
    slot_mixed: bool = False  # a number on one side of the slot only ("Go 1.21" / "Bazel")
    slot_one_named: bool = False  # a name on one side of the slot only: one X named, the other general
    #                               ("her friendship with Caroline" / "her friends")
    slot_after_preposition: bool = False  # the slot follows "as", "with", "to", ...: the value of a kept predicate
    swapped_other: int = 0  # words replaced in place that no signal accounts for ("webhooks 5" / "emails 3")
    two_slots: bool = False  # the notes differ only in two or more short replaced spans
    slots_plain: bool = False  # ... and none of them holds a name, an identifier or a number (a rewording may)
    unexplained: int = 0  # content words only one note has that no signal accounts for
    roles_swapped: str | None = None  # the same things in exchanged roles ("Melanie values ... Caroline" /
    #                                   "Caroline appreciates ... Melanie"): another fact, both can hold
    broadened: str | None = None  # one note says it of all X, or of a general X, the other of one named or
    #                               qualified X ("the checkout service" / "every service"): another fact


def _content(toks: Sequence[Token]) -> list[Token]:
    return [t for t in toks if t.kind != "stop" and t.norm not in NEGATIONS]


def _negated(toks: Sequence[Token]) -> bool:
    """An odd number of negations ("not ... without" says yes)."""
    return sum(t.norm in NEGATIONS for t in toks) % 2 == 1


def _own_clause_negations(toks: Sequence[Token], other: AbstractSet[str]) -> bool:
    """Whether every negation of the note governs words the other note does not have: a clause of its own
    ("..., never the production one") adds detail, it does not deny what the other note says."""
    found = False
    for i, t in enumerate(toks):
        if t.norm not in NEGATIONS:
            continue
        found = True
        # what the negation governs: the words after it in its clause, or before it ("logins are disabled")
        scope = _clause_words(toks[i + 1:]) or _clause_words(toks[:i][::-1])
        if not scope or sum(_shares(u, other) for u in scope) * 2 >= len(scope):
            return False
    return found


def _shares(t: Token, other: AbstractSet[str]) -> bool:
    """Whether the other note has this word, or a part of it ("soft-deleted" / "soft deletes")."""
    return t.norm in other or "-" in t.raw and all(_stem(p) in other for p in t.raw.split("-") if p)


CLAUSE_BREAKS = frozenset(", but except and when if because so while which".split())


def _clause_words(toks: Sequence[Token]) -> list[Token]:
    out: list[Token] = []
    for u in toks:
        if u.raw in CLAUSE_BREAKS:
            break
        if u.kind != "stop" and u.norm not in NEGATIONS and u.norm not in CHANGE_MARKERS:
            out.append(u)
    return out


def _preferred(toks: Sequence[Token]) -> tuple[str, str] | None:
    """("x", "y") for "prefer x over y" / "x instead of y" / "x rather than y" (content words next to the marker)."""
    for i, t in enumerate(toks):
        if t.raw in ("over", "instead", "rather") and (t.raw != "over" or any(u.raw in PREFER_VERBS
                                                                              for u in toks[:i])):
            before = [u.norm for u in toks[:i] if u.kind != "stop" and u.norm not in NEGATIONS]
            after = [u.norm for u in toks[i + 1:] if u.kind != "stop" and u.norm not in NEGATIONS]
            if before and after:
                return before[-1], after[0]
    return None


def _swapped_alternatives(ca: Sequence[Token], cb: Sequence[Token], shared: AbstractSet[str]) -> tuple[str, str] | None:
    """Two alternatives both notes name, in the opposite order ("spaces, never tabs" / "tabs, never spaces")."""
    alts = sorted(w for w in shared if w in _ALT_INDEX)
    if len(alts) < 2:  # most pairs: no two listed alternatives in common, nothing to order
        return None
    first_a: dict[str, int] = {}
    first_b: dict[str, int] = {}
    for seq, first in ((ca, first_a), (cb, first_b)):
        for i, t in enumerate(seq):
            first.setdefault(t.norm, i)
    for i, x in enumerate(alts):
        for y in alts[i + 1:]:
            if _ALT_INDEX[x] & _ALT_INDEX[y] and (first_a[x] < first_a[y]) != (first_b[x] < first_b[y]):
                return x, y
    return None


def _diff(a: Sequence[str], b: Sequence[str]) -> list[tuple[str, int, int, int, int]]:
    """difflib's non-equal opcodes of two word sequences; the common beginning and end are cut off first, which
    keeps two long notes that differ in a few words (a shared 700-word body) linear instead of quadratic."""
    lo = 0
    while lo < len(a) and lo < len(b) and a[lo] == b[lo]:
        lo += 1
    hi = 0
    while hi < len(a) - lo and hi < len(b) - lo and a[-1 - hi] == b[-1 - hi]:
        hi += 1
    ma, mb = a[lo:len(a) - hi], b[lo:len(b) - hi]
    if not ma or not mb or set(ma).isdisjoint(mb):
        # what difflib answers when the middles share no word (most pairs: one span replaced), without it:
        # nothing, an insertion, a deletion or one replacement of the whole middle
        if not ma and not mb:
            return []
        op = "insert" if not ma else "delete" if not mb else "replace"
        return [(op, lo, len(a) - hi, lo, len(b) - hi)]
    return [(op, i1 + lo, i2 + lo, j1 + lo, j2 + lo) for op, i1, i2, j1, j2 in _opcodes(ma, mb)]


def _opcodes(a: Sequence[str], b: Sequence[str]) -> list[tuple[str, int, int, int, int]]:
    """`difflib.SequenceMatcher(a=a, b=b, autojunk=False).get_opcodes()` without its "equal" ones: the same
    algorithm (the longest matching block first, the earliest of equals, then each side of it in turn; adjacent
    blocks joined), with no junk, in one function: ~2x quicker than the class on a note's ten words, and a write
    diffs each new note against ~10 neighbours (issue 22, sixth pass; tests/unit/test_bulk_caller.py compares the
    two on many sequences)."""
    b2j: dict[str, list[int]] = {}
    for j, word in enumerate(b):
        b2j.setdefault(word, []).append(j)
    nothing: list[int] = []
    la, lb = len(a), len(b)
    queue = [(0, la, 0, lb)]
    blocks: list[tuple[int, int, int]] = []
    while queue:
        alo, ahi, blo, bhi = queue.pop()
        # `find_longest_match`: of the longest blocks, the one starting first in a, then in b
        besti, bestj, bestsize = alo, blo, 0
        j2len: dict[int, int] = {}
        for i in range(alo, ahi):
            j2lenget = j2len.get
            newj2len: dict[int, int] = {}
            for j in b2j.get(a[i], nothing):
                if j < blo:
                    continue
                if j >= bhi:
                    break
                k = newj2len[j] = j2lenget(j - 1, 0) + 1
                if k > bestsize:
                    besti, bestj, bestsize = i - k + 1, j - k + 1, k
            j2len = newj2len
        while besti > alo and bestj > blo and a[besti - 1] == b[bestj - 1]:
            besti, bestj, bestsize = besti - 1, bestj - 1, bestsize + 1
        while besti + bestsize < ahi and bestj + bestsize < bhi and a[besti + bestsize] == b[bestj + bestsize]:
            bestsize += 1
        if bestsize:  # `get_matching_blocks`
            blocks.append((besti, bestj, bestsize))
            if alo < besti and blo < bestj:
                queue.append((alo, besti, blo, bestj))
            if besti + bestsize < ahi and bestj + bestsize < bhi:
                queue.append((besti + bestsize, ahi, bestj + bestsize, bhi))
    blocks.sort()
    i1 = j1 = k1 = 0
    joined: list[tuple[int, int, int]] = []
    for i2, j2, k2 in blocks:
        if i1 + k1 == i2 and j1 + k1 == j2:
            k1 += k2
        else:
            if k1:
                joined.append((i1, j1, k1))
            i1, j1, k1 = i2, j2, k2
    if k1:
        joined.append((i1, j1, k1))
    joined.append((la, lb, 0))
    out: list[tuple[str, int, int, int, int]] = []
    i = j = 0
    for ai, bj, size in joined:  # `get_opcodes`, the "equal" spans left out
        if i < ai and j < bj:
            out.append(("replace", i, ai, j, bj))
        elif i < ai:
            out.append(("delete", i, ai, j, bj))
        elif j < bj:
            out.append(("insert", i, ai, j, bj))
        i, j = ai + size, bj + size
    return out


@functools.lru_cache(maxsize=8192)
def _names(text: str, vocab: frozenset[str]) -> frozenset[str]:
    """Normalized words written like names: capitalized inside a sentence (Jenkins, WeasyPrint), mixed with digits
    or inner capitals (k8s, gRPC), or not an everyday word of the embedder's vocabulary (zerolog, imgix). Cached:
    a note is compared with up to ten neighbours (frozen, so the cached set cannot be changed by a caller)."""
    out = set()
    for m in _NAME_WORD_RE.finditer(text):
        w = m.group(1)
        k = m.start() - 1  # the last character before the word that is not a space (text[:start].rstrip()[-1:])
        while k >= 0 and text[k].isspace():
            k -= 1
        inner = k >= 0 and text[k] not in ".!?:;"
        norm, always = _name_word(w, vocab)
        if always or (inner and w[0].isupper()):
            out.add(norm)
    return frozenset(out)


@functools.lru_cache(maxsize=65536)
def _name_word(w: str, vocab: frozenset[str]) -> tuple[str, bool]:
    """A word's normalized form, and whether it reads as a name wherever it stands: mixed with digits or inner
    capitals (k8s, gRPC), or not an everyday word of the vocabulary (zerolog, date-fns). Cached per spelling."""
    low = w.lower()
    rare = bool(vocab) and any(p.isalpha() and len(p) >= 3 and p not in vocab and p not in STOP
                               for p in low.split("-"))  # zerolog, date-fns
    return _norm_word(low), bool(_DIGIT_RE.search(w) or _INNER_CAPITAL_RE.search(w) or rare)


_NAME_WORD_RE = re.compile(r"(?<![\w.-])([A-Za-z][\w-]*)")
_DIGIT_RE = re.compile(r"\d")
_INNER_CAPITAL_RE = re.compile(r"[a-z][A-Z]")


def _split_clauses(text: str) -> str:
    """Clause breaks as " , " tokens (a comma, semicolon, colon or dash; not inside 10,000 or 02:00)."""
    return _CLAUSE_BREAK_RE.sub(" , ", text)


_CLAUSE_BREAK_RE = re.compile(r"\s*(?:;|,(?!\d)|:(?!\d)|—|–)\s*|\s+-\s+")


SECONDS = {"ms": 0.001, "millisecond": 0.001, "second": 1, "sec": 1, "s": 1, "minut": 60, "minute": 60,
           "min": 60, "hour": 3600, "hr": 3600, "h": 3600, "day": 86400, "d": 86400, "week": 604800,
           "month": 2629800, "year": 31557600}


def _quantities(content: Sequence[Token]) -> dict[str, tuple[set[str], set[str]]]:
    """What a note counts, by what it counts: {unit: (values, tokens)}. A duration ("30 days", "a week", "25s") is
    in seconds under "duration", so `7 days` equals `a week`; another number is keyed by the words next to it
    ("10 connections", "port 3000", "Python 3.11")."""
    out: dict[str, tuple[set[str], set[str]]] = {}

    def add(key: str, value: str, toks: set[str]) -> None:
        vals, used = out.setdefault(key, (set(), set()))
        vals.add(value)
        used |= toks

    for i, t in enumerate(content):
        nxt = content[i + 1] if i + 1 < len(content) else None
        prev = content[i - 1] if i > 0 else None
        if t.kind == "number":
            suffix = re.sub(r"^v?\d+(?:[.:]\d+)*", "", t.raw) if t.raw[:1].isdigit() or re.match(r"v\d", t.raw) else ""
            unit = suffix or (nxt.norm if nxt is not None and nxt.kind == "word" else "")
            if unit in SECONDS and re.fullmatch(r"\d+(?:\.\d+)?", t.norm):
                add("duration", f"{float(t.norm) * SECONDS[unit]:g}s", {t.norm, unit})
            else:  # keyed by both neighbours: "4.2 LTS" / "Django 5.0" still share "django"
                before = prev.norm if prev is not None and prev.kind == "word" else ""
                for key in {unit, before} - {""} or {""}:  # the unit is explained only where it is the key:
                    add(key, t.norm, {t.norm} | ({unit} if key == unit and not suffix else set()))  # 3 shards/2 replicas
        elif t.raw in ("week", "day", "hour", "minute", "month", "year", "second") and \
                (prev is None or prev.kind != "number") and (prev is None or prev.raw not in ("per", "every", "each")):
            add("duration", f"{SECONDS[t.norm]:g}s", {t.norm})  # "a week", "an hour"
    return out


def _unmatched(values: set[str], others: set[str], key: str) -> set[str]:
    """The values with no equal among the others; durations are equal within 2.5% ("12 months" is "a year",
    "90 days" is "three months")."""
    if key != "duration":
        return values - others
    secs = [float(o[:-1]) for o in others]
    return {v for v in values if not any(abs(float(v[:-1]) - o) <= 0.025 * max(float(v[:-1]), o) for o in secs)}


def _value_signals(f: Features, ca: Sequence[Token], cb: Sequence[Token], qa: dict | None = None,
                   qb: dict | None = None) -> None:
    """A number, version or duration replaced: keyed by what it counts, or the only number of each note (`qa`,
    `qb`: their `_quantities`, when the caller has them)."""
    qa = _quantities(ca) if qa is None else qa
    qb = _quantities(cb) if qb is None else qb
    for key in sorted(set(qa) & set(qb)):
        (va, ta_), (vb, tb_) = qa[key], qb[key]
        only_a, only_b = _unmatched(va, vb, key), _unmatched(vb, va, key)
        if only_a and only_b:
            change = f"{', '.join(sorted(only_a))} -> {', '.join(sorted(only_b))}"
            if not any(sig.endswith(change) for sig in f.signals):
                f.signals.append(f"{key or 'number'} {change}")
            f.explained |= ta_ | tb_
    timed = qa.get("duration", (set(), set()))[1] | qb.get("duration", (set(), set()))[1]
    na = [t for t in ca if t.kind == "number" and t.norm not in timed]
    nb = [t for t in cb if t.kind == "number" and t.norm not in timed]
    if not f.signals and len(na) == len(nb) == 1 and na[0].norm != nb[0].norm \
            and ("." in na[0].norm) == ("." in nb[0].norm):  # "a concurrency of 8" / "set to 4"
        f.signals.append(f"number {na[0].norm} -> {nb[0].norm}")
        f.explained |= {na[0].norm, nb[0].norm}
    if f.signals:
        f.kinds.add("value")


def _listed_signals(f: Features, na: _Note, nb: _Note) -> None:
    """Listed alternatives, identifiers, change markers, swapped preferences."""
    ta, tb, ca, cb = na.toks, nb.toks, na.content, nb.content
    sa, sb = na.words, nb.words
    only_a, only_b = sa - sb, sb - sa
    before = len(f.signals)
    for wa in sorted(w for w in only_a if w in _ALT_INDEX):  # a word of no listed group pairs with none
        for wb in sorted(w for w in only_b if w in _ALT_INDEX):
            if _ALT_INDEX.get(wa, set()) & _ALT_INDEX.get(wb, set()):
                f.signals.append(f"{wa} -> {wb}")
                f.explained |= {wa, wb}
    ia = {t.norm for t in ca if t.kind == "ident"} - sb
    ib = {t.norm for t in cb if t.kind == "ident"} - sa
    if ia and ib:
        f.signals.append(f"{', '.join(sorted(ia))} -> {', '.join(sorted(ib))}")
        f.explained |= ia | ib
    # a change announced by one note only ("we moved CI to GitHub Actions; Jenkins is gone")
    if bool(na.marks) != bool(nb.marks) and sa & sb:
        f.signals.append("change: " + ", ".join(sorted({t.raw for t in [*ta, *tb] if t.norm in CHANGE_MARKERS})))
        f.explained |= {w for w in sa | sb if any(_ALT_INDEX.get(w, set()) & _ALT_INDEX.get(v, set())
                                                  for v in sa | sb if v != w)}
    pa, pb = na.preferred, nb.preferred
    if pa and pb and pa == pb[::-1]:
        f.signals.append(f"preference swapped: {pa[0]} over {pa[1]} -> {pb[0]} over {pb[1]}")
        f.explained |= set(pa)
    swapped = _swapped_alternatives(ca, cb, sa & sb)
    if swapped:
        f.signals.append(f"{swapped[0]} and {swapped[1]} swapped")
        f.explained |= set(swapped)
    if len(f.signals) > before:
        f.kinds.add("listed")


@functools.lru_cache(maxsize=8192)
def clause_tokens(text: str) -> tuple[Token, ...]:
    """The tokens of a note with its clause breaks, cached: a new note is compared with up to ten neighbours, and
    the same neighbours come back for the next notes of an import (tokens are frozen, so sharing them is safe)."""
    return tuple(tokens(_split_clauses(text)))


class _Note(NamedTuple):
    """What `features` reads of one note whatever the other (read only: cached and shared)."""
    toks: tuple[Token, ...]  # its tokens, with clause breaks
    content: tuple[Token, ...]  # its content tokens (`_content`)
    words: frozenset[str]  # their normalized words
    negated: bool  # whether it negates (`_negated`)
    quantities: dict  # what it counts (`_quantities`)
    aligned: tuple[Token, ...]  # the content tokens `_align` compares (light verbs left out)
    aligned_norms: tuple[str, ...]  # ... their normalized words
    norms: tuple[str, ...]  # the content tokens' normalized words, in order
    marks: frozenset[str]  # the change markers it holds ("moved", "no longer")
    preferred: tuple[str, str] | None  # `_preferred`
    raws: frozenset[str]  # its tokens as written


@functools.lru_cache(maxsize=8192)
def _parsed(text: str) -> _Note:
    """What `features` reads of one note whatever the other, computed once per note. Cached like `clause_tokens`:
    a note meets up to ten neighbours, one after the other."""
    return _note_of(clause_tokens(text))


def _note_of(toks: tuple[Token, ...], quantities: dict | None = None) -> _Note:
    """A note's parse from its tokens (`quantities`: its `_quantities` when known, a stored parse's)."""
    content = tuple(_content(toks))
    aligned = tuple([t for t in content if t.norm not in LIGHT_VERBS])
    norms = tuple([t.norm for t in content])
    return _Note(toks, content, frozenset(norms), _negated(toks),
                 _quantities(content) if quantities is None else quantities, aligned,
                 tuple([t.norm for t in aligned]), norms,
                 frozenset([t.norm for t in toks]) & CHANGE_MARKERS, _preferred(toks),
                 frozenset([t.raw for t in toks]))


# -- a note's parse stored with it (issue 22, fifth pass) ----------------------------------------------------------
# A write compares the new note with up to ten neighbours, and a neighbour is rarely met twice in a process: its parse
# (tokenizing, content words, quantities: ~40 us, half of a pair's comparison) was redone for nearly every one. The
# write path now stores each note's parse with it (core/store `note_parses`, `encoded`) and primes this module with
# the neighbours' stored parses (`prime`) before comparing. A stored parse is trusted only when it was made by this
# very parser (`parser_version`: a digest of the code and word lists it depends on) of this very text (a digest of
# the text inside the blob); anything else is parsed again, as before. `decoded(encoded(p))` equals `p` field by field,
# the tokens of `content` and `aligned` being the same objects as in `toks` (`_before` finds a token by identity).
PARSE_FORMAT = 1
# text -> its parse, read from the store or parsed here (bounded: the oldest go first; ~3 KB each; `_parsed`'s own
# cache holds the parses made here too, this one says which texts need no stored parse read)
_PRIMED: dict[str, _Note] = {}
_PRIMED_MAX = 2048
_PRIMED_LOCK = threading.Lock()


@functools.cache
def parser_version() -> str:
    """What a stored parse must have been made by: a digest of the encoding's format, the source of the modules
    the parse depends on (this one, the word lists and tokenizer, the stemmer's wrapper) and the stemmer library's
    version. "" when a source cannot be read (an installation without sources): then nothing is stored or trusted."""
    from mnemo.core import text as text_module
    from mnemo.core.relation import words as words_module

    h = hashlib.sha256(f"mnemo-note-parse {PARSE_FORMAT}".encode())
    try:
        # the sources, also where a module runs compiled (mnemo/native.py): the same parser either way
        for path in (str(words_module.__file__), str(text_module.__file__), __file__):
            with open(_source_file(path), "rb") as fh:
                h.update(fh.read())
        import Stemmer

        h.update(str(getattr(Stemmer, "__version__", "")).encode())
    except (OSError, ImportError, TypeError):
        return ""
    return h.hexdigest()[:24]


def _source_file(path: str) -> str:
    """The source beside a module file: itself, or for a compiled module (`compare.cpython-311-....so`) its `.py`."""
    name = os.path.basename(path)
    return path if name.endswith(".py") else os.path.join(os.path.dirname(path), name.split(".", 1)[0] + ".py")


def _text_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=12).digest()


_KIND_CODES = {"word": "w", "number": "n", "ident": "i", "stop": "s"}
_KINDS = {v: k for k, v in _KIND_CODES.items()}
_new_token = tuple.__new__  # a Token from a (raw, norm, kind) tuple, without NamedTuple's Python-level __new__


def encoded(text: str) -> bytes:
    """The parse of `text` as stored with its note: marshal of plain values (its tokens' spellings, their normal
    forms (marshal writes a form that is the spelling itself as a reference), their kinds as one letter each, its
    quantities), the text's digest inside. The rest of
    the parse is worked out again from the tokens when it is read (`_note_of`: cheap; the tokenizing and the
    quantities are most of a parse)."""
    n = _note(text)  # kept at hand too: the note just written is the next writes' neighbour
    return marshal.dumps((PARSE_FORMAT, _text_digest(text), tuple([t.raw for t in n.toks]),
                          tuple([t.norm for t in n.toks]), "".join([_KIND_CODES[t.kind] for t in n.toks]),
                          n.quantities), 4)


def decoded(text: str, blob: bytes) -> _Note | None:
    """The parse stored for `text`, or None when the blob is not one of `text` in this format (a note edited
    since, a damaged or foreign blob): the caller parses the text then."""
    try:
        fmt, digest, raws, norms, kinds, quantities = marshal.loads(blob)
        if fmt != PARSE_FORMAT or digest != _text_digest(text):
            return None
        # one Token per occurrence, made without a Python-level call per token (unequal lengths: ValueError)
        toks = tuple(map(_new_token, repeat(Token), zip(raws, norms, map(_KINDS.__getitem__, kinds), strict=True)))
    except (EOFError, ValueError, TypeError, KeyError):
        return None
    return _note_of(toks, quantities)


def prime(text: str, blob: bytes) -> bool:
    """Use the stored parse `blob` of `text` for the comparisons that follow; False when it cannot be used."""
    if text in _PRIMED:
        return True
    n = decoded(text, blob)
    if n is None:
        return False
    _keep(text, n)
    return True


def _keep(text: str, n: _Note) -> None:
    if text not in _PRIMED:
        with _PRIMED_LOCK:  # the owner's request threads may compare at once (reads need no lock)
            if len(_PRIMED) >= _PRIMED_MAX:
                del _PRIMED[next(iter(_PRIMED))]
            _PRIMED[text] = n


def known(text: str) -> bool:
    """Whether the parse of `text` is at hand (primed from the store, or parsed lately in this process): then no
    stored parse is read for it."""
    return text in _PRIMED


def _note(text: str) -> _Note:
    """The parse of `text`: primed from the store, or parsed (and then at hand: `known`)."""
    n = _PRIMED.get(text)
    if n is None:
        n = _parsed(text)
        _keep(text, n)
    return n


def features(old: str, new: str, cosine: float, vocab: frozenset[str] = frozenset()) -> Features:
    na, nb = _note(old), _note(new)
    ta, sa, neg_a = na.toks, na.words, na.negated
    tb, sb, neg_b = nb.toks, nb.words, nb.negated
    f = Features(cosine)
    _value_signals(f, na.content, nb.content, na.quantities, nb.quantities)
    # a negation added or removed over the shared statement
    if neg_a != neg_b and not _own_clause_negations(ta if neg_a else tb, sb if neg_a else sa):
        f.signals.append("negation " + ("removed" if neg_a else "added"))
        f.kinds.add("negation")
    _listed_signals(f, na, nb)
    names = _names(old, vocab) | _names(new, vocab)
    _align(f, na, nb, names, vocab)
    f.unexplained = len((sa ^ sb) - f.explained - LIGHT_VERBS)
    # the same content words in another order (different words: neither check can find anything)
    f.reordered = _reordered(ta, tb) if sa == sb and na.norms != nb.norms else None
    # two things in exchanged places: the same content words, each as often (other words: nothing to find)
    f.roles_swapped = None if f.reordered or sa != sb or len(na.content) != len(nb.content) else \
        _roles_swapped(ta, tb)
    f.broadened = _broadened(f, ta, tb, names) if (na.raws | nb.raws) & UNIVERSAL else None
    f.contain = len(sa & sb) / (min(len(sa), len(sb)) or 1)
    f.added, f.removed = len(sb - sa), len(sa - sb)
    return f


# Verbs a rewording swaps freely ("is written in" / "uses", "is built with" / "uses"): left out of the alignment.
LIGHT_VERBS = frozenset(_stem(w) for w in "use uses used using write writes written wrote build builds built do "
                        "does done make makes made go goes get gets got take takes took taken happen happens now"
                        .split())
# Prefixes that turn a word into its opposite (signed/unsigned, normalized/denormalized, blocking/nonblocking).
OPPOSITE_PREFIXES = ("un", "non", "de", "dis", "in", "im", "il", "ir", "anti", "a")
# Words around which two notes may name the same two things in the opposite order.
ORDER_MARKERS = frozenset("over than instead rather before after from to into vs versus then".split())


def _opposite(a: str, b: str, vocab: frozenset[str] = frozenset()) -> bool:
    """Whether two words are opposites by their form alone: a negating prefix (signed/unsigned), a compound
    with one part replaced (read-only/read-write, opt-in/opt-out, write-through/write-back), or a word of the
    vocabulary after two short different beginnings (inside/outside, upstream/downstream, uppercase/lowercase)."""
    a, b = a.lower(), b.lower()
    if a == b or not all(re.fullmatch(r"[a-z]+(?:[-_][a-z]+)*", w) for w in (a, b)):
        return False
    for x, y in ((a, b), (b, a)):
        if any(y in (p + x, p + "-" + x) for p in OPPOSITE_PREFIXES if len(x) >= 4):
            return True
    pa, pb = re.split(r"[-_]", a), re.split(r"[-_]", b)
    if len(pa) == len(pb) >= 2:
        return sum(x != y for x, y in zip(pa, pb, strict=True)) == 1
    n = len(os.path.commonprefix([a[::-1], b[::-1]]))
    return n >= 4 and a[-n:] in vocab and 2 <= len(a) - n <= 5 and 2 <= len(b) - n <= 5


SLOT_WORDS = 3  # the longest replaced span taken for one slot ("Okta" / "Google Workspace SSO")


# After one of these the slot is the object of an unchanged predicate ("returns dates as __", "built with __").
PREPOSITIONS = frozenset("as with in on to by from into via through using at for of onto".split())


def _before(toks: Sequence[Token], first: Token) -> str:
    """The word before `first` in the note, articles skipped."""
    i = next(k for k, t in enumerate(toks) if t is first)
    return next((t.raw for t in reversed(toks[:i]) if t.raw not in ("a", "an", "the")), "")


def _align(f: Features, na: _Note, nb: _Note, names: AbstractSet[str], vocab: frozenset[str]) -> None:
    """The two notes' content words aligned in order (light verbs left out): how many differ, how many of them
    replace a word in place with no signal to account for it, a replaced word that is the opposite of the other
    by form, and the one replaced slot when that is all that differs (unless its sides share a word: "a two-pane
    design" / "two panes" is a rewording)."""
    ta, tb, a, b = na.toks, nb.toks, na.aligned, nb.aligned
    ops = _diff(na.aligned_norms, nb.aligned_norms)
    # one sentence with one slot of 1-2 words replaced ("uses zerolog" / "uses zap"), a swapped light verb aside
    f.one_slot = len(ops) == 1 and ops[0][0] == "replace" and ops[0][2] - ops[0][1] <= 2 and ops[0][4] - ops[0][3] <= 2
    f.diff_words = sum(i2 - i1 + j2 - j1 for _, i1, i2, j1, j2 in ops)
    f.swapped_other = sum(min(sum(t.norm not in f.explained for t in a[i1:i2]),
                              sum(t.norm not in f.explained for t in b[j1:j2]))
                          for op, i1, i2, j1, j2 in ops if op == "replace")
    f.two_slots = len(ops) >= 2 and all(op == "replace" and i2 - i1 <= 2 and j2 - j1 <= 2
                                        for op, i1, i2, j1, j2 in ops)  # "frontend ... Mondays" / "backend ... Wednesdays"
    gone = [t for _, i1, i2, _, _ in ops for t in a[i1:i2]]
    came = [t for _, _, _, j1, j2 in ops for t in b[j1:j2]]
    # ... a rewording keeps what the note is about: its first content word ("payments API requires ..." / "payments
    # API needs ..."); "search releases ... wednesday" / "catalog releases ... thursday" is another subject
    f.slots_plain = f.two_slots and ops[0][1] > 0 and ops[0][3] > 0 and \
        not any(t.kind in ("ident", "number") or t.norm in names for t in gone + came)
    if len(ops) == 1:  # an opposite by form counts where it is the one thing that differs
        f.opposite = next((f"{x.raw} -> {y.raw}" for x in gone for y in came if _opposite(x.raw, y.raw, vocab)),
                          None)
    if len(ops) != 1 or ops[0][0] != "replace" or max(ops[0][2] - ops[0][1], ops[0][4] - ops[0][3]) > SLOT_WORDS:
        return
    _, i1, i2, j1, j2 = ops[0]
    sides = (a[i1:i2], b[j1:j2])
    parts = [{p for t in side for p in map(_stem, re.split(r"[-_]", t.raw)) if len(p) > 2} for side in sides]
    whole = [{t.norm for t in side} for side in sides]
    if (whole[0] & parts[1] or parts[0] & whole[1]) - names:  # "a two-pane design" / "two panes": a rewording
        return  # (a shared name is not: "electron-builder" / "Electron Forge")
    f.slot = (" ".join(t.raw.strip("`") for t in sides[0]), " ".join(t.raw.strip("`") for t in sides[1]))
    f.slot_words = max(len(sides[0]), len(sides[1]))
    f.slot_names = all(t.kind in ("ident", "number") or t.norm in names for t in [*sides[0], *sides[1]])
    f.slot_mixed = len({any(t.kind == "number" for t in side) for side in sides}) == 2  # "Go 1.21" / "Bazel"
    f.slot_one_named = len({any(t.kind == "ident" or t.norm in names for t in side) for side in sides}) == 2
    f.slot_after_preposition = all(_before(toks, side[0]) in PREPOSITIONS for toks, side in zip((ta, tb), sides,
                                                                                               strict=True))


def _reordered(ta: Sequence[Token], tb: Sequence[Token]) -> str | None:
    """"X over Y" / "Y over X", "from X to Y" / "from Y to X": the same content words, and what comes before a
    marker both notes share in one comes after it in the other."""
    ca, cb = _content(ta), _content(tb)
    if sorted(t.norm for t in ca) != sorted(t.norm for t in cb) or [t.norm for t in ca] == [t.norm for t in cb]:
        return None
    change = _change_verb(ta) and _change_verb(tb)
    for m in ORDER_MARKERS & {t.raw for t in ta} & {t.raw for t in tb}:
        if m in DIRECTION_MARKERS and not change:
            continue
        ia, ib = [t.raw for t in ta].index(m), [t.raw for t in tb].index(m)
        before_a = {t.norm for t in _content(ta[:ia])}
        after_b = {t.norm for t in _content(tb[ib + 1:])}
        if before_a & after_b and {t.norm for t in _content(ta[ia + 1:])} & {t.norm for t in _content(tb[:ib])}:
            return m
    return None


# "X to Y" / "Y to X" says something exclusive only for a change ("moved from X to Y"); "A forwards to B" / "B
# forwards to A" exchanges roles (another fact). These markers count only next to a change verb.
DIRECTION_MARKERS = frozenset({"to", "from", "into"})
CHANGE_VERBS = ("migrat", "move", "switch", "replac", "upgrad", "downgrad", "chang", "went", "port", "convert")
JOINS = frozenset({"and", "or", "&", ","})  # "Alice and Bob" / "Bob and Alice": the same pair
UNIVERSAL = frozenset({"all", "every", "each", "any"})
QUALIFIERS_NOT = UNIVERSAL | NEGATIONS | {"per", "own", "no", "one", "single"}  # "per order" is "each order"


def _change_verb(toks: Sequence[Token]) -> bool:
    return any(t.raw.startswith(CHANGE_VERBS) or t.norm in CHANGE_MARKERS for t in toks)


def _roles_swapped(ta: Sequence[Token], tb: Sequence[Token]) -> str | None:
    """Two things both notes name in exchanged places, every other word in its place: "Caroline taught Melanie to
    paint" / "Melanie taught Caroline to paint" -> "carolin <-> melani". Not when the two are joined by "and" /
    "or" in both notes (a symmetric pair: the same claim)."""
    ia = [i for i, t in enumerate(ta) if t.kind != "stop" and t.norm not in NEGATIONS]
    ib = [i for i, t in enumerate(tb) if t.kind != "stop" and t.norm not in NEGATIONS]
    a, b = [ta[i].norm for i in ia], [tb[i].norm for i in ib]
    n = len(a)
    if n != len(b) or n < 3 or n > 24 or sorted(a) == a and a == b:
        return None
    for x0 in range(n):  # A = P X M Y S and B = P Y M X S, X and Y spans of 1-3 words, M not empty
        for x1 in range(x0 + 1, min(n, x0 + 3) + 1):
            for y0 in range(x1 + 1, n):
                for y1 in range(y0 + 1, min(n, y0 + 3) + 1):
                    X, Y = a[x0:x1], a[y0:y1]
                    if X == Y or b[x0:x0 + len(Y)] != Y or b[y1 - len(X):y1] != X:
                        continue
                    m_a, m_b = a[x1:y0], b[x0 + len(Y):y1 - len(X)]
                    if len(m_a) != len(m_b) or a[:x0] != b[:x0] or a[y1:] != b[y1:]:
                        continue
                    # the very words that relate them (a changed verb may be a converse, "owns" / "belongs to",
                    # which words alone cannot tell from a synonym), in the same voice ("X manages Y" / "Y is
                    # managed by X" says the same thing)
                    if m_a != m_b or _passive(ta, ia[x1:y0]) != _passive(tb, ib[x0 + len(Y):y1 - len(X)]):
                        continue
                    if not (_joined(ta, ia[x1 - 1], ia[y0]) and _joined(tb, ib[x0 + len(Y) - 1], ib[y1 - len(X)])):
                        return f"{' '.join(X)} <-> {' '.join(Y)}"
    return None


BE = frozenset("is are was were be been being get gets got".split())


def _passive(toks: Sequence[Token], middle: Sequence[int]) -> bool:
    """Whether a form of "be" stands right before a word between the two exchanged ones ("is managed")."""
    return any(k > 0 and toks[k - 1].raw in BE for k in middle)


def _joined(toks: Sequence[Token], i: int, j: int) -> bool:
    """Whether only joining words ("and", "or", a comma, articles) stand between positions i < j."""
    between = toks[i + 1:j]
    return any(t.raw in JOINS for t in between) and all(t.kind == "stop" for t in between)


def _broadened(f: Features, ta: Sequence[Token], tb: Sequence[Token], names: AbstractSet[str]) -> str | None:
    """One note says it of every X, the other of one qualified X ("the checkout service logs in JSON" / "every
    service logs in JSON", either way round): the quantified word is qualified in the other note by a word this
    note does not have."""
    for q_toks, other in ((ta, tb), (tb, ta)):
        have = {t.norm for t in _content(q_toks)}
        for i, t in enumerate(q_toks):
            if t.raw not in UNIVERSAL:
                continue
            head = next((u for u in q_toks[i + 1:] if u.kind != "stop"), None)
            if head is None:
                continue
            for k, u in enumerate(other):
                if u.norm == head.norm and k > 0 and other[k - 1].kind != "stop" and \
                        other[k - 1].norm not in have and other[k - 1].raw not in QUALIFIERS_NOT and not any(v.raw in UNIVERSAL for v in other[max(0, k - 3):k]):
                    return f"{t.raw} {head.raw} in one note, {other[k - 1].raw} {u.raw} in the other"
    return None


def masked(text: str, explained: set[str]) -> str:
    """The note without the tokens a signal explains (and without negations): what the rest of it says."""
    toks = clause_tokens(text)
    keep = [t.raw.strip("`") for t in toks
            if t.norm not in explained and t.norm not in NEGATIONS and t.norm not in CHANGE_MARKERS and t.raw != ","]
    return " ".join(keep) or "-"


@dataclass
class Decision:
    relation: str  # duplicate | conflict | distinct
    refines: bool  # duplicate whose new note adds detail the old one lacks
    reasons: list[str]
    masked_cosine: float | None = None
    score: float | None = None  # P(conflict) from the model, when it was asked

    def to_dict(self) -> dict:
        return {"relation": self.relation, "refines": self.refines, "reasons": self.reasons,
                "masked_cosine": None if self.masked_cosine is None else round(self.masked_cosine, 4),
                "score": None if self.score is None else round(self.score, 4)}


Embed = Callable[[list[str]], Sequence]


def _cos(a: Sequence, b: Sequence) -> float:
    return float(sum(float(x) * float(y) for x, y in zip(a, b, strict=True)))


# -- the conflict model: a logistic regression over the pair's features, fit on the tune split --------------------
FEATURES = ("cosine", "value", "negation", "listed", "slot", "slot_names", "slot_words", "slot_mixed", "slot_one_named",
            "slot_after_preposition", "opposite", "reordered", "swapped_other", "unexplained", "diff_words", "contain")


@dataclass(frozen=True)
class Model:
    """P(conflict) = sigmoid(bias + weights . vector(...)); a conflict from `threshold` on."""
    weights: tuple[float, ...]
    bias: float
    threshold: float


MODEL_L2 = 30.0
MODEL = Model(weights=(3.3598, -0.0083, 0.0356, 0.0258, -0.0695, 0.9402, -0.1721, -0.9845, -0.563, 1.5117, 1.413,
                       0.3497, -0.8319, -0.8435, -0.981, 2.1906),
              bias=-0.2856, threshold=0.525)


def vector(f: Features) -> list[float]:
    """The model's input, in the order of FEATURES: the cosine; the signal kinds; the replaced slot: whether both
    sides are names, a number on one side only, a name on one side only, whether it follows a preposition; the
    length of the one replaced span (also when a signal explains it); an opposite by form; a swapped order; words
    replaced in place that no signal explains (log); how many words differ (log): unexplained by a signal, and
    aligned in order; the shared words. All from the text and the pair's cosine: nothing is embedded."""
    slot = f.slot is not None and not f.signals  # with a signal, the replaced words are the signal's
    return [f.cosine, float("value" in f.kinds),
            float("negation" in f.kinds), float("listed" in f.kinds), float(slot), float(slot and f.slot_names),
            float(max(0, f.slot_words - 1)),
            float(slot and f.slot_mixed), float(slot and f.slot_one_named), float(slot and f.slot_after_preposition), float(f.opposite is not None), float(f.reordered is not None),
            math.log1p(f.swapped_other), math.log1p(f.unexplained), math.log1p(f.diff_words), f.contain]


def has_cue(f: Features) -> bool:
    """Whether anything in the pair could make a contradiction: without one the model is not asked."""
    return bool(f.signals or f.slot or f.opposite or f.reordered)


def conflict_probability(x: Sequence[float], model: Model = MODEL) -> float:
    z = model.bias + sum(w * v for w, v in zip(model.weights, x, strict=True))
    return 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, z))))


def _conflict_reasons(f: Features) -> list[str]:
    if f.signals:
        return list(f.signals)
    out = [f"{f.slot[0]} -> {f.slot[1]} (the same sentence otherwise)"] if f.slot else []
    if f.opposite:
        out.append(f"opposite: {f.opposite}")
    if f.reordered:
        out.append(f"order swapped around '{f.reordered}'")
    return out or ["says the opposite"]


def classify(f: Features, cosine: float, masked_cosine: float | None = None, t: Thresholds = DEFAULT,
             model: Model = MODEL) -> Decision:
    """The decision from a pair's features and its cosine. `masked_cosine` (the notes without the signal's tokens,
    embedded) is only carried into the decision for diagnostics (`decide_many(scores=True)`): the model does not
    use it."""
    if cosine < t.signal_min_cosine:
        return Decision("distinct", False, [f"not about the same thing (cosine {cosine:.2f})"])
    if (f.roles_swapped or f.broadened) and not f.signals and not f.opposite:
        why = f"roles exchanged ({f.roles_swapped})" if f.roles_swapped else f.broadened
        return Decision("distinct", False, [f"{why}: another fact, both can hold (cosine {cosine:.2f})"])
    p = conflict_probability(vector(f), model) if has_cue(f) else 0.0
    if p >= model.threshold:
        return Decision("conflict", False, _conflict_reasons(f), masked_cosine, p)
    if has_cue(f):  # never folded into a confirmation
        why = "; ".join(f.signals) or (f.slot and f"{f.slot[0]} -> {f.slot[1]}") or f.opposite or f.reordered
        return Decision("distinct", False, [f"{why}, but about something else (conflict score {p:.2f})"],
                        masked_cosine, p)
    return _same_or_other(f, cosine, t)


def _same_or_other(f: Features, cosine: float, t: Thresholds) -> Decision:
    """A pair without any contradiction feature: the same claim (a paraphrase or a refinement), or another fact."""
    if f.two_slots and f.slots_plain and cosine >= t.two_slot_cosine:
        pass  # everyday words replaced ("requires ... request" / "needs ... call") and the real model finds the two
        #       notes this close: a rewording, decided below like any other
    elif f.one_slot or f.two_slots:  # replaced values this module cannot name: never folded into a confirmation
        return Decision("distinct", False, [f"{'one word' if f.one_slot else 'words'} replaced (cosine "
                                            f"{cosine:.2f}): kept as its own note"])
    if cosine >= t.dup_cosine or (cosine >= t.refine_cosine and f.contain >= t.refine_contain):
        # Nothing the user wrote is dropped: a confirmation keeps only the old text, so the new one may add at most
        # a rewording (max_added words); more detail makes a refinement, whose text keeps the old one's words.
        if f.added <= t.max_added or f.removed <= 1:
            refines = f.added > t.max_added and f.added >= 3 * f.removed + 2
            return Decision("duplicate", refines, [f"same claim (cosine {cosine:.2f}, {f.contain:.0%} shared "
                                                   f"words)"])
        return Decision("distinct", False, [f"close (cosine {cosine:.2f}), but each note says something the "
                                            f"other does not"])
    return Decision("distinct", False, [f"another fact (cosine {cosine:.2f}, {f.contain:.0%} shared words)"])


def embedded_cosines(pairs: Sequence[tuple[str, str, float]], feats: Sequence[Features], embed: Embed,
                     t: Thresholds = DEFAULT, only: set[int] | None = None) -> tuple[dict[int, float], dict[int, float]]:
    """The masked cosines (pairs with a signal) and the slot cosines (pairs with one replaced slot and no signal)
    of the pairs at or above the cosine gate (with `only`: of those pairs only), from one call to `embed`."""
    gate = [i for i in range(len(pairs)) if pairs[i][2] >= t.signal_min_cosine and (only is None or i in only)]
    todo = [(i, "mask") for i in gate if feats[i].signals]
    todo += [(i, "slot") for i in gate if feats[i].slot and not feats[i].signals]
    texts: list[str] = []
    for i, what in todo:
        slot = feats[i].slot
        if what == "mask":
            texts += [masked(pairs[i][0], feats[i].explained), masked(pairs[i][1], feats[i].explained)]
        else:
            assert slot is not None  # a "slot" entry is only made for a pair with a slot (above)
            texts += list(slot)
    vecs = embed(texts) if texts else []
    out: tuple[dict[int, float], dict[int, float]] = ({}, {})
    for n, (i, what) in enumerate(todo):
        out[what == "slot"][i] = _cos(vecs[2 * n], vecs[2 * n + 1])
    return out


def decide_many(pairs: Sequence[tuple[str, str, float]], embed: Embed, vocab: frozenset[str] = frozenset(),
                t: Thresholds = DEFAULT, *, scores: bool = True) -> list[Decision]:
    """`decide` for several (old, new, cosine) pairs. The decisions use the pairs' cosines and texts only;
    `scores=True` also embeds (one call to `embed`) the masked notes and slots of the pairs that have them, for
    the decisions' `masked_cosine` (diagnostics); `scores=False` (the write path) embeds nothing, with the same
    decisions."""
    feats = [features(old, new, cos, vocab) for old, new, cos in pairs]
    masked_cos = embedded_cosines(pairs, feats, embed, t)[0] if scores else {}
    return [classify(f, pair[2], masked_cos.get(i), t)
            for i, (pair, f) in enumerate(zip(pairs, feats, strict=True))]


def decide(old: str, new: str, cosine: float, embed: Embed, vocab: frozenset[str] = frozenset()) -> Decision:
    """The relation of `new` to `old` (cosine = of their real vectors); `embed` embeds the masked notes."""
    return decide_many([(old, new, cosine)], embed, vocab)[0]


def same_claim(old: str, new: str, cosine: float, vocab: frozenset[str] = frozenset()) -> bool:
    """Whether `new` says what `old` says (a paraphrase or refinement), without embedding anything: a pair with
    any contradiction feature (a signal, a replaced slot, an opposite, a swapped order) is never the same claim."""
    f = features(old, new, cosine, vocab)
    if has_cue(f) or cosine < DEFAULT.signal_min_cosine:
        return False
    return _same_or_other(f, cosine, DEFAULT).relation == "duplicate"


def vocabulary_of(embedder) -> frozenset[str]:
    """The embedder's everyday words (MiniLM's tokenizer vocabulary), or none (the hash embedder)."""
    fn = getattr(embedder, "vocabulary", None)
    try:
        return fn() if fn is not None else frozenset()
    except Exception:  # noqa: BLE001 - names then come from capitalization alone
        return frozenset()


__all__ = ["DEFAULT", "FEATURES", "MODEL", "Decision", "Features", "Model", "Thresholds", "classify",
           "conflict_probability", "decide", "decide_many", "embedded_cosines", "features", "has_cue", "masked",
           "same_claim", "tokens", "vector", "vocabulary_of"]
