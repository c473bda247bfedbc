"""The PostgreSQL backend: the storage contract as rows, for several machines on one task.

Everything is a row in tables prefixed `tether_` in the connection's schema: documents (bytes,
version, mtime; a delete keeps the row so versions are never reused), entries and their chunk
texts, the search index (`tsvector` generated from the body with the `english` configuration,
a GIN index, ranked by idf-weighted `ts_rank`), task records, the
subagent registry and task leases.

Concurrency: each call runs in one transaction. Writers of one document or one subagent
serialise on a transaction-scoped advisory lock keyed by its name (`pg_advisory_xact_lock`), so
compare-and-set is exact even for rows that do not exist yet; `setup()` takes a global one, so
processes starting together migrate once. Migrations are named, append-only and recorded in
`tether_migrations`; `open(url, setup=False)` (read-only callers) refuses a database without
tether's tables or with an older or newer schema, naming the URL without its password.

The backend takes an open `psycopg.Connection` (autocommit) or a `psycopg_pool.ConnectionPool`;
`PostgresBackend.open(url)` makes a pool and closes it after.
"""

from __future__ import annotations

import json
import math
import re
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memory.backends.inmemory import check_query
from memory.base import (
    BaseBackend,
    ConflictError,
    Document,
    DocumentInfo,
    EntryRecord,
    LockInfo,
    SearchDoc,
    SearchHit,
    StorageError,
    SubagentRecord,
    TaskRecord,
    check_chunk,
    check_doc_path,
    check_id,
    json_text,
    prepare_entry,
    unknown_entry,
)
from memory.errors import InvalidInputError

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
#: Named, append-only; never edit one that has shipped.
MIGRATIONS = [("m001_tables", M001_TABLES)]

CREATE_MIGRATIONS_SQL = """
CREATE TABLE IF NOT EXISTS tether_migrations (
    name TEXT PRIMARY KEY, applied_at TIMESTAMPTZ NOT NULL DEFAULT now()
)
"""
HAS_MIGRATIONS_SQL = "SELECT to_regclass('tether_migrations') IS NOT NULL"
APPLIED_SQL = "SELECT name FROM tether_migrations"
RECORD_MIGRATION_SQL = "INSERT INTO tether_migrations(name) VALUES (%s)"
XACT_LOCK_SQL = "SELECT pg_advisory_xact_lock(hashtext(%s))"

