"""The SQL of the PostgreSQL backend: its named, append-only migrations and its statements.

Never edit a migration that has shipped: add a new one to `MIGRATIONS`.
"""

from __future__ import annotations

M001_TABLES = """
CREATE TABLE IF NOT EXISTS tether_documents (
    path TEXT PRIMARY KEY, data BYTEA, version INTEGER NOT NULL,
    mtime DOUBLE PRECISION NOT NULL, deleted BOOLEAN NOT NULL DEFAULT FALSE
);
CREATE TABLE IF NOT EXISTS tether_entries (
    id TEXT PRIMARY KEY, seq BIGSERIAL UNIQUE, type TEXT NOT NULL, tokens INTEGER NOT NULL,
    bytes INTEGER NOT NULL, chunks INTEGER NOT NULL, summary TEXT NOT NULL,
    tags TEXT[] NOT NULL, directory TEXT, created_at TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS tether_entry_chunks (
    entry_id TEXT NOT NULL REFERENCES tether_entries(id) ON DELETE CASCADE, n INTEGER NOT NULL,
    body BYTEA NOT NULL, PRIMARY KEY (entry_id, n)
);
CREATE TABLE IF NOT EXISTS tether_search (
    doc_id TEXT PRIMARY KEY, source TEXT NOT NULL, path TEXT NOT NULL, meta JSONB NOT NULL,
    body TEXT NOT NULL,
    tsv TSVECTOR GENERATED ALWAYS AS (
        to_tsvector('english', regexp_replace(body, '[^[:alnum:]]+', ' ', 'g'))) STORED
);
CREATE INDEX IF NOT EXISTS tether_search_tsv ON tether_search USING GIN (tsv);
CREATE TABLE IF NOT EXISTS tether_tasks (
    task_id TEXT PRIMARY KEY, status TEXT NOT NULL, data JSONB NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS tether_subagents (
    task_id TEXT NOT NULL, agent_id TEXT NOT NULL, status TEXT NOT NULL, data JSONB NOT NULL,
    updated_at DOUBLE PRECISION NOT NULL, PRIMARY KEY (task_id, agent_id)
);
CREATE TABLE IF NOT EXISTS tether_locks (
    task_id TEXT PRIMARY KEY, owner TEXT NOT NULL, expires_at DOUBLE PRECISION NOT NULL
)
"""
#: Entries link to checkpoints and leave tombstones; logs know their line count.
M002_ENTRY_LINKS = """
ALTER TABLE tether_entries ADD COLUMN IF NOT EXISTS checkpoint TEXT;
CREATE INDEX IF NOT EXISTS tether_entries_checkpoint ON tether_entries (checkpoint);
CREATE TABLE IF NOT EXISTS tether_entry_tombstones (
    id TEXT PRIMARY KEY, removed_at TEXT NOT NULL
);
ALTER TABLE tether_documents ADD COLUMN IF NOT EXISTS lines BIGINT;
CREATE INDEX IF NOT EXISTS tether_search_path ON tether_search (path)
"""
#: Appends are rows of their own: a document's bytes are `data` followed by its parts in
#: `start` order (`start` is the part's byte offset in the document), so appending to a long
#: log writes only the new lines instead of rewriting the whole value. `size` is the whole
#: length and `open_tail` whether the last byte is not a newline (NULL in rows written
#: before: those have no parts, and both come from `data`).
M003_DOCUMENT_PARTS = """
CREATE TABLE IF NOT EXISTS tether_document_parts (
    path TEXT NOT NULL, start BIGINT NOT NULL, data BYTEA NOT NULL, PRIMARY KEY (path, start)
);
ALTER TABLE tether_documents ADD COLUMN IF NOT EXISTS size BIGINT;
ALTER TABLE tether_documents ADD COLUMN IF NOT EXISTS open_tail BOOLEAN
"""
#: A row per server process that a write's durability barrier updates (see `FLUSH_SQL`),
#: and a receipt per append (its caller's token and first line), so an append whose
#: connection was lost can ask whether it landed instead of appending twice. (The GIN
#: index keeps its pending list: turning `fastupdate` off made searches 15% faster and
#: concurrent appends 20% slower, bulk loads 2.2x slower.)
M004_FLUSH = """
CREATE TABLE IF NOT EXISTS tether_flush (pid INTEGER PRIMARY KEY, n BIGINT NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS tether_receipts (
    token TEXT PRIMARY KEY, first BIGINT NOT NULL, at DOUBLE PRECISION NOT NULL
)
"""
#: An append to a log in one call, one round trip (`APPEND_CALL_SQL`): a procedure that
#: locks the document's row, moves its counts on, adds the part (closing a torn last line,
#: which keeps its number), indexes the new lines (`p_nums` are 1-based positions among them,
#: `p_bodies` their texts) and leaves a receipt, then COMMITs without waiting for the disk
#: (the row lock goes at once), and ends with `FLUSH_SQL`'s update, which the CALL commits
#: synchronously: the call returns once the WAL is on disk past the append. `first` comes
#: back NULL for a document that is new, deleted or from before `m003` (appended the slow
#: way). The CALL runs outside any transaction block (an autocommit connection).
M005_APPEND_PROCEDURE = (
    """
CREATE OR REPLACE PROCEDURE tether_append(
    p_path TEXT, p_now DOUBLE PRECISION, p_count BIGINT, p_length BIGINT, p_data BYTEA,
    p_nums BIGINT[], p_bodies TEXT[], p_token TEXT, INOUT first BIGINT DEFAULT NULL
) LANGUAGE plpgsql AS $$
DECLARE
    v_before BIGINT;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    WITH old AS (
        SELECT path, lines, size, open_tail FROM tether_documents
        WHERE path = p_path AND NOT deleted
          AND lines IS NOT NULL AND size IS NOT NULL AND open_tail IS NOT NULL
        FOR UPDATE
    ), doc AS (
        UPDATE tether_documents d
        SET version = d.version + 1, mtime = p_now, lines = old.lines + p_count,
            size = old.size + p_length + old.open_tail::int, open_tail = FALSE
        FROM old WHERE d.path = old.path
        RETURNING old.lines AS before, old.size AS start, old.open_tail AS torn
    ), part AS (
        INSERT INTO tether_document_parts(path, start, data)
        SELECT p_path, start, CASE WHEN torn THEN '\\x0a'::bytea || p_data ELSE p_data END
        FROM doc
    ), search AS (
        INSERT INTO tether_search(doc_id, source, path, meta, body)
        SELECT p_path || '#L' || (doc.before + t.n), 'messages', p_path,
               jsonb_build_object('line', doc.before + t.n), t.body
        FROM doc, unnest(p_nums, p_bodies) AS t(n, body)
        ON CONFLICT (doc_id) DO UPDATE SET source = excluded.source, path = excluded.path,
            meta = excluded.meta, body = excluded.body
    ), receipt AS (
        INSERT INTO tether_receipts(token, first, at) SELECT p_token, before + 1, p_now FROM doc
    )
    SELECT before INTO v_before FROM doc;
    IF v_before IS NULL THEN
        first := NULL;
        RETURN;
    END IF;
    COMMIT;
    INSERT INTO tether_flush(pid) VALUES (pg_backend_pid())
    ON CONFLICT (pid) DO UPDATE SET n = tether_flush.n + 1;
    first := v_before + 1;
END
$$
""",
)
#: A searched log's new lines are indexed by the first search after them, not by the append
#: (as on the files backend): `tether_log_marks` says up to where a log's search rows go
#: (`bytes`, always at a line's start, and the `lines` before it); a search first indexes
#: what lies after (`PENDING_LOGS_SQL`). `tether_append_log` is `tether_append` without
#: the search rows: it leaves a mark where a searched log has none yet (everything before
#: was indexed by whoever wrote it, a torn last line excepted: the mark goes after the newline
#: that closes it). Logs whose last line is torn get their mark at their next append.
M006_LOG_MARKS = (
    """
CREATE TABLE IF NOT EXISTS tether_log_marks (
    path TEXT PRIMARY KEY, lines BIGINT NOT NULL, bytes BIGINT NOT NULL
)
""",
    """
INSERT INTO tether_log_marks(path, lines, bytes)
SELECT path, lines, size FROM tether_documents
WHERE NOT deleted AND path ~ '^working/[^./][^/]*/messages[.]jsonl$' AND lines IS NOT NULL
  AND size IS NOT NULL AND open_tail IS FALSE
ON CONFLICT (path) DO NOTHING
""",
    """
CREATE OR REPLACE PROCEDURE tether_append_log(
    p_path TEXT, p_now DOUBLE PRECISION, p_count BIGINT, p_length BIGINT, p_data BYTEA,
    p_searched BOOLEAN, p_token TEXT, INOUT first BIGINT DEFAULT NULL
) LANGUAGE plpgsql AS $$
DECLARE
    v_before BIGINT;
BEGIN
    PERFORM set_config('synchronous_commit', 'off', true);
    WITH old AS (
        SELECT path, lines, size, open_tail FROM tether_documents
        WHERE path = p_path AND NOT deleted
          AND lines IS NOT NULL AND size IS NOT NULL AND open_tail IS NOT NULL
        FOR UPDATE
    ), doc AS (
        UPDATE tether_documents d
        SET version = d.version + 1, mtime = p_now, lines = old.lines + p_count,
            size = old.size + p_length + old.open_tail::int, open_tail = FALSE
        FROM old WHERE d.path = old.path
        RETURNING old.lines AS before, old.size AS start, old.open_tail AS torn
    ), part AS (
        INSERT INTO tether_document_parts(path, start, data)
        SELECT p_path, start, CASE WHEN torn THEN '\\x0a'::bytea || p_data ELSE p_data END
        FROM doc
    ), mark AS (
        INSERT INTO tether_log_marks(path, lines, bytes)
        SELECT p_path, before, start + torn::int FROM doc WHERE p_searched
        ON CONFLICT (path) DO NOTHING
    ), receipt AS (
        INSERT INTO tether_receipts(token, first, at) SELECT p_token, before + 1, p_now FROM doc
    )
    SELECT before INTO v_before FROM doc;
    IF v_before IS NULL THEN
        first := NULL;
        RETURN;
    END IF;
    COMMIT;
    INSERT INTO tether_flush(pid) VALUES (pg_backend_pid())
    ON CONFLICT (pid) DO UPDATE SET n = tether_flush.n + 1;
    first := v_before + 1;
END
$$
""",
)
#: Named, append-only; never edit one that has shipped. A script is its statements joined by
#: `;\n`, or a tuple of them (a procedure's body has its own).
MIGRATIONS = [
    ("m001_tables", M001_TABLES),
    ("m002_entry_links", M002_ENTRY_LINKS),
    ("m003_document_parts", M003_DOCUMENT_PARTS),
    ("m004_flush", M004_FLUSH),
    ("m005_append_procedure", M005_APPEND_PROCEDURE),
    ("m006_log_marks", M006_LOG_MARKS),
]

