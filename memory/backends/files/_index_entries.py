"""The entries' rows of the full-text index (`_index.Index`): one row per entry, or per
chunk of a chunked entry, cited as `id` or `id#chunk-N`.

New entries are pulled from the `entries` table by `seq` above the `entries_seq` watermark
and pruned ones dropped by `entry_tombstones` above `tombstones_seq` (both in `idx_state`),
so the entry store never calls the index. Texts are read outside the write lock; the
transaction that applies them first checks that the watermarks are still the ones it
planned against, so two processes never index the same entries twice.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable

from memory.backends.blocks import WORDY
from memory.backends.files._host import FilesHost
from memory.backends.files._index_schema import delete_docs, has_table, next_doc_id, watermarks
from memory.base import IndexReport
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
