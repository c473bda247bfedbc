"""LangGraph checkpointers beside tether's memory: the one place that opens their databases.

* `open_sqlite_saver(path)`: `SqliteSaver` on a SQLite file (WAL, `synchronous=FULL`), or
  read-only on an existing file (`mode=ro`, else `immutable=1` when the WAL cannot be opened,
  as in a read-only memory directory);
* `sqlite_holds_thread(path, thread)`: whether that file has saved state for a thread, asked
  with one read-only query and without importing LangGraph (for `orchestrator status`);
* `pg_connect(url)`: a psycopg connection as LangGraph's `PostgresSaver` wants it, with a
  one-line `StorageError` (password hidden) when the server cannot be reached;
* `open_postgres_saver(url)`: a set-up `PostgresSaver` on a checked pool that reconnects;
  its setup holds an advisory lock, so first runs on a fresh schema set it up one by one.

LangGraph and psycopg are imported inside the functions that need them: importing this
module costs only `sqlite3`.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path
from typing import Any

from memory.backends.urls import encode_userinfo, redact
from memory.contract.base import StorageError

CONNECT_TIMEOUT_S = 5
HAS_THREAD_SQL = "SELECT 1 FROM checkpoints WHERE thread_id = ? AND checkpoint_ns = '' LIMIT 1"
#: What serialises `PostgresSaver.setup()` across processes (a session advisory lock of the
#: database; tether's own tables take `tether_setup` in `PostgresBackend.setup`).
SETUP_TRY_LOCK_SQL = "SELECT pg_try_advisory_lock(hashtext('tether_langgraph_setup')) AS locked"
SETUP_POLL_S = 0.05
SETUP_UNLOCK_SQL = "SELECT pg_advisory_unlock(hashtext('tether_langgraph_setup'))"
_READ_ONLY_FLAGS = ("mode=ro", "immutable=1")  # `immutable`: a read-only dir with a WAL file


def open_sqlite_saver(db_path: Path, *, read_only: bool = False) -> Any:
    """A `SqliteSaver` on `db_path` (created with its folder if missing); close `saver.conn`.

    Raises:
        StorageError: `read_only` and the file cannot be opened or is not a database.
    """
    from langgraph.checkpoint.sqlite import SqliteSaver  # only graph users pay for it

    if read_only:
        for flags in _READ_ONLY_FLAGS:
            conn = sqlite3.connect(f"{db_path.as_uri()}?{flags}", uri=True, check_same_thread=False)
            try:
                conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            except sqlite3.DatabaseError:
                conn.close()
                continue
            saver = SqliteSaver(conn)
            saver.is_setup = True  # the tables exist; setup() would write
            return saver
        raise StorageError(f"cannot open {str(db_path)!r} read-only as a SQLite database")
    db_path.parent.mkdir(parents=True, exist_ok=True)
    # keep sqlite3's default transaction handling: `SqliteSaver` writes a task's writes
    # with `executemany` and commits once, which is atomic only outside autocommit mode
    # (in autocommit a kill between rows left a spawn step with half of its `Send`s)
    conn = sqlite3.connect(str(db_path), check_same_thread=False)
    # a new file gives the pages that pruning frees back (`checkpoint_prune`); this is a
    # no-op on an existing one, and must come before WAL mode writes the file's header
    conn.execute("PRAGMA auto_vacuum=INCREMENTAL")
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    conn.execute("PRAGMA busy_timeout=10000")
    saver = SqliteSaver(conn)
    saver.setup()
    return saver


def sqlite_holds_thread(db_path: Path, thread_id: str) -> bool:
    """Whether the `SqliteSaver` file `db_path` has saved state for `thread_id` (False when
    the file is missing or unreadable)."""
    if not db_path.exists():
        return False
    for flags in _READ_ONLY_FLAGS:
        try:
            conn = sqlite3.connect(f"{db_path.as_uri()}?{flags}", uri=True)
            try:
                row = conn.execute(HAS_THREAD_SQL, (thread_id,)).fetchone()
            finally:
                conn.close()
        except sqlite3.Error:
            continue
        return row is not None
    return False


def pg_connect(url: str, **kwargs: Any) -> Any:
    """A psycopg connection to `url` in autocommit with dict rows (what `PostgresSaver`
    expects); `kwargs` override those settings.

    Raises:
        StorageError: the server cannot be reached (one line; the password is hidden).
    """
    import psycopg  # the optional `postgres` extra: imported only when PostgreSQL is used
    from psycopg.rows import dict_row

    settings: dict[str, Any] = {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "connect_timeout": CONNECT_TIMEOUT_S,
    }
    settings.update(kwargs)
    try:
        return psycopg.connect(encode_userinfo(url), **settings)
    except (psycopg.Error, ValueError) as exc:
        lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
        reason = lines[0].removeprefix("connection failed: ") if lines else type(exc).__name__
        raise StorageError(
            f"cannot connect to {redact(url)!r} ({reason}); check the server, the user "
            "and the database name in --memory-url / TETHER_MEMORY_URL"
        ) from None


def open_postgres_saver(url: str, **kwargs: Any) -> Any:
    """A set-up `PostgresSaver` on a checked pool of connections to `url` (close it with
    `saver.conn.close()`). A connection lost under a call is replaced and the call run
    again (`memory.backends.postgres.connections`): every saver call is an idempotent upsert or
    a read. `kwargs` are connection settings (e.g. `options` for a search path).

    Raises:
        StorageError: the server cannot be reached (the message hides the password).
    """
    from memory.backends.postgres.connections import make_pool

    pg_connect(url, **kwargs).close()  # the real reason, if any, is here
    from psycopg.rows import dict_row

    settings: dict[str, Any] = {
        "autocommit": True,
        "prepare_threshold": 0,
        "row_factory": dict_row,
        "connect_timeout": CONNECT_TIMEOUT_S,
        **kwargs,
    }
    saver = _reconnecting_saver()(make_pool(url, settings, max_size=4, name="tether-saver"))
    saver.url = redact(url)
    saver.setup()
    return saver


_SAVER_CLASS: Any = None


def _reconnecting_saver() -> Any:
    """`PostgresSaver` whose calls run again on a lost connection (defined once, lazily:
    it imports LangGraph)."""
    global _SAVER_CLASS
    if _SAVER_CLASS is not None:
        return _SAVER_CLASS
    from langgraph.checkpoint.postgres import PostgresSaver

    from memory.backends.postgres.connections import retrying

    class ReconnectingPostgresSaver(PostgresSaver):
        url = "postgresql"

        def setup(self, *args: Any, **kwargs: Any) -> Any:
            return retrying(
                lambda: self._setup_alone(*args, **kwargs), url=self.url, pool=self.conn
            )

        def _setup_alone(self, *args: Any, **kwargs: Any) -> Any:
            # LangGraph's migrations run in autocommit: first runs setting up one schema
            # at once raced (`UniqueViolation`, a deadlock). A session lock, held on a
            # connection of its own, serialises them; the server drops it with a killed
            # holder's session, so a crash never leaves it held.
            # The lock is polled, never waited for inside a query: a session waiting in a
            # query holds a snapshot, which the holder's `CREATE INDEX CONCURRENTLY` waits
            # for (a deadlock the server does not see).
            with self.conn.connection() as held:
                while not held.execute(SETUP_TRY_LOCK_SQL).fetchone()["locked"]:
                    time.sleep(SETUP_POLL_S)
                try:
                    return super(cls, self).setup(*args, **kwargs)
                finally:
                    held.execute(SETUP_UNLOCK_SQL)

        def get_tuple(self, *args: Any, **kwargs: Any) -> Any:
            return retrying(
                lambda: super(cls, self).get_tuple(*args, **kwargs), url=self.url, pool=self.conn
            )

        def put(self, *args: Any, **kwargs: Any) -> Any:
            return retrying(
                lambda: super(cls, self).put(*args, **kwargs), url=self.url, pool=self.conn
            )

        def put_writes(self, *args: Any, **kwargs: Any) -> Any:
            return retrying(
                lambda: super(cls, self).put_writes(*args, **kwargs), url=self.url, pool=self.conn
            )

        def delete_thread(self, *args: Any, **kwargs: Any) -> Any:
            return retrying(
                lambda: super(cls, self).delete_thread(*args, **kwargs),
                url=self.url,
                pool=self.conn,
            )

        def prune(self, *args: Any, **kwargs: Any) -> Any:
            return retrying(
                lambda: super(cls, self).prune(*args, **kwargs), url=self.url, pool=self.conn
            )

        def list(self, *args: Any, **kwargs: Any) -> Any:
            """Read whole before it is handed out, so a lost connection midway is read
            again from the start, never half."""
            rows = retrying(
                lambda: [*super(cls, self).list(*args, **kwargs)], url=self.url, pool=self.conn
            )
            return iter(rows)

    cls = ReconnectingPostgresSaver
    _SAVER_CLASS = cls
    return cls
