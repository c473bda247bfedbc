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
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from memory.backends._postgres_documents import DocumentsMixin, retried
from memory.backends._postgres_lock import LockKeeper
from memory.backends._postgres_retry import (
    NOT_LANDED,
    lost_errors,
    make_pool,
    reason_of,
    retrying,
)
from memory.backends._postgres_search import (
    ALNUM,
    COMMON_DF,
    PART_ID,
    PARTS_SLACK,
    CountCache,
    candidate_query,
)
from memory.backends._postgres_sql import (
    APPLIED_SQL,
    ASYNC_COMMIT_SQL,
    CLEAR_SEARCH_SQL,
    COUNT_PRUNED_SQL,
    COUNT_SEARCH_SQL,
    CREATE_MIGRATIONS_SQL,
    DELETE_ENTRY_SEARCH_SQL,
    DELETE_ENTRY_SQL,
    DELETE_LOCK_SQL,
    DELETE_SEARCH_SQL,
    ENTRY_COLUMNS,
    ENTRY_KNOWN_SQL,
    ESTIMATE_SEARCH_SQL,
    FLUSH_SQL,
    HAS_MIGRATIONS_SQL,
    HAS_THREAD_SQL,
    INSERT_CHUNK_SQL,
    INSERT_ENTRY_SQL,
    INSERT_TOMBSTONE_SQL,
    LIST_AGENTS_SQL,
    LIST_DOC_DATA_SQL,
    LIST_ENTRIES_SQL,
    LIST_TASKS_SQL,
    MIGRATIONS,
    PRUNE_RECEIPTS_SQL,
    QUERY_SEARCH_SQL,
    RECORD_MIGRATION_SQL,
    SELECT_AGENT_SQL,
    SELECT_CHUNK_SQL,
    SELECT_CHUNKS_SQL,
    SELECT_ENTRY_SQL,
    SELECT_LOCK_SQL,
    SELECT_TASK_SQL,
    TERM_SCORE_SQL,
    TERM_STATS_SQL,
    UPSERT_AGENT_SQL,
    UPSERT_LOCK_SQL,
    UPSERT_TASK_SQL,
    XACT_LOCK_SQL,
)
from memory.backends.blocks import document_docs, entry_docs
from memory.backends.savers import CONNECT_TIMEOUT_S, open_postgres_saver, pg_connect, redact
from memory.base import (
    BaseBackend,
    IndexReport,
    LockInfo,
    SearchDoc,
    SearchHit,
    StorageError,
    SubagentRecord,
    TaskRecord,
    check_chunk,
    check_id,
    check_limit,
    check_query,
    json_text,
    unknown_entry,
)
from memory.entries import Entry, normalize_directory, pieces, prepare_entry, tier_of

T = TypeVar("T")
POOL_MAX = 8
#: An `index_upsert` of this many rows is a bulk load: the GIN pending list is merged after.
BULK_ROWS = 500
MERGE_PENDING_SQL = "SELECT gin_clean_pending_list('tether_search_tsv'::regclass)"