CREATE_MIGRATIONS_SQL = """
CREATE TABLE IF NOT EXISTS tether_migrations (
    name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""
HAS_MIGRATIONS_SQL = "SELECT to_regclass('tether_migrations') IS NOT NULL"
APPLIED_SQL = "SELECT name FROM tether_migrations"
RECORD_MIGRATION_SQL = "INSERT INTO tether_migrations(name) VALUES (%s)"
XACT_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext(%s))"
#: Writes under a document's lock commit without waiting for the disk (the lock is released
#: at once), then `FLUSH_SQL` commits a row of this session's own synchronously: its commit
#: waits until the WAL is on disk up to its own record, which comes after the write's, so the
#: write is durable before the call returns, and concurrent writers share the disk flushes.
ASYNC_COMMIT_SQL = "SET LOCAL synchronous_commit TO off"
FLUSH_SQL = """
INSERT INTO tether_flush(pid) VALUES (pg_backend_pid())
ON CONFLICT (pid) DO UPDATE SET n = tether_flush.n + 1
"""
#: `mutex`: a session lock in a key space of its own (the server drops it with its session).
TRY_MUTEX_SQL = "SELECT pg_try_advisory_lock(hashtext('tether-mutex'), hashtext(%s))"
UNLOCK_MUTEX_SQL = "SELECT pg_advisory_unlock(hashtext('tether-mutex'), hashtext(%s))"

SELECT_DOC_SQL = """
SELECT substring(data from %s), version, mtime, deleted, coalesce(size, octet_length(data)),
       octet_length(data)
