"""The files backend's entries: rows of `memory.db` plus gzip files under `entries/`.

Tiers (see `memory.contract.entries`): `inline` content is the row's blob; `file` is
`entries/{id}/content.gz`; `chunked` is `entries/{id}/chunk-NNNN.gz`, one file per chunk.
This module writes them; reading is `_entry_reads`, statistics, pruning and the sweep of
orphan folders `_entry_upkeep`.

Invariants:

* **Byte-exact**: content is stored as its UTF-8 bytes (NUL, `\\r\\n`, no trailing newline,
  any unicode) and `fetch` returns exactly what was logged; the chunks concatenate to it.
* **Files before rows**: the gzip files are written durably (`memory.durable`) before the row
  that points at them is committed, so a crash never leaves a row without its files. A crash
  in between leaves an orphan `entries/{id}/` folder with no row: harmless, never listed.
  `delete` removes rows first (recording tombstones) and files after, for the same reason;
  `sweep_orphans` removes such folders once they are an hour old.
* **Unique ids**: the folder is created with an exclusive `mkdir` and the row has a UNIQUE
  id; a collision retries with a new id.
* `seq` grows monotonically, so the index pulls new entries by `seq > watermark` and drops
  pruned ones from `entry_tombstones`.
* **Journal** (`_journal`): `entries/journal.jsonl` gets one line per logged entry, appended
  inside the `BEGIN IMMEDIATE` transaction that inserts the row (after the files are
  durable), and one per pruned id. `restore()` rebuilds missing rows from it when `memory.db`
  was deleted; it runs on `memory reindex` and on first use when the `entries` table is empty.

Reading (`EntryReads`): rows as `Entry`, and content byte-exact from its tier (the row's
blob, `content.gz`, or the chunk files). An entry file is read only where it resolves
inside the memory directory (`Inside`), and a missing or damaged one raises
`CorruptDataError` naming it, never returns partial content.
"""

from __future__ import annotations

import gzip
import os
import shutil
import sqlite3
import threading
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import memory.durable as durable
from memory.backends.files._db import transaction
from memory.backends.files._entry_sql import (
    ENTRY_COLUMNS,
    ID_TAKEN_SQL,
    INSERT_ENTRY_SQL,
    INSERT_TAG_SQL,
    MIGRATIONS,
    SELECT_CONTENT_SQL,
    SELECT_ENTRY_SQL,
    SELECT_TAGS_SQL,
    SINCE_SQL,
    TOMBSTONES_SINCE_SQL,
)
from memory.backends.files._entry_upkeep import EntryUpkeep
from memory.backends.files._host import FilesHost
from memory.backends.files._journal import EntryJournal, chunk_name
from memory.contract.base import check_chunk, check_limit, unknown_entry
from memory.contract.entries import (
    Clock,
    Entry,
    check_type,
    normalize_directory,
    pieces,
    prepare_entry,
)
from memory.errors import CorruptDataError, MemoryRuntimeError, PathEscapeError
from memory.paths import Inside
from memory.text.summarize import Summarizer


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


__all__ = ["EntryStore", "MIGRATIONS"]

GZIP_LEVEL = 6
PARALLEL_CHUNKS_FROM = 8  # entries with more chunks write them from a thread pool
CHUNK_WRITERS = 8
ID_ATTEMPTS = 20


