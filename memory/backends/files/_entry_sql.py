"""The entry tables of `memory.db` (rows, tags, tombstones) and the SQL that reads them.

Migrations are named and append-only (see `_db`); never edit one that has shipped.
"""

from __future__ import annotations

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
RESTORE_ENTRY_SQL = """
INSERT INTO entries (seq, id, type, tier, tokens, bytes, stored_bytes, chunks, summary, content,
                     path, checkpoint, directory, created_at)
VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
"""
INSERT_TAG_SQL = "INSERT OR IGNORE INTO entry_tags (entry_id, tag) VALUES (?, ?)"
ID_TAKEN_SQL = (
    "SELECT 1 FROM entries WHERE id = ? UNION ALL SELECT 1 FROM entry_tombstones WHERE id = ?"
)
SELECT_ENTRY_SQL = f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id = ?"
SELECT_BY_IDS_SQL = f"SELECT {ENTRY_COLUMNS} FROM entries WHERE id IN ({{marks}})"
SELECT_CONTENT_SQL = "SELECT content FROM entries WHERE id = ?"
SELECT_TAGS_SQL = "SELECT entry_id, tag FROM entry_tags WHERE entry_id IN ({marks}) ORDER BY tag"
SELECT_ALL_WITH_CONTENT_SQL = f"SELECT {ENTRY_COLUMNS}, content FROM entries ORDER BY seq"
SELECT_IDS_SQL = "SELECT id FROM entries"
SELECT_KNOWN_IDS_SQL = "SELECT id FROM entries WHERE id IN ({marks})"
SELECT_TOMBSTONED_IDS_SQL = "SELECT id FROM entry_tombstones"
ANY_ENTRY_SQL = "SELECT 1 FROM entries LIMIT 1"
ANY_TOMBSTONE_SQL = "SELECT 1 FROM entry_tombstones LIMIT 1"
SINCE_SQL = "SELECT seq, id FROM entries WHERE seq > ? ORDER BY seq"
TOMBSTONES_SINCE_SQL = "SELECT seq, id FROM entry_tombstones WHERE seq > ? ORDER BY seq"
INSERT_TOMBSTONE_SQL = "INSERT INTO entry_tombstones (id, removed_at) VALUES (?, ?)"
DELETE_ENTRY_SQL = "DELETE FROM entries WHERE id = ?"
HANDED_OUT_SQL = "SELECT seq FROM sqlite_sequence WHERE name = 'entries'"
MAX_SEQ_SQL = "SELECT COALESCE(MAX(seq), 0) FROM entries"
STATS_SQL = """
SELECT {key} AS k, COUNT(*) AS n, COALESCE(SUM(tokens), 0) AS tokens,
       COALESCE(SUM(bytes), 0) AS bytes, COALESCE(SUM(stored_bytes), 0) AS stored_bytes,
       COALESCE(SUM(chunks), 0) AS chunks
FROM entries GROUP BY {key} ORDER BY {key}
"""
DATES_SQL = "SELECT MIN(created_at), MAX(created_at) FROM entries"
TAG_COUNT_SQL = "SELECT COUNT(DISTINCT tag) FROM entry_tags"
PRUNED_COUNT_SQL = "SELECT COUNT(*) FROM entry_tombstones"
