"""The SQLite side of the memory directory: connection settings and migrations.

`memory.db` holds entry metadata, small entries, tags and refs, the summary tree and a
full-text index derived from the files. It runs in WAL mode with a busy timeout so that
parallel subagents (threads or processes) can write at once.

Migrations are named, append-only functions or SQL strings owned by the module whose
tables they create (`_entry_sql`, `_index`, `_records`); the backend hands them all to
`migrate`. They are applied in name order, in one transaction, and recorded in
`_migrations`. Never edit one that has shipped: add a new one.
"""

from __future__ import annotations

import contextlib
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from memory.backends.files._repair import is_damage, read_only_damage
from memory.errors import MemoryDirError

BUSY_TIMEOUT_MS = 60_000
#: Reads through a memory map instead of a read() per page: a search steps through
#: thousands of FTS5 pages (1M messages: 1 ms less of a 7 ms search). The mapped pages
#: are the operating system's file cache, counted in the process's resident memory.
MMAP_BYTES = 1 << 30

CREATE_MIGRATIONS_TABLE = """
CREATE TABLE IF NOT EXISTS _migrations (
    name TEXT PRIMARY KEY,
    applied_at TEXT NOT NULL DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))
)
"""

APPLIED_SQL = "SELECT name FROM _migrations"
RECORD_SQL = "INSERT INTO _migrations(name) VALUES (?)"

Migration = tuple[str, "str | Callable[[sqlite3.Connection], None]"]


def connect(path: Path) -> sqlite3.Connection:
    """Open `memory.db` in WAL mode, autocommit (explicit `BEGIN` where it matters).

    Switching a new database to WAL needs a lock that SQLite's busy handler does not
    always wait for (two processes creating the store at once get "database is locked"
    at once), so the set-up is retried until `BUSY_TIMEOUT_MS` has passed.
    """
    try:
        conn = sqlite3.connect(
            str(path),
            timeout=BUSY_TIMEOUT_MS / 1000,
            isolation_level=None,
            check_same_thread=False,
        )
    except sqlite3.DatabaseError as exc:
        if is_damage(exc):
            raise  # the backend moves a damaged file aside and starts a new one
        raise _unusable(path, exc) from None
    deadline = time.monotonic() + BUSY_TIMEOUT_MS / 1000
    delay = 0.01
    while True:
        try:
            _configure(conn)
            break
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) and "busy" not in str(exc):
                conn.close()
                if is_damage(exc) or "full" in str(exc) or "I/O" in str(exc):
                    raise  # the backend's own one-line meaning (`_repair.healing`)
                raise _unusable(path, exc) from None
            if time.monotonic() > deadline:
                conn.close()
                raise _unusable(path, exc) from None
            time.sleep(delay)
            delay = min(delay * 2, 0.2)
        except sqlite3.DatabaseError as exc:
            conn.close()
            if is_damage(exc):
                raise
            raise _unusable(path, exc) from None
    conn.row_factory = sqlite3.Row
    return conn


def connect_read_only(path: Path) -> sqlite3.Connection:
    """Open `memory.db` for reading only (a read-only directory, or another user's).

    Nothing is written: no WAL switch, no migrations. When SQLite cannot open the WAL
    database read-only (no writable `-shm`), it is opened `immutable`, which reads the main
    file as it is: recent writes still in the WAL may be missing (callers say so).
    """
    if not path.exists():
        raise MemoryDirError(
            f"no memory.db in read-only {str(path.parent)!r}; nothing to read there yet"
        )
    last: Exception | None = None
    for flags in ("mode=ro", "immutable=1"):
        try:
            conn = sqlite3.connect(
                f"{path.as_uri()}?{flags}", uri=True, isolation_level=None, check_same_thread=False
            )
            conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
            conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")
        except sqlite3.DatabaseError as exc:
            last = exc
            continue
        conn.row_factory = sqlite3.Row
        return conn
    if last is not None and is_damage(last):
        raise read_only_damage(path, last)  # cannot be moved aside from here
    raise _unusable(path, last or RuntimeError("unknown error"))


def _configure(conn: sqlite3.Connection) -> None:
    conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    if conn.execute("PRAGMA journal_mode").fetchone()[0].lower() != "wal":
        conn.execute("PRAGMA journal_mode = WAL")
    conn.execute("PRAGMA synchronous = FULL")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute(f"PRAGMA mmap_size = {MMAP_BYTES}")


def _unusable(path: Path, exc: Exception) -> MemoryDirError:
    return MemoryDirError(
        f"cannot open {str(path)!r} ({exc}); check that it is a file this user can read and write"
    )


@contextlib.contextmanager
def transaction(conn: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """One `BEGIN IMMEDIATE` ... `COMMIT`; any exception rolls it back and is raised as it was.

    SQLite rolls a transaction back by itself after some errors (a full disk, an I/O
    error), and a `ROLLBACK` then fails with "cannot rollback - no transaction is active",
    which would replace the error that says what happened. So the rollback runs only while
    a transaction is open, and its own failure never hides the original exception.
    """
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield conn
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            with contextlib.suppress(sqlite3.Error):
                conn.execute("ROLLBACK")
        raise


def migrate(conn: sqlite3.Connection, migrations: list[Migration]) -> list[str]:
    """Apply the pending ones of `migrations` (idempotent, safe under concurrent openers).

    All pending migrations run in one write transaction (one commit for a new memory
    directory), each recorded in `_migrations` by name.
    """
    conn.execute(CREATE_MIGRATIONS_TABLE)
    done = {row[0] for row in conn.execute(APPLIED_SQL)}
    if all(name in done for name, _ in migrations):
        return []
    applied = []
    with transaction(conn):
        # Another process may have applied some while we waited for the write lock.
        done = {row[0] for row in conn.execute(APPLIED_SQL)}
        for name, step in sorted(migrations, key=lambda m: m[0]):
            if name in done:
                continue
            if callable(step):
                step(conn)
            else:
                for statement in _split_sql(step):
                    conn.execute(statement)
            conn.execute(RECORD_SQL, (name,))
            applied.append(name)
    return applied


def _split_sql(script: str) -> list[str]:
    """Split a migration script on `;` at line ends (no triggers with inner `;` here)."""
    parts, buf = [], []
    for line in script.splitlines():
        buf.append(line)
        if line.rstrip().endswith(";"):
            stmt = "\n".join(buf).strip()
            if stmt.strip(";").strip():
                parts.append(stmt)
            buf = []
    rest = "\n".join(buf).strip()
    if rest:
        parts.append(rest)
    return parts