FROM tether_documents WHERE path = %s
"""
SELECT_PARTS_SQL = """
SELECT start, data FROM tether_document_parts
WHERE path = %s AND start + octet_length(data) > %s ORDER BY start
"""
#: Up to `for` bytes of a document's base value from a 1-based position, with its lengths.
SELECT_BASE_WINDOW_SQL = """
SELECT substring(data from %s for %s), octet_length(data), coalesce(size, octet_length(data)),
       deleted
FROM tether_documents WHERE path = %s
"""
#: The parts that hold bytes in [from, to).
SELECT_PARTS_WINDOW_SQL = """
SELECT start, data FROM tether_document_parts
WHERE path = %s AND start + octet_length(data) > %s AND start < %s ORDER BY start
"""
INSERT_PART_SQL = "INSERT INTO tether_document_parts(path, start, data) VALUES (%s, %s, %s)"
DELETE_PARTS_SQL = "DELETE FROM tether_document_parts WHERE path = %s"
STAT_DOC_SQL = """
SELECT version, mtime, deleted, coalesce(size, octet_length(data))
FROM tether_documents WHERE path = %s
"""
SELECT_VERSION_SQL = "SELECT version, deleted FROM tether_documents WHERE path = %s FOR UPDATE"
UPSERT_DOC_SQL = """
INSERT INTO tether_documents(path, data, version, mtime, deleted, lines, size, open_tail)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s)
ON CONFLICT (path) DO UPDATE SET data = excluded.data, version = excluded.version,
    mtime = excluded.mtime, deleted = excluded.deleted, lines = excluded.lines,
    size = excluded.size, open_tail = excluded.open_tail
