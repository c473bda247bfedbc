"""The entry store: large outputs kept outside the token window.

An entry is stored in the tier its estimated size (`memory.tokens.estimate_tokens`) calls for:

* `inline`  (< 500 tokens): the UTF-8 bytes in the `entries` row of `memory.db`;
* `file`    (500..4000 tokens): `entries/{id}/content.gz` plus an extractive summary;
* `chunked` (> 4000 tokens): `entries/{id}/chunk-NNNN.gz`, each at most 4000 tokens, cut at
  a line end where one exists (never inside a character), plus a parent summary.

Invariants:

* **Byte-exact**: content is stored as its UTF-8 bytes (NUL, `\\r\\n`, no trailing newline,
  any unicode) and `fetch` returns exactly what was logged; the chunks concatenate to it.
* **Files before rows**: the gzip files are written durably (`memory.durable`) before the row
  that points at them is committed, so a crash never leaves a row without its files. A crash
  in between leaves an orphan `entries/{id}/` folder with no row: harmless, never listed.
  `prune` deletes rows first (recording tombstones) and files after, for the same reason;
  `sweep_orphans` removes such folders once they are an hour old.
* **Unique ids** `mem-YYYYMMDD-HHMMSS-xxxxxxxx` (UTC, 8 random hex): the folder is created
  with an exclusive `mkdir` and the row has a UNIQUE id; a collision retries with a new id.
* `seq` grows monotonically, so the index pulls new entries by `seq > watermark` and drops
  pruned ones from `entry_tombstones`.
* **Journal** (`memory._entries_journal`): `entries/journal.jsonl` gets one line per logged
  entry, appended inside the `BEGIN IMMEDIATE` transaction that inserts the row (after the
  files are durable), and one per pruned id. `restore()` rebuilds missing rows from it when
  `memory.db` was deleted; it runs on `memory reindex` and on first use when the `entries`
  table is empty.
"""

from __future__ import annotations

import gzip
import os
import re
import secrets
import shutil
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memory import durable
from memory._entries_journal import EntryJournal, JournalSchema
from memory.errors import (
    ChunkOutOfRangeError,
    CorruptDataError,
    InvalidInputError,
    MemoryRuntimeError,
    UnknownEntryError,
)
from memory.summarize import Summarizer, extractive_summary, headline
from memory.tokens import CHARS_PER_TOKEN, estimate_tokens

if TYPE_CHECKING:
    from memory.store import MemoryStore

__all__ = [
    "ENTRY_TYPES",
    "Entry",
    "EntryStore",
    "MIGRATIONS",
    "TIERS",
    "check_type",
    "normalize_directory",
    "split_chunks",
]

ENTRY_TYPES = ("transcript", "output", "summary", "context", "chunk")
TIERS = ("inline", "file", "chunked")
INLINE_MAX_TOKENS = 499  # < 500 tokens stays in the database
FILE_MAX_TOKENS = 4000  # 500..4000 tokens is one gzip file
CHUNK_MAX_TOKENS = 4000
CHUNK_MAX_CHARS = CHUNK_MAX_TOKENS * CHARS_PER_TOKEN
SUMMARY_MAX_TOKENS = 200
GZIP_LEVEL = 6
PARALLEL_CHUNKS_FROM = 8  # entries with more chunks write them from a thread pool
CHUNK_WRITERS = 8
ORPHAN_GRACE_S = 3600.0  # an orphan folder must be this old before `sweep_orphans` takes it
ENTRY_ID_RE = re.compile(r"mem-\d{8}-\d{6}-[0-9a-f]{8}")
ID_ATTEMPTS = 20

