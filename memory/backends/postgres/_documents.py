"""Documents on PostgreSQL: reads, whole writes, appends to logs, and their search rows.

A mixin of `PostgresBackend` (it brings `_tx`, `_connection` and `_retry`). A document is a
row of `tether_documents` (its base value) followed by the parts that appends added
(`tether_document_parts`). Every call runs again on a lost connection (`_retry`); writes
that are not idempotent ask first whether they landed: an append by its receipt, a whole
write by comparing what is stored.
"""

from __future__ import annotations

import functools
import json
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Any

from memory.backends.blocks import document_docs, indexed_source, message_docs
from memory.backends.postgres._sql import (
    APPEND_CALL_SQL,
    APPEND_DOC_SQL,
    DELETE_MARK_SQL,
    DELETE_PARTS_SQL,
    DELETE_PATH_SEARCH_SQL,
    FLUSH_SQL,
    INSERT_PART_SQL,
    INSERT_RECEIPT_SQL,
    LIST_DOCS_SQL,
    SELECT_BASE_WINDOW_SQL,
    SELECT_DOC_SQL,
    SELECT_LOG_SQL,
    SELECT_PARTS_SQL,
    SELECT_PARTS_WINDOW_SQL,
    SELECT_RECEIPT_SQL,
    SELECT_VERSION_SQL,
    STAT_DOC_SQL,
    UPSERT_DOC_SQL,
    UPSERT_SEARCH_SQL,
)
from memory.backends.postgres.connections import NOT_LANDED
from memory.contract.base import (
    Document,
    DocumentInfo,
    SearchDoc,
    check_data,
    check_doc_path,
    check_version,
    encode_lines,
    lines_before,
)

#: Characters of one search row: a `tsvector` holds at most 1 MB, which a message of a few
#: MB of distinct words exceeds; a longer text is indexed as several rows (every word stays
#: findable, each row cites the same line).
PART_CHARS = 200_000