"""
SELECT_LOG_SQL = """
SELECT version, deleted, lines, coalesce(size, octet_length(data)),
       coalesce(open_tail,
                octet_length(data) > 0 AND get_byte(data, octet_length(data) - 1) <> 10),
       CASE WHEN lines IS NULL THEN data END
FROM tether_documents WHERE path = %s FOR UPDATE
"""
APPEND_CALL_SQL = """
CALL tether_append_log(%(path)s, %(now)s, %(count)s, %(length)s, %(data)s, %(searched)s,
                       %(token)s)
"""
#: Searched logs with lines after their mark, and where (`M006_LOG_MARKS`).
PENDING_LOGS_SQL = """
SELECT m.path FROM tether_log_marks m JOIN tether_documents d ON d.path = m.path
WHERE NOT d.deleted AND coalesce(d.size, octet_length(d.data)) > m.bytes
"""
#: Locked: a rewrite of the log (`_replace` deletes the mark) waits for the indexer, or the
#: indexer for the rewrite (and then finds no mark); searchers of one log take turns.
SELECT_MARK_SQL = "SELECT lines, bytes FROM tether_log_marks WHERE path = %s FOR UPDATE"
UPDATE_MARK_SQL = "UPDATE tether_log_marks SET lines = %s, bytes = %s WHERE path = %s"
DELETE_MARK_SQL = "DELETE FROM tether_log_marks WHERE path = %s"
CLEAR_MARKS_SQL = "DELETE FROM tether_log_marks"
UPSERT_MARK_SQL = """
INSERT INTO tether_log_marks(path, lines, bytes) VALUES (%s, %s, %s)
ON CONFLICT (path) DO UPDATE SET lines = excluded.lines, bytes = excluded.bytes
"""
INSERT_RECEIPT_SQL = "INSERT INTO tether_receipts(token, first, at) VALUES (%s, %s, %s)"
SELECT_RECEIPT_SQL = "SELECT first FROM tether_receipts WHERE token = %s"
#: Receipts are needed for as long as a call retries; a day is far more.
PRUNE_RECEIPTS_SQL = "DELETE FROM tether_receipts WHERE at < %s"
APPEND_DOC_SQL = """
UPDATE tether_documents SET version = version + 1, mtime = %s, lines = %s, size = %s,
    open_tail = FALSE