# -- schema (append-only migrations, see memory._db) -------------------------------------
M001_CREATE_ENTRIES = """
CREATE TABLE IF NOT EXISTS entries (
    seq          INTEGER PRIMARY KEY AUTOINCREMENT,
    id           TEXT NOT NULL UNIQUE,
    type         TEXT NOT NULL,
    tier         TEXT NOT NULL CHECK (tier IN ('inline', 'file', 'chunked')),
    tokens       INTEGER NOT NULL,
    bytes        INTEGER NOT NULL,
    stored_bytes INTEGER NOT NULL,
    chunks       INTEGER NOT NULL DEFAULT 0,
    summary      TEXT NOT NULL,
    content      BLOB,
    path         TEXT,
    checkpoint   TEXT,
    directory    TEXT,
    created_at   TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS entries_created_at ON entries(created_at);
CREATE INDEX IF NOT EXISTS entries_checkpoint ON entries(checkpoint);
CREATE INDEX IF NOT EXISTS entries_directory ON entries(directory);
CREATE INDEX IF NOT EXISTS entries_type ON entries(type);
CREATE TABLE IF NOT EXISTS entry_tags (
    entry_id TEXT NOT NULL REFERENCES entries(id) ON DELETE CASCADE,
    tag      TEXT NOT NULL,
    PRIMARY KEY (entry_id, tag)
);
CREATE INDEX IF NOT EXISTS entry_tags_tag ON entry_tags(tag);
CREATE TABLE IF NOT EXISTS entry_tombstones (
    seq        INTEGER PRIMARY KEY AUTOINCREMENT,
    id         TEXT NOT NULL,
    removed_at TEXT NOT NULL
);
"""

MIGRATIONS = [("m001_create_entries", M001_CREATE_ENTRIES)]

ENTRY_COLUMNS = (
    "seq, id, type, tier, tokens, bytes, stored_bytes, chunks, summary, path, checkpoint,"
    " directory, created_at"
)
INSERT_ENTRY_SQL = """
INSERT INTO entries (id, type, tier, tokens, bytes, stored_bytes, chunks, summary, content,
                     path, checkpoint, directory, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
INSERT_TAG_SQL = "INSERT OR IGNORE INTO entry_tags (entry_id, tag) VALUES (?, ?)"
ID_TAKEN_SQL = (
    "SELECT 1 FROM entries WHERE id = ? UNION ALL SELECT 1 FROM entry_tombstones WHERE id = ?"
)
SELECT_ENTRY_SQL = f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?"
SELECT_CONTENT_SQL = "SELECT content FROM entries WHERE id = ?"
SELECT_TAGS_SQL = "SELECT entry_id, tag FROM entry_tags WHERE entry_id IN ({marks}) ORDER BY tag"
INSERT_TOMBSTONE_SQL = "INSERT INTO entry_tombstones (id, removed_at) VALUES (?, ?)"
DELETE_ENTRY_SQL = "DELETE FROM entries WHERE id = ?"
STATS_SQL = """
SELECT {key} AS k, COUNT(*) AS n, COALESCE(SUM(tokens), 0) AS tokens,
       COALESCE(SUM(bytes), 0) AS bytes, COALESCE(SUM(stored_bytes), 0) AS stored_bytes,
       COALESCE(SUM(chunks), 0) AS chunks
FROM entries GROUP BY {key} ORDER BY {key}
"""


@dataclass
class Entry:
    """Metadata of one stored entry (the content itself comes from `EntryStore.fetch`)."""

    id: str
    type: str
    tier: str
    """`inline`, `file` or `chunked`."""
    tokens: int
    """Estimated tokens of the whole content."""
    bytes: int
    """Size of the content in UTF-8 bytes."""
    chunks: int
    """Number of chunks (0 unless `tier == "chunked"`)."""
    summary: str
    tags: list[str] = field(default_factory=list)
    checkpoint: str | None = None
    directory: str | None = None
    created_at: str = ""
    """ISO 8601 UTC, e.g. `2026-01-23T12:34:56.123456Z`."""
    path: str | None = None
    """Relative to the memory root: the gzip file (`file`) or the chunk folder (`chunked`)."""
    seq: int = 0
    stored_bytes: int = 0
    """Bytes on disk (compressed for `file`/`chunked`)."""

    @property
    def summary_line(self) -> str:
        """The summary's most telling line: totals, else an error, else its first line."""
        return headline(self.summary)

    @property
    def reference(self) -> str:
        """Seed 003's reference line: `mem-...: 156 passed, 2 failed (12000 tokens)`."""
        label = self.summary_line or ",".join(self.tags) or self.type
        return f"{self.id}: {label} ({self.tokens} tokens)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "tier": self.tier,
            "tokens": self.tokens,
            "bytes": self.bytes,
            "stored_bytes": self.stored_bytes,
            "chunks": self.chunks,
            "summary": self.summary,
            "tags": list(self.tags),
            "checkpoint": self.checkpoint,
            "directory": self.directory,
            "created_at": self.created_at,
            "path": self.path,
            "seq": self.seq,
        }


