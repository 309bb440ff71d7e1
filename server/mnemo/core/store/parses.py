"""The `note_parses` table: the relation check's parse of each memory's text, stored when the memory is written
(core/relation/compare.py `encoded`), so a later write comparing it as a neighbour reads it instead of parsing the
text again (issue 22, fifth pass). Opaque here: a blob and the version of the parser that made it; the blob holds a
digest of the text it parses, checked when it is read. Not the truth: a missing, stale or foreign row only costs a
parse; rows are written by the remember path and filled in as neighbours are met (a store older than this table, a
parser changed since), and deleted with their memory."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Sequence

from mnemo.core.store.memories import chunked, marks


class ParseTable:
    """Mixed into `Store`: needs `conn()`."""

    def note_parses(self, ids: Iterable[str], parser: str) -> dict[str, bytes]:
        """The stored parses of `ids` made by `parser` (rows of another parser version are not returned)."""
        out: dict[str, bytes] = {}
        if not parser:
            return out
        for chunk in chunked(list(ids)):
            for r in self.conn().execute(f"SELECT id, parse FROM note_parses WHERE parser=? AND id IN"
                                         f" ({marks(len(chunk))})", (parser, *chunk)):
                out[r[0]] = r[1]
        return out

    @staticmethod
    def put_note_parses(conn: sqlite3.Connection, rows: Sequence[tuple[str, str, bytes]]) -> None:
        """Store (memory id, parser version, parse) rows, replacing what a memory had; a row for an id that is not
        a memory of this store (a team server's) is not written."""
        conn.executemany("INSERT OR REPLACE INTO note_parses(id, parser, parse) SELECT ?, ?, ? WHERE EXISTS"
                         " (SELECT 1 FROM memories WHERE id=?)", [(i, p, b, i) for i, p, b in rows if p])