WHERE path = %s
"""
DELETE_PATH_SEARCH_SQL = "DELETE FROM tether_search WHERE path = %s AND source <> 'entries'"
LIST_DOCS_SQL = """
SELECT path, version, mtime, coalesce(size, octet_length(data)) FROM tether_documents
WHERE NOT deleted AND starts_with(path, %s) ORDER BY path COLLATE "C"
"""
INSERT_ENTRY_SQL = """
INSERT INTO tether_entries(id, type, tokens, bytes, chunks, summary, tags, directory, created_at,
                           checkpoint)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) RETURNING seq
"""
ENTRY_KNOWN_SQL = """
SELECT 1 FROM tether_entries WHERE id = %(id)s
UNION ALL SELECT 1 FROM tether_entry_tombstones WHERE id = %(id)s
"""
DELETE_ENTRY_SQL = "DELETE FROM tether_entries WHERE id = %s"
INSERT_TOMBSTONE_SQL = (
    "INSERT INTO tether_entry_tombstones(id, removed_at) VALUES (%s, %s) ON CONFLICT DO NOTHING"
)
COUNT_PRUNED_SQL = "SELECT count(*) FROM tether_entry_tombstones"
DELETE_ENTRY_SEARCH_SQL = (
    "DELETE FROM tether_search WHERE source = 'entries' AND meta ->> 'entry' = %s"
)
LIST_DOC_DATA_SQL = """
SELECT d.path, d.data, (SELECT string_agg(p.data, ''::bytea ORDER BY p.start)
                        FROM tether_document_parts p WHERE p.path = d.path)
FROM tether_documents d WHERE NOT d.deleted
"""
CLEAR_SEARCH_SQL = "DELETE FROM tether_search"
INSERT_CHUNK_SQL = "INSERT INTO tether_entry_chunks(entry_id, n, body) VALUES (%s, %s, %s)"
ENTRY_COLUMNS = (
    "id, type, tokens, bytes, chunks, summary, tags, directory, created_at, checkpoint, seq"
)
SELECT_ENTRY_SQL = f"SELECT {ENTRY_COLUMNS} FROM tether_entries WHERE id = %s"
SELECT_CHUNKS_SQL = "SELECT body FROM tether_entry_chunks WHERE entry_id = %s ORDER BY n"
SELECT_CHUNK_SQL = "SELECT body FROM tether_entry_chunks WHERE entry_id = %s AND n = %s"
LIST_ENTRIES_SQL = f"""
SELECT {ENTRY_COLUMNS} FROM tether_entries
WHERE (%(type)s::text IS NULL OR type = %(type)s)
  AND (%(tag)s::text IS NULL OR %(tag)s = ANY(tags))
  AND (%(dir)s::text IS NULL OR directory = %(dir)s OR starts_with(directory, %(prefix)s))
  AND (%(checkpoint)s::text IS NULL OR checkpoint = %(checkpoint)s)
ORDER BY seq DESC LIMIT %(limit)s
"""
UPSERT_SEARCH_SQL = """
INSERT INTO tether_search(doc_id, source, path, meta, body) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (doc_id) DO UPDATE SET source = excluded.source, path = excluded.path,
    meta = excluded.meta, body = excluded.body
"""
DELETE_SEARCH_SQL = "DELETE FROM tether_search WHERE doc_id = ANY(%s)"
TERM_STATS_SQL = """
SELECT t, (SELECT string_agg(lexeme, ' ') FROM unnest(to_tsvector('english', t))),
       (SELECT count(*) FROM tether_search
           WHERE tsv @@ to_tsquery('english', t)
             AND (%(sources)s::text[] IS NULL OR source = ANY(%(sources)s)))
