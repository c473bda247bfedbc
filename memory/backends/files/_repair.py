"""A damaged `memory.db` never blocks work: it is moved aside and rebuilt from the files.

`memory.db` is derived: entries come back from `entries/journal.jsonl`, the index from the
files, document versions start again from the files' stamps. So wherever SQLite reports
damage (`SQLITE_CORRUPT`, `SQLITE_NOTADB`, or stored text that is not UTF-8), the files
backend (`healing`, around each of its operations):

1. moves `memory.db` and its `-wal` and `-shm` aside to `memory.db.damaged-{ts}` (never
   deleted), under a file lock, unless another thread or process replaced it already;
2. opens a new one, which restores the entries from the journal on first use and indexes
   the files at the next search;
3. says so in one warning (logger `memory`) and runs the operation once more.

Nothing checks the database up front: a healthy memory pays one `stat` per operation, which
also notices a `memory.db` that another process moved aside (or a person deleted), so every
process reconnects to the new one. A full disk is not damage: it is one `MemoryRuntimeError`
line, after a rollback that never hides it (`_db.transaction`).
"""

from __future__ import annotations

import functools
import logging
import os
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import memory.durable as durable
from memory.clock import utc_now
from memory.errors import (
    SQLITE_FULL,
    SQLITE_IOERR,
    CorruptDataError,
    MemoryDirError,
    MemoryRuntimeError,
)
from memory.errors import describe_sqlite_damage as describe
from memory.errors import is_sqlite_damage as is_damage
from memory.paths import Layout

DB_FILES = ("", "-wal", "-shm")
REPAIR_LOCK = "memory.db.repair"

log = logging.getLogger(__name__)
F = TypeVar("F", bound=Callable[..., Any])


def storage_error(db: Path, exc: sqlite3.DatabaseError) -> Exception:
    """The one-line error for a SQLite failure that is not damage (a full disk, I/O), else
    `exc` itself. SQLite often reports a full disk as an I/O error (it could not grow the
    `-wal` or `-shm` file), so the free space of the folder decides."""
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    text = " ".join(str(exc).split())
    full = code == SQLITE_FULL or "disk is full" in text
    if full or code == SQLITE_IOERR or "disk I/O error" in text:
        if full or disk_full(db.parent):
            return MemoryRuntimeError(
                f"disk full while writing {str(db)!r}: free space and retry (what was being "
                "written was rolled back)"
            )
        return MemoryRuntimeError(f"cannot write {str(db)!r} ({text}): check the disk and retry")
    return exc


def disk_full(folder: Path) -> bool:
    """Whether the file system holding `folder` has no block left for this user."""
    try:
        return os.statvfs(folder).f_bavail == 0
    except OSError:
        return False


def identity(path: Path) -> tuple[int, int] | None:
    """`(device, inode)` of `path`, or None when it does not exist."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return None
    return st.st_dev, st.st_ino


def move_aside(layout: Layout, damaged: tuple[int, int] | None) -> Path | None:
    """Move `memory.db` (with `-wal`, `-shm`) to `memory.db.damaged-{ts}` if it is still the
    file found `damaged`; the new path, or None when another one has replaced it meanwhile."""
    with durable.file_lock(layout.locks / REPAIR_LOCK):
        current = identity(layout.db)
        if current is None or (damaged is not None and current != damaged):
            return None
        stamp = utc_now().strftime("%Y%m%dT%H%M%S%fZ")  # sortable, as every name tether makes
        aside = layout.root / f"memory.db.damaged-{stamp}"
        for suffix in DB_FILES:
            try:
                os.rename(f"{layout.db}{suffix}", f"{aside}{suffix}")
            except FileNotFoundError:
                continue
        durable.fsync_dir(layout.root)
        return aside


def healing(method: F) -> F:
    """Run a files-backend operation; on damage, repair `memory.db` and run it once more.

    Any other SQLite failure that has a one-line meaning (a full disk) is raised as that.
    """

    @functools.wraps(method)
    def run(self: Any, *args: Any, **kwargs: Any) -> Any:
        self.follow_db()
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if not is_damage(exc):
                raise storage_error(self.layout.db, exc) from None
            self.repair(exc)
        try:
            return method(self, *args, **kwargs)
        except sqlite3.DatabaseError as exc:
            if is_damage(exc):
                raise CorruptDataError(
                    f"{str(self.layout.db)!r} is damaged again right after a rebuild "
                    f"({describe(exc)}); "
                    "check the disk"
                ) from None
            raise storage_error(self.layout.db, exc) from None

    return run  # type: ignore[return-value]


def read_only_damage(db: Path, exc: BaseException) -> MemoryDirError:
    return MemoryDirError(
        f"{str(db)!r} is damaged ({describe(exc)}) and its directory is read-only; ask its "
        "owner to run `memory reindex` (the files are intact)"
    )
