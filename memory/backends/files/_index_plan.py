"""What a sync of the full-text index reads: the rows of each changed file, planned
outside any lock against the `idx_files` state it saw (`FileWork.basis`, which the writer
checks again in its transaction), grouped in write batches.

A big jsonl is planned in slices of `batch_rows` rows (`Index.BATCH_ROWS`), each against
the row state the one before leaves; a sync with more than `pipeline_bytes`
(`Index.PIPELINE_BYTES`) to read plans the next batch in a helper thread while the caller
writes the last one (SQLite holds no GIL inside the one statement that inserts a batch,
see `_index_schema.json_array`).
"""

from __future__ import annotations

import hashlib
import sqlite3
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from memory.backends.blocks import (
    BLOCK_MAX_LINES,
    JSON_BLOCK_MAX_LINES,
    message_fields,
    split_blocks,
)
from memory.backends.files._index_schema import indexable, json_array
from memory.backends.files._text import speaker_key

READ_CHUNK = 1 << 20


def read_complete_lines(
    path: str, start: int, end: int, first_line: int
) -> Iterator[tuple[int, int, bytes]]:
    """Yield `(line_no, offset, raw)` for each complete line in bytes `[start, end)`.

    A final fragment without a newline (a torn or in-progress append) is not yielded.
    """
    line_no, offset, pending = first_line, start, b""
    with open(path, "rb") as fh:
        fh.seek(start)
        remaining = end - start
        while remaining > 0:
            chunk = fh.read(min(READ_CHUNK, remaining))
            if not chunk:
                break
            remaining -= len(chunk)
            pieces = (pending + chunk).split(b"\n")
            pending = pieces.pop()
            for raw in pieces:
                yield line_no, offset, raw
                line_no += 1
                offset += len(raw) + 1


