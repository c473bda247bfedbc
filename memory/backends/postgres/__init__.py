"""The PostgreSQL backend: the storage contract as rows, for several machines on one task.

Everything is a row in tables prefixed `tether_` in the connection's schema: documents (bytes,
version, mtime; a delete keeps the row so versions are never reused), entries and their chunk
texts, the search index (`tsvector` generated from the body with the `english` configuration,
a GIN index, ranked by idf-weighted `ts_rank`; the lines appended to a searched log are
indexed by the next search, from the log's mark in `tether_log_marks`), task records, the
subagent registry and task leases.

Concurrency: each call runs in one transaction. Writers of one document or one subagent
serialise on a transaction-scoped advisory lock keyed by its name (`pg_advisory_xact_lock`), so
compare-and-set is exact even for rows that do not exist yet; `setup()` takes a global one, so
processes starting together migrate once. Migrations are named, append-only and recorded in
`tether_migrations`; `open(url, setup=False)` (read-only callers) refuses a database without
tether's tables or with an older or newer schema, naming the URL without its password.

The backend takes an open `psycopg.Connection` (autocommit) or a `psycopg_pool.ConnectionPool`;
`PostgresBackend.open(url)` makes a pool and closes it after.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

from memory.backends.postgres._documents import DocumentsMixin, retried
from memory.backends.postgres._entries import EntriesMixin
from memory.backends.postgres._lock import LOST_SESSION_S, LockKeeper
from memory.backends.postgres._records import RecordsMixin
from memory.backends.postgres._search import CountCache, PendingMerges, SearchMixin
from memory.backends.postgres._sql import (
    APPLIED_SQL,
    ASYNC_COMMIT_SQL,
    CREATE_MIGRATIONS_SQL,
    FLUSH_SQL,
    HAS_MIGRATIONS_SQL,
    HAS_THREAD_SQL,
    MIGRATIONS,
    PRUNE_RECEIPTS_SQL,
    RECORD_MIGRATION_SQL,
    TRY_MUTEX_SQL,
    XACT_LOCK_SQL,
)
from memory.backends.postgres.connections import lost_errors, make_pool, reason_of, retrying
from memory.backends.savers import CONNECT_TIMEOUT_S, open_postgres_saver, pg_connect
from memory.backends.urls import redact
from memory.contract.base import BaseBackend, StorageError
from memory.errors import NoTablesError

IDENTITY_SQL = (
    "SELECT current_database(), current_schema(), (SELECT min(applied_at) FROM tether_migrations)"
)

__all__ = [
    "MIGRATIONS",
    "TRY_MUTEX_SQL",
    "DocumentsMixin",
    "LockKeeper",
    "PostgresBackend",
]

T = TypeVar("T")
POOL_MAX = 8


class PostgresBackend(DocumentsMixin, EntriesMixin, SearchMixin, RecordsMixin, BaseBackend):
    """The contract on PostgreSQL.

    Args:
        conn: an open `psycopg.Connection` or `psycopg_pool.ConnectionPool` (not closed here).
        url: the URL it was opened from, for messages (the password is never shown).
    """

    kind = "postgres"
    shared = True
    url_form = "postgresql://..."

    def __init__(self, conn: Any, *, url: str = "postgresql"):
        self._conn = conn
        self.url = redact(url)
        self._conninfo = url
        self._connect_kwargs: dict[str, Any] = {}
        self._counts = CountCache()
        self._merges = PendingMerges()
        self._marks_refused = False
        self._mutex = threading.RLock()
        self._pool = hasattr(conn, "connection") and not hasattr(conn, "cursor")
        self._owned: Any = None
        self._saver: Any = None
        if not self._pool and not conn.autocommit:
            conn.autocommit = True

    @property
    def location(self) -> str:
        return self.url

    @classmethod
    def from_url(
        cls, url: str, *, setup: bool = True, schema: str | None = None
    ) -> PostgresBackend:
        """A backend owning a pool on `url` (closed by `close()`).

        `setup=False` checks tether's tables instead of creating them.
        """
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S}
        if schema:
            kwargs["options"] = f"-c search_path={schema}"
        pg_connect(url, **kwargs, row_factory=None).close()  # the real reason, if any, is here
        pool = make_pool(url, kwargs, max_size=POOL_MAX)
        backend = cls(pool, url=url)
        backend._owned = pool
        backend._connect_kwargs = kwargs
        try:
            backend.setup() if setup else backend.check_schema()
        except BaseException:
            pool.close()
            raise
        return backend

    @classmethod
    @contextmanager
    def open(
        cls, url: str, *, setup: bool = True, schema: str | None = None
    ) -> Iterator[PostgresBackend]:
        """`from_url(url)` as a context manager."""
        backend = cls.from_url(url, setup=setup, schema=schema)
        try:
            yield backend
        finally:
            backend.close()

    def close(self) -> None:
        if self._saver is not None:
            self._saver.conn.close()
            self._saver = None
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    @contextmanager
    def mutex(self, name: str, *, timeout: float = 60.0) -> Iterator[None]:
        """A session advisory lock, held on a connection of its own for the block: the server
        drops it when the holder's connection ends, so a crashed process never leaves it
        held; a live holder whose connection ends takes it again (`LockKeeper`). An attempt
        that lost its connection is followed by one that waits up to `LOST_SESSION_S` for
        the lost session's lock to go."""
        keeper = LockKeeper(self._new_connection, name, self.url)
        attempts = 0

        def take() -> None:
            nonlocal attempts
            attempts += 1  # after a lost attempt, that attempt's session may hold the lock
            keeper.take(timeout if attempts == 1 else max(timeout, LOST_SESSION_S))

        self._retry(take)
        try:
            yield
        finally:
            keeper.release()

    def _new_connection(self) -> Any:
        return pg_connect(self._conninfo, **{**self._connect_kwargs, "row_factory": None})

    def checkpointer(self) -> Any:
        """LangGraph's `PostgresSaver` on its own connection (set up; closed by `close()`)."""
        if self._saver is None:
            self._saver = open_postgres_saver(self._conninfo, **self._connect_kwargs)
        return self._saver

    @retried
    def holds_thread(self, thread_id: str) -> bool:
        """One query on `PostgresSaver`'s table (absent before the first run: False)."""
        import psycopg

        try:
            with self._tx() as conn:
                return conn.execute(HAS_THREAD_SQL, (thread_id,)).fetchone() is not None
        except (psycopg.errors.UndefinedTable, StorageError):
            return False

    @contextmanager
    def _tx(self, *, lock: str | None = None) -> Iterator[Any]:
        """One transaction. With `lock`, writers of that name serialise on an advisory lock
        that the commit releases without waiting for the disk; the call returns once a
        synchronous commit of this session's own has flushed the WAL past it (`FLUSH_SQL`),
        so concurrent writers of one log share disk flushes instead of queueing for them."""
        with self._connection() as conn:
            with conn.transaction():
                if lock is not None:
                    conn.execute(ASYNC_COMMIT_SQL)
                    conn.execute(XACT_LOCK_SQL, (lock,))
                yield conn
            if lock is not None:
                conn.execute(FLUSH_SQL)

    def _retry(self, call: Callable[[], T], landed: Callable[[], Any] | None = None) -> T:
        """`call()` through `retrying` (a pool reconnects); on a connection of the caller's
        own, a lost connection is one `StorageError` at once."""
        if self._pool:
            return retrying(call, url=self.url, landed=landed, pool=self._conn)
        try:
            return call()
        except lost_errors() as exc:
            raise StorageError(f"lost {self.url!r} ({reason_of(exc)})") from None

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        if self._pool:
            with self._conn.connection() as conn:
                yield conn
        else:
            with self._mutex:
                yield self._conn

    # -- schema --------------------------------------------------------------------
    @retried
    def setup(self) -> None:
        with self._tx() as conn:
            conn.execute(XACT_LOCK_SQL, ("tether_setup",))
            conn.execute(CREATE_MIGRATIONS_SQL)
            done = {row[0] for row in conn.execute(APPLIED_SQL)}
            for name, script in MIGRATIONS:
                if name not in done:
                    statements = script if isinstance(script, tuple) else script.split(";\n")
                    for statement in statements:
                        conn.execute(statement)
                    conn.execute(RECORD_MIGRATION_SQL, (name,))
            conn.execute(PRUNE_RECEIPTS_SQL, (time.time() - 86400,))

    @retried
    def identity(self) -> str:
        """Which memory this is, the same from every host that reaches it: the database, the
        schema, and when tether's tables were first made there (a LangGraph Server's
        `tether_subagent` answers it, so a lead refuses a server on another memory)."""
        with self._tx() as conn:
            database, schema, made = conn.execute(IDENTITY_SQL).fetchone()
        return f"{database}/{schema}@{made.isoformat() if made else '-'}"

    @retried
    def check_schema(self) -> None:
        """Refuse a database that lacks tether's tables or has another schema version."""
        with self._tx() as conn:
            if not conn.execute(HAS_MIGRATIONS_SQL).fetchone()[0]:
                raise NoTablesError(
                    f"{self.url!r} has no tether tables; run `memory --memory-url URL setup` "
                    "(or any writing command) first"
                )
            done = {row[0] for row in conn.execute(APPLIED_SQL)}
        known = {name for name, _ in MIGRATIONS}
        if done - known:
            raise StorageError(
                f"{self.url!r} has a newer tether schema ({', '.join(sorted(done - known))}); "
                "upgrade tether"
            )
        if known - done:
            raise StorageError(
                f"{self.url!r} has an older tether schema (missing "
                f"{', '.join(sorted(known - done))}); run `memory --memory-url URL setup`"
            )
