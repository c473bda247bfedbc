"""Entries on PostgreSQL: the log of stored outputs, their chunk texts and their search rows.

A mixin of `PostgresBackend` (it brings `_tx`, `_retry`, `clock` and `summarizer`). An entry
is a row of `tether_entries` and its chunk texts (`tether_chunks`); a deleted one leaves a
tombstone, so a pruned id is never reused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memory.backends.blocks import entry_docs
from memory.backends.postgres._documents import retried
from memory.backends.postgres._sql import (
    COUNT_PRUNED_SQL,
    DELETE_ENTRY_SEARCH_SQL,
    DELETE_ENTRY_SQL,
    ENTRY_KNOWN_SQL,
    INSERT_CHUNK_SQL,
    INSERT_ENTRY_SQL,
    INSERT_TOMBSTONE_SQL,
    LIST_ENTRIES_SQL,
    SELECT_CHUNK_SQL,
    SELECT_CHUNKS_SQL,
    SELECT_ENTRY_SQL,
)
from memory.backends.postgres.connections import NOT_LANDED
from memory.contract.base import check_chunk, check_limit, unknown_entry
from memory.contract.entries import Entry, normalize_directory, pieces, prepare_entry, tier_of


class EntriesMixin:
    """`log/put/get/fetch/list/delete` entries for `PostgresBackend`."""

    _tx: Any
    _retry: Any
    _insert_search: Any
    clock: Any
    summarizer: Any

    def log_entry(
        self, content, *, type="output", tags=(), directory=None, checkpoint=None
    ) -> Entry:
        entry, text, data = prepare_entry(
            content, type=type, tags=tags, directory=directory, checkpoint=checkpoint,
            moment=self.clock(), summarizer=self.summarizer,
        )  # fmt: skip

        def insert() -> Entry:
            with self._tx() as conn:
                self._insert_entry(conn, entry, text, len(data))
            return entry

        return self._retry(insert, lambda: entry if self._entry_known(entry.id) else NOT_LANDED)

    def _entry_known(self, entry_id: str) -> bool:
        with self._tx() as conn:
            return conn.execute(ENTRY_KNOWN_SQL, {"id": entry_id}).fetchone() is not None

    def _insert_entry(self, conn: Any, entry: Entry, text: str, size: int) -> None:
        parts = pieces(entry, text)
        row = (entry.id, entry.type, entry.tokens, entry.bytes, len(parts), entry.summary,
               list(entry.tags), entry.directory, entry.created_at, entry.checkpoint)  # fmt: skip
        entry.seq = conn.execute(INSERT_ENTRY_SQL, row).fetchone()[0]
        entry.stored_bytes, entry.path = size, None
        with conn.cursor() as cur:
            cur.executemany(
                INSERT_CHUNK_SQL, [(entry.id, n, p.encode()) for n, p in enumerate(parts)]
            )
        self._insert_search(conn, entry_docs(entry, parts))

    def put_entry(self, entry: Entry, content: bytes) -> bool:
        text = content.decode("utf-8")
        entry = Entry(**{**entry.__dict__, "tags": list(entry.tags)})

        def insert() -> bool:
            with self._tx(lock="entry:" + entry.id) as conn:
                if conn.execute(ENTRY_KNOWN_SQL, {"id": entry.id}).fetchone():
                    return False
                self._insert_entry(conn, entry, text, len(content))
            return True

        return self._retry(insert, lambda: True if self._entry_known(entry.id) else NOT_LANDED)

    @retried
    def get_entry(self, entry_id: str) -> Entry:
        with self._tx() as conn:
            row = conn.execute(SELECT_ENTRY_SQL, (entry_id,)).fetchone()
        if row is None:
            raise unknown_entry(entry_id)
        return _entry(row)

    @retried
    def fetch_entry(self, entry_id: str, *, chunk: int | None = None) -> str:
        record = self.get_entry(entry_id)
        check_chunk(entry_id, chunk, record.chunks)
        with self._tx() as conn:
            if chunk is not None:
                return bytes(
                    conn.execute(SELECT_CHUNK_SQL, (entry_id, chunk)).fetchone()[0]
                ).decode()
            return b"".join(
                bytes(r[0]) for r in conn.execute(SELECT_CHUNKS_SQL, (entry_id,))
            ).decode()

    @retried
    def list_entries(
        self, *, type=None, tag=None, directory=None, checkpoint=None, limit=20
    ) -> list[Entry]:
        check_limit(limit)
        norm = normalize_directory(directory) if directory is not None else None
        params = {
            "type": type,
            "tag": tag,
            "dir": norm,
            "prefix": (norm.rstrip("/") + "/") if norm else None,
            "checkpoint": checkpoint,
            "limit": limit,
        }
        with self._tx() as conn:
            return [_entry(r) for r in conn.execute(LIST_ENTRIES_SQL, params)]

    @retried
    def delete_entries(self, entry_ids: Sequence[str]) -> list[Entry]:
        removed = []
        now = self.clock().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        with self._tx() as conn:
            for entry_id in dict.fromkeys(entry_ids):
                row = conn.execute(SELECT_ENTRY_SQL, (entry_id,)).fetchone()
                if row is None:
                    continue
                conn.execute(DELETE_ENTRY_SQL, (entry_id,))
                conn.execute(INSERT_TOMBSTONE_SQL, (entry_id, now))
                conn.execute(DELETE_ENTRY_SEARCH_SQL, (entry_id,))
                removed.append(_entry(row))
        return sorted(removed, key=lambda e: e.seq)

    @retried
    def count_pruned(self) -> int:
        with self._tx() as conn:
            return conn.execute(COUNT_PRUNED_SQL).fetchone()[0]


def _entry(row: Any) -> Entry:
    tier = tier_of(row[2])
    return Entry(
        id=row[0],
        type=row[1],
        tier=tier,
        tokens=row[2],
        bytes=row[3],
        chunks=row[4] if tier == "chunked" else 0,
        summary=row[5],
        tags=list(row[6]),
        directory=row[7],
        created_at=row[8],
        checkpoint=row[9],
        seq=row[10],
        stored_bytes=row[3],
    )