FROM unnest(%(terms)s::text[]) AS t WHERE numnode(to_tsquery('english', t)) > 0
"""
#: The search table's size as PostgreSQL estimates it: the planner's figure once analysed, or
#: the live rows the statistics collector counts (current without an ANALYZE).
ESTIMATE_SEARCH_SQL = """
SELECT greatest(c.reltuples::bigint, coalesce(s.n_live_tup, 0))
FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid
WHERE c.oid = 'tether_search'::regclass
"""
COUNT_SEARCH_SQL = """
SELECT count(*) FROM tether_search
WHERE %(sources)s::text[] IS NULL OR source = ANY(%(sources)s)
"""
#: Ranked by the sum over query words of idf(word) x ts_rank(doc, word, normalised by length):
#: BM25's idea (rare words weigh more; idf from per-word counts through the GIN index) on top
#: of PostgreSQL's per-word frequency ranking. (Full BM25 with tf from the tsvector's positions
#: ranked no better on `bench/backends.py` and was 4x slower.) The sum is weighed by the kind
#: of record (`weights`: `memory.search.recall.SOURCE_WEIGHTS` as a JSON object, 1 for the others).
QUERY_SEARCH_SQL = """
SELECT doc_id, source, path, body,
       ({score}) * coalesce((%(weights)s::jsonb ->> source)::float8, 1) AS score
FROM tether_search
WHERE tsv @@ to_tsquery('english', %(candidates)s)
  AND (%(sources)s::text[] IS NULL OR source = ANY(%(sources)s))
ORDER BY score DESC, doc_id LIMIT %(limit)s
"""
TERM_SCORE_SQL = "%(w{i})s * ts_rank(tsv, to_tsquery('english', %(t{i})s), 1)"
UPSERT_TASK_SQL = """
INSERT INTO tether_tasks(task_id, status, data, updated_at) VALUES (%s, %s, %s, %s)
ON CONFLICT (task_id) DO UPDATE SET status = excluded.status, data = excluded.data,
    updated_at = excluded.updated_at
"""
SELECT_TASK_SQL = "SELECT task_id, status, data, updated_at FROM tether_tasks WHERE task_id = %s"
LIST_TASKS_SQL = (
    "SELECT task_id, status, data, updated_at FROM tether_tasks ORDER BY updated_at DESC, task_id"
)
UPSERT_AGENT_SQL = """
INSERT INTO tether_subagents(task_id, agent_id, status, data, updated_at)
VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (task_id, agent_id) DO UPDATE SET status = excluded.status, data = excluded.data,
    updated_at = excluded.updated_at
"""
MERGE_TASK_SQL = """
INSERT INTO tether_tasks(task_id, status, data, updated_at)
VALUES (%(task_id)s, COALESCE(%(status)s, ''), %(data)s, %(at)s)
ON CONFLICT (task_id) DO UPDATE SET status = COALESCE(%(status)s, tether_tasks.status),
    data = tether_tasks.data || excluded.data, updated_at = excluded.updated_at
RETURNING status, data, updated_at
"""
GET_AGENT_SQL = (
    "SELECT status, data, updated_at FROM tether_subagents WHERE task_id = %s AND agent_id = %s"
)
SELECT_AGENT_SQL = "SELECT status, data FROM tether_subagents WHERE task_id = %s AND agent_id = %s"
LIST_AGENTS_SQL = """
SELECT task_id, agent_id, status, data, updated_at FROM tether_subagents
WHERE task_id = %s ORDER BY agent_id COLLATE "C"
"""
SELECT_LOCK_SQL = "SELECT owner, expires_at FROM tether_locks WHERE task_id = %s"
UPSERT_LOCK_SQL = """
INSERT INTO tether_locks(task_id, owner, expires_at) VALUES (%s, %s, %s)
ON CONFLICT (task_id) DO UPDATE SET owner = excluded.owner, expires_at = excluded.expires_at
"""
DELETE_LOCK_SQL = "DELETE FROM tether_locks WHERE task_id = %s AND owner = %s"

#: Whether `PostgresSaver`'s table holds a thread's root graph state (`orchestrator status`).
HAS_THREAD_SQL = "SELECT 1 FROM checkpoints WHERE thread_id = %s AND checkpoint_ns = '' LIMIT 1"