class PostgresBackend(DocumentsMixin, BaseBackend):
    """The contract on PostgreSQL.

    Args:
        conn: an open `psycopg.Connection` or `psycopg_pool.ConnectionPool` (not closed here).
        url: the URL it was opened from, for messages (the password is never shown).
    """

    kind = "postgres"

    def __init__(self, conn: Any, *, url: str = "postgresql"):
        self._conn = conn
        self.url = redact(url)
        self._conninfo = url
        self._connect_kwargs: dict[str, Any] = {}
        self._counts = CountCache()
        self._mutex = threading.RLock()
        self._pool = hasattr(conn, "connection") and not hasattr(conn, "cursor")
        self._owned: Any = None
        self._saver: Any = None
        if not self._pool and not conn.autocommit:
            conn.autocommit = True

    @property
    def location(self) -> str:
        return self.url

    @classmethod
    def from_url(
        cls, url: str, *, setup: bool = True, schema: str | None = None
    ) -> PostgresBackend:
        """A backend owning a pool on `url` (closed by `close()`).

        `setup=False` checks tether's tables instead of creating them.
        """
        kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": CONNECT_TIMEOUT_S}
        if schema:
            kwargs["options"] = f"-c search_path={schema}"
        pg_connect(url, **kwargs, row_factory=None).close()  # the real reason, if any, is here
        pool = make_pool(url, kwargs, max_size=POOL_MAX)
        backend = cls(pool, url=url)
        backend._owned = pool
        backend._connect_kwargs = kwargs
        try:
            backend.setup() if setup else backend.check_schema()
        except BaseException:
            pool.close()
            raise
        return backend

    @classmethod
    @contextmanager
    def open(
        cls, url: str, *, setup: bool = True, schema: str | None = None
    ) -> Iterator[PostgresBackend]:
        """`from_url(url)` as a context manager."""
        backend = cls.from_url(url, setup=setup, schema=schema)
        try:
            yield backend
        finally:
            backend.close()

    def close(self) -> None:
        if self._saver is not None:
            self._saver.conn.close()
            self._saver = None
        if self._owned is not None:
            self._owned.close()
            self._owned = None

    @contextmanager
    def mutex(self, name: str, *, timeout: float = 60.0) -> Iterator[None]:
        """A session advisory lock, held on a connection of its own for the block: the server
        drops it when the holder's connection ends, so a crashed process never leaves it
        held; a live holder whose connection ends takes it again (`LockKeeper`)."""
        keeper = LockKeeper(self._new_connection, name, self.url)
        self._retry(lambda: keeper.take(timeout))
        try:
            yield
        finally:
            keeper.release()

    def _new_connection(self) -> Any:
        return pg_connect(self._conninfo, **{**self._connect_kwargs, "row_factory": None})

    def checkpointer(self) -> Any:
        """LangGraph's `PostgresSaver` on its own connection (set up; closed by `close()`)."""
        if self._saver is None:
            self._saver = open_postgres_saver(self._conninfo, **self._connect_kwargs)
        return self._saver

    @retried
    def holds_thread(self, thread_id: str) -> bool:
        """One query on `PostgresSaver`'s table (absent before the first run: False)."""
        import psycopg

        try:
            with self._tx() as conn:
                return conn.execute(HAS_THREAD_SQL, (thread_id,)).fetchone() is not None
        except (psycopg.errors.UndefinedTable, StorageError):
            return False

    @contextmanager
    def _tx(self, *, lock: str | None = None) -> Iterator[Any]:
        """One transaction. With `lock`, writers of that name serialise on an advisory lock
        that the commit releases without waiting for the disk; the call returns once a
        synchronous commit of this session's own has flushed the WAL past it (`FLUSH_SQL`),
        so concurrent writers of one log share disk flushes instead of queueing for them."""
        with self._connection() as conn:
            with conn.transaction():
                if lock is not None:
                    conn.execute(ASYNC_COMMIT_SQL)
                    conn.execute(XACT_LOCK_SQL, (lock,))
                yield conn
            if lock is not None:
                conn.execute(FLUSH_SQL)

    def _retry(self, call: Callable[[], T], landed: Callable[[], Any] | None = None) -> T:
        """`call()` through `retrying` (a pool reconnects); on a connection of the caller's
        own, a lost connection is one `StorageError` at once."""
        if self._pool:
            return retrying(call, url=self.url, landed=landed, pool=self._conn)
        try:
            return call()
        except lost_errors() as exc:
            raise StorageError(f"lost {self.url!r} ({reason_of(exc)})") from None

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        if self._pool:
            with self._conn.connection() as conn:
                yield conn
        else:
            with self._mutex:
                yield self._conn

    # -- schema --------------------------------------------------------------------
    @retried
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
            conn.execute(PRUNE_RECEIPTS_SQL, (time.time() - 86400,))

    @retried
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

    # -- entries -------------------------------------------------------------------
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

    # -- search index --------------------------------------------------------------
    @retried
    def index_upsert(self, docs: Sequence[SearchDoc]) -> None:
        for doc in docs:
            check_id(doc.doc_id, "document id")
            check_id(doc.source, "source")
        with self._tx() as conn:
            self._insert_search(conn, docs)
        if len(docs) >= BULK_ROWS:
            self._merge_pending()

    def _merge_pending(self) -> None:
        """Move the GIN index's pending list into the index after a bulk load, so searches
        do not scan it row by row until autovacuum does this (appends leave it alone: a
        merge inside an append would hold up every writer of that log)."""
        import psycopg

        try:
            with self._connection() as conn:
                conn.execute(MERGE_PENDING_SQL)
        except psycopg.errors.InsufficientPrivilege:
            pass  # another role owns the index: autovacuum merges it in time

    @retried
    def index_delete(self, doc_ids: Sequence[str]) -> int:
        with self._tx() as conn:
            return conn.execute(DELETE_SEARCH_SQL, (list(doc_ids),)).rowcount

    @retried
    def index_query(self, query, *, sources=None, limit=10) -> list[SearchHit]:
        check_query(query, limit)  # the english stemmer folds word forms itself
        terms = list(dict.fromkeys(ALNUM.findall(query.lower())))
        if not terms:
            return []
        srcs = list(sources) if sources is not None else None
        key = tuple(srcs) if srcs is not None else None
        with self._tx() as conn:
            known = {t: self._counts.get((key, t)) for t in terms}
            todo = [t for t in terms if known[t] is None]
            if todo:
                found = conn.execute(TERM_STATS_SQL, {"terms": todo, "sources": srcs}).fetchall()
                for term, lexeme, df in found:
                    known[term] = (lexeme, df)
                    self._counts.put((key, term), (lexeme, df), large=df > COMMON_DF)
            got = [known[t] for t in terms]
            usable = (g for g in got if g and g[1] > 0 and g[0] and " " not in g[0])
            stats = sorted(dict.fromkeys(usable), key=lambda s: s[1])
            if not stats:
                return []
            total = self._counts.get((key, None))
            if total is None:
                total = self._search_rows(conn, srcs)
                self._counts.put((key, None), total, large=total > COMMON_DF)
            params: dict[str, Any] = {"sources": srcs, "limit": limit + PARTS_SLACK}
            params["candidates"] = candidate_query([t for t, _ in stats], [df for _, df in stats])
            parts = []
            for i, (term, df) in enumerate(stats):
                params[f"t{i}"] = term
                params[f"w{i}"] = math.log(1 + max(total - df, 0.5) / (df + 0.5))
                parts.append(TERM_SCORE_SQL.format(i=i))
            sql = QUERY_SEARCH_SQL.format(score=" + ".join(parts))
            rows = conn.execute(sql, params).fetchall()
        hits: dict[str, SearchHit] = {}
        for r in rows:  # the parts of one long text are one hit, its best part
            doc_id = PART_ID.sub("", r[0])
            hits.setdefault(doc_id, SearchHit(doc_id, r[1], r[2], float(r[4]), r[3]))
        return list(hits.values())[:limit]

    @staticmethod
    def _search_rows(conn: Any, sources: list[str] | None) -> int:
        """Rows searched (for idf): the planner's estimate of a large table, else a count."""
        if sources is None:
            estimate = conn.execute(ESTIMATE_SEARCH_SQL).fetchone()[0] or 0
            if estimate >= COMMON_DF:
                return int(estimate)
        return conn.execute(COUNT_SEARCH_SQL, {"sources": sources}).fetchone()[0]

    @retried
    def reindex(self) -> IndexReport:
        """Rebuild the search index from the documents and entries (one transaction)."""
        report = IndexReport()
        with self._tx() as conn:
            conn.execute(XACT_LOCK_SQL, ("tether_reindex",))
            conn.execute(CLEAR_SEARCH_SQL)
            for path, data, appended in conn.execute(LIST_DOC_DATA_SQL).fetchall():
                docs = document_docs(path, bytes(data or b"") + bytes(appended or b""))
                self._insert_search(conn, docs)
                report.files_indexed += 1 if docs else 0
                report.rows_added += len(docs)
            for row in conn.execute(f"SELECT {ENTRY_COLUMNS} FROM tether_entries").fetchall():
                entry = _entry(row)
                chunks = conn.execute(SELECT_CHUNKS_SQL, (entry.id,)).fetchall()
                docs = entry_docs(entry, [bytes(c[0]).decode() for c in chunks])
                self._insert_search(conn, docs)
                report.entries_added += 1
                report.rows_added += len(docs)
        report.rows_total = report.rows_added
        self._merge_pending()
        return report

    # -- tasks and registry --------------------------------------------------------
    @retried
    def put_task(self, task: TaskRecord) -> TaskRecord:
        check_id(task.task_id, "task id")
        now, data = time.time(), json_text(task.data)
        with self._tx() as conn:
            conn.execute(UPSERT_TASK_SQL, (task.task_id, task.status, data, now))
        return TaskRecord(task.task_id, task.status, json.loads(data), now)

    @retried
    def get_task(self, task_id: str) -> TaskRecord | None:
        with self._tx() as conn:
            row = conn.execute(SELECT_TASK_SQL, (task_id,)).fetchone()
        return None if row is None else TaskRecord(*row)

    @retried
    def list_tasks(self) -> list[TaskRecord]:
        with self._tx() as conn:
            return [TaskRecord(*r) for r in conn.execute(LIST_TASKS_SQL)]

    @retried
    def put_subagent(self, record: SubagentRecord) -> SubagentRecord:
        check_id(record.task_id, "task id")
        check_id(record.agent_id, "agent id")
        now, data = time.time(), json_text(record.data)
        row = (record.task_id, record.agent_id, record.status, data, now)
        with self._tx(lock=f"agent:{record.task_id}:{record.agent_id}") as conn:
            conn.execute(UPSERT_AGENT_SQL, row)
        return SubagentRecord(*row[:3], json.loads(data), now)

    def transition_subagent(self, task_id, agent_id, *, from_status, to_status, data=None):
        check_id(task_id, "task id")
        check_id(agent_id, "agent id")

        def landed() -> Any:
            with self._tx() as conn:
                row = conn.execute(SELECT_AGENT_SQL, (task_id, agent_id)).fetchone()
            return True if row and row[0] == to_status else NOT_LANDED

        return self._retry(
            lambda: self._transition(task_id, agent_id, from_status, to_status, data), landed
        )

    def _transition(self, task_id, agent_id, from_status, to_status, data) -> bool:
        with self._tx(lock=f"agent:{task_id}:{agent_id}") as conn:
            row = conn.execute(SELECT_AGENT_SQL, (task_id, agent_id)).fetchone()
            if (row[0] if row else None) not in tuple(from_status):
                return False
            merged = dict(row[1]) if row else {}
            merged.update(data or {})
            conn.execute(
                UPSERT_AGENT_SQL, (task_id, agent_id, to_status, json_text(merged), time.time())
            )
        return True

    @retried
    def list_subagents(self, task_id: str) -> list[SubagentRecord]:
        with self._tx() as conn:
            return [SubagentRecord(*r) for r in conn.execute(LIST_AGENTS_SQL, (task_id,))]

    # -- lock ----------------------------------------------------------------------
    @retried
    def acquire_lock(self, task_id: str, owner: str, *, ttl: float = 60.0) -> bool:
        check_id(task_id, "task id")
        check_id(owner, "lock owner")
        with self._tx(lock="lock:" + task_id) as conn:
            now = time.time()
            row = conn.execute(SELECT_LOCK_SQL, (task_id,)).fetchone()
            if row and row[0] != owner and row[1] > now:
                return False
            conn.execute(UPSERT_LOCK_SQL, (task_id, owner, now + ttl))
        return True

    @retried
    def release_lock(self, task_id: str, owner: str) -> bool:
        with self._tx() as conn:
            return conn.execute(DELETE_LOCK_SQL, (task_id, owner)).rowcount > 0

    @retried
    def get_lock(self, task_id: str) -> LockInfo | None:
        with self._tx() as conn:
            row = conn.execute(SELECT_LOCK_SQL, (task_id,)).fetchone()
        if row is None or row[1] <= time.time():
            return None
        return LockInfo(task_id, row[0], row[1])


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