def normalize_directory(directory: str | os.PathLike[str]) -> str:
    """An absolute, normalised path, so `./pipeline` and `/abs/pipeline` name one place."""
    raw = os.fspath(directory)
    if not raw.strip():
        raise InvalidInputError("empty --directory: give a path such as './pipeline'")
    return os.path.normpath(os.path.abspath(os.path.expanduser(raw)))


def split_chunks(text: str, max_chars: int = CHUNK_MAX_CHARS) -> list[str]:
    """Cut `text` into pieces of at most `max_chars` characters, at line ends if possible.

    `"".join(split_chunks(t)) == t` always; a line longer than `max_chars` is cut inside
    the line (between characters, never inside one).
    """
    pieces, start, size = [], 0, len(text)
    while size - start > max_chars:
        cut = text.rfind("\n", start, start + max_chars)
        end = cut + 1 if cut >= start else start + max_chars
        pieces.append(text[start:end])
        start = end
    if start < size or not pieces:
        pieces.append(text[start:])
    return pieces


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _iso(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def check_type(type: str) -> str:
    if type not in ENTRY_TYPES:
        raise InvalidInputError(f"unknown entry type {type!r}: use one of {', '.join(ENTRY_TYPES)}")
    return type


def _as_text(content: str | bytes) -> tuple[str, bytes]:
    """The content as text and as its exact UTF-8 bytes; rejects invalid or empty input."""
    if isinstance(content, bytes | bytearray | memoryview):
        data = bytes(content)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(
                f"content is not valid UTF-8 (byte {data[exc.start]:#04x} at offset "
                f"{exc.start}); store text, or encode binary data first (e.g. base64)"
            ) from None
    elif isinstance(content, str):
        text = content
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"content has an unencodable character {text[exc.start]!r} at {exc.start}; "
                "store valid unicode text"
            ) from None
    else:
        raise InvalidInputError(f"content must be text, not {type(content).__name__!r}")
    if not text or text.isspace():
        raise InvalidInputError("content is empty: nothing to store (give TEXT, --file or --stdin)")
    return text, data