SELECT_DOC_SQL = "SELECT data, version, mtime, deleted FROM tether_documents WHERE path = %s"
UPSERT_DOC_SQL = """
INSERT INTO tether_documents(path, data, version, mtime, deleted) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (path) DO UPDATE SET data = excluded.data, version = excluded.version,
    mtime = excluded.mtime, deleted = excluded.deleted
"""
LIST_DOCS_SQL = """
SELECT path, version, mtime, octet_length(data) FROM tether_documents
WHERE NOT deleted AND starts_with(path, %s) ORDER BY path COLLATE "C"
"""
INSERT_ENTRY_SQL = """
INSERT INTO tether_entries(id, type, tokens, bytes, chunks, summary, tags, directory, created_at)
VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s)
"""
INSERT_CHUNK_SQL = "INSERT INTO tether_entry_chunks(entry_id, n, body) VALUES (%s, %s, %s)"
ENTRY_COLUMNS = "id, type, tokens, bytes, chunks, summary, tags, directory, created_at"
SELECT_ENTRY_SQL = f"SELECT {ENTRY_COLUMNS} FROM tether_entries WHERE id = %s"
SELECT_CHUNKS_SQL = "SELECT body FROM tether_entry_chunks WHERE entry_id = %s ORDER BY n"
SELECT_CHUNK_SQL = "SELECT body FROM tether_entry_chunks WHERE entry_id = %s AND n = %s"
LIST_ENTRIES_SQL = f"""
SELECT {ENTRY_COLUMNS} FROM tether_entries
WHERE (%(type)s::text IS NULL OR type = %(type)s)
  AND (%(tag)s::text IS NULL OR %(tag)s = ANY(tags))
  AND (%(dir)s::text IS NULL OR directory = %(dir)s OR starts_with(directory, %(prefix)s))
ORDER BY seq DESC LIMIT %(limit)s
"""
UPSERT_SEARCH_SQL = """
INSERT INTO tether_search(doc_id, source, path, meta, body) VALUES (%s, %s, %s, %s, %s)
ON CONFLICT (doc_id) DO UPDATE SET source = excluded.source, path = excluded.path,
    meta = excluded.meta, body = excluded.body
"""
DELETE_SEARCH_SQL = "DELETE FROM tether_search WHERE doc_id = ANY(%s)"
TERM_STATS_SQL = """
SELECT (SELECT string_agg(lexeme, ' ') FROM unnest(to_tsvector('english', t))),
       (SELECT count(*) FROM tether_search
           WHERE tsv @@ to_tsquery('english', t)
             AND (%(sources)s::text[] IS NULL OR source = ANY(%(sources)s)))
FROM unnest(%(terms)s::text[]) AS t WHERE numnode(to_tsquery('english', t)) > 0
"""
COUNT_SEARCH_SQL = """
SELECT count(*) FROM tether_search
WHERE %(sources)s::text[] IS NULL OR source = ANY(%(sources)s)
"""
#: Ranked by the sum over query words of idf(word) x ts_rank(doc, word, normalised by length):
#: BM25's idea (rare words weigh more; idf from per-word counts through the GIN index) on top
#: of PostgreSQL's per-word frequency ranking. (Full BM25 with tf from the tsvector's positions
#: ranked no better on `bench/backends.py` and was 4x slower.)
QUERY_SEARCH_SQL = """
SELECT doc_id, source, path, body, {score} AS score
FROM tether_search
WHERE tsv @@ to_tsquery('english', %(any)s)
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

CONNECT_TIMEOUT_S = 5
#: Words as the index splits them: runs of letters and digits (`auth_service` is two words).
ALNUM = re.compile(r"[^\W_]+")
POOL_MAX = 8


def redact(url: str) -> str:
    """`url` without its password (`postgresql://user:***@host/db`)."""
    return re.sub(r"(//[^:/@]+):[^@/]*@", r"\1:***@", url)


class PostgresBackend(BaseBackend):
    """The contract on PostgreSQL.

    Args:
        conn: an open `psycopg.Connection` or `psycopg_pool.ConnectionPool` (not closed here).
        url: the URL it was opened from, for messages (the password is never shown).
    """

    kind = "postgres"

    def __init__(self, conn: Any, *, url: str = "postgresql"):
        self._conn = conn
        self.url = redact(url)
        self._mutex = threading.RLock()
        self._pool = hasattr(conn, "connection") and not hasattr(conn, "cursor")
        if not self._pool and not conn.autocommit:
            conn.autocommit = True

    @classmethod
    @contextmanager
    def open(
        cls, url: str, *, setup: bool = True, schema: str | None = None
    ) -> Iterator[PostgresBackend]:
        """A pool on `url`; `setup=False` checks tether's tables instead of creating them."""
        import psycopg
        from psycopg_pool import ConnectionPool

        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S}
        if schema:
            kwargs["options"] = f"-c search_path={schema}"
        try:
            psycopg.connect(url, **kwargs).close()  # the real reason, if any, comes from here
        except (psycopg.Error, ValueError) as exc:
            lines = [ln.strip() for ln in str(exc).splitlines() if ln.strip()]
            reason = lines[0].removeprefix("connection failed: ") if lines else type(exc).__name__
            raise StorageError(
                f"cannot connect to {redact(url)!r} ({reason}); check the server, the user "
                "and the database name in --memory-url / TETHER_MEMORY_URL"
            ) from None
        pool = ConnectionPool(url, kwargs=kwargs, min_size=1, max_size=POOL_MAX, open=True)
        try:
            backend = cls(pool, url=url)
            backend.setup() if setup else backend.check_schema()
            yield backend
        finally:
            pool.close()

    @contextmanager
    def _tx(self) -> Iterator[Any]:
        import psycopg

        try:
            if self._pool:
                with self._conn.connection() as conn, conn.transaction():
                    yield conn
            else:
                with self._mutex, self._conn.transaction():
                    yield self._conn
        except psycopg.OperationalError as exc:
            raise StorageError(f"lost {self.url!r} ({str(exc).strip()}); retry") from None

    # -- schema --------------------------------------------------------------------
    def setup(self) -> None:
        with self._tx() as conn:
            conn.execute(XACT_LOCK_SQL, ("tether_setup",))
            conn.execute(CREATE_MIGRATIONS_SQL)
            done = {row[0] for row in conn.execute(APPLIED_SQL)}
            for name, script in MIGRATIONS:
                if name not in done:
                    for statement in script.split(";\n"):
                        conn.execute(statement)
                    conn.execute(RECORD_MIGRATION_SQL, (name,))

    def check_schema(self) -> None:
        """Refuse a database that lacks tether's tables or has another schema version."""
        with self._tx() as conn:
            if not conn.execute(HAS_MIGRATIONS_SQL).fetchone()[0]:
                raise StorageError(
                    f"{self.url!r} has no tether tables; run `memory --memory-url URL setup` "
                    "(or any writing command) first"
                )
            done = {row[0] for row in conn.execute(APPLIED_SQL)}
        known = {name for name, _ in MIGRATIONS}
        if done - known:
            raise StorageError(
                f"{self.url!r} has a newer tether schema ({', '.join(sorted(done - known))}); "
                "upgrade tether"
            )
        if known - done:
            raise StorageError(
                f"{self.url!r} has an older tether schema (missing "
                f"{', '.join(sorted(known - done))}); run `memory --memory-url URL setup`"
            )

    # -- documents -----------------------------------------------------------------
    def get_document(self, path: str) -> Document | None:
        check_doc_path(path)
        with self._tx() as conn:
            row = conn.execute(SELECT_DOC_SQL, (path,)).fetchone()
        if row is None or row[3]:
            return None
        data = bytes(row[0])
        return Document(path, row[1], row[2], len(data), data)

    def _locked_version(self, conn: Any, path: str) -> tuple[int, int]:
        conn.execute(XACT_LOCK_SQL, ("doc:" + path,))
        row = conn.execute(SELECT_DOC_SQL, (path,)).fetchone()
        if row is None:
            return 0, 0
        return (0 if row[3] else row[1]), row[1]

    def put_document(
        self, path: str, data: bytes, *, expected_version: int | None = None
    ) -> DocumentInfo:
        check_doc_path(path)
        if not isinstance(data, bytes | bytearray):
            raise InvalidInputError(f"document data must be bytes, not {type(data).__name__!r}")
        with self._tx() as conn:
            have, last = self._locked_version(conn, path)
            _check_version(path, have, expected_version)
            info = DocumentInfo(path, last + 1, time.time(), len(data))
            conn.execute(UPSERT_DOC_SQL, (path, bytes(data), info.version, info.mtime, False))
        return info

    def delete_document(self, path: str, *, expected_version: int | None = None) -> bool:
        check_doc_path(path)
        with self._tx() as conn:
            have, last = self._locked_version(conn, path)
            _check_version(path, have, expected_version)
            if not have:
                return False
            conn.execute(UPSERT_DOC_SQL, (path, None, last, time.time(), True))
        return True

    def list_documents(self, prefix: str = "") -> list[DocumentInfo]:
        with self._tx() as conn:
            rows = conn.execute(LIST_DOCS_SQL, (prefix,)).fetchall()
        return [DocumentInfo(r[0], r[1], r[2], r[3] or 0) for r in rows]

    # -- entries -------------------------------------------------------------------
    def log_entry(self, content, *, type="output", tags=(), directory=None) -> EntryRecord:
        rec, pieces = prepare_entry(content, type=type, tags=tags, directory=directory)
        row = (rec.id, rec.type, rec.tokens, rec.bytes, rec.chunks, rec.summary)
        with self._tx() as conn:
            conn.execute(INSERT_ENTRY_SQL, (*row, list(rec.tags), rec.directory, rec.created_at))
            for n, piece in enumerate(pieces):
                conn.execute(INSERT_CHUNK_SQL, (rec.id, n, piece.encode()))
        return rec

    def get_entry(self, entry_id: str) -> EntryRecord:
        with self._tx() as conn:
            row = conn.execute(SELECT_ENTRY_SQL, (entry_id,)).fetchone()
        if row is None:
            raise unknown_entry(entry_id)
        return _entry(row)

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

    def list_entries(self, *, type=None, tag=None, directory=None, limit=20) -> list[EntryRecord]:
        from memory.entries import normalize_directory

        if limit is not None and limit < 0:
            raise InvalidInputError(f"invalid limit {limit!r}: use 0 or a positive number")
        norm = normalize_directory(directory) if directory is not None else None
        params = {
            "type": type,
            "tag": tag,
            "dir": norm,
            "prefix": (norm.rstrip("/") + "/") if norm else None,
            "limit": limit,
        }
        with self._tx() as conn:
            return [_entry(r) for r in conn.execute(LIST_ENTRIES_SQL, params)]

    # -- search index --------------------------------------------------------------
    def index_upsert(self, docs: Sequence[SearchDoc]) -> None:
        for doc in docs:
            check_id(doc.doc_id, "document id")
            check_id(doc.source, "source")
        with self._tx() as conn:
            for doc in docs:
                meta = json.dumps(doc.meta, sort_keys=True)
                row = (doc.doc_id, doc.source, doc.path, meta, doc.text.replace("\x00", ""))
                conn.execute(UPSERT_SEARCH_SQL, row)

    def index_delete(self, doc_ids: Sequence[str]) -> int:
        with self._tx() as conn:
            return conn.execute(DELETE_SEARCH_SQL, (list(doc_ids),)).rowcount

    def index_query(self, query, *, sources=None, limit=10) -> list[SearchHit]:
        check_query(query, limit)  # the english stemmer folds word forms itself
        terms = list(dict.fromkeys(ALNUM.findall(query.lower())))
        if not terms:
            return []
        srcs = list(sources) if sources is not None else None
        with self._tx() as conn:
            stats = conn.execute(TERM_STATS_SQL, {"terms": terms, "sources": srcs}).fetchall()
            stats = [(t, df) for t, df in stats if df > 0 and t and " " not in t]
            if not stats:
                return []
            total = conn.execute(COUNT_SEARCH_SQL, {"sources": srcs}).fetchone()[0]
            params: dict[str, Any] = {"sources": srcs, "limit": limit}
            params["any"] = " | ".join(t for t, _ in stats)
            parts = []
            for i, (term, df) in enumerate(stats):
                params[f"t{i}"] = term
                params[f"w{i}"] = math.log(1 + (total - df + 0.5) / (df + 0.5))
                parts.append(TERM_SCORE_SQL.format(i=i))
            sql = QUERY_SEARCH_SQL.format(score=" + ".join(parts))
            rows = conn.execute(sql, params).fetchall()
        return [SearchHit(r[0], r[1], r[2], float(r[4]), r[3]) for r in rows]

    # -- tasks and registry --------------------------------------------------------
    def put_task(self, task: TaskRecord) -> TaskRecord:
        check_id(task.task_id, "task id")
        now, data = time.time(), json_text(task.data)
        with self._tx() as conn:
            conn.execute(UPSERT_TASK_SQL, (task.task_id, task.status, data, now))
        return TaskRecord(task.task_id, task.status, json.loads(data), now)

    def get_task(self, task_id: str) -> TaskRecord | None:
        with self._tx() as conn:
            row = conn.execute(SELECT_TASK_SQL, (task_id,)).fetchone()
        return None if row is None else TaskRecord(*row)

    def list_tasks(self) -> list[TaskRecord]:
        with self._tx() as conn:
            return [TaskRecord(*r) for r in conn.execute(LIST_TASKS_SQL)]

    def put_subagent(self, record: SubagentRecord) -> SubagentRecord:
        check_id(record.task_id, "task id")
        check_id(record.agent_id, "agent id")
        now, data = time.time(), json_text(record.data)
        row = (record.task_id, record.agent_id, record.status, data, now)
        with self._tx() as conn:
            conn.execute(XACT_LOCK_SQL, (f"agent:{record.task_id}:{record.agent_id}",))
            conn.execute(UPSERT_AGENT_SQL, row)
        return SubagentRecord(*row[:3], json.loads(data), now)

    def transition_subagent(self, task_id, agent_id, *, from_status, to_status, data=None):
        check_id(task_id, "task id")
        check_id(agent_id, "agent id")
        with self._tx() as conn:
            conn.execute(XACT_LOCK_SQL, (f"agent:{task_id}:{agent_id}",))
            row = conn.execute(SELECT_AGENT_SQL, (task_id, agent_id)).fetchone()
            if (row[0] if row else None) not in tuple(from_status):
                return False
            merged = dict(row[1]) if row else {}
            merged.update(data or {})
            conn.execute(
                UPSERT_AGENT_SQL, (task_id, agent_id, to_status, json_text(merged), time.time())
            )
        return True

    def list_subagents(self, task_id: str) -> list[SubagentRecord]:
        with self._tx() as conn:
            return [SubagentRecord(*r) for r in conn.execute(LIST_AGENTS_SQL, (task_id,))]

    # -- lock ----------------------------------------------------------------------
    def acquire_lock(self, task_id: str, owner: str, *, ttl: float = 60.0) -> bool:
        check_id(task_id, "task id")
        check_id(owner, "lock owner")
        with self._tx() as conn:
            conn.execute(XACT_LOCK_SQL, ("lock:" + task_id,))
            now = time.time()
            row = conn.execute(SELECT_LOCK_SQL, (task_id,)).fetchone()
            if row and row[0] != owner and row[1] > now:
                return False
            conn.execute(UPSERT_LOCK_SQL, (task_id, owner, now + ttl))
        return True

    def release_lock(self, task_id: str, owner: str) -> bool:
        with self._tx() as conn:
            return conn.execute(DELETE_LOCK_SQL, (task_id, owner)).rowcount > 0

    def get_lock(self, task_id: str) -> LockInfo | None:
        with self._tx() as conn:
            row = conn.execute(SELECT_LOCK_SQL, (task_id,)).fetchone()
        if row is None or row[1] <= time.time():
            return None
        return LockInfo(task_id, row[0], row[1])


def _check_version(path: str, have: int, expected: int | None) -> None:
    if expected is not None and expected != have:
        raise ConflictError(
            f"{path!r} is at version {have}, not {expected}; read it again and retry"
        )


def _entry(row: Any) -> EntryRecord:
    return EntryRecord(
        id=row[0],
        type=row[1],
        tokens=row[2],
        bytes=row[3],
        chunks=row[4],
        summary=row[5],
        tags=tuple(row[6]),
        directory=row[7],
        created_at=row[8],
    )
