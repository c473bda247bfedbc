"""The full-text index's tables, their migrations and the row helpers its writers share.

Three FTS5 tables hold the document rows (`TABLE_OF_SOURCE`: messages, entries, every other
file), `idx_docs` each row's metadata under the same rowid, `idx_files` the state each file
was indexed at and `idx_state` the entry watermarks (see `_index` for the design).
`MIGRATIONS` are named and append-only: `memory.db`'s migration runner applies them once,
and `Index.rebuild()` replays them after dropping the tables.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

import orjson

TOKENIZER = "porter unicode61"

#: FTS5 table per view family; every source not listed here goes to `idx_doc`.
TABLE_OF_SOURCE = {"messages": "idx_msg", "entries": "idx_ent"}
FILE_TABLE = "idx_doc"
TABLES = ("idx_msg", "idx_ent", "idx_doc")


def table_for(source: str) -> str:
    """The FTS5 table that holds rows of `source`."""
    return TABLE_OF_SOURCE.get(source, FILE_TABLE)


# -- schema ----------------------------------------------------------------------------
CREATE_FILES = """
CREATE TABLE IF NOT EXISTS idx_files (
    id INTEGER PRIMARY KEY,
    path TEXT NOT NULL UNIQUE,
    source TEXT NOT NULL,
    mtime_ns INTEGER NOT NULL,
    size INTEGER NOT NULL,
    done_bytes INTEGER NOT NULL DEFAULT 0,
    done_lines INTEGER NOT NULL DEFAULT 0,
    tail_off INTEGER NOT NULL DEFAULT 0,
    tail_hash TEXT NOT NULL DEFAULT ''
)"""
CREATE_DOCS = """
CREATE TABLE IF NOT EXISTS idx_docs (
    id INTEGER PRIMARY KEY,
    source TEXT NOT NULL,
    file_id INTEGER,
    line INTEGER,
    entry_id TEXT,
    cite TEXT,
    path TEXT
)"""
CREATE_DOCS_FILE_INDEX = "CREATE INDEX IF NOT EXISTS idx_docs_file ON idx_docs(file_id)"
CREATE_DOCS_ENTRY_INDEX = "CREATE INDEX IF NOT EXISTS idx_docs_entry ON idx_docs(entry_id)"
CREATE_STATE = "CREATE TABLE IF NOT EXISTS idx_state (key TEXT PRIMARY KEY, value INTEGER)"
ADD_DOC_ID_SQL = "ALTER TABLE idx_docs ADD COLUMN doc_id TEXT"
CREATE_DOC_ID_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS idx_docs_doc_id ON idx_docs(doc_id) WHERE doc_id IS NOT NULL"
)
SELECT_UPSERTED_SQL = """
SELECT d.doc_id, d.source, d.path, d.line, t.body FROM idx_docs d
JOIN (SELECT rowid AS id, body FROM idx_msg UNION ALL SELECT rowid, body FROM idx_ent
      UNION ALL SELECT rowid, body FROM idx_doc) t ON t.id = d.id
WHERE d.doc_id IS NOT NULL ORDER BY d.id
"""
INSERT_UPSERTED_SQL = (
    "INSERT INTO idx_docs(id, source, line, cite, path, doc_id) VALUES (?, ?, ?, ?, ?, ?)"
)
CREATE_FTS = "CREATE VIRTUAL TABLE IF NOT EXISTS {table} USING fts5(body, tokenize = '{tok}')"


def create_index_tables(conn: sqlite3.Connection) -> None:
    """Create every index table (idempotent); used by the migration and by `rebuild()`."""
    for sql in (
        CREATE_FILES,
        CREATE_DOCS,
        CREATE_DOCS_FILE_INDEX,
        CREATE_DOCS_ENTRY_INDEX,
        CREATE_STATE,
    ):
        conn.execute(sql)
    for table in TABLES:
        conn.execute(CREATE_FTS.format(table=table, tok=TOKENIZER))


def drop_index_tables(conn: sqlite3.Connection) -> None:
    for table in (*TABLES, "idx_docs", "idx_files", "idx_state"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")


def add_doc_ids(conn: sqlite3.Connection) -> None:
    """Rows added through the contract's `index_upsert` carry their own id (`doc_id`)."""
    conn.execute(ADD_DOC_ID_SQL)
    conn.execute(CREATE_DOC_ID_INDEX)


