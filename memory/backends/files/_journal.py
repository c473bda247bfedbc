"""The entry journal: `entries/journal.jsonl`, the rows of `memory.db` as an append-only file.

Design: one line per logged entry (`{"op": "log", "v": 1, ...}`: every column of its row,
its tags and, for inline entries, its bytes in base64) and one `{"op": "prune"}` line per
pruned id, all appended with `durable.append_jsonl`. `EntryJournal.restore` rebuilds the
`entries` rows (and tags and tombstones) missing from `memory.db` out of it, so deleting
`memory.db` loses nothing; `EntryStore` calls `check` on first use (restore an emptied table,
or journal the rows of a store made before the journal existed).

The same file is how `memory export` writes entries of any backend (with the gzip files
beside it) and how `memory import` reads them back (`read_tree_entries`).

Invariants:

* A log line is appended inside the row's `BEGIN IMMEDIATE` write transaction, after the
  entry's files are durable, so a committed row always has its line and journal order is
  commit order; a line without a row (crash before `COMMIT`) is harmless. Prune lines are
  appended before the prune's `COMMIT`, so a restore never brings a pruned entry back.
* `restore` is idempotent and keeps journal order. It skips ids already present or
  tombstoned, pruned ids (whose tombstones come back instead), file and chunked entries
  whose files are missing, and unreadable lines (a torn last line included).
"""

from __future__ import annotations

import base64
import binascii
import gzip
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

import memory.durable as durable
from memory.backends.files._entry_sql import (
    ANY_ENTRY_SQL,
    ANY_TOMBSTONE_SQL,
    HANDED_OUT_SQL,
    INSERT_TAG_SQL,
    INSERT_TOMBSTONE_SQL,
    MAX_SEQ_SQL,
    RESTORE_ENTRY_SQL,
    SELECT_ALL_WITH_CONTENT_SQL,
    SELECT_IDS_SQL,
    SELECT_TOMBSTONED_IDS_SQL,
)
from memory.clock import now_iso
from memory.entries import ENTRY_ID_RE, TIERS, Entry, check_type
from memory.errors import InvalidInputError
from memory.paths import Layout

JOURNAL_NAME = "journal.jsonl"
JOURNAL_VERSION = 1


def chunk_name(n: int) -> str:
    return f"chunk-{n:04d}.gz"


class EntryJournal:
    """The journal of the entries of one memory directory (`layout`)."""

    def __init__(self, layout: Layout):
        self.layout = layout

    @property
    def path(self) -> Path:
        """`entries/journal.jsonl`."""
        return self.layout.entries / JOURNAL_NAME

    # -- writing -----------------------------------------------------------------------
    def append_log(self, entry: Entry, inline_blob: bytes | None) -> None:
        """Journal a new row; call inside its write transaction, after its files are durable."""
        durable.append_jsonl(self.path, journal_record(entry, inline_blob))

    def append_prunes(self, entry_ids: Iterable[str], removed_at: str) -> None:
        """Journal pruned ids; call inside the prune's write transaction, before `COMMIT`."""
        records = [
            {"op": "prune", "id": entry_id, "removed_at": removed_at} for entry_id in entry_ids
        ]
        durable.append_jsonl(self.path, records, many=True)

    # -- first use ---------------------------------------------------------------------
    def check(
        self, conn: sqlite3.Connection, with_tags: Callable[[list[sqlite3.Row]], list[Entry]]
    ) -> None:
        """First use: restore an emptied table from the journal, or start a missing journal."""
        if conn.execute(ANY_ENTRY_SQL).fetchone() is None:
            tombstoned = conn.execute(ANY_TOMBSTONE_SQL).fetchone()
            if tombstoned is None and _nonempty(self.path):
                self.restore(conn)
        elif not self.path.exists():
            self.backfill(conn, with_tags)

    def backfill(
        self, conn: sqlite3.Connection, with_tags: Callable[[list[sqlite3.Row]], list[Entry]]
    ) -> None:
        """Journal the rows of a store made before the journal existed (once)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not self.path.exists():
                cursor = conn.execute(SELECT_ALL_WITH_CONTENT_SQL)
                while rows := cursor.fetchmany(1000):
                    entries = with_tags(rows)
                    blobs = [None if r["content"] is None else bytes(r["content"]) for r in rows]
                    records = [journal_record(e, b) for e, b in zip(entries, blobs, strict=True)]
                    durable.append_jsonl(self.path, records, many=True)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    # -- restoring ---------------------------------------------------------------------
    def restore(self, conn: sqlite3.Connection) -> int:
        """Rebuild the missing rows in one write transaction (see `EntryStore.restore`)."""
        conn.execute("BEGIN IMMEDIATE")
        try:
            restored = self.restore_locked(conn)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return restored

    def restore_locked(self, conn: sqlite3.Connection) -> int:
        """`restore` inside a write transaction the caller holds; returns the count."""
        logged, pruned = read_journal(self.path)
        present = {row[0] for row in conn.execute(SELECT_IDS_SQL)}
        dead = {row[0] for row in conn.execute(SELECT_TOMBSTONED_IDS_SQL)}
        for entry_id, removed_at in pruned.items():
            if entry_id not in dead and entry_id not in present:
                conn.execute(INSERT_TOMBSTONE_SQL, (entry_id, removed_at))
                dead.add(entry_id)
        floor = handed_out_seq(conn)
        restored = 0
        for record in logged:
            entry_id = record["id"]
            if entry_id in present or entry_id in dead:
                continue
            row = self.row_from_record(record)
            if row is None:
                continue
            seq = record.get("seq")
            if not isinstance(seq, int) or isinstance(seq, bool) or seq <= floor:
                seq = None
            cursor = conn.execute(RESTORE_ENTRY_SQL, (seq, *row))
            floor = max(floor, int(cursor.lastrowid or 0))
            tags = [t for t in record.get("tags") or [] if isinstance(t, str) and t]
            conn.executemany(INSERT_TAG_SQL, [(entry_id, tag) for tag in tags])
            present.add(entry_id)
            restored += 1
        return restored

    def row_from_record(self, record: dict[str, Any]) -> tuple | None:
        """The `INSERT_ENTRY_SQL` values of a journal line; None if it cannot be restored."""
        try:
            tier, path = record["tier"], record.get("path")
            chunks, size = int(record["chunks"]), int(record["bytes"])
            content = None
            if tier == "inline":
                content = base64.b64decode(record["content_b64"], validate=True)
                if len(content) != size:
                    return None
            elif tier not in TIERS or not files_present(self.layout, tier, path, chunks):
                return None
            return (
                record["id"], check_type(record["type"]), tier,
                int(record["tokens"]), size, int(record["stored_bytes"]), chunks,
                str(record["summary"]), content, path, record.get("checkpoint"),
                record.get("directory"), str(record["created_at"]),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError, binascii.Error, InvalidInputError):
            return None


def files_present(layout: Layout, tier: str, path: Any, chunks: int) -> bool:
    """Whether a file/chunked entry's files (under `entries/`) all exist."""
    if not isinstance(path, str) or not path.startswith(f"{layout.relative(layout.entries)}/"):
        return False
    target = layout.root / path
    if ".." in Path(path).parts:
        return False
    if tier == "file":
        return target.is_file()
    return chunks > 0 and all((target / chunk_name(n)).is_file() for n in range(chunks))


