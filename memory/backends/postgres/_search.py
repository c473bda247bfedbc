"""Search on PostgreSQL: the index's rows, which of them to rank, and the row counts that
weigh the words.

`SearchMixin` is a mixin of `PostgresBackend` (it brings `_tx`, `_connection`, `_retry`,
`_insert_search` and `_counts`, a `CountCache`).
"""

from __future__ import annotations

import json
import logging
import math
import re
import threading
import time
from collections.abc import Sequence
from typing import Any

from memory.backends.blocks import document_docs, entry_docs, indexed_source, message_docs
from memory.backends.postgres._documents import retried
from memory.backends.postgres._entries import _entry
from memory.backends.postgres._sql import (
    ASYNC_COMMIT_SQL,
    CLEAR_MARKS_SQL,
    CLEAR_SEARCH_SQL,
    COUNT_SEARCH_SQL,
    DELETE_SEARCH_SQL,
    ENTRY_COLUMNS,
    ESTIMATE_SEARCH_SQL,
    LIST_DOC_DATA_SQL,
    PENDING_LOGS_SQL,
    QUERY_SEARCH_SQL,
    SELECT_CHUNKS_SQL,
    SELECT_MARK_SQL,
    TERM_SCORE_SQL,
    TERM_STATS_SQL,
    UPDATE_MARK_SQL,
    UPSERT_MARK_SQL,
    XACT_LOCK_SQL,
)
from memory.contract.base import IndexReport, SearchDoc, SearchHit, check_id, check_query
from memory.search.recall import SOURCE_WEIGHTS

log = logging.getLogger("tether.postgres")

#: Words as the index splits them: runs of letters and digits (`auth_service` is two words).
ALNUM = re.compile(r"[^\W_]+")
#: A word in more rows than this is common: its rows are candidates only beside another word.
COMMON_DF = 5000
#: A search row of a part of a long text (`search_parts`): `...#p2#L12` is `...#L12`.
PART_ID = re.compile(r"#p\d+(?=#L\d+$|$)")
#: Rows fetched beyond the limit, so parts of one text collapsing into one hit leave enough.
PARTS_SLACK = 8
#: Seconds a common word's row count (and the table's) is reused (`CountCache`).
COUNT_TTL_S = 10.0
#: Common words paired with each other among the candidates (the rarest of them first).
MAX_PAIRED = 4
#: An `index_upsert` of this many rows is a bulk load: the GIN pending list is merged after.
BULK_ROWS = 500
#: What a match weighs by its view (`memory.search.recall.SOURCE_WEIGHTS`), as
#: `QUERY_SEARCH_SQL` reads it.
WEIGHTS_JSON = json.dumps(SOURCE_WEIGHTS)
#: Seconds between the merges of the GIN pending list that searches start (`PendingMerges`).
MERGE_EVERY_S = 1.0


def candidate_query(lexemes: list[str], dfs: list[int]) -> str:
    """The `to_tsquery` text of the rows worth ranking for `lexemes` (rarest first, with
    their document counts): any of the rare words, taken while their counts add up to at
    most `COMMON_DF`, or any two of the next words together. Ranking every row holding a
    common word is what made a search cost seconds on a large table; a row holding only one
    common word ranks below these anyway."""
    rare, budget = [], 0
    for lexeme, df in zip(lexemes, dfs, strict=True):
        if rare and budget + df > COMMON_DF:
            break
        rare.append(lexeme)
        budget += df
    common = lexemes[len(rare) :][:MAX_PAIRED]
    pairs = [f"({a} & {b})" for i, a in enumerate(common) for b in common[i + 1 :]]
    return " | ".join(rare + pairs)


class CountCache:
    """Row counts of common words (and of the whole table) for `COUNT_TTL_S` seconds.

    Counting the rows of a word in thousands of them walks every one (a GIN index cannot
    answer a count from the index alone): 5 ms of a 10 ms search at 16K messages. A common
    word's count, and so its weight, hardly moves in seconds; a rare word is counted at
    every search (it is cheap, and a new row changes its weight).
    """

    def __init__(self) -> None:
        self._items: dict[Any, tuple[float, Any]] = {}
        self._lock = threading.Lock()

    def get(self, key: Any) -> Any:
        with self._lock:
            item = self._items.get(key)
        if item is None or time.monotonic() - item[0] > COUNT_TTL_S:
            return None
        return item[1]

    def put(self, key: Any, value: Any, *, large: bool) -> None:
        if not large:
            return
        with self._lock:
            if len(self._items) > 10_000:
                self._items.clear()
            self._items[key] = (time.monotonic(), value)


