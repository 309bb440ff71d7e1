"""Salvage: every intact row of a damaged SQLite file, read page by page (the approach of SQLite's `.recover`).

A damaged page stops SQLite's own b-tree walks: a `SELECT` that reaches it raises "database disk image is
malformed", and everything below a damaged interior page becomes unreachable through SQL. So this module reads the
file itself (never through SQLite, never writing to it), following the file format
(https://www.sqlite.org/fileformat2.html):

- the committed frames of the write-ahead log, when there is one, replace the pages they carry (salts and
  checksums verified, stopping at the first bad frame, as SQLite's own recovery does);
- the schema (`sqlite_master`, rooted at page 1) names each table's root page; each b-tree is walked from its
  root, skipping pages that do not parse, so rows on intact leaf pages are attributed to their table;
- leaf pages that no walk reached (their parent was damaged) and that are not on the free list are "orphans":
  each of their rows is given to the one data table whose columns it fits (count, NOT NULL, declared types), and
  dropped when none or several fit;
- every cell is checked: pointers inside the page, record header and body lengths that add up exactly, valid
  UTF-8, overflow chains that stay inside the file. A cell that fails is counted, not guessed at.

The caller (`core/recovery/repair.py`) decides which copy of a row to keep and rebuilds everything derived from them.
"""

from __future__ import annotations

import mmap
import sqlite3
import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

MAGIC = b"SQLite format 3\x00"
TABLE_LEAF, TABLE_INTERIOR, INDEX_LEAF, INDEX_INTERIOR = 13, 5, 10, 2


class BadCell(Exception):
    """A cell, record or page that does not parse."""


@dataclass
class Row:
    rowid: int
    values: list[Any]
    reachable: bool  # found under the table's own root (else: an orphan page, attributed by shape)
    page: int


@dataclass
class TableDef:
    name: str
    columns: list[str]
    types: list[str]  # declared type, upper case ('' when none)
    notnull: list[bool]
    ipk: int | None  # index of an INTEGER PRIMARY KEY column (stored as NULL in the record: the rowid)
    sql: str


@dataclass
class Salvage:
    rows: dict[str, list[Row]] = field(default_factory=dict)
    index_keys: dict[str, list[list[Any]]] = field(default_factory=dict)
    tables: dict[str, TableDef] = field(default_factory=dict)
    schema_sql: list[tuple[str, str, str]] = field(default_factory=list)  # (type, name, sql)
    stats: dict[str, int] = field(default_factory=dict)

    def count(self, key: str, n: int = 1) -> None:
        self.stats[key] = self.stats.get(key, 0) + n


# -- bytes -------------------------------------------------------------------------------------------------------
def _u16(b, i: int) -> int:
    return (b[i] << 8) | b[i + 1]


def _u32(b, i: int) -> int:
    return int.from_bytes(b[i:i + 4], "big")


def varint(b, i: int) -> tuple[int, int]:
    v = 0
    for k in range(8):
        c = b[i + k]
        v = (v << 7) | (c & 0x7F)
        if c < 0x80:
            return v, i + k + 1
    return (v << 8) | b[i + 8], i + 9


_INT_SIZES = {1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8}


def decode_record(p: bytes) -> list[Any]:
    """The values of one record; BadCell unless header and body account for every byte exactly."""
    try:
        hlen, i = varint(p, 0)
        if hlen < 1 or hlen > len(p):
            raise BadCell("record header length")
        types = []
        while i < hlen:
            t, i = varint(p, i)
            types.append(t)
        if i != hlen:
            raise BadCell("record header overruns")
        out, pos = [], hlen
        for t in types:
            v, pos = _value(p, pos, t)
            out.append(v)
    except (IndexError, UnicodeDecodeError, struct.error) as exc:
        raise BadCell(str(exc)) from exc
    if pos != len(p):
        raise BadCell("record body length")
    return out


