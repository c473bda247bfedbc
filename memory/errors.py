"""Errors raised by the `memory` package.

User mistakes and runtime failures are kept apart so the CLI can word them and callers
can catch what they can fix::

    MemoryStoreError                  base of everything raised here
    ├── MemoryUserError (ValueError)  the caller asked for something wrong; fix the input
    │   ├── UnknownEntryError         no entry with that id
    │   ├── ChunkOutOfRangeError      `--chunk N` beyond the entry's chunks
    │   ├── InvalidQueryError         empty query, unknown scope, bad limit
    │   ├── InvalidInputError         invalid UTF-8, empty content, bad option values
    │   ├── PathEscapeError           a path that leaves the memory directory
    │   ├── MemoryDirError            the memory directory is unusable (a file, unwritable)
    │   ├── PatchNotFoundError        `memory_patch`'s old text is not in the file
    │   ├── ConflictError             a compare-and-set write named an outdated version
    │   ├── LockHeldError             the task's lock is held by another live owner
    │   └── TemplateRenderError       a template is missing, malformed or lacks a variable
    └── MemoryRuntimeError            storage failed underneath a valid request
        ├── CorruptDataError          a stored file or row cannot be read back
        ├── StorageError              the backend cannot be reached or used (server down,
        │                             bad credentials, old schema)
        └── SummarizerFailed          the summariser raised or timed out (nothing archived)

Messages are one line, show the offending value with `!r` and say what to do next.

`is_sqlite_damage` and `describe_sqlite_damage` tell a damaged SQLite database (tether's
`memory.db`, or LangGraph's `state.sqlite` beside it) from every other SQLite failure.
"""

from __future__ import annotations

import sqlite3

#: SQLite's primary result codes (the low byte of an extended code).
SQLITE_IOERR, SQLITE_CORRUPT, SQLITE_FULL, SQLITE_NOTADB = 10, 11, 13, 26


class MemoryStoreError(Exception):
    """Base class of every error raised by the memory package."""


class MemoryUserError(MemoryStoreError, ValueError):
    """The request itself is wrong; the message says how to fix it."""


class UnknownEntryError(MemoryUserError, KeyError):
    """No entry has the requested id."""

    def __str__(self) -> str:  # KeyError would repr() the message otherwise
        return str(self.args[0]) if self.args else ""


class ChunkOutOfRangeError(MemoryUserError, IndexError):
    """A chunk number outside the entry's chunks."""


class InvalidQueryError(MemoryUserError):
    """An empty query, an unknown scope or a bad limit."""


class InvalidInputError(MemoryUserError):
    """Content or options that cannot be stored (invalid UTF-8, empty input, ...)."""


class PathEscapeError(MemoryUserError, PermissionError):
    """A path that would leave the memory directory."""


class MemoryDirError(MemoryUserError):
    """The memory directory cannot be used (it is a file, or not writable)."""


class MemoryRuntimeError(MemoryStoreError, RuntimeError):
    """Storage failed underneath a valid request."""


class CorruptDataError(MemoryRuntimeError):
    """A stored file or database row cannot be read back."""


class PatchNotFoundError(MemoryUserError):
    """An old text given to `patch_memory` is not in the file (nothing was changed)."""


class TemplateRenderError(MemoryUserError):
    """A template is missing, malformed, or refers to a variable it was not given."""


class SummarizerFailed(MemoryRuntimeError):
    """The summariser raised or timed out; nothing was archived."""


class ConflictError(MemoryUserError):
    """A compare-and-set write named a version that is no longer the current one."""


class LockHeldError(MemoryUserError):
    """The task's lock is held by another live owner."""


class StorageError(MemoryRuntimeError):
    """The backend cannot be reached or used (server down, bad credentials, old schema)."""


class NoTablesError(StorageError):
    """The database holds no tether tables: another memory than one tether set up."""


def is_sqlite_damage(exc: BaseException) -> bool:
    """Whether SQLite raised `exc` because the database file is damaged."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    code = getattr(exc, "sqlite_errorcode", None)
    if code is not None and code & 0xFF in (SQLITE_CORRUPT, SQLITE_NOTADB):
        return True
    text = str(exc)  # the module's own errors carry no code
    return text.startswith("Could not decode to UTF-8") or "malformed" in text


def describe_sqlite_damage(exc: BaseException) -> str:
    """What SQLite said, in a few words (never the stored text it could not decode)."""
    text = " ".join(str(exc).split())
    if text.startswith("Could not decode to UTF-8"):
        return "stored text is not UTF-8"
    return text[:200]
