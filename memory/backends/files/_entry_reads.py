"""Reading the files backend's entries (`_entries.EntryStore`): rows as `Entry`, and
content byte-exact from its tier (the row's blob, `content.gz`, or the chunk files).

An entry file is read only where it resolves inside the memory directory (`Inside`), and a
missing or damaged one raises `CorruptDataError` naming it, never returns partial content.
"""

from __future__ import annotations

import gzip
import os
import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path

from memory.backends.files._entry_sql import (
    ENTRY_COLUMNS,
    SELECT_CONTENT_SQL,
    SELECT_ENTRY_SQL,
    SELECT_TAGS_SQL,
    SINCE_SQL,
    TOMBSTONES_SINCE_SQL,
)
from memory.backends.files._journal import chunk_name
from memory.base import check_chunk, check_limit, unknown_entry
from memory.entries import Entry, check_type, normalize_directory
from memory.errors import CorruptDataError, PathEscapeError
from memory.paths import Inside


class EntryReads:
    """`get`, `fetch`, `list` and the other reads of `EntryStore`, over its connection
    (`_conn`), its root and its `Inside` check."""

    _conn: sqlite3.Connection
    _inside: Inside
    _root: Path
    _rel: Callable[[Path], str]

    def get(self, entry_id: str) -> Entry:
        """The entry's metadata; `UnknownEntryError` if there is no such id."""
        row = self._conn.execute(SELECT_ENTRY_SQL, (entry_id,)).fetchone()
        if row is None:
            raise unknown_entry(entry_id, str(self._root))
        return self._with_tags([row])[0]

    def fetch(self, entry_id: str, *, chunk: int | None = None, summary_only: bool = False) -> str:
        """The entry's exact content, one chunk of it (from 0), or its summary.

        Raises:
            UnknownEntryError: no such id.
            ChunkOutOfRangeError: `chunk` outside `0..chunks-1` (an unchunked entry is chunk 0).
            CorruptDataError: a file of the entry is missing or damaged.
        """
        entry = self.get(entry_id)
        if summary_only:
            return entry.summary
        if chunk is not None:
            check_chunk(entry_id, chunk, entry.chunks)
            if entry.tier == "chunked":
                return self._read_gz(self._root / entry.path / chunk_name(chunk)).decode("utf-8")
        return self._read_all(entry).decode("utf-8")

    def fetch_bytes(self, entry_id: str) -> bytes:
        """The entry's exact stored bytes (what `fetch` returns, encoded as UTF-8)."""
        return self._read_all(self.get(entry_id))

    def iter_bytes(self, entry_id: str) -> Iterator[bytes]:
        """The entry's exact bytes piece by piece (one chunk at a time; for streaming)."""
        entry = self.get(entry_id)
        if entry.tier != "chunked":
            yield self._read_all(entry)
            return
        folder = self._root / entry.path
        for n in range(entry.chunks):
            yield self._read_gz(folder / chunk_name(n))

    def texts(self, entry_id: str) -> list[tuple[str, str]]:
        """`[(citation, text)]` for the index: one item, or one per chunk (`id#chunk-N`)."""
        entry = self.get(entry_id)
        if entry.tier != "chunked":
            return [(entry.id, self._read_all(entry).decode("utf-8"))]
        folder = self._root / entry.path
        return [
            (f"{entry.id}#chunk-{n}", self._read_gz(folder / chunk_name(n)).decode("utf-8"))
            for n in range(entry.chunks)
        ]

    def _read_all(self, entry: Entry) -> bytes:
        if entry.tier == "inline":
            row = self._conn.execute(SELECT_CONTENT_SQL, (entry.id,)).fetchone()
            if row is None or row[0] is None:
                raise CorruptDataError(f"entry {entry.id!r} has no inline content; prune it")
            return bytes(row[0])
        if entry.tier == "file":
            return self._read_gz(self._root / entry.path)
        folder = self._root / entry.path
        return b"".join(self._read_gz(folder / chunk_name(n)) for n in range(entry.chunks))

    def _read_gz(self, path: Path) -> bytes:
        if self._inside.real(path) is None:  # `entries/{id}` or a chunk swapped for a symlink
            raise PathEscapeError(
                f"entry file {self._rel(path)!r} resolves outside the memory directory "
                "(a symlink); it is not read: restore the entry's folder or prune the entry"
            )
        try:
            return gzip.decompress(path.read_bytes())
        except FileNotFoundError:
            raise CorruptDataError(
                f"entry file {self._rel(path)!r} is missing; restore it or prune the entry"
            ) from None
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise CorruptDataError(
                f"entry file {self._rel(path)!r} is damaged ({exc}); restore it or prune the entry"
            ) from None

    def list(
        self,
        *,
        type: str | None = None,
        directory: str | os.PathLike[str] | None = None,
        tag: str | None = None,
        checkpoint: str | None = None,
        limit: int | None = 20,
    ) -> list[Entry]:
        """Entries newest first, filtered; `directory` also matches its sub-directories."""
        where, params = [], []
        if type is not None:
            where.append("type = ?")
            params.append(check_type(type))
        if directory is not None:
            norm = normalize_directory(directory)
            where.append("(directory = ? OR substr(directory, 1, ?) = ?)")
            prefix = norm.rstrip("/") + "/"
            params += [norm, len(prefix), prefix]
        if tag is not None:
            where.append("id IN (SELECT entry_id FROM entry_tags WHERE tag = ?)")
            params.append(tag)
        if checkpoint is not None:
            where.append("checkpoint = ?")
            params.append(checkpoint)
        check_limit(limit)
        sql = f"SELECT {ENTRY_COLUMNS} FROM entries"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self._with_tags(self._conn.execute(sql, params).fetchall())

    def since(self, seq: int) -> list[tuple[int, str]]:
        """`(seq, id)` of entries added after `seq`, in order (for incremental indexing)."""
        rows = self._conn.execute(SINCE_SQL, (seq,)).fetchall()
        return [(int(r[0]), r[1]) for r in rows]

    def tombstones_since(self, seq: int) -> list[tuple[int, str]]:
        """`(seq, id)` of entries pruned after tombstone `seq`, in order."""
        rows = self._conn.execute(TOMBSTONES_SINCE_SQL, (seq,)).fetchall()
        return [(int(r[0]), r[1]) for r in rows]

    def _with_tags(self, rows: list[sqlite3.Row]) -> list[Entry]:
        entries = [_entry_from_row(row) for row in rows]
        by_id = {e.id: e for e in entries}
        ids = list(by_id)
        for start in range(0, len(ids), 500):  # stay under SQLite's variable limit
            part = ids[start : start + 500]
            sql = SELECT_TAGS_SQL.format(marks=",".join("?" * len(part)))
            for entry_id, tag in self._conn.execute(sql, part):
                by_id[entry_id].tags.append(tag)
        return entries


def _entry_from_row(row: sqlite3.Row) -> Entry:
    return Entry(
        id=row["id"],
        type=row["type"],
        tier=row["tier"],
        tokens=row["tokens"],
        bytes=row["bytes"],
        chunks=row["chunks"],
        summary=row["summary"],
        tags=[],
        checkpoint=row["checkpoint"],
        directory=row["directory"],
        created_at=row["created_at"],
        path=row["path"],
        seq=row["seq"],
        stored_bytes=row["stored_bytes"],
    )