class EntryStore(EntryReads, EntryUpkeep):
    """The entries of one memory directory (its `memory.db` rows and `entries/` folder).

    Args:
        backend: the files backend whose connection, layout, clock and summariser are used.
    """

    def __init__(self, backend: FilesHost):
        self.backend = backend
        self._journal = EntryJournal(backend.layout)
        self._inside = Inside(backend.layout.root)
        self._journal_checked = False
        self.unrestored: list[str] = []
        """One line per journal line the last `restore` could not bring back."""
        self._journal_lock = threading.Lock()

    @property
    def _conn(self) -> sqlite3.Connection:
        conn = self.backend.connect()
        if not self._journal_checked and not conn.in_transaction and not self.backend.read_only:
            with self._journal_lock:  # other threads wait for the restore, then go on
                if not self._journal_checked:
                    self._journal_checked = True  # first: restore() uses this property too
                    self._check_journal(conn)
        return conn

    def reset(self) -> None:
        """Check the journal again on next use (a new `memory.db`: restore its entries)."""
        with self._journal_lock:
            self._journal_checked = False

    def ready(self) -> None:
        """Run the first-use journal check now (restore an emptied table, start a journal)."""
        self._conn  # noqa: B018 - the property does the check

    @property
    def clock(self) -> Clock:
        """The backend's clock (ids, `created_at`, prune ages); settable for tests."""
        return self.backend.clock

    @clock.setter
    def clock(self, value: Clock) -> None:
        self.backend.clock = value

    @property
    def summarizer(self) -> Summarizer:
        """The backend's entry summariser; settable."""
        return self.backend.summarizer

    @summarizer.setter
    def summarizer(self, value: Summarizer) -> None:
        self.backend.summarizer = value

    @property
    def _root(self) -> Path:
        return self.backend.layout.root

    @property
    def _entries_dir(self) -> Path:
        return self.backend.layout.entries

    # -- writing -----------------------------------------------------------------------
    def log(
        self,
        content: str | bytes,
        *,
        tags: Iterable[str] = (),
        type: str = "output",
        checkpoint: str | None = None,
        directory: str | os.PathLike[str] | None = None,
    ) -> Entry:
        """Store `content` in the tier its size calls for (see `memory.contract.entries`)."""
        for _ in range(ID_ATTEMPTS):
            entry, text, data = prepare_entry(
                content,
                type=type,
                tags=tags,
                directory=directory,
                checkpoint=checkpoint,
                moment=self.backend.clock(),
                summarizer=self.backend.summarizer,
            )
            if self._store_and_insert(entry, text, data):
                return entry
            content = data  # validated once; retry with a new id
        raise MemoryRuntimeError(
            f"could not allocate a unique entry id after {ID_ATTEMPTS} attempts; retry"
        )

    def put(self, entry: Entry, content: bytes) -> bool:
        """Store an entry logged elsewhere with its id and metadata; False if the id is known."""
        entry = Entry(**{**entry.__dict__, "tags": list(entry.tags), "path": None, "seq": 0})
        text = content.decode("utf-8")
        return self._store_and_insert(entry, text, content)

    def _store_and_insert(self, entry: Entry, text: str, data: bytes) -> bool:
        """Write the files (if any), then the row; False if the id was taken."""
        if self._conn.execute(ID_TAKEN_SQL, (entry.id, entry.id)).fetchone():
            return False
        folder = None
        inline_blob: bytes | None = None
        if entry.tier == "inline":
            inline_blob, entry.stored_bytes = data, len(data)
        else:
            folder = self._entries_dir / entry.id
            try:
                folder.mkdir(parents=True)  # exclusive: the id is ours from here on
            except FileExistsError:
                return False
        try:
            if folder is not None:
                durable.fsync_dir(folder.parent)
                self._write_files(entry, folder, text, data)
            if not self._insert_row(entry, inline_blob):
                if folder is not None:
                    shutil.rmtree(folder, ignore_errors=True)
                return False
        except sqlite3.IntegrityError as exc:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)
            if "UNIQUE" not in str(exc):
                raise CorruptDataError(f"cannot store entry {entry.id!r}: {exc}") from None
            return False  # the id was taken meanwhile: retry with a new one
        except BaseException:
            if folder is not None:  # no row will ever point here
                shutil.rmtree(folder, ignore_errors=True)
            raise
        return True

    def _write_files(self, entry: Entry, folder: Path, text: str, data: bytes) -> None:
        if entry.tier == "file":
            target = folder / "content.gz"
            blob = gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
            durable.atomic_write_bytes(target, blob)
            entry.tier, entry.path, entry.stored_bytes = "file", self._rel(target), len(blob)
            return
        parts = pieces(entry, text)

        def write_chunk(n: int) -> int:
            blob = gzip.compress(parts[n].encode("utf-8"), compresslevel=GZIP_LEVEL, mtime=0)
            durable.atomic_write_bytes(folder / chunk_name(n), blob)
            return len(blob)

        if len(parts) <= PARALLEL_CHUNKS_FROM:
            sizes = [write_chunk(n) for n in range(len(parts))]
        else:  # zlib and fsync release the GIL: overlap them for huge inputs
            with ThreadPoolExecutor(max_workers=CHUNK_WRITERS) as pool:
                sizes = list(pool.map(write_chunk, range(len(parts))))
        entry.tier, entry.path, entry.chunks = "chunked", self._rel(folder), len(parts)
        entry.stored_bytes = sum(sizes)

    def _insert_row(self, entry: Entry, inline_blob: bytes | None) -> bool:
        """Insert the row and journal it in one write transaction; False if the id is taken."""
        conn = self._conn
        with transaction(conn):
            if conn.execute(ID_TAKEN_SQL, (entry.id, entry.id)).fetchone():
                return False  # (the empty transaction commits)
            cursor = conn.execute(
                INSERT_ENTRY_SQL,
                (
                    entry.id,
                    entry.type,
                    entry.tier,
                    entry.tokens,
                    entry.bytes,
                    entry.stored_bytes,
                    entry.chunks,
                    entry.summary,
                    inline_blob,
                    entry.path,
                    entry.checkpoint,
                    entry.directory,
                    entry.created_at,
                ),
            )
            entry.seq = int(cursor.lastrowid or 0)
            conn.executemany(INSERT_TAG_SQL, [(entry.id, tag) for tag in entry.tags])
            # Under the write lock, so journal order is commit order and restore() (which
            # also takes it) never sees a line whose row is about to be inserted.
            self._journal.append_log(entry, inline_blob)
        return True

    def _rel(self, path: Path) -> str:
        return self.backend.layout.relative(path)

    # -- journal -----------------------------------------------------------------------
    def restore(self) -> int:
        """Rebuild the `entries` rows (and tags) missing from `memory.db` out of the journal.

        Entries come back in journal order (the order they were committed in), keeping their
        original `seq` when it is above every seq the table has handed out (else a new one,
        so the index's `seq > watermark` feed still picks them up). Skipped: ids already
        present or tombstoned, pruned ids (whose tombstones come back instead), file and
        chunked entries whose files are gone, and unreadable lines. Idempotent.

        Returns:
            How many entries were restored; `unrestored` then names the journal lines whose
            entries could not be (each also logged as a warning).
        """
        self._journal_checked = True
        restored, self.unrestored = self._journal.restore(self._conn)
        return restored

    def _check_journal(self, conn: sqlite3.Connection) -> None:
        """First use: restore an emptied table from the journal, or start a missing journal."""
        self._journal.check(conn, self._with_tags)