def _value(p: bytes, pos: int, t: int) -> tuple[Any, int]:
    if t == 0:
        return None, pos
    if t in _INT_SIZES:
        n = _INT_SIZES[t]
        if pos + n > len(p):
            raise BadCell("integer overruns")
        return int.from_bytes(p[pos:pos + n], "big", signed=True), pos + n
    if t == 7:
        return struct.unpack(">d", p[pos:pos + 8])[0], pos + 8
    if t in (8, 9):
        return t - 8, pos
    if t in (10, 11):
        raise BadCell("reserved serial type")
    n = (t - 12) // 2 if t % 2 == 0 else (t - 13) // 2
    if pos + n > len(p):
        raise BadCell("value overruns")
    raw = p[pos:pos + n]
    return (bytes(raw) if t % 2 == 0 else bytes(raw).decode("utf-8")), pos + n


# -- the file ----------------------------------------------------------------------------------------------------
class Pages:
    """The pages of a database file as they were last committed (the WAL's committed frames over the file)."""

    def __init__(self, path: Path, wal_path: Path | None = None):
        self._f = open(path, "rb")  # noqa: SIM115 - closed by close()
        size = Path(path).stat().st_size
        self._mm = mmap.mmap(self._f.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
        head = bytes(self._mm[:100])
        self.header_ok = head[:16] == MAGIC
        ps = _u16(head, 16) if len(head) >= 18 else 0
        ps = 65536 if ps == 1 else ps
        if not self.header_ok or ps < 512 or ps > 65536 or ps & (ps - 1):
            ps = 4096  # Mnemo's stores use SQLite's default page size
        self.size = ps
        reserved = head[20] if self.header_ok else 0
        self.usable = ps - reserved
        self.wal: dict[int, bytes] = {}
        wal_db_pages = 0
        if wal_path is not None and Path(wal_path).exists():
            self.wal, wal_db_pages = read_wal(Path(wal_path), ps)
        file_pages = -(-size // ps)
        self.count = wal_db_pages or max(file_pages, max(self.wal, default=0))

    def page(self, n: int) -> bytes:
        if n < 1 or n > self.count:
            raise BadCell(f"page {n} is outside the file")
        if n in self.wal:
            return self.wal[n]
        data = self._mm[(n - 1) * self.size:n * self.size]
        if len(data) < self.size:
            raise BadCell(f"page {n} is cut short")
        return data

    def header(self) -> bytes:
        return bytes(self.page(1)[:100])

    def close(self) -> None:
        if isinstance(self._mm, mmap.mmap):
            self._mm.close()
        self._f.close()


def _wal_checksum(buf: bytes, s0: int, s1: int, big: bool) -> tuple[int, int]:
    words = struct.unpack(f"{'>' if big else '<'}{len(buf) // 4}I", buf)
    for k in range(0, len(words), 2):
        s0 = (s0 + words[k] + s1) & 0xFFFFFFFF
        s1 = (s1 + words[k + 1] + s0) & 0xFFFFFFFF
    return s0, s1


def read_wal(path: Path, page_size: int) -> tuple[dict[int, bytes], int]:
    """Pages of the committed transactions in a WAL file, and the database size in pages after the last one."""
    data = path.read_bytes()
    if len(data) < 32 or _u32(data, 0) not in (0x377F0682, 0x377F0683):
        return {}, 0
    big = bool(_u32(data, 0) & 1)
    ps = _u32(data, 8) or page_size
    s0, s1 = _wal_checksum(data[:24], 0, 0, big)
    if (s0, s1) != (_u32(data, 24), _u32(data, 28)):
        return {}, 0
    salts = data[16:24]
    frames: dict[int, int] = {}
    committed: dict[int, int] = {}
    db_pages = 0
    off = 32
    while off + 24 + ps <= len(data):
        fh = data[off:off + 24]
        if fh[8:16] != salts:
            break
        s0, s1 = _wal_checksum(fh[:8], s0, s1, big)
        s0, s1 = _wal_checksum(data[off + 24:off + 24 + ps], s0, s1, big)
        if (s0, s1) != (_u32(fh, 16), _u32(fh, 20)):
            break
        frames[_u32(fh, 0)] = off + 24
        if _u32(fh, 4):  # a commit frame: the transaction is complete
            committed, db_pages = dict(frames), _u32(fh, 4)
        off += 24 + ps
    return {pg: data[o:o + ps] for pg, o in committed.items()}, db_pages


# -- cells -------------------------------------------------------------------------------------------------------
def _payload(pages: Pages, data: bytes, i: int, size: int, index: bool) -> bytes:
    """A cell's payload of `size` bytes starting at `i` on the page, following its overflow chain."""
    u = pages.usable
    x = ((u - 12) * 64 // 255) - 23 if index else u - 35
    m = ((u - 12) * 32 // 255) - 23
    local = size if size <= x else (m + (size - m) % (u - 4) if m + (size - m) % (u - 4) <= x else m)
    if size < 0 or i + local > u or (local < size and i + local + 4 > u):
        raise BadCell("cell overruns its page")
    parts = [bytes(data[i:i + local])]
    have, nxt, hops = local, (_u32(data, i + local) if local < size else 0), 0
    while have < size:
        hops += 1
        if nxt == 0 or hops > pages.count:
            raise BadCell("overflow chain broken")
        ov = pages.page(nxt)
        take = min(u - 4, size - have)
        parts.append(bytes(ov[4:4 + take]))
        have += take
        nxt = _u32(ov, 0)
    return b"".join(parts)


def _cell_offsets(data: bytes, hdr: int, interior: bool, usable: int) -> list[int]:
    n = _u16(data, hdr + 3)
    start = hdr + (12 if interior else 8)
    if start + 2 * n > usable:
        raise BadCell("cell count overruns the page")
    return [_u16(data, start + 2 * k) for k in range(n)]


def _page_kind(pages: Pages, n: int) -> tuple[bytes, int, int]:
    data = pages.page(n)
    hdr = 100 if n == 1 else 0
    return data, hdr, data[hdr]


def leaf_rows(pages: Pages, n: int, out: Salvage) -> list[tuple[int, list[Any]]]:
    """(rowid, values) of each cell of table-leaf page `n` that parses; the others are counted as bad."""
    data, hdr, kind = _page_kind(pages, n)
    if kind != TABLE_LEAF:
        raise BadCell(f"page {n} is not a table leaf")
    rows = []
    for off in _cell_offsets(data, hdr, False, pages.usable):
        try:
            if off < hdr + 8 or off >= pages.usable:
                raise BadCell("cell pointer outside the page")
            size, i = varint(data, off)
            rowid, i = varint(data, i)
            rowid = rowid - (1 << 64) if rowid >= 1 << 63 else rowid
            rows.append((rowid, decode_record(_payload(pages, data, i, size, False))))
        except (BadCell, IndexError):
            out.count("bad_cells")
    return rows


def index_keys(pages: Pages, n: int, out: Salvage) -> list[list[Any]]:
    """The keys stored on an index page (leaf or interior)."""
    data, hdr, kind = _page_kind(pages, n)
    interior = kind == INDEX_INTERIOR
    keys = []
    for off in _cell_offsets(data, hdr, interior, pages.usable):
        try:
            i = off + 4 if interior else off
            size, i = varint(data, i)
            keys.append(decode_record(_payload(pages, data, i, size, True)))
        except (BadCell, IndexError):
            out.count("bad_cells")
    return keys


def walk(pages: Pages, root: int, seen: set[int], out: Salvage) -> tuple[list[int], list[int]]:
    """Leaf pages and index pages under `root` (damaged pages are skipped and counted, never followed)."""
    leaves: list[int] = []
    index_pages: list[int] = []
    stack = [root]
    while stack:
        n = stack.pop()
        if n in seen:
            continue
        seen.add(n)
        try:
            data, hdr, kind = _page_kind(pages, n)
            if kind in (TABLE_LEAF, INDEX_LEAF):
                (leaves if kind == TABLE_LEAF else index_pages).append(n)
                continue
            if kind not in (TABLE_INTERIOR, INDEX_INTERIOR):
                raise BadCell(f"page {n}: unknown page type {kind}")
            if kind == INDEX_INTERIOR:
                index_pages.append(n)
            kids = [_u32(data, off) for off in _cell_offsets(data, hdr, True, pages.usable)
                    if hdr + 12 <= off < pages.usable - 4]
            stack.extend(k for k in [*kids, _u32(data, hdr + 8)] if 0 < k <= pages.count)
        except (BadCell, IndexError):
            out.count("bad_pages")
    return leaves, index_pages


def freelist(pages: Pages, out: Salvage) -> set[int]:
    """Pages on the free list (old content that must not come back)."""
    free: set[int] = set()
    try:
        trunk = _u32(pages.header(), 32)
    except BadCell:
        return free
    while 0 < trunk <= pages.count and trunk not in free:
        free.add(trunk)
        try:
            data = pages.page(trunk)
            n = _u32(data, 4)
            if 8 + 4 * n > pages.usable:
                raise BadCell("free-list trunk overruns")
            free.update(_u32(data, 8 + 4 * k) for k in range(n))
            trunk = _u32(data, 0)
        except BadCell:
            out.count("bad_pages")
            break
    return free


# -- tables ------------------------------------------------------------------------------------------------------
def table_def(name: str, sql: str) -> TableDef | None:
    """Columns of a CREATE TABLE statement, read by SQLite itself from an in-memory database."""
    mem = sqlite3.connect(":memory:")
    try:
        mem.execute(sql)
        info = mem.execute(f'PRAGMA table_info("{name}")').fetchall()
        pk_cols = [r for r in info if r[5]]
    except sqlite3.Error:
        return None
    finally:
        mem.close()
    ipk = None
    if len(pk_cols) == 1 and pk_cols[0][2].upper() == "INTEGER" and "WITHOUT ROWID" not in sql.upper():
        ipk = pk_cols[0][0]
    return TableDef(name, [r[1] for r in info], [r[2].upper() for r in info], [bool(r[3]) for r in info], ipk, sql)


def fits(t: TableDef, values: list[Any]) -> bool:
    """Whether a record has the shape of a row of `t` (count, NOT NULL, declared types)."""
    if len(values) != len(t.columns):
        return False
    for k, v in enumerate(values):
        if k == t.ipk:
            if v is not None:
                return False
            continue
        if v is None:
            if t.notnull[k]:
                return False
            continue
        want = t.types[k]
        if ("CHAR" in want or "TEXT" in want or "CLOB" in want) and not isinstance(v, str):
            return False
        if want == "BLOB" and not isinstance(v, bytes):
            return False
        if ("REAL" in want or "INT" in want) and not isinstance(v, int | float):
            return False
    return True


def read_schema(pages: Pages, seen: set[int], out: Salvage) -> list[tuple[str, str, str, int, str | None]]:
    """Rows of sqlite_master (type, name, tbl_name, rootpage, sql) found under page 1."""
    leaves, _ = walk(pages, 1, seen, out)
    entries = []
    for n in leaves:
        for _rowid, v in leaf_rows(pages, n, out):
            if len(v) == 5 and isinstance(v[1], str) and isinstance(v[3], int):
                entries.append(tuple(v))
    return entries


def salvage(db: Path, fallback_schema: list[tuple[str, str, str]] | None = None,
            skip: frozenset[str] = frozenset(), index_keys_of: frozenset[str] | None = None) -> Salvage:
    """Every row that can still be read from `db` (and its `-wal`). `fallback_schema` ((type, name, sql) from a
    backup) names the tables when the damaged file's own schema cannot be read. The rows of tables in `skip` and
    the keys of indexes not in `index_keys_of` (None: all) are not decoded (their pages are still walked, so they
    are not taken for orphans)."""
    out = Salvage()
    db = Path(db)
    pages = Pages(db, db.with_name(db.name + "-wal"))
    try:
        _salvage(pages, out, fallback_schema or [], skip, index_keys_of)
        out.stats["pages"] = pages.count
        out.stats["wal_pages"] = len(pages.wal)
    finally:
        pages.close()
    return out


def _salvage(pages: Pages, out: Salvage, fallback: list[tuple[str, str, str]], skip: frozenset[str],
             index_keys_of: frozenset[str] | None) -> None:
    seen: set[int] = set()
    schema = read_schema(pages, seen, out) if pages.header_ok else []
    if not pages.header_ok:
        out.count("bad_pages")
    out.schema_sql = [(e[0], e[1], e[4]) for e in schema if e[4]] or list(fallback)
    for typ, name, sql in out.schema_sql:
        if typ == "table" and not name.startswith("sqlite_") and "VIRTUAL" not in sql.upper():
            t = table_def(name, sql)
            if t is not None:
                out.tables[name] = t
    for typ, name, _tbl, root, _sql in schema:
        if not root:
            continue
        leaves, idx_pages = walk(pages, root, seen, out)
        if name in skip or (typ == "index" and index_keys_of is not None and name not in index_keys_of):
            continue
        if typ == "table":
            bucket = out.rows.setdefault(name, [])
            for n in leaves:
                _take(pages, n, name, True, bucket, out)
        elif typ == "index":
            keys = out.index_keys.setdefault(name, [])
            for n in idx_pages:
                try:
                    keys.extend(index_keys(pages, n, out))
                except (BadCell, IndexError):
                    out.count("bad_pages")
    _orphans(pages, seen | freelist(pages, out), out, skip)


def _take(pages: Pages, n: int, table: str, reachable: bool, bucket: list[Row], out: Salvage) -> None:
    t = out.tables.get(table)
    try:
        rows = leaf_rows(pages, n, out)
    except (BadCell, IndexError):
        out.count("bad_pages")
        return
    for rowid, values in rows:
        if t is not None and not fits(t, values):
            out.count("bad_cells")
            continue
        bucket.append(Row(rowid, values, reachable, n))


def _orphans(pages: Pages, known: set[int], out: Salvage, skip: frozenset[str]) -> None:
    """Table-leaf pages no walk reached: each row goes to the one data table whose shape it fits."""
    candidates = [t for name, t in out.tables.items() if not name.startswith("sqlite_") and name not in skip]
    for n in range(1, pages.count + 1):
        if n in known:
            continue
        try:
            data, hdr, kind = _page_kind(pages, n)
            if kind != TABLE_LEAF:
                continue
            rows = leaf_rows(pages, n, out)
        except (BadCell, IndexError):
            continue
        out.count("orphan_pages")
        for rowid, values in rows:
            owners = [t for t in candidates if fits(t, values)]
            if len(owners) != 1:
                out.count("orphan_rows_unplaced")
                continue
            out.rows.setdefault(owners[0].name, []).append(Row(rowid, values, False, n))
            out.count("orphan_rows")


# -- carving ------------------------------------------------------------------------------------------------------
def carve_page(data: bytes, start: int, end: int, t: TableDef) -> list[list[Any]]:
    """Records of table `t` found at any byte offset of a page whose structure is lost (its header overwritten, a
    free page, an old WAL frame): a record is kept only when its header and body account for every byte exactly
    and its values fit the table's shape, so random bytes do not pass for a row."""
    ncols = len(t.columns)
    found, o = [], start
    while o < end - 2:
        rec = _record_at(data, o, end, ncols)
        if rec is not None and fits(t, rec[0]):
            found.append(rec[0])
            o = rec[1]
            continue
        o += 1
    return found


def _record_at(data: bytes, o: int, end: int, ncols: int) -> tuple[list[Any], int] | None:
    try:
        hlen, i = varint(data, o)
        if hlen < ncols + 1 or hlen > 9 * ncols + 2 or o + hlen > end:
            return None
        types, body = [], 0
        while i < o + hlen:
            t, i = varint(data, i)
            if t in (10, 11):
                return None
            types.append(t)
            body += _INT_SIZES.get(t, 8 if t == 7 else (0 if t < 12 else (t - 12) // 2))
        if len(types) != ncols or i != o + hlen or o + hlen + body > end:
            return None
        return decode_record(bytes(data[o:o + hlen + body])), o + hlen + body
    except (BadCell, IndexError, UnicodeDecodeError, ValueError):
        return None


def wal_frames(path: Path, page_size: int) -> list[bytes]:
    """Every frame a WAL file holds, committed or not, current or left over from an earlier generation of the log
    (their pages can hold rows the database file no longer has). No checksum is required: what is carved from
    them is checked record by record."""
    try:
        data = Path(path).read_bytes()
    except OSError:
        return []
    if len(data) < 32 or _u32(data, 0) not in (0x377F0682, 0x377F0683):
        return []
    ps = _u32(data, 8) or page_size
    if ps < 512 or ps > 65536 or ps & (ps - 1):
        ps = page_size
    return [data[off + 24:off + 24 + ps] for off in range(32, len(data) - 24 - ps + 1, 24 + ps)]


def carve(db: Path, table: str, t: TableDef, extra_pages: list[bytes] | None = None) -> list[tuple[str, list[Any]]]:
    """(where, values) of every record shaped like a row of `t` on the pages of `db` that are not intact b-tree
    pages (their header is damaged or they are free), on every frame of its WAL, and on `extra_pages`."""
    db = Path(db)
    out: list[tuple[str, list[Any]]] = []
    pages = Pages(db)
    try:
        free = freelist(pages, Salvage())
        for n in range(1, pages.count + 1):
            try:
                data, hdr, kind = _page_kind(pages, n)
            except (BadCell, IndexError):
                continue
            if n not in free and kind in (TABLE_LEAF, TABLE_INTERIOR, INDEX_LEAF, INDEX_INTERIOR):
                try:  # an intact page is read by the b-tree walk; only the cells of one that fails are carved
                    _cell_offsets(data, hdr, kind in (TABLE_INTERIOR, INDEX_INTERIOR), pages.usable)
                    continue
                except BadCell:
                    pass
            where = "a free page" if n in free else "a damaged page"
            out.extend((where, v) for v in carve_page(data, 0, pages.usable, t))
        frames = wal_frames(db.with_name(db.name + "-wal"), pages.size)
    finally:
        pages.close()
    for data in frames:
        out.extend(("the write-ahead log", v) for v in carve_page(data, 0, len(data), t))
    for data in extra_pages or []:
        out.extend(("a damaged page", v) for v in carve_page(data, 0, len(data), t))
    return out


def torn_texts(db: Path, wanted: dict[str, str], digest: Callable[[str], str], types: tuple[str, ...],
               kinds: tuple[str, ...], tiers: tuple[str, ...] = ("warm", "cold", "hot"),
               max_text: int = 8192, trusts: tuple[str, ...] = ("trusted", "untrusted")) -> dict[str, dict[str, Any]]:
    """Notes whose record lost its header (the damage ended inside it) but whose id's tail and text still stand in
    `db` or its WAL: id -> {text, type?, kind?, tags?}. `wanted` maps each id to the content hash the file's own
    index keeps for it; a text is taken only when `digest(text)` equals that hash, so nothing is guessed about
    where it ends. After the text come the type and the kind (read when they are one of `types` / `kinds`), and
    further on the tier and the tags (a JSON list), read when they parse."""
    blobs = []
    for path in (Path(db), Path(db).with_name(Path(db).name + "-wal")):
        try:
            blobs.append(path.read_bytes())
        except OSError:
            continue
    out: dict[str, dict[str, Any]] = {}
    for item_id, want in wanted.items():
        tail = item_id[-12:].encode()
        for raw in blobs:
            pos = raw.find(tail)
            while pos >= 0 and item_id not in out:
                start = pos + len(tail)
                got = _text_at(raw, start, want, digest, max_text, types)
                if got is not None:
                    text, end = got
                    out[item_id] = {"text": text, **_after_text(raw, end, types, kinds, tiers, want, trusts)}
                pos = raw.find(tail, pos + 1)
    return out


def _text_at(raw: bytes, start: int, want: str, digest: Callable[[str], str], max_text: int,
             types: tuple[str, ...]) -> tuple[str, int] | None:
    """The text starting at `start` whose hash is `want`: it ends where a record's next value (the type) begins,
    so only those ends are tried."""
    import re

    window = raw[start:start + max_text + 16]
    for m in re.finditer(b"|".join(re.escape(t.encode()) for t in types), window):
        try:
            text = window[:m.start()].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if text and digest(text) == want:
            return text, start + m.start()
    return None


def _after_text(raw: bytes, pos: int, types: tuple[str, ...], kinds: tuple[str, ...],
                tiers: tuple[str, ...], want: str, trusts: tuple[str, ...]) -> dict[str, Any]:
    """The type and the kind right after the text; the tags only where this record holds them. The memories row
    runs `... content_hash source provenance anchors [superseded_by] [deprecated_reason] tier tags ...`, so the
    tags are read only after this note's own content hash (`want`, near the kind), its provenance (a JSON object)
    and anchors (a JSON list) parse in a row, followed by the tier with nothing but printable text between, and
    when the trust value follows them: a record cut before or inside its tags gives none (never the tags of a
    record further on, nor a list the damage happened to close)."""
    import json
    import re

    out: dict[str, Any] = {}
    rest = raw[pos:pos + 4096].decode("utf-8", "replace")
    typ = next((t for t in sorted(types, key=len, reverse=True) if rest.startswith(t)), None)
    if typ is None:
        return out
    out["type"] = typ
    kind = next((k for k in sorted(kinds, key=len, reverse=True) if rest[len(typ):].startswith(k)), None)
    if kind is None:
        return out
    out["kind"] = kind
    at = rest.find(want, len(typ) + len(kind), len(typ) + len(kind) + 1024)
    if at < 0 or not want:
        return out
    dec = json.JSONDecoder()
    brace = rest.find("{", at + len(want), at + len(want) + 64)  # after the source
    try:
        prov, i = dec.raw_decode(rest, brace) if brace >= 0 else (None, 0)
        anchors, i = dec.raw_decode(rest, i) if isinstance(prov, dict) and rest[i:i + 1] == "[" else (None, 0)
    except ValueError:
        return out
    if not isinstance(anchors, list):
        return out
    m = re.compile("(?:" + "|".join(map(re.escape, tiers)) + r")(?=\[)").search(rest, i, i + 1024)
    if m is None or not _plain(rest[i:m.start()]):
        return out
    try:
        tags, end = dec.raw_decode(rest, m.end())
    except ValueError:
        return out
    if not rest.startswith(trusts, end):
        return out
    if isinstance(tags, list) and all(isinstance(t, str) for t in tags):
        out["tags"] = tags
    return out


def _plain(gap: str) -> bool:
    """Whether the bytes between anchors and tier can be this row's own (a superseded-by id, a deprecation
    reason): printable text only; a record header, random bytes or a cut (U+FFFD) are not."""
    return all(ch.isprintable() and ch != "\ufffd" for ch in gap)


def cut_index_texts(db: Path, hashes: dict[str, str], digest: Callable[[str], str]) -> dict[str, tuple[str, str | None]]:
    """Full-text rows (`fts_content`: rowid, c0 = `text tags kind`, c1 = a memory id, c2 = the partition) whose
    record was cut after its c0 (the damage took the id): hash -> c0 for each c0 that holds a text whose
    `digest` is one of `hashes` (the content hashes the file's own index keeps for ids no copy holds), so the
    text is attributed to its id exactly, never by guess: hash -> (text, c0), c0 None when the damage began inside
    it (then only the text is known: the tags and kind that followed it are gone). The record header gives c0's
    length."""
    import re

    out: dict[str, tuple[str, str | None]] = {}
    # header: its length, NULL (the rowid alias), c0's serial type (odd: text), c1's: a 24-character id ('=')
    head = re.compile(rb"[\x05-\x0a]\x00([\x80-\xff]{0,2}[\x0d-\x7f])=")
    for path in (Path(db), Path(db).with_name(Path(db).name + "-wal")):
        try:
            raw = path.read_bytes()
        except OSError:
            continue
        for m in head.finditer(raw):
            try:
                t, _ = varint(m.group(1), 0)
            except IndexError:
                continue
            if t < 13 or t % 2 == 0:
                continue
            start = m.start() + raw[m.start()]
            body = raw[start:start + (t - 13) // 2]
            try:
                c0 = body.decode("utf-8")
            except UnicodeDecodeError:
                c0 = None
            if c0 is not None:
                head_text, sep, _kind = c0.rpartition(" ")
                toks = head_text.split(" ") if sep else []
                for k in range(0, min(len(toks), 24)):
                    text = " ".join(toks[:len(toks) - k]).rstrip(" ") if k else head_text.rstrip(" ")
                    h = digest(text) if text else None
                    if h in hashes and h not in out:
                        out[h] = (text, c0)
                        break
                else:
                    c0 = None
            if c0 is None:  # cut inside c0: the text is a prefix of it, taken only when its hash is wanted
                valid = body.decode("utf-8", "ignore")
                for j in range(len(valid), 0, -1):
                    h = digest(valid[:j])
                    if h in hashes and h not in out:
                        out[h] = (valid[:j], None)
                        break
    return out


__all__ = ["BadCell", "Pages", "Row", "Salvage", "TableDef", "carve", "carve_page", "cut_index_texts", "torn_texts", "decode_record", "fits",
           "read_wal", "salvage", "table_def", "wal_frames"]