def add_message_days(conn: sqlite3.Connection) -> None:
    """Each message row keeps the UTC day of its `ts`, for questions that name a day (rows
    indexed before this get it at the next `memory reindex`)."""
    conn.execute("ALTER TABLE idx_docs ADD COLUMN day TEXT")
    conn.execute("CREATE INDEX IF NOT EXISTS idx_docs_day ON idx_docs(day) WHERE day IS NOT NULL")


def add_message_speakers(conn: sqlite3.Connection) -> None:
    """Each message row keeps its speaker (the line's `name`, folded: `_text.speaker_key`),
    for questions that name one (rows indexed before this get it at the next `memory
    reindex`). The partial index answers "is this name anyone's" with one seek."""
    conn.execute("ALTER TABLE idx_docs ADD COLUMN speaker TEXT")
    conn.execute(
        "CREATE INDEX IF NOT EXISTS idx_docs_speaker ON idx_docs(speaker) WHERE speaker IS NOT NULL"
    )


#: Named and append-only; `rebuild()` replays them after dropping the tables.
MIGRATIONS = [
    ("m101_index_tables", create_index_tables),
    ("m102_index_doc_ids", add_doc_ids),
    ("m103_message_days", add_message_days),
    ("m104_message_speakers", add_message_speakers),
]


def has_table(conn: sqlite3.Connection, name: str) -> bool:
    return (
        conn.execute(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = ?", (name,)
        ).fetchone()
        is not None
    )


def watermarks(conn: sqlite3.Connection) -> dict[str, int]:
    marks = {"entries_seq": 0, "tombstones_seq": 0}
    for key, value in conn.execute("SELECT key, value FROM idx_state"):
        if key in marks:
            marks[key] = int(value)
    return marks


def next_doc_id(conn: sqlite3.Connection) -> int:
    return conn.execute("SELECT coalesce(max(id), 0) + 1 FROM idx_docs").fetchone()[0]


def json_array(values: list[Any]) -> str:
    """`values` as one JSON array, for a statement that reads them with `json_each(?)`.

    A whole batch then goes in one `sqlite3_step`, during which Python's sqlite3 holds no
    GIL. `executemany` takes the GIL back for every row, and with a busy Python thread
    beside it each row waits out a switch interval (50,000 rows: 0.7 s alone, 277 s next to
    a spinning thread; through `json_each`, 0.7 s either way).
    """
    try:
        return orjson.dumps(values).decode("utf-8")
    except orjson.JSONEncodeError:  # a lone surrogate: escaped, as SQLite's JSON reads it
        return json.dumps(values)


def indexable(text: str) -> str:
    """`text` with each NUL a space, to pass through `json_array`: SQLite's JSON functions end
    a string at its first NUL (and FTS5 takes no NUL for part of a word)."""
    return text.replace("\0", " ") if "\0" in text else text


def delete_docs(conn: sqlite3.Connection, where: str, args: tuple) -> int:
    """Delete the rows matching `where` from `idx_docs` and their FTS tables."""
    rows = conn.execute(f"SELECT id, source FROM idx_docs WHERE {where}", args).fetchall()
    if not rows:
        return 0
    by_table: dict[str, list[int]] = {}
    for row in rows:
        by_table.setdefault(table_for(row["source"]), []).append(row["id"])
    for table, ids in by_table.items():
        sql = f"DELETE FROM {table} WHERE rowid IN (SELECT value FROM json_each(?))"
        conn.execute(sql, (json_array(ids),))
    conn.execute(f"DELETE FROM idx_docs WHERE {where}", args)
    return len(rows)
