"""The `memory.db` migrations of the storage contract's tables (shipped, so kept as they are).

Task records, the subagent registry and task leases of the files backend are the
contract's JSON documents (`memory.contract.doc_records`): `memory.db` is derived, and a damaged one
is rebuilt from the files, so records that exist nowhere else live in files. The tables
these migrations made are no longer read.
"""

from __future__ import annotations

M201_BACKEND_CONTRACT = """
CREATE TABLE IF NOT EXISTS backend_documents (
    path TEXT PRIMARY KEY, version INTEGER NOT NULL, mtime REAL NOT NULL,
    size INTEGER NOT NULL, sha256 TEXT NOT NULL
);
CREATE VIRTUAL TABLE IF NOT EXISTS backend_search USING fts5(
    doc_id UNINDEXED, source UNINDEXED, path UNINDEXED, meta UNINDEXED, body,
    tokenize = 'porter unicode61'
);
CREATE TABLE IF NOT EXISTS backend_search_ids (doc_id TEXT PRIMARY KEY, fts_rowid INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS backend_tasks (
    task_id TEXT PRIMARY KEY, status TEXT NOT NULL, data TEXT NOT NULL, updated_at REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS backend_subagents (
    task_id TEXT NOT NULL, agent_id TEXT NOT NULL, status TEXT NOT NULL, data TEXT NOT NULL,
    updated_at REAL NOT NULL, PRIMARY KEY (task_id, agent_id)
);
CREATE TABLE IF NOT EXISTS backend_locks (
    task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at REAL NOT NULL
);
"""
#: The contract's search index is the tuned index of `_index`: the second one goes.
M202_DROP_BACKEND_SEARCH = """
DROP TABLE IF EXISTS backend_search;
DROP TABLE IF EXISTS backend_search_ids;
"""
#: A document's version is recognised by its file's `inode:mtime_ns:size` (no hashing).
M203_DOCUMENT_STAMPS = "ALTER TABLE backend_documents ADD COLUMN stamp TEXT"
MIGRATIONS = [
    ("m201_backend_contract", M201_BACKEND_CONTRACT),
    ("m202_drop_backend_search", M202_DROP_BACKEND_SEARCH),
    ("m203_document_stamps", M203_DOCUMENT_STAMPS),
]

__all__ = ["MIGRATIONS"]