def journal_record(entry: Entry, inline_blob: bytes | None) -> dict[str, Any]:
    """One journal line: every column of the entry's row, its tags, inline bytes in base64."""
    record = {"op": "log", "v": JOURNAL_VERSION, **entry.to_dict()}
    if entry.tier == "inline" and inline_blob is not None:
        record["content_b64"] = base64.b64encode(inline_blob).decode("ascii")
    return record


def read_journal(path: Path) -> tuple[list[dict[str, Any]], dict[str, str]]:
    """`(log records in order, first per id; {pruned id: removed_at})`; bad lines skipped."""
    logged: dict[str, dict[str, Any]] = {}
    pruned: dict[str, str] = {}
    for _, record in durable.read_jsonl(path).records:
        entry_id = record.get("id")
        if not isinstance(entry_id, str) or not ENTRY_ID_RE.fullmatch(entry_id):
            continue
        if record.get("op") == "log":
            logged.setdefault(entry_id, record)
        elif record.get("op") == "prune":
            pruned.setdefault(entry_id, str(record.get("removed_at") or now_iso()))
    return [r for i, r in logged.items() if i not in pruned], pruned


def handed_out_seq(conn: sqlite3.Connection) -> int:
    """The highest `seq` the entries table ever handed out (AUTOINCREMENT never reuses)."""
    row = conn.execute(HANDED_OUT_SQL).fetchone()
    top = conn.execute(MAX_SEQ_SQL).fetchone()[0]
    return max(int(row[0]) if row else 0, int(top))


def _nonempty(path: Path) -> bool:
    try:
        return path.stat().st_size > 0
    except OSError:
        return False


def read_tree_entries(root: Path) -> Iterator[tuple[Entry, bytes]]:
    """`(entry, exact content)` of every entry the journal of the memory tree `root` lists.

    What `memory import` reads from a tree without `memory.db`: the journal's rows in order,
    inline content from the line itself, the rest from the gzip files beside it. Entries
    whose files are missing or damaged, and pruned ones, are skipped.
    """
    layout = Layout(Path(root))
    journal = EntryJournal(layout)
    logged, _ = read_journal(journal.path)
    for record in logged:
        row = journal.row_from_record(record)
        if row is None:
            continue
        entry = entry_from_record(record)
        try:
            if entry.tier == "inline":
                data = row[8]
            elif entry.tier == "file":
                data = gzip.decompress((layout.root / entry.path).read_bytes())
            else:
                folder = layout.root / entry.path
                data = b"".join(
                    gzip.decompress((folder / chunk_name(n)).read_bytes())
                    for n in range(entry.chunks)
                )
        except (OSError, EOFError, gzip.BadGzipFile):
            continue
        yield entry, data


def entry_from_record(record: dict[str, Any]) -> Entry:
    """The `Entry` of a journal line (validated by `row_from_record` first)."""
    tags = [t for t in record.get("tags") or [] if isinstance(t, str) and t]
    return Entry(
        id=record["id"], type=record["type"], tier=record["tier"],
        tokens=int(record["tokens"]), bytes=int(record["bytes"]), chunks=int(record["chunks"]),
        summary=str(record["summary"]), tags=sorted(tags),
        checkpoint=record.get("checkpoint"), directory=record.get("directory"),
        created_at=str(record["created_at"]), path=record.get("path"),
        stored_bytes=int(record["stored_bytes"]),
    )  # fmt: skip
