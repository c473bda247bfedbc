"""The full-text index over the whole memory directory, kept current incrementally.

Design: every searchable piece of memory becomes one *document row*: a block (paragraph or
section) of a markdown/JSON file with its first line, one line of a `messages.jsonl` file
with its physical line number, or one entry / chunk of an entry with its citation. Rows
live in three SQLite FTS5 tables (tokenizer `porter unicode61`, ranked with BM25) chosen by
how big a view grows: `idx_msg` (messages, up to millions of rows), `idx_ent` (entries and
chunks) and `idx_doc` (every other file). Splitting them keeps document frequencies and
candidate sets per view, so a scoped search never walks another view's postings.
`idx_docs` holds each row's metadata (source, file, line, citation) under the same rowid;
rows given through the storage contract (`index_upsert`) carry their own `doc_id` there and
live beside the synced ones (one index, one planner: `_planner`);
`idx_files` remembers, per indexed file, the `(mtime_ns, size)` it was indexed at and, for
jsonl files, how many complete lines/bytes were consumed plus a hash of the last one.

Invariants:
* Files are the truth. `sync()` stats the known folders (`_index_scan`: `os.scandir`, no
  reads for unchanged files) and brings the rows in line: new and changed files are
  (re)indexed, deleted files lose their rows, and a `messages.jsonl` that only grew has just
  its new complete lines indexed (after checking that the last indexed line is still there,
  byte for byte; otherwise the file is reindexed). A torn last line is left for a later sync.
* Entries are pulled from the `entries` table by `seq` above a watermark and dropped by
  `entry_tombstones` above another (`_index_entries`), so the index never needs the entry
  store to call it.
* Files are read outside any write lock; rows are applied in `BEGIN IMMEDIATE`
  transactions that first re-check the state the work was planned against, so several
  processes may sync at once and the result is the same as one sync.
* Memory stays bounded: rows are applied every `Index.BATCH_ROWS`, and a big jsonl file is
  indexed in slices (recorded as if it ended where a slice stopped, so the next slice is
  an ordinary append).
* `rebuild()` drops every index table and indexes everything again.

Hidden files and folders (names starting with '.') and `memory.db*` are never indexed.

The entries' rows (`IndexEntries`): one row per entry, or per chunk of a chunked entry,
cited as `id` or `id#chunk-N`. New entries are pulled from the `entries` table by `seq`
above the `entries_seq` watermark and pruned ones dropped by `entry_tombstones` above
`tombstones_seq`, so the entry store never calls the index; the transaction that applies
them first checks that the watermarks are still the ones it planned against.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable

from memory.backends.blocks import WORDY
from memory.backends.files._db import transaction
from memory.backends.files._host import FilesHost
from memory.backends.files._index_plan import (
    FileWork,
    Seen,
    batches,
    plan_file,
    stat_of,
    state_of,
)
from memory.backends.files._index_scan import scan
from memory.backends.files._index_schema import (
    INSERT_UPSERTED_SQL,
    MIGRATIONS,
    SELECT_UPSERTED_SQL,
    TABLES,
    delete_docs,
    drop_index_tables,
    has_table,
    next_doc_id,
    table_for,
    watermarks,
)
from memory.backends.files._watch import Watch
from memory.contract.base import IndexReport, SearchDoc
from memory.errors import MemoryStoreError


class IndexEntries:
    """The entry half of `Index.sync`; reads the index's `backend` and `conn` and writes
    through its `_write`."""

    backend: FilesHost
    conn: sqlite3.Connection
    _write: Callable[..., None]

    def _sync_entries(self, report: IndexReport) -> None:
        conn = self.conn
        if not has_table(conn, "entries"):
            return
        marks = watermarks(conn)
        new = conn.execute(
            "SELECT seq, id FROM entries WHERE seq > ? ORDER BY seq", (marks["entries_seq"],)
        ).fetchall()
        dead: list[sqlite3.Row] = []
        if has_table(conn, "entry_tombstones"):
            dead = conn.execute(
                "SELECT seq, id FROM entry_tombstones WHERE seq > ? ORDER BY seq",
                (marks["tombstones_seq"],),
            ).fetchall()
        if not new and not dead:
            return
        dead_ids = {row["id"] for row in dead}
        planned = [
            (row["seq"], row["id"], self._entry_rows(row["id"]))
            for row in new
            if row["id"] not in dead_ids
        ]
        last_seq = new[-1]["seq"] if new else marks["entries_seq"]
        last_dead = dead[-1]["seq"] if dead else marks["tombstones_seq"]
        self._write(
            lambda c: self._apply_entries(c, marks, planned, dead_ids, last_seq, last_dead, report)
        )

    def _entry_rows(self, entry_id: str) -> tuple[str | None, list[tuple[str, str]]]:
        try:
            texts = self.backend.entries.texts(entry_id)
        except (MemoryStoreError, UnicodeDecodeError, OSError):
            return None, []  # pruned meanwhile (its tombstone follows), binary or unreadable
        path = None
        try:
            path = self.backend.entries.get(entry_id).path
        except (MemoryStoreError, AttributeError):
            pass
        return path, [(cite, text) for cite, text in texts if text and WORDY.search(text)]

    def _apply_entries(
        self,
        conn: sqlite3.Connection,
        marks: dict[str, int],
        planned: list,
        dead_ids: set[str],
        last_seq: int,
        last_dead: int,
        report: IndexReport,
    ) -> None:
        if watermarks(conn) != marks:
            return  # another process indexed these meanwhile; the next sync sees the rest
        next_id = next_doc_id(conn)
        for _seq, entry_id, (path, rows) in planned:
            delete_docs(conn, "entry_id = ?", (entry_id,))
            for cite, text in rows:
                conn.execute(
                    "INSERT INTO idx_docs(id, source, entry_id, cite, path) "
                    "VALUES (?, 'entries', ?, ?, ?)",
                    (next_id, entry_id, cite, path),
                )
                conn.execute("INSERT INTO idx_ent(rowid, body) VALUES (?, ?)", (next_id, text))
                next_id += 1
            report.entries_added += 1
            report.rows_added += len(rows)
        for entry_id in dead_ids:
            removed = delete_docs(conn, "entry_id = ?", (entry_id,))
            report.rows_removed += removed
            report.entries_removed += 1 if removed else 0
        conn.executemany(
            "INSERT OR REPLACE INTO idx_state(key, value) VALUES (?, ?)",
            [("entries_seq", last_seq), ("tombstones_seq", last_dead)],
        )


class Index(IndexEntries):
    """The derived full-text index of one memory directory (see the module docstring)."""

    #: Rows applied per write transaction during a large sync (bounds memory and lock time).
    BATCH_ROWS = 20_000
    #: A sync with more bytes than this to read plans in a helper thread beside its writes.
    PIPELINE_BYTES = 4 << 20

    def __init__(self, backend: FilesHost):
        self.backend = backend
        self.layout = backend.layout
        self._sync_lock = threading.Lock()
        self._watch: Watch | None = None
        self._scanned: tuple[sqlite3.Connection, int] | None = None
        """(connection, its `data_version`) as of the last scan that the watch covers."""
        self._files_seen = 0

    @property
    def conn(self) -> sqlite3.Connection:
        return self.backend.connect()

    # -- public -----------------------------------------------------------------------
    def sync(self, *, full: bool = False) -> IndexReport:
        """Bring the index up to date with the files and entries; cheap when nothing moved.

        The files are stat'ed (`_scan`) unless the folder watch (`_watch.Watch`, Linux inotify on
        local file systems) saw no change under them since the last scan and no other
        connection committed to `memory.db` meanwhile; `full=True` always scans.
        """
        began = time.perf_counter()
        report = IndexReport()
        if self.backend.read_only:  # nothing can be written: search what is indexed
            report.stale = True
            return report
        with self._sync_lock:  # a thread that skips the scan must not pass one still syncing
            self._sync_all_files(report, full)
        self.backend.entries.ready()  # restores entries lost with a deleted memory.db first
        self._sync_entries(report)
        report.seconds = time.perf_counter() - began
        return report

    def _sync_all_files(self, report: IndexReport, full: bool) -> None:
        conn = self.conn
        watch = self._watch
        if watch is None:
            watch = self._watch = Watch.for_root(str(self.layout.root))
        # Another connection's commit (a rebuild, another process's sync) may have changed
        # what is indexed without any file changing: then scan as well.
        version = conn.execute("PRAGMA data_version").fetchone()[0]
        scanned = self._scanned
        if (
            not full
            and watch.unchanged()
            and scanned is not None
            and scanned[0] is conn  # another thread's connection has its own data_version
            and scanned[1] == version
        ):
            report.files_seen = self._files_seen
            return
        self._scanned = None
        watch.begin_scan()  # from here on, any change marks the watch changed again
        seen = self._scan(watch)
        report.files_seen = self._files_seen = len(seen)
        known = {row["path"]: row for row in conn.execute("SELECT * FROM idx_files")}
        self._sync_files(seen, known, report)
        self._scanned = (conn, version) if watch.active else None

    def rebuild(self) -> IndexReport:
        """Drop every index table and index all files and entries again."""
        began = time.perf_counter()
        self.backend.entries.restore()  # rows lost with a deleted memory.db, from the journal
        warnings = list(self.backend.entries.unrestored)
        conn = self.conn
        with transaction(conn):
            kept = [SearchDoc(r[0], r[1], r[4], r[2] or "", {"line": r[3]})
                    for r in conn.execute(SELECT_UPSERTED_SQL)]  # fmt: skip
            drop_index_tables(conn)
            for _, step in MIGRATIONS:
                step(conn)
            self._upsert(conn, kept)
        report = self.sync(full=True)
        report.warnings = warnings
        self._optimize()
        report.rows_total = self.row_count()
        report.seconds = time.perf_counter() - began
        return report

    def _optimize(self) -> None:
        """Merge each FTS table's segments into one (faster queries after a bulk load)."""
        for table in TABLES:
            self._write(lambda c, t=table: c.execute(f"INSERT INTO {t}({t}) VALUES('optimize')"))

    def row_count(self) -> int:
        return self.conn.execute("SELECT count(*) FROM idx_docs").fetchone()[0]

    # -- documents given through the contract -------------------------------------------
    def upsert(self, docs: list[SearchDoc]) -> None:
        """Add or replace documents by `doc_id`, beside the rows the sync keeps (all or none)."""
        self._write(lambda c: self._upsert(c, docs), derived=False)

    @staticmethod
    def _upsert(conn: sqlite3.Connection, docs: list[SearchDoc]) -> None:
        next_id = next_doc_id(conn)
        for doc in docs:
            delete_docs(conn, "doc_id = ?", (doc.doc_id,))
            line = doc.meta.get("line") if isinstance(doc.meta.get("line"), int) else None
            row = (next_id, doc.source, line, doc.doc_id, doc.path or None, doc.doc_id)
            conn.execute(INSERT_UPSERTED_SQL, row)
            table = table_for(doc.source)
            conn.execute(f"INSERT INTO {table}(rowid, body) VALUES (?, ?)", (next_id, doc.text))
            next_id += 1

    def delete(self, doc_ids: list[str]) -> int:
        """Remove documents given through `upsert`; how many existed."""
        removed = [0]

        def run(conn: sqlite3.Connection) -> None:
            for doc_id in dict.fromkeys(doc_ids):
                removed[0] += delete_docs(conn, "doc_id = ?", (doc_id,))

        self._write(run, derived=False)
        return removed[0]

    # -- scanning ---------------------------------------------------------------------
    def _scan(self, watch: Watch | None = None) -> dict[str, Seen]:
        """Stat every indexable file (`_index_scan.scan`); a method, so tests can count scans."""
        return scan(self.layout, watch)

    # -- files ------------------------------------------------------------------------
    def _sync_files(
        self, seen: dict[str, Seen], known: dict[str, sqlite3.Row], report: IndexReport
    ) -> None:
        gone = [row for path, row in known.items() if path not in seen]
        if gone:
            self._write(lambda c: self._remove_files(c, gone, report))
        changed = [
            (item, known.get(rel))
            for rel, item in seen.items()
            if stat_of(known.get(rel)) != (item.mtime_ns, item.size)
        ]
        for batch in batches(
            changed, batch_rows=self.BATCH_ROWS, pipeline_bytes=self.PIPELINE_BYTES
        ):
            self._write(lambda c, b=batch: self._apply_files(c, b, report))

    def _apply_files(
        self, conn: sqlite3.Connection, batch: list[FileWork], report: IndexReport
    ) -> None:
        next_id = next_doc_id(conn)
        for work in batch:
            row = conn.execute(
                "SELECT * FROM idx_files WHERE path = ?", (work.seen.rel,)
            ).fetchone()
            if state_of(row) != work.basis:
                # Another process synced this file since we planned: redo against its state.
                if (
                    not work.partial
                    and row is not None
                    and (row["mtime_ns"], row["size"]) == (work.seen.mtime_ns, work.seen.size)
                ):
                    continue
                work = plan_file(work.seen, row, batch_rows=self.BATCH_ROWS)
            next_id = self._apply_file(conn, work, row, next_id, report)

    def _apply_file(
        self,
        conn: sqlite3.Connection,
        work: FileWork,
        row: sqlite3.Row | None,
        next_id: int,
        report: IndexReport,
    ) -> int:
        item = work.seen
        if row is None:
            file_id = conn.execute(
                "INSERT INTO idx_files(path, source, mtime_ns, size) VALUES (?, ?, ?, ?)",
                (item.rel, item.source, item.mtime_ns, item.size),
            ).lastrowid
        else:
            file_id = row["id"]
            if not work.append:
                report.rows_removed += delete_docs(conn, "file_id = ?", (file_id,))
        table = table_for(item.source)
        places, texts = work.encode()
        # one statement per table (see `json_array`): ids run from `next_id` in row order
        conn.execute(
            "INSERT INTO idx_docs(id, source, file_id, line, day, speaker) SELECT ? + key, ?, ?, "
            "json_extract(value, '$[0]'), json_extract(value, '$[1]'), "
            "json_extract(value, '$[2]') FROM json_each(?)",
            (next_id, item.source, file_id, places),
        )
        conn.execute(
            f"INSERT INTO {table}(rowid, body) SELECT ? + key, value FROM json_each(?)",
            (next_id, texts),
        )
        # A partly indexed file is recorded as if it ended where indexing stopped, so the
        # next plan continues it as an append.
        mtime_ns, size = (-1, work.done_bytes) if work.partial else (item.mtime_ns, item.size)
        conn.execute(
            "UPDATE idx_files SET source = ?, mtime_ns = ?, size = ?, done_bytes = ?, "
            "done_lines = ?, tail_off = ?, tail_hash = ? WHERE id = ?",
            (
                item.source,
                mtime_ns,
                size,
                work.done_bytes,
                work.done_lines,
                work.tail_off,
                work.tail_hash,
                file_id,
            ),
        )
        report.files_indexed += 0 if work.partial else 1
        report.rows_added += len(work.rows)
        return next_id + len(work.rows)

    @staticmethod
    def _remove_files(
        conn: sqlite3.Connection, gone: list[sqlite3.Row], report: IndexReport
    ) -> None:
        for row in gone:
            current = conn.execute(
                "SELECT id FROM idx_files WHERE id = ? AND mtime_ns = ? AND size = ?",
                (row["id"], row["mtime_ns"], row["size"]),
            )
            if current.fetchone() is None:
                continue  # another process already handled it
            report.rows_removed += delete_docs(conn, "file_id = ?", (row["id"],))
            conn.execute("DELETE FROM idx_files WHERE id = ?", (row["id"],))
            report.files_removed += 1

    # -- transactions -----------------------------------------------------------------
    def _write(self, fn, *, derived: bool = True) -> None:
        """Run `fn(conn)` in one `BEGIN IMMEDIATE` transaction (serialises writers).

        Rows `derived` from files and entries commit without an fsync: a commit lost with a
        power cut leaves older stamps and watermarks, so the next sync indexes those again.
        Documents given through `upsert` exist nowhere else: their commits are durable.
        """
        with self.backend._write(durable_commit=not derived) as conn:
            fn(conn)
