"""The SQLite file: connections, the one write transaction, what its errors mean, and the checks of the file.

WAL with `synchronous=FULL`; every write runs in `BEGIN IMMEDIATE` and is acknowledged only after COMMIT. The
tables and their statements live in the other modules of this package (one per table family); `Store`
(store/__init__.py) puts them together.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from pathlib import Path

from mnemo.core.errors import StoreCorrupt, StoreError, StoreNotWritable
from mnemo.core.store.memories import VisibilityCache
from mnemo.core.store.schema import SCHEMA, SCHEMA_VERSION, migrate
from mnemo.core.store_settings import default_home


def repair_command(db_path: Path) -> str:
    """The exact command that repairs the store holding `db_path` (with `--home` unless it is the default)."""
    home = Path(db_path).parent
    default = default_home()
    with contextlib.suppress(OSError):
        if home.resolve() == default.resolve():
            return "mnemo doctor --repair"
    return f"mnemo doctor --repair --home {shlex.quote(str(home))}"


def summarize_check(rows: Sequence[str]) -> str:
    """SQLite's integrity/quick check output in one line: how many problems, and the first."""
    msgs = [m for m in rows if m and not m.startswith("*** in database")]
    if msgs == ["ok"] or not msgs:
        return "ok"
    first = " ".join(msgs[0].split())
    more = "100+" if len(rows) >= 100 else str(len(msgs))
    return first if len(msgs) == 1 else f"{more} problems, the first: {first}"


def repair_hint(db_path: Path) -> str:
    return (f"run `{repair_command(db_path)}`: it keeps the damaged file aside, salvages every row that can still be "
            "read, merges the newest good backup and lists what could not be recovered")