def search_parts(doc_id: str, text: str) -> list[tuple[str, str]]:
    """`(doc_id, text)` rows for one search document: itself when short, else parts cut at
    whitespace, the first keeping `doc_id` and the others `...#p2#L12` (still citing L12)."""
    if len(text) <= PART_CHARS:
        return [(doc_id, text)]
    head, _, line = doc_id.rpartition("#L") if "#L" in doc_id else (doc_id, "", "")
    parts, start = [], 0
    while start < len(text):
        end = min(start + PART_CHARS, len(text))
        if end < len(text):
            cut = text.rfind(" ", start + PART_CHARS // 2, end)
            end = cut + 1 if cut > 0 else end
        parts.append(text[start:end])
        start = end
    suffix = f"#L{line}" if line else ""
    return [
        (doc_id if k == 0 else f"{head}#p{k + 1}{suffix}", part) for k, part in enumerate(parts)
    ]


def retried(method: Callable[..., Any]) -> Callable[..., Any]:
    """Run `method` again on a lost connection (for calls that are safe to repeat)."""

    @functools.wraps(method)
    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        return self._retry(lambda: method(self, *args, **kwargs))

    return call


class DocumentsMixin:
    """`get/put/append/delete/list` documents for `PostgresBackend`."""

    _tx: Any
    _connection: Any
    _retry: Any

    @retried
    def get_document(self, path: str, *, offset: int = 0) -> Document | None:
        check_doc_path(path)
        with self._tx() as conn:
            return self._read(conn, path, offset)

    @staticmethod
    def _read(conn: Any, path: str, offset: int) -> Document | None:
        """The document at `path` from byte `offset`: its base value, then the parts that
        appends added (only those that end after `offset`)."""
        row = conn.execute(SELECT_DOC_SQL, (offset + 1, path)).fetchone()
        if row is None or row[3]:
            return None
        data, size, base = bytes(row[0] or b""), row[4] or 0, row[5] or 0
        if size > base:  # appended parts follow the base value
            pieces = [data]
            for start, part in conn.execute(SELECT_PARTS_SQL, (path, offset)).fetchall():
                pieces.append(bytes(part)[max(0, offset - start) :])
            data = b"".join(pieces)
        return Document(path, row[1], row[2], size, data)

    @staticmethod
    def _read_window(conn: Any, path: str, offset: int, limit: int) -> tuple[bytes, int]:
        """About `limit` bytes of the document at `path` from byte `offset` (the parts that
        start inside the window whole, so often a little more), and the document's size
        (0 when it is absent or deleted)."""
        row = conn.execute(SELECT_BASE_WINDOW_SQL, (offset + 1, limit, path)).fetchone()
        if row is None or row[3]:
            return b"", 0
        pieces, base, size = [bytes(row[0] or b"")], row[1] or 0, row[2] or 0
        since = max(offset, base)
        if since < offset + limit and size > base:
            for start, part in conn.execute(
                SELECT_PARTS_WINDOW_SQL, (path, since, offset + limit)
            ).fetchall():
                pieces.append(bytes(part)[max(0, since - start) :])
        return b"".join(pieces), size

    @retried
    def stat_document(self, path: str) -> DocumentInfo | None:
        check_doc_path(path)
        with self._tx() as conn:
            row = conn.execute(STAT_DOC_SQL, (path,)).fetchone()
        if row is None or row[2]:
            return None
        return DocumentInfo(path, row[0], row[1], row[3] or 0)

    @retried
    def list_documents(self, prefix: str = "") -> list[DocumentInfo]:
        with self._tx() as conn:
            rows = conn.execute(LIST_DOCS_SQL, (prefix,)).fetchall()
        return [DocumentInfo(r[0], r[1], r[2], r[3] or 0) for r in rows]

    # -- whole writes --------------------------------------------------------------------
    def put_document(
        self, path: str, data: bytes, *, expected_version: int | None = None
    ) -> DocumentInfo:
        check_doc_path(path)
        data = check_data(data)

        def landed() -> Any:
            with self._tx() as conn:
                doc = self._read(conn, path, 0)
            if doc is None or doc.data != data:
                return NOT_LANDED
            if expected_version is not None and doc.version != expected_version + 1:
                return NOT_LANDED
            return DocumentInfo(path, doc.version, doc.mtime, len(data))

        return self._retry(lambda: self._put(path, data, expected_version), landed)

    def _put(self, path: str, data: bytes, expected_version: int | None) -> DocumentInfo:
        with self._tx(lock="doc:" + path) as conn:
            have, last = self._locked_version(conn, path)
            check_version(path, have, expected_version)
            info = DocumentInfo(path, last + 1, time.time(), len(data))
            self._replace(conn, path, data, info.version, info.mtime)
            self._reindex_document(conn, path, data)
        return info

    @retried
    def delete_document(self, path: str, *, expected_version: int | None = None) -> bool:
        check_doc_path(path)
        with self._tx(lock="doc:" + path) as conn:
            have, last = self._locked_version(conn, path)
            check_version(path, have, expected_version)
            if not have:
                return False
            self._replace(conn, path, None, last, time.time())
            self._reindex_document(conn, path, None)
        return True

    @staticmethod
    def _locked_version(conn: Any, path: str) -> tuple[int, int]:
        row = conn.execute(SELECT_VERSION_SQL, (path,)).fetchone()
        if row is None:
            return 0, 0
        return (0 if row[1] else row[0]), row[0]

    @staticmethod
    def _replace(conn: Any, path: str, data: bytes | None, version: int, mtime: float) -> None:
        """Make `data` the whole document (None: deleted), dropping appended parts and the
        log's search mark (its caller indexes what it wrote)."""
        conn.execute(DELETE_PARTS_SQL, (path,))
        conn.execute(DELETE_MARK_SQL, (path,))
        size = len(data) if data is not None else 0
        open_tail = bool(data) and not data.endswith(b"\n")
        lines = lines_before(data) if data is not None else 0
        conn.execute(
            UPSERT_DOC_SQL, (path, data, version, mtime, data is None, lines, size, open_tail)
        )

    # -- appends -------------------------------------------------------------------------
    def append_lines(self, path: str, lines: Sequence[bytes | str]) -> int:
        check_doc_path(path)
        payload = encode_lines(lines)
        token = secrets.token_hex(12)  # this call's receipt, the same on every attempt

        def landed() -> Any:
            with self._connection() as conn:
                row = conn.execute(SELECT_RECEIPT_SQL, (token,)).fetchone()
                if row is not None:
                    conn.execute(FLUSH_SQL)  # what landed is on disk before we say so
            return NOT_LANDED if row is None else row[0]

        def attempt() -> int:
            from psycopg.errors import UniqueViolation  # the `postgres` extra's

            try:
                return self._append(path, payload, token)
            except UniqueViolation as exc:
                # the receipt is there: an attempt the lost connection hid committed after
                # `landed` looked (the server finishes a statement its client left)
                if exc.diag.constraint_name != "tether_receipts_pkey":
                    raise
                first = landed()
                if first is NOT_LANDED:
                    raise
                return first

        return self._retry(attempt, landed)

    def _append(self, path: str, payload: bytes, token: str) -> int:
        if path.endswith(".jsonl"):
            first = self._fast_append(path, payload, token)
            if first is not None:
                return first
        with self._tx(lock="doc:" + path) as conn:
            row = conn.execute(SELECT_LOG_SQL, (path,)).fetchone()
            if row is None or row[1]:  # a new (or deleted) document starts at line 1
                self._replace(conn, path, payload, (row[0] if row else 0) + 1, time.time())
                first = 1
            else:
                count = row[2] if row[2] is not None else lines_before(bytes(row[5] or b""))
                first = count + 1
                if row[4]:
                    payload = b"\n" + payload  # close a torn line: it keeps its number
                new_count = count + payload.count(b"\n") - (1 if row[4] else 0)
                conn.execute(INSERT_PART_SQL, (path, row[3], payload))
                conn.execute(APPEND_DOC_SQL, (time.time(), new_count, row[3] + len(payload), path))
            conn.execute(INSERT_RECEIPT_SQL, (token, first, time.time()))
            if path.endswith(".jsonl"):  # a log: index only its new lines, if searched
                new = payload.lstrip(b"\n").split(b"\n")[:-1] if indexed_source(path) else []
                self._insert_search(conn, message_docs(path, list(enumerate(new, start=first))))
            else:
                self._reindex_document(conn, path, self._read(conn, path, 0).data)
        return first

    def _fast_append(self, path: str, payload: bytes, token: str) -> int | None:
        """Append to an existing log in one call (`APPEND_CALL_SQL`: the append commits
        without waiting for the disk, then the call waits for it); None when the log needs
        the slow way. A searched log's new lines are indexed by the next search
        (`SearchMixin._index_pending_logs`), as on the files backend."""
        params = {
            "path": path,
            "now": time.time(),
            "count": payload.count(b"\n"),
            "length": len(payload),
            "data": payload,
            "searched": indexed_source(path) is not None,
            "token": token,
        }
        with self._connection() as conn:
            return conn.execute(APPEND_CALL_SQL, params).fetchone()[0]

    # -- search rows of documents --------------------------------------------------------
    def _reindex_document(self, conn: Any, path: str, data: bytes | None) -> None:
        conn.execute(DELETE_PATH_SEARCH_SQL, (path,))
        if data is not None:
            self._insert_search(conn, document_docs(path, data))

    @staticmethod
    def _insert_search(conn: Any, docs: Sequence[SearchDoc]) -> None:
        rows = [
            (doc_id, d.source, d.path, json.dumps(d.meta, sort_keys=True), text)
            for d in docs
            for doc_id, text in search_parts(d.doc_id, d.text.replace("\x00", ""))
        ]
        if rows:
            with conn.cursor() as cur:
                cur.executemany(UPSERT_SEARCH_SQL, rows)