class EntryStore:
    """Seed 003's entries over a `MemoryStore` (its layout and its SQLite connection).

    Args:
        store: the memory store whose `memory.db` and `entries/` folder are used.
        clock: returns the current UTC time (tests pass a fixed clock).
        summarizer: makes each entry's summary; the model-free extractive one by default.
    """

    def __init__(
        self,
        store: MemoryStore,
        clock: Callable[[], datetime] | None = None,
        summarizer: Summarizer | None = None,
    ):
        self.store = store
        self.clock = clock or _utc_now
        self.summarizer: Summarizer = summarizer or extractive_summary
        self._journal = EntryJournal(store, _JOURNAL_SCHEMA)
        self._journal_checked = False
        self._journal_lock = threading.Lock()

    @property
    def _conn(self) -> sqlite3.Connection:
        conn = self.store.connect()
        if not self._journal_checked and not conn.in_transaction and not self.store.read_only:
            with self._journal_lock:  # other threads wait for the restore, then go on
                if not self._journal_checked:
                    self._journal_checked = True  # first: restore() uses this property too
                    self._check_journal(conn)
        return conn

    def ready(self) -> None:
        """Run the first-use journal check now (restore an emptied table, start a journal)."""
        self._conn  # noqa: B018 - the property does the check

    @property
    def journal_path(self) -> Path:
        """`entries/journal.jsonl`: the rows of `memory.db` as an append-only file."""
        return self._journal.path

    @property
    def _root(self) -> Path:
        return self.store.layout.root

    @property
    def _entries_dir(self) -> Path:
        return self.store.layout.entries

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
        """Store `content` in the tier its size calls for.

        Args:
            content: text (or UTF-8 bytes) to keep byte-exact.
            tags: labels for `list --tag`; blanks are dropped, duplicates kept once.
            type: one of `ENTRY_TYPES`.
            checkpoint: id of the checkpoint this entry belongs to.
            directory: a working directory to link; stored as an absolute path.

        Returns:
            The stored `Entry`.

        Raises:
            InvalidInputError: empty or non-UTF-8 content, unknown type, empty directory.
        """
        check_type(type)
        text, data = _as_text(content)
        if isinstance(tags, str):  # a single tag, not its characters
            tags = [tags]
        tag_list = sorted({t.strip() for t in tags if t and t.strip()})
        directory_norm = normalize_directory(directory) if directory is not None else None
        if checkpoint is not None:
            checkpoint = checkpoint.strip() or None
        tokens = estimate_tokens(text)
        summary = self.summarizer(text, SUMMARY_MAX_TOKENS)
        for _ in range(ID_ATTEMPTS):
            now = self.clock()
            entry_id = f"mem-{now.astimezone(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"
            entry = Entry(
                id=entry_id,
                type=type,
                tier="inline",
                tokens=tokens,
                bytes=len(data),
                chunks=0,
                summary=summary,
                tags=tag_list,
                checkpoint=checkpoint,
                directory=directory_norm,
                created_at=_iso(now),
            )
            if self._store_and_insert(entry, text, data):
                return entry
        raise MemoryRuntimeError(
            f"could not allocate a unique entry id after {ID_ATTEMPTS} attempts; retry"
        )

    def _store_and_insert(self, entry: Entry, text: str, data: bytes) -> bool:
        """Write the files (if any), then the row; False if the id was taken."""
        if self._conn.execute(ID_TAKEN_SQL, (entry.id, entry.id)).fetchone():
            return False
        folder = None
        inline_blob: bytes | None = None
        if entry.tokens <= INLINE_MAX_TOKENS:
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
        if entry.tokens <= FILE_MAX_TOKENS:
            target = folder / "content.gz"
            blob = gzip.compress(data, compresslevel=GZIP_LEVEL, mtime=0)
            durable.atomic_write_bytes(target, blob)
            entry.tier, entry.path, entry.stored_bytes = "file", self._rel(target), len(blob)
            return
        pieces = split_chunks(text)

        def write_chunk(n: int) -> int:
            blob = gzip.compress(pieces[n].encode("utf-8"), compresslevel=GZIP_LEVEL, mtime=0)
            durable.atomic_write_bytes(folder / _chunk_name(n), blob)
            return len(blob)

        if len(pieces) <= PARALLEL_CHUNKS_FROM:
            sizes = [write_chunk(n) for n in range(len(pieces))]
        else:  # zlib and fsync release the GIL: overlap them for huge inputs
            from concurrent.futures import ThreadPoolExecutor  # only huge inputs pay for it

            with ThreadPoolExecutor(max_workers=CHUNK_WRITERS) as pool:
                sizes = list(pool.map(write_chunk, range(len(pieces))))
        entry.tier, entry.path, entry.chunks = "chunked", self._rel(folder), len(pieces)
        entry.stored_bytes = sum(sizes)

    def _insert_row(self, entry: Entry, inline_blob: bytes | None) -> bool:
        """Insert the row and journal it in one write transaction; False if the id is taken."""
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if conn.execute(ID_TAKEN_SQL, (entry.id, entry.id)).fetchone():
                conn.execute("ROLLBACK")
                return False
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
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return True

    def _rel(self, path: Path) -> str:
        return self.store.layout.relative(path)

    # -- reading -----------------------------------------------------------------------
    def get(self, entry_id: str) -> Entry:
        """The entry's metadata; `UnknownEntryError` if there is no such id."""
        row = self._conn.execute(SELECT_ENTRY_SQL, (entry_id,)).fetchone()
        if row is None:
            raise UnknownEntryError(
                f"no entry {entry_id!r} in {str(self._root)!r}: see `memory list` for ids"
            )
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
            count = max(entry.chunks, 1)
            if not 0 <= chunk < count:
                valid = "0" if count == 1 else f"0..{count - 1}"
                raise ChunkOutOfRangeError(
                    f"chunk {chunk} is out of range for {entry_id!r}: it has {count} "
                    f"chunk{'s' if count != 1 else ''} (valid: {valid})"
                )
            if entry.tier == "chunked":
                return self._read_gz(self._root / entry.path / _chunk_name(chunk)).decode("utf-8")
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
            yield self._read_gz(folder / _chunk_name(n))

    def texts(self, entry_id: str) -> list[tuple[str, str]]:
        """`[(citation, text)]` for the index: one item, or one per chunk (`id#chunk-N`)."""
        entry = self.get(entry_id)
        if entry.tier != "chunked":
            return [(entry.id, self._read_all(entry).decode("utf-8"))]
        folder = self._root / entry.path
        return [
            (f"{entry.id}#chunk-{n}", self._read_gz(folder / _chunk_name(n)).decode("utf-8"))
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
        return b"".join(self._read_gz(folder / _chunk_name(n)) for n in range(entry.chunks))

    def _read_gz(self, path: Path) -> bytes:
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
        if limit is not None and limit < 0:
            raise InvalidInputError(f"invalid limit {limit!r}: use 0 or a positive number")
        sql = f"SELECT {ENTRY_COLUMNS} FROM entries"
        if where:
            sql += " WHERE " + " AND ".join(where)
        sql += " ORDER BY seq DESC"
        if limit is not None:
            sql += f" LIMIT {int(limit)}"
        return self._with_tags(self._conn.execute(sql, params).fetchall())

    def refs(
        self, *, checkpoint: str | None = None, directory: str | os.PathLike[str] | None = None
    ) -> list[Entry]:
        """Entries linked to a checkpoint and/or a directory, oldest first."""
        if checkpoint is None and directory is None:
            raise InvalidInputError("refs needs --checkpoint ID or --directory DIR")
        found = self.list(checkpoint=checkpoint, directory=directory, limit=None)
        return list(reversed(found))

    def since(self, seq: int) -> list[tuple[int, str]]:
        """`(seq, id)` of entries added after `seq`, in order (for incremental indexing)."""
        rows = self._conn.execute(
            "SELECT seq, id FROM entries WHERE seq > ? ORDER BY seq", (seq,)
        ).fetchall()
        return [(int(r[0]), r[1]) for r in rows]

    def tombstones_since(self, seq: int) -> list[tuple[int, str]]:
        """`(seq, id)` of entries pruned after tombstone `seq`, in order."""
        rows = self._conn.execute(
            "SELECT seq, id FROM entry_tombstones WHERE seq > ? ORDER BY seq", (seq,)
        ).fetchall()
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

    # -- journal -----------------------------------------------------------------------
    def restore(self) -> int:
        """Rebuild the `entries` rows (and tags) missing from `memory.db` out of the journal.

        Entries come back in journal order (the order they were committed in), keeping their
        original `seq` when it is above every seq the table has handed out (else a new one,
        so the index's `seq > watermark` feed still picks them up). Skipped: ids already
        present or tombstoned, pruned ids (whose tombstones come back instead), file and
        chunked entries whose files are gone, and unreadable lines. Idempotent.

        Returns:
            How many entries were restored.
        """
        self._journal_checked = True
        return self._journal.restore(self._conn)

    def _check_journal(self, conn: sqlite3.Connection) -> None:
        """First use: restore an emptied table from the journal, or start a missing journal."""
        self._journal.check(conn, self._with_tags)

    # -- maintenance -------------------------------------------------------------------
    def stats(self) -> dict[str, Any]:
        """Counts, tokens, bytes (content and stored) overall, by tier and by type."""
        conn = self._conn

        def grouped(key: str) -> dict[str, dict[str, int]]:
            return {
                row["k"]: {
                    "entries": row["n"],
                    "tokens": row["tokens"],
                    "bytes": row["bytes"],
                    "stored_bytes": row["stored_bytes"],
                    "chunks": row["chunks"],
                }
                for row in conn.execute(STATS_SQL.format(key=key))
            }

        by_tier = {tier: _zero() for tier in TIERS} | grouped("tier")
        by_type = {type: _zero() for type in ENTRY_TYPES} | grouped("type")
        total = _zero()
        for bucket in by_tier.values():
            for key in total:
                total[key] += bucket[key]
        oldest, newest = conn.execute(
            "SELECT MIN(created_at), MAX(created_at) FROM entries"
        ).fetchone()
        return {
            **total,
            "by_tier": by_tier,
            "by_type": by_type,
            "oldest": oldest,
            "newest": newest,
            "tags": conn.execute("SELECT COUNT(DISTINCT tag) FROM entry_tags").fetchone()[0],
            "pruned": conn.execute("SELECT COUNT(*) FROM entry_tombstones").fetchone()[0],
        }

    def prune(
        self,
        *,
        keep_days: int | None = None,
        keep_entries: int | None = None,
        dry_run: bool = False,
    ) -> list[Entry]:
        """Remove entries older than `keep_days` or beyond the newest `keep_entries`.

        Only entries go (their rows, tags and `entries/{id}/` folders); nothing else in the
        memory directory is touched. Rows are deleted (and tombstoned) before files.

        Returns:
            The removed entries (or, with `dry_run`, those that would be removed), oldest first.
        """
        for name, value in (("keep-days", keep_days), ("keep-entries", keep_entries)):
            if value is not None and value < 0:
                raise InvalidInputError(f"invalid --{name} {value!r}: use 0 or a positive number")
        if keep_days is None and keep_entries is None:
            raise InvalidInputError("prune needs --keep-days N and/or --keep-entries N")
        conn = self._conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            victims = self._prune_victims(keep_days, keep_entries)
            if not dry_run:
                removed_at = _iso(self.clock())
                for entry in victims:
                    conn.execute(INSERT_TOMBSTONE_SQL, (entry.id, removed_at))
                    conn.execute(DELETE_ENTRY_SQL, (entry.id,))
                if victims:  # before COMMIT: a restore must never bring them back
                    self._journal.append_prunes([e.id for e in victims], removed_at)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        if not dry_run:
            for entry in victims:
                if entry.tier != "inline":
                    shutil.rmtree(self._entries_dir / entry.id, ignore_errors=True)
        return victims

    def sweep_orphans(
        self, *, older_than_s: float = ORPHAN_GRACE_S, dry_run: bool = False
    ) -> list[str]:
        """Remove `entries/{id}/` folders that no row points to (left by a killed `log`).

        Only folders named like an entry id and untouched for `older_than_s` seconds are
        considered, so a `log` still writing its files is never disturbed.

        Returns:
            Their paths relative to the memory root (removed, or that would be with `dry_run`).
        """
        if not self._entries_dir.is_dir():
            return []
        cutoff = time.time() - older_than_s
        candidates = [
            p
            for p in sorted(self._entries_dir.iterdir())
            if ENTRY_ID_RE.fullmatch(p.name) and p.is_dir() and p.stat().st_mtime < cutoff
        ]
        known = set()
        for start in range(0, len(candidates), 500):
            part = [p.name for p in candidates[start : start + 500]]
            sql = f"SELECT id FROM entries WHERE id IN ({','.join('?' * len(part))})"
            known.update(row[0] for row in self._conn.execute(sql, part))
        orphans = [p for p in candidates if p.name not in known]
        if not dry_run:
            for folder in orphans:
                shutil.rmtree(folder, ignore_errors=True)
        return [self._rel(p) for p in orphans]

    def _prune_victims(self, keep_days: int | None, keep_entries: int | None) -> list[Entry]:
        clauses, params = [], []
        if keep_days is not None:
            cutoff = _iso(self.clock() - timedelta(days=keep_days))
            clauses.append("created_at < ?")
            params.append(cutoff)
        if keep_entries is not None:
            clauses.append("seq NOT IN (SELECT seq FROM entries ORDER BY seq DESC LIMIT ?)")
            params.append(keep_entries)
        sql = f"SELECT {ENTRY_COLUMNS} FROM entries WHERE {' OR '.join(clauses)} ORDER BY seq"
        return self._with_tags(self._conn.execute(sql, params).fetchall())


def _zero() -> dict[str, int]:
    return {"entries": 0, "tokens": 0, "bytes": 0, "stored_bytes": 0, "chunks": 0}


def _chunk_name(n: int) -> str:
    return f"chunk-{n:04d}.gz"


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


_JOURNAL_SCHEMA = JournalSchema(
    entry_id_re=ENTRY_ID_RE,
    tiers=TIERS,
    check_type=check_type,
    chunk_name=_chunk_name,
    entry_columns=ENTRY_COLUMNS,
    insert_tag_sql=INSERT_TAG_SQL,
    insert_tombstone_sql=INSERT_TOMBSTONE_SQL,
    now_iso=lambda: _iso(_utc_now()),
)
