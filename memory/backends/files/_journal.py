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
  tombstoned and pruned ids (whose tombstones come back instead). Nothing is skipped in
  silence: a line whose entry cannot come back (files missing or outside the memory, a
  malformed field) and an unreadable line (garbled, or a torn last line) whose entry is not
  in `memory.db` are each named as `entries/journal.jsonl:LINE` in a warning (logger
  `memory`), and an unreadable line's bytes are kept in `entries/unreadable/`.
* Nothing outside the memory root is read: a journal or entry file that is a symlink
  leading out is refused like a missing one, with a warning.
"""

from __future__ import annotations

import base64
import binascii
import gzip
import logging
import os
import re
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import memory.durable as durable
from memory.backends.files._db import transaction
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
from memory.contract.entries import ENTRY_ID_RE, TIERS, Entry, check_type
from memory.errors import InvalidInputError, MemoryRuntimeError
from memory.paths import Inside, Layout

JOURNAL_NAME = "journal.jsonl"
JOURNAL_VERSION = 1
#: Where the bytes of unreadable journal lines are kept (`entries/unreadable/journal.jsonl-L12`).
UNREADABLE_DIR = "unreadable"
_ID_BYTES = re.compile(rb"mem-\d{8}-\d{6}-[0-9a-f]{8}")

log = logging.getLogger(__name__)


def chunk_name(n: int) -> str:
    return f"chunk-{n:04d}.gz"


class EntryJournal:
    """The journal of the entries of one memory directory (`layout`)."""

    def __init__(self, layout: Layout):
        self.layout = layout
        self._warned: set[str] = set()

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
        with transaction(conn):
            if not self.path.exists():
                cursor = conn.execute(SELECT_ALL_WITH_CONTENT_SQL)
                while rows := cursor.fetchmany(1000):
                    entries = with_tags(rows)
                    blobs = [None if r["content"] is None else bytes(r["content"]) for r in rows]
                    records = [journal_record(e, b) for e, b in zip(entries, blobs, strict=True)]
                    durable.append_jsonl(self.path, records, many=True)

    # -- restoring ---------------------------------------------------------------------
    def restore(self, conn: sqlite3.Connection) -> tuple[int, list[str]]:
        """Rebuild the missing rows in one write transaction (see `EntryStore.restore`)."""
        with transaction(conn):
            return self.restore_locked(conn)

    def restore_locked(self, conn: sqlite3.Connection) -> tuple[int, list[str]]:
        """`restore` inside a write transaction the caller holds.

        Returns:
            `(restored, problems)`: how many entries came back, and one line for each
            journal line whose entry did not (`file:line: why`); each is also logged as a
            warning, and the bytes of an unreadable line are kept under `entries/unreadable/`.
        """
        journal = read_journal(self.path, Inside(self.layout.root))
        present = {row[0] for row in conn.execute(SELECT_IDS_SQL)}
        dead = {row[0] for row in conn.execute(SELECT_TOMBSTONED_IDS_SQL)}
        for entry_id, removed_at in journal.pruned.items():
            if entry_id not in dead and entry_id not in present:
                conn.execute(INSERT_TOMBSTONE_SQL, (entry_id, removed_at))
                dead.add(entry_id)
        floor = handed_out_seq(conn)
        restored, problems = 0, [self.refused(journal.refused)] if journal.refused else []
        for line, record in journal.logged:
            entry_id = record["id"]
            if entry_id in present or entry_id in dead:
                continue
            row, why = self.row_from_record(record)
            if row is None:
                problems.append(f"{self.where(line)}: entry {entry_id!r} is not restored: {why}")
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
        for line, raw in journal.unreadable:
            if not (mentioned_ids(raw) & (present | dead)):  # else its entry is there
                problems.append(self._keep_aside(line, raw))
        for problem in problems:
            if problem not in self._warned:  # once per process (first use, then `reindex`)
                self._warned.add(problem)
                log.warning(problem)
        return restored, problems

    def where(self, line: int) -> str:
        """`entries/journal.jsonl:12`: a line of the journal, as warnings name it."""
        return f"{self.layout.relative(self.path)}:{line}"

    def refused(self, target: str) -> str:
        """The warning for a journal that is a symlink leading out of the memory."""
        return (
            f"{self.layout.relative(self.path)} resolves outside the memory directory "
            f"(a symlink to {target!r}); it is not read"
        )

    def _keep_aside(self, line: int, raw: bytes) -> str:
        """Copy an unreadable line's bytes to `entries/unreadable/` (once); the warning."""
        aside = self.layout.entries / UNREADABLE_DIR / f"{JOURNAL_NAME}-L{line}"
        kept = f"kept in {self.layout.relative(aside)!r}"
        try:
            if not aside.exists():
                durable.atomic_write_bytes(aside, raw)
        except MemoryRuntimeError as exc:
            kept = f"not kept aside ({exc})"
        return (
            f"{self.where(line)}: unreadable line of {len(raw)} bytes ({kept}); "
            "an entry logged on it is not restored"
        )

    def row_from_record(self, record: dict[str, Any]) -> tuple[tuple | None, str]:
        """`(INSERT_ENTRY_SQL values, "")` of a journal line, or `(None, why it cannot be)`."""
        try:
            tier, path = record["tier"], record.get("path")
            chunks, size = int(record["chunks"]), int(record["bytes"])
            content = None
            if tier == "inline":
                content = base64.b64decode(record["content_b64"], validate=True)
                if len(content) != size:
                    return None, f"its content has {len(content)} bytes, not {size}"
            elif tier not in TIERS:
                return None, f"unknown tier {tier!r}"
            elif not files_present(self.layout, tier, path, chunks):
                return None, f"its files under {path!r} are missing or outside the memory"
            return (
                record["id"], check_type(record["type"]), tier,
                int(record["tokens"]), size, int(record["stored_bytes"]), chunks,
                str(record["summary"]), content, path, record.get("checkpoint"),
                record.get("directory"), str(record["created_at"]),
            ), ""  # fmt: skip
        except KeyError as exc:
            return None, f"the line has no {exc.args[0]!r}"
        except (TypeError, ValueError, binascii.Error, InvalidInputError) as exc:
            return None, f"a field is malformed ({' '.join(str(exc).split())[:120]})"