class PendingMerges:
    """When a search first merges the GIN index's pending list: at most once every
    `MERGE_EVERY_S` seconds per backend, and never again once the server refused (another
    role owns the index, a standby).

    Appends leave their search rows in the pending list (a merge inside an append would
    hold up every writer of the log), which every search scans row by row: with 16K
    messages pending, a word's count took 5.3 ms by a sequential scan against 0.04 ms
    through the merged index. A merge costs about 5 us a row, once.
    """

    def __init__(self) -> None:
        self._next = 0.0
        self.refused = False
        self._lock = threading.Lock()

    def due(self) -> bool:
        now = time.monotonic()
        with self._lock:
            if self.refused or now < self._next:
                return False
            self._next = now + MERGE_EVERY_S
            return True


class SearchMixin:
    """`index_upsert/delete/query` and `reindex` for `PostgresBackend`."""

    #: The merge of the GIN index's pending list into the index (`_merge_pending`).
    MERGE_PENDING_SQL = "SELECT gin_clean_pending_list('tether_search_tsv'::regclass)"
    #: Bytes of a log a search indexes per transaction (`_index_log`), so that a log appended
    #: to for hours without a search is indexed in steps, not read into memory whole.
    INDEX_WINDOW = 4 << 20

    _tx: Any
    _connection: Any
    _retry: Any
    _insert_search: Any
    _counts: CountCache
    _merges: PendingMerges
    _read: Any
    _marks_refused: bool

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
        """Move the GIN index's pending list into the index (after a bulk load, and before
        a search once a second: `PendingMerges`), so searches do not scan it row by row
        until autovacuum does this (appends leave it alone: a merge inside an append would
        hold up every writer of that log)."""
        import psycopg

        try:
            with self._connection() as conn:
                conn.execute(self.MERGE_PENDING_SQL)
        except (
            psycopg.errors.InsufficientPrivilege,  # another role owns the index
            psycopg.errors.ObjectNotInPrerequisiteState,  # a standby: recovery in progress
        ):
            self._merges.refused = True  # autovacuum merges it in time

    def _index_pending_logs(self) -> None:
        """Index the lines appended to searched logs after their marks (appends leave that
        to the next search, as on the files backend: `M006_LOG_MARKS`). A role that may not
        write searches what is indexed already, and is told so once."""
        import psycopg

        if self._marks_refused:
            return
        try:
            with self._connection() as conn:
                paths = [row[0] for row in conn.execute(PENDING_LOGS_SQL).fetchall()]
            for path in paths:
                while self._index_log(path):
                    pass
        except (psycopg.errors.InsufficientPrivilege, psycopg.errors.ReadOnlySqlTransaction) as exc:
            self._marks_refused = True
            log.warning(
                "%s: cannot index the newest log lines (%s); searches miss them until a "
                "process that may write searches",
                self.url,  # type: ignore[attr-defined]
                str(exc).strip().splitlines()[0],
            )

    def _index_log(self, path: str) -> bool:
        """Index the whole lines of `path` in about `INDEX_WINDOW` bytes after its mark and
        move the mark past them, in one transaction (a crash loses both, and the next search
        does it again); True when more lines wait. The mark's row is locked first: searchers
        of one log take turns (the second finds the work done), and a rewrite of the log
        cannot slip between reading the mark and the lines."""
        with self._tx() as conn:
            conn.execute(ASYNC_COMMIT_SQL)
            mark = conn.execute(SELECT_MARK_SQL, (path,)).fetchone()
            if mark is None:
                return False
            lines, offset = mark
            data, size = self._read_window(conn, path, offset, self.INDEX_WINDOW)
            end = data.rfind(b"\n") + 1
            if not end and offset + len(data) < size:  # one line longer than the window
                doc = self._read(conn, path, offset)
                data = doc.data if doc is not None else b""
                end = data.rfind(b"\n") + 1
            if not end:
                return False
            new = data[:end].split(b"\n")[:-1]
            self._insert_search(conn, message_docs(path, list(enumerate(new, start=lines + 1))))
            conn.execute(UPDATE_MARK_SQL, (lines + len(new), offset + end, path))
        return offset + end < size

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
        if srcs is None or "messages" in srcs:
            self._index_pending_logs()
        if self._merges.due():
            self._merge_pending()
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
            params["weights"] = WEIGHTS_JSON
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
            conn.execute(CLEAR_MARKS_SQL)
            for path, data, appended in conn.execute(LIST_DOC_DATA_SQL).fetchall():
                whole = bytes(data or b"") + bytes(appended or b"")
                docs = document_docs(path, whole)
                self._insert_search(conn, docs)
                if path.endswith(".jsonl") and indexed_source(path):  # lines after: later
                    end = whole.rfind(b"\n") + 1
                    conn.execute(UPSERT_MARK_SQL, (path, whole[:end].count(b"\n"), end))
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
