"""``SQLiteStore``: the cache in one local file, through the standard library's ``sqlite3``.

Each thread of each process has its own connection (SQLite's rule: a connection is never used across
``fork()``, and a forked child leaves its parent's untouched). The file is in WAL mode, so readers
never wait for a writer, and writers of other threads and processes wait their turn (``busy_timeout``)
instead of failing. The file says what it is (``application_id``) and which layout it holds
(``user_version``): another program's database, or one of another layout, is refused, not written to.
"""

from __future__ import annotations

import os
import sqlite3
import threading
import time
import weakref
from collections.abc import Callable
from pathlib import Path

from ._store import Errors, Store, StoreStats

__all__ = ["SQLiteStore"]

_BUSY_PAUSE = 0.005
"""Seconds between two tries of a statement SQLite answered busy without waiting."""

APPLICATION_ID = 0x57434331  # "WCC1": a response cache of this package
LAYOUT = 1
_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS entries ("
    " key TEXT PRIMARY KEY, value BLOB NOT NULL, stored REAL NOT NULL, expires REAL) WITHOUT ROWID",
    "CREATE INDEX IF NOT EXISTS entries_expires ON entries (expires) WHERE expires IS NOT NULL",
)
_PURGE_EVERY = 1000
"""Expired entries are removed after every this many saves (and by ``clear``); until then they are
never served."""


class _Connection:
    """One thread's connection (a holder, since ``sqlite3.Connection`` takes no weak reference), closed
    when its thread ends or its store goes: Python 3.13 warns of a connection collected open."""

    __slots__ = ("__weakref__", "db", "pid")

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self.pid = os.getpid()

    def __del__(self, getpid: Callable[[], int] = os.getpid) -> None:  # bound now: at exit ``os`` may be gone
        if self.pid == getpid():  # a forked child's inherited one stays open (its parent's locks)
            self.db.close()


class SQLiteStore(Store):
    """Entries in the SQLite file ``path`` (created with its folders if missing), safe for many threads
    and processes of one machine. Keep it on a local disk: SQLite's locks are unreliable on network file
    systems. ``busy_timeout``: how long a write waits for another process's to finish."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        *,
        ttl: float | None = None,
        errors: Errors = "warn",
        busy_timeout: float = 5.0,
    ) -> None:
        super().__init__(ttl=ttl, errors=errors)
        self.path = Path(path).expanduser()
        self._busy_timeout = busy_timeout
        self._local = threading.local()
        self._open: weakref.WeakSet[_Connection] = weakref.WeakSet()
        self._abandoned: list[_Connection] = []
        self._lock = threading.Lock()
        self._saves = 0

    @property
    def location(self) -> str:
        return str(self.path)

    def _db(self) -> sqlite3.Connection:
        connection: _Connection | None = getattr(self._local, "connection", None)
        if connection is not None and connection.pid == os.getpid():
            return connection.db
        if connection is not None:  # inherited through fork(): never used, nor closed, here
            self._abandoned.append(connection)
        connection = _Connection(self._connect())
        self._local.connection = connection
        with self._lock:
            self._open.add(connection)
        return connection.db

    def _connect(self) -> sqlite3.Connection:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        db = sqlite3.connect(
            self.path, timeout=self._busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            self._when_free(lambda: db.execute("PRAGMA journal_mode=WAL"))
            db.execute("PRAGMA synchronous=NORMAL")  # durable at each checkpoint; a crash loses no file
            self._check_layout(db)
        except BaseException:
            db.close()
            raise
        return db

    def _when_free(self, statement: Callable[[], object]) -> None:
        """Run ``statement`` (switching a new file to WAL), waiting up to ``busy_timeout`` while another
        connection holds the file: SQLite answers "database is locked" at once there, without waiting
        as ``busy_timeout`` makes it wait for a write (threads of a batch opening one new file met it)."""
        deadline = time.monotonic() + self._busy_timeout
        while True:
            try:
                statement()
                return
            except sqlite3.OperationalError as exc:
                if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY or time.monotonic() >= deadline:
                    raise
            time.sleep(_BUSY_PAUSE)

    def _check_layout(self, db: sqlite3.Connection) -> None:
        """Create the table in a new file; refuse another program's database or another layout."""
        if _layout(db) == (APPLICATION_ID, LAYOUT):
            return
        db.execute("BEGIN IMMEDIATE")  # one process lays out a new file; the others then see it
        try:
            application, layout = _layout(db)
            if (application, layout) == (0, 0):
                tables = db.execute("SELECT count(*) FROM sqlite_schema").fetchone()[0]
                if tables:
                    raise sqlite3.DatabaseError(
                        f"{self.path} is another program's SQLite database, not a response cache"
                    )
                for statement in _SCHEMA:
                    db.execute(statement)
                db.execute(f"PRAGMA application_id={APPLICATION_ID}")
                db.execute(f"PRAGMA user_version={LAYOUT}")
            elif application != APPLICATION_ID:
                raise sqlite3.DatabaseError(
                    f"{self.path} is another program's SQLite database, not a response cache"
                )
            elif layout != LAYOUT:
                raise sqlite3.DatabaseError(
                    f"{self.path} is a response cache of layout {layout}, not {LAYOUT} (another version "
                    "of the package wrote it): give this one another file, or clear it with that version"
                )
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    def load(self, key: str) -> bytes | None:
        row = (
            self._db()
            .execute(
                "SELECT value FROM entries WHERE key = ? AND (expires IS NULL OR expires > ?)",
                (key, time.time()),
            )
            .fetchone()
        )
        return None if row is None else bytes(row[0])

    def save(self, key: str, value: bytes) -> None:
        now = time.time()
        expires = None if self.ttl is None else now + self.ttl
        db = self._db()
        db.execute("INSERT OR REPLACE INTO entries VALUES (?, ?, ?, ?)", (key, value, now, expires))
        with self._lock:
            self._saves += 1
            purge = self.ttl is not None and self._saves % _PURGE_EVERY == 0
        if purge:
            db.execute("DELETE FROM entries WHERE expires <= ?", (now,))

    def clear(self) -> int:
        removed: int = self._db().execute("DELETE FROM entries").rowcount
        return removed

    def stats(self) -> StoreStats:
        entries, size = (
            self._db()
            .execute(
                "SELECT count(*), coalesce(sum(length(value)), 0) FROM entries"
                " WHERE expires IS NULL OR expires > ?",
                (time.time(),),
            )
            .fetchone()
        )
        return StoreStats(self.location, entries, size, self.ttl)

    def close(self) -> None:
        """Close this process's connections (each thread opens its own again if the store is used)."""
        with self._lock:
            mine = [connection for connection in self._open if connection.pid == os.getpid()]
            for connection in mine:
                self._open.discard(connection)
        for connection in mine:
            connection.db.close()
        self._local = threading.local()


def _layout(db: sqlite3.Connection) -> tuple[int, int]:
    application: int = db.execute("PRAGMA application_id").fetchone()[0]
    layout: int = db.execute("PRAGMA user_version").fetchone()[0]
    return application, layout