def files_present(layout: Layout, tier: str, path: Any, chunks: int) -> bool:
    """Whether a file/chunked entry's files (under `entries/`) all exist inside the root."""
    if not isinstance(path, str) or not path.startswith(f"{layout.relative(layout.entries)}/"):
        return False
    target = layout.root / path
    if ".." in Path(path).parts:
        return False
    inside = Inside(layout.root)
    if tier == "file":
        return target.is_file() and inside(target)
    files = [target / chunk_name(n) for n in range(chunks)]
    return chunks > 0 and all(f.is_file() for f in files) and inside(files[0]) and inside(files[-1])


def journal_record(entry: Entry, inline_blob: bytes | None) -> dict[str, Any]:
    """One journal line: every column of the entry's row, its tags, inline bytes in base64."""
    record = {"op": "log", "v": JOURNAL_VERSION, **entry.to_dict()}
    if entry.tier == "inline" and inline_blob is not None:
        record["content_b64"] = base64.b64encode(inline_blob).decode("ascii")
    return record


@dataclass
class JournalRead:
    """What `read_journal` found."""

    logged: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    """`(line, record)` of each logged entry, first line per id, pruned ids left out."""
    pruned: dict[str, str] = field(default_factory=dict)
    """`{pruned id: removed_at}`."""
    unreadable: list[tuple[int, bytes]] = field(default_factory=list)
    """`(line, bytes)` of each line that is not a journal record (garbled, torn, foreign)."""
    refused: str = ""
    """The outside target when the journal is a symlink leading out of the root (not read)."""


def read_journal(path: Path, inside: Inside) -> JournalRead:
    """The journal at `path`: its records in order, and the lines that are not records."""
    found = JournalRead()
    if os.path.islink(path) and not inside(path):
        found.refused = os.path.realpath(path)
        return found
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return found
    parsed = durable.parse_jsonl(data)
    logged: dict[str, tuple[int, dict[str, Any]]] = {}
    bad = set(parsed.bad_lines)
    for line, record in parsed.records:
        entry_id, op = record.get("id"), record.get("op")
        if not isinstance(entry_id, str) or not ENTRY_ID_RE.fullmatch(entry_id):
            bad.add(line)
        elif op == "log":
            logged.setdefault(entry_id, (line, record))
        elif op == "prune":
            found.pruned.setdefault(entry_id, str(record.get("removed_at") or now_iso()))
        else:
            bad.add(line)
    found.logged = [item for entry_id, item in logged.items() if entry_id not in found.pruned]
    if bad:
        lines = data.split(b"\n")
        found.unreadable = [(line, lines[line - 1]) for line in sorted(bad)]
    return found


def mentioned_ids(raw: bytes) -> set[str]:
    """The entry ids that appear in the bytes of a line (what a garbled line was about)."""
    return {m.decode("ascii") for m in _ID_BYTES.findall(raw)}


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


def read_tree_entries(
    root: Path, problems: list[str] | None = None
) -> Iterator[tuple[Entry, bytes]]:
    """`(entry, exact content)` of every entry the journal of the memory tree `root` lists.

    What `memory import` reads from a tree without `memory.db`: the journal's rows in order,
    inline content from the line itself, the rest from the gzip files beside it. Entries
    whose files are missing, damaged or outside the tree, pruned ones, and unreadable lines
    are skipped, each with one line in `problems` (`file:line: why`).
    """
    layout = Layout(Path(root))
    journal = EntryJournal(layout)
    problems = problems if problems is not None else []
    found = read_journal(journal.path, Inside(layout.root))
    if found.refused:
        problems.append(journal.refused(found.refused))
    for line, raw in found.unreadable:
        problems.append(
            f"{journal.where(line)}: unreadable line of {len(raw)} bytes; "
            "an entry logged on it is not imported"
        )
    for line, record in found.logged:
        row, why = journal.row_from_record(record)
        if row is None:
            problems.append(f"{journal.where(line)}: entry {record['id']!r} is not imported: {why}")
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
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            problems.append(
                f"{journal.where(line)}: entry {entry.id!r} is not imported: its files are "
                f"damaged ({exc})"
            )
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