def line_hash(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


# -- planning --------------------------------------------------------------------------
@dataclass
class Seen:
    rel: str
    source: str
    abspath: str
    mtime_ns: int
    size: int


@dataclass
class FileWork:
    """Rows for one file, computed outside the lock against the `basis` row state."""

    seen: Seen
    basis: tuple | None
    append: bool
    rows: list[tuple[int, str]] = field(default_factory=list)
    days: list[str | None] = field(default_factory=list)
    """For a jsonl, the UTC day of each row's message (same order as `rows`)."""
    speakers: list[str | None] = field(default_factory=list)
    """For a jsonl, the speaker of each row's message (`speaker_key`; same order)."""
    done_bytes: int = 0
    done_lines: int = 0
    tail_off: int = 0
    tail_hash: str = ""
    partial: bool = False
    """True when a big jsonl stopped after `batch_rows` rows; the rest follows in turn."""
    encoded: tuple[str, str] | None = None

    def encode(self) -> tuple[str, str]:
        """The rows as the two JSON arrays the inserts read: `[line, day, speaker]` and texts
        (made once, by the planning thread when there is one)."""
        if self.encoded is None:
            days = self.days or [None] * len(self.rows)
            speakers = self.speakers or [None] * len(self.rows)
            places = [
                [line, day, speaker]
                for (line, _), day, speaker in zip(self.rows, days, speakers, strict=True)
            ]
            self.encoded = (json_array(places), json_array([indexable(t) for _, t in self.rows]))
        return self.encoded


def stat_of(row: sqlite3.Row | None) -> tuple[int, int] | None:
    return None if row is None else (row["mtime_ns"], row["size"])


def _row_after(work: FileWork) -> dict[str, int | str]:
    """The `idx_files` values `Index._apply_file` writes for the slice `work` (a plan reads
    them)."""
    return {
        "mtime_ns": -1,
        "size": work.done_bytes,
        "done_bytes": work.done_bytes,
        "done_lines": work.done_lines,
        "tail_off": work.tail_off,
        "tail_hash": work.tail_hash,
    }


def state_of(row: sqlite3.Row | None) -> tuple | None:
    if row is None:
        return None
    return (row["mtime_ns"], row["size"], row["done_bytes"], row["done_lines"], row["tail_hash"])


def batches(
    changed: list[tuple[Seen, sqlite3.Row | None]], *, batch_rows: int, pipeline_bytes: int
) -> Iterator[list]:
    """The work of the changed files in write batches (`batch_rows` rows, or up to a
    big jsonl's slice). With more than `pipeline_bytes` to read, a helper thread plans
    the next batch while the caller writes the last one: SQLite releases the GIL while
    it inserts and tokenizes, so reading and parsing the next rows runs beside it."""
    planned = _group(_plan_steps(changed, batch_rows), batch_rows)
    if sum(item.size for item, _ in changed) < pipeline_bytes:
        yield from planned
        return
    with ThreadPoolExecutor(1, thread_name_prefix="tether-index-plan") as pool:
        ahead = pool.submit(next, planned, None)
        while (batch := ahead.result()) is not None:
            ahead = pool.submit(next, planned, None)
            yield batch


def _group(works: Iterator[FileWork], batch_rows: int) -> Iterator[list[FileWork]]:
    batch: list[FileWork] = []
    pending_rows = 0
    for work in works:
        batch.append(work)
        pending_rows += len(work.rows)
        if pending_rows >= batch_rows or work.partial:
            yield batch
            batch, pending_rows = [], 0
    if batch:
        yield batch


def _plan_steps(
    changed: list[tuple[Seen, sqlite3.Row | None]], batch_rows: int
) -> Iterator[FileWork]:
    for item, row in changed:
        while True:
            work = plan_file(item, row, batch_rows=batch_rows)
            yield work
            if not work.partial:
                break
            # the next slice is planned against the row this one leaves (`_apply_file`
            # records it as a file that ends where the slice stopped); `_apply_files`
            # checks that basis again and plans afresh if another process moved it
            row = _row_after(work)


def plan_file(item: Seen, row: sqlite3.Row | None, *, batch_rows: int) -> FileWork:
    work = _plan_rows(item, row, batch_rows)
    work.encode()  # here, in the planning thread when there is one
    return work


def _plan_rows(item: Seen, row: sqlite3.Row | None, batch_rows: int) -> FileWork:
    if item.source == "messages":
        return _plan_jsonl(item, row, batch_rows)
    work = FileWork(item, state_of(row), append=False)
    try:
        with open(item.abspath, "rb") as fh:
            data = fh.read(item.size)
    except OSError:
        data = b""
    text = data.decode("utf-8", errors="replace")
    max_lines = JSON_BLOCK_MAX_LINES if item.rel.endswith(".json") else BLOCK_MAX_LINES
    work.rows = split_blocks(text, max_lines)
    return work


def _plan_jsonl(item: Seen, row: sqlite3.Row | None, batch_rows: int) -> FileWork:
    """Index only the new complete lines when the file just grew, else all of it."""
    start, first_line, append = 0, 1, False
    # Append-only growth keeps the indexed prefix; any other change reindexes the file.
    if row is not None and item.size > row["size"] and row["done_bytes"] > 0:
        if _tail_intact(item.abspath, row):
            start, first_line, append = row["done_bytes"], row["done_lines"] + 1, True
    work = FileWork(item, state_of(row), append=append, done_bytes=start, done_lines=first_line - 1)
    if append:
        work.tail_off, work.tail_hash = row["tail_off"], row["tail_hash"]
    last = None  # the last complete line read: its hash tells an append from a rewrite
    rows, days, speakers = work.rows, work.days, work.speakers
    try:
        for line_no, offset, raw in read_complete_lines(item.abspath, start, item.size, first_line):
            text, day, speaker = message_fields(raw)
            if text is not None:
                rows.append((line_no, text))
                days.append(day)
                speakers.append(speaker and speaker_key(speaker))
            last = (line_no, offset, raw)
            if len(rows) >= batch_rows and offset + len(raw) + 1 < item.size:
                work.partial = True  # bounded memory: the caller comes back for more
                break
    except OSError:
        pass
    if last is not None:
        line_no, offset, raw = last
        work.done_bytes, work.done_lines = offset + len(raw) + 1, line_no
        work.tail_off, work.tail_hash = offset, line_hash(raw + b"\n")
    return work


def _tail_intact(path: str, row: sqlite3.Row) -> bool:
    length = row["done_bytes"] - row["tail_off"]
    try:
        with open(path, "rb") as fh:
            fh.seek(row["tail_off"])
            data = fh.read(length)
    except OSError:
        return False
    return len(data) == length and line_hash(data) == row["tail_hash"]