class Database:
    """Thread-safe access to the SQLite truth: thread-local connections, one writer at a time."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self._local = threading.local()
        self._write_lock = threading.RLock()
        self._conns: list[sqlite3.Connection] = []
        self._conns_lock = threading.Lock()
        self.damage: str | None = None  # what SQLite said when it found the file damaged (then nothing is served)
        self.visibility_cache = VisibilityCache()  # recall's visibility columns (store/memories.py)
        self._check_dir()
        try:
            with self._write_lock:
                self.conn().executescript(SCHEMA)  # executescript manages its own transaction
            with self.write() as conn:
                migrate(conn)
                conn.execute("INSERT OR IGNORE INTO meta(key, value) VALUES('schema_version', ?)",
                             (str(SCHEMA_VERSION),))
        except sqlite3.DatabaseError as exc:
            if "malformed" in str(exc) or "not a database" in str(exc):
                self.damage = str(exc)
                raise StoreCorrupt(f"the store at {self.path} is damaged: {exc}", hint=repair_hint(self.path),
                                   sqlite=str(exc)) from exc
            raise StoreError(f"cannot open the store at {self.path}: {exc}",
                             hint="check the disk and permissions, then run `mnemo doctor`") from exc

    def _check_dir(self) -> None:
        d = self.path.parent
        try:
            d.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise StoreNotWritable(f"cannot create the store directory {d}: {exc.strerror}",
                                   hint="set MNEMO_HOME to a writable directory or fix the permissions") from exc
        if not os.access(d, os.W_OK | os.X_OK) or (self.path.exists() and not os.access(self.path, os.W_OK)):
            raise StoreNotWritable(f"the store directory {d} is not writable",
                                   hint="set MNEMO_HOME to a writable directory or fix the permissions")

    # -- connections -----------------------------------------------------------------------------------------
    def conn(self) -> sqlite3.Connection:
        c = getattr(self._local, "conn", None)
        if c is None:
            try:
                c = sqlite3.connect(self.path, timeout=30.0, isolation_level=None, check_same_thread=False)
            except sqlite3.OperationalError as exc:
                raise StoreNotWritable(f"cannot open {self.path}: {exc}",
                                       hint="set MNEMO_HOME to a writable directory or fix the permissions") from exc
            c.row_factory = sqlite3.Row
            c.execute("PRAGMA journal_mode=WAL")
            c.execute("PRAGMA synchronous=FULL")
            c.execute("PRAGMA foreign_keys=ON")
            c.execute("PRAGMA busy_timeout=30000")
            self._local.conn = c
            with self._conns_lock:
                self._conns.append(c)
        return c

    @contextlib.contextmanager
    def write(self) -> Iterator[sqlite3.Connection]:
        """One all-or-nothing write transaction; acknowledged only after COMMIT returns.

        SQLite errors (disk full, I/O error, a busy or damaged database) become `StoreError`s that say what to do.
        A failed COMMIT is rolled back here: otherwise the transaction would stay open on this thread's
        connection, the next write would join it as "nested", and nothing after it would ever be committed.
        """
        with self._write_lock:
            c = self.conn()
            if c.in_transaction:  # nested use: join the outer transaction
                yield c
                return
            try:
                c.execute("BEGIN IMMEDIATE")
            except sqlite3.DatabaseError as exc:
                raise self.store_error(exc, "start a write") from exc
            try:
                yield c
            except BaseException as exc:
                self._rollback(c)
                if isinstance(exc, sqlite3.OperationalError | sqlite3.DatabaseError) \
                        and not isinstance(exc, sqlite3.IntegrityError | sqlite3.ProgrammingError):
                    raise self.store_error(exc, "write") from exc
                raise
            else:
                try:
                    c.execute("COMMIT")
                except sqlite3.DatabaseError as exc:
                    self._rollback(c)
                    raise self.store_error(exc, "commit") from exc
            finally:
                self.visibility_cache.settled()  # committed or rolled back: the rows it changed are read again

    def in_transaction(self) -> bool:
        """Whether this thread's connection is inside a transaction (what it reads may not be committed yet)."""
        return self.conn().in_transaction

    @contextlib.contextmanager
    def reading(self) -> Iterator[None]:
        """One consistent read of several statements (a read transaction on this thread's connection)."""
        conn = self.conn()
        conn.execute("BEGIN")
        try:
            yield
        finally:
            conn.execute("COMMIT")
            self.visibility_cache.settled()  # a write that joined this transaction

    @staticmethod
    @contextlib.contextmanager
    def undone(conn: sqlite3.Connection, name: str = "dry_run") -> Iterator[None]:
        """Inside a write: everything done in the block is rolled back at its end (a dry run's savepoint)."""
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield
        finally:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")

    @staticmethod
    @contextlib.contextmanager
    def savepoint(conn: sqlite3.Connection, name: str = "item") -> Iterator[None]:
        """Inside a write: the block is all-or-nothing on its own (a failing item of a batch leaves no trace, the
        items before and after it stay in the transaction)."""
        conn.execute(f"SAVEPOINT {name}")
        try:
            yield
        except BaseException:
            conn.execute(f"ROLLBACK TO {name}")
            conn.execute(f"RELEASE {name}")
            raise
        conn.execute(f"RELEASE {name}")

    @staticmethod
    def _rollback(c: sqlite3.Connection) -> None:
        try:
            if c.in_transaction:
                c.execute("ROLLBACK")
        except sqlite3.Error:  # SQLite may have rolled back already (after SQLITE_FULL / IOERR)
            pass

    def store_error(self, exc: sqlite3.DatabaseError, what: str) -> StoreError:
        """A user-fixable error for a SQLite failure (nothing of this write was stored)."""
        msg = str(exc)
        low = msg.lower()
        if "full" in low:
            return StoreError(f"the disk holding {self.path.parent} is full: could not {what}; this change was not "
                              "stored (everything acknowledged before is safe)",
                              hint="free some disk space, then retry", sqlite=msg)
        if "i/o" in low or "disk" in low:
            return StoreError(f"disk I/O error on {self.path}: could not {what}; this change was not stored "
                              "(everything acknowledged before is safe)",
                              hint="check the disk (space, quota, file size limit `ulimit -f`, permissions), then "
                                   "retry; `mnemo doctor` checks the store", sqlite=msg)
        if "locked" in low or "busy" in low:
            return StoreError(f"the store at {self.path} stayed busy: could not {what}",
                              hint="another program holds a long write lock on mnemo.db; close it and retry",
                              sqlite=msg)
        if "malformed" in low or "not a database" in low or "corrupt" in low:
            self.damage = self.damage or msg
            return StoreCorrupt(f"the store at {self.path} is damaged ({msg}): could not {what}",
                                hint=repair_hint(self.path), sqlite=msg)
        return StoreError(f"the store at {self.path} failed: could not {what} ({msg})",
                          hint="run `mnemo doctor`", sqlite=msg)

    def close(self) -> None:
        self.visibility_cache.clear()
        with self._conns_lock:
            for c in self._conns:
                with contextlib.suppress(Exception):
                    c.close()
            self._conns.clear()
        self._local = threading.local()

    # -- meta ------------------------------------------------------------------------------------------------
    def get_meta(self, key: str, default: str | None = None) -> str | None:
        row = self.conn().execute("SELECT value FROM meta WHERE key=?", (key,)).fetchone()
        return row[0] if row else default

    def set_meta(self, conn: sqlite3.Connection, key: str, value: str) -> None:
        conn.execute("INSERT INTO meta(key, value) VALUES(?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                     (key, value))

    def integrity_check(self) -> str:
        """`ok`, or a one-line summary of what SQLite's integrity_check found."""
        return summarize_check([str(r[0]) for r in self.conn().execute("PRAGMA integrity_check(100)")])

    # -- damage ----------------------------------------------------------------------------------------------
    def check_damage(self) -> str | None:
        """Run SQLite's `quick_check` (every page read once: ~0.1 s per 10,000 memories); remember and return what
        it found wrong, None when the file is sound."""
        try:
            rows = [str(r[0]) for r in self.conn().execute("PRAGMA quick_check(100)")]
            found = None if rows == ["ok"] else summarize_check(rows)
        except sqlite3.DatabaseError as exc:
            found = str(exc)
        if found:
            self.damage = self.damage or f"SQLite quick_check: {found}"
        return found

    def damage_error(self) -> StoreCorrupt | None:
        """The error every request gets while the file is known to be damaged (writing on would spread it)."""
        if self.damage is None:
            return None
        return StoreCorrupt(f"the store at {self.path} is damaged ({self.damage}); nothing can be read or written "
                            "until it is repaired", hint=repair_hint(self.path), sqlite=self.damage)
