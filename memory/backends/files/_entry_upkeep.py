"""Upkeep of the files backend's entries (`_entries.EntryStore`): their statistics,
pruning (rows and tombstones first, files after) and sweeping the folders no row points to.
"""

from __future__ import annotations

import shutil
import sqlite3
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from memory.backends.files._db import transaction
from memory.backends.files._entry_sql import (
    DATES_SQL,
    DELETE_ENTRY_SQL,
    INSERT_TOMBSTONE_SQL,
    PRUNED_COUNT_SQL,
    SELECT_BY_IDS_SQL,
    SELECT_KNOWN_IDS_SQL,
    STATS_SQL,
    TAG_COUNT_SQL,
)
from memory.backends.files._host import FilesHost
from memory.backends.files._journal import EntryJournal
from memory.clock import iso
from memory.contract.entries import ENTRY_ID_RE, ENTRY_TYPES, TIERS, Entry, empty_stats

ORPHAN_GRACE_S = 3600.0  # an orphan folder must be this old before `sweep_orphans` takes it


class EntryUpkeep:
    """`stats`, `delete` and `sweep_orphans` of `EntryStore`, over its connection (`_conn`),
    journal and `entries/` folder."""

    backend: FilesHost
    _conn: sqlite3.Connection
    _journal: EntryJournal
    _entries_dir: Path
    _rel: Callable[[Path], str]
    _with_tags: Callable[[list[sqlite3.Row]], list[Entry]]

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

        by_tier = {tier: empty_stats() for tier in TIERS} | grouped("tier")
        by_type = {type: empty_stats() for type in ENTRY_TYPES} | grouped("type")
        total = empty_stats()
        for bucket in by_tier.values():
            for key in total:
                total[key] += bucket[key]
        oldest, newest = conn.execute(DATES_SQL).fetchone()
        return {
            **total,
            "by_tier": by_tier,
            "by_type": by_type,
            "oldest": oldest,
            "newest": newest,
            "tags": conn.execute(TAG_COUNT_SQL).fetchone()[0],
            "pruned": conn.execute(PRUNED_COUNT_SQL).fetchone()[0],
        }

    def count_pruned(self) -> int:
        return self._conn.execute(PRUNED_COUNT_SQL).fetchone()[0]

    def delete(self, entry_ids: Iterable[str]) -> list[Entry]:
        """Remove entries (rows, tags, then their `entries/{id}/` folders); returns them.

        Rows are deleted and tombstoned, and the prune journalled, in one write transaction;
        files go after the commit, so a crash never leaves a row without its files.
        """
        wanted = list(dict.fromkeys(entry_ids))
        conn = self._conn
        with transaction(conn):
            victims = [e for e in self._by_ids(wanted)]
            removed_at = iso(self.backend.clock())
            for entry in victims:
                conn.execute(INSERT_TOMBSTONE_SQL, (entry.id, removed_at))
                conn.execute(DELETE_ENTRY_SQL, (entry.id,))
            if victims:  # before COMMIT: a restore must never bring them back
                self._journal.append_prunes([e.id for e in victims], removed_at)
        for entry in victims:
            if entry.tier != "inline":
                shutil.rmtree(self._entries_dir / entry.id, ignore_errors=True)
        return victims

    def _by_ids(self, entry_ids: list[str]) -> list[Entry]:
        found: list[Entry] = []
        for start in range(0, len(entry_ids), 500):  # stay under SQLite's variable limit
            part = entry_ids[start : start + 500]
            sql = SELECT_BY_IDS_SQL.format(marks=",".join("?" * len(part)))
            found += self._with_tags(self._conn.execute(sql, part).fetchall())
        return sorted(found, key=lambda e: e.seq)

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
            sql = SELECT_KNOWN_IDS_SQL.format(marks=",".join("?" * len(part)))
            known.update(row[0] for row in self._conn.execute(sql, part))
        orphans = [p for p in candidates if p.name not in known]
        if not dry_run:
            for folder in orphans:
                shutil.rmtree(folder, ignore_errors=True)
        return [self._rel(p) for p in orphans]
