"""Documents as the plain files of a memory directory, with versions kept in `memory.db`.

A document is any file of the tree except tether's own storage (`memory.db*`, `entries/`,
hidden names other than `.tether/`, and `.tether/running/`). Its bytes are the file, written
with `memory.durable` (temp file, fsync, rename, fsync of the folder), so a reader never
sees a torn file. `backend_documents` keeps one row per path: the last version given out and
the file's stamp (`inode:mtime_ns:size`) right after that write.

Versions: a file whose stamp matches its row is at the row's version; a file changed outside
the backend (a hand edit, an append) is one above it; a file without a row is version 1.
Writers serialise on SQLite's write lock (`BEGIN IMMEDIATE`): they check the version, replace
the file, then record the new row, committed with `synchronous = NORMAL` because files are
the truth and the row is bookkeeping: a row lost to a power cut reads as "changed outside",
which is still one above what any reader saw. Readers read the row first and the file
second, so a writer between its rename and its commit is seen at the version it is about to
record. A delete keeps the row, so versions are never reused.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import memory.durable as durable
from memory.base import (
    Document,
    DocumentInfo,
    check_data,
    check_doc_path,
    check_version,
    encode_lines,
)
from memory.errors import ConflictError, InvalidInputError
from memory.paths import Layout, confine

SELECT_DOC_SQL = "SELECT version, stamp, sha256 FROM backend_documents WHERE path = ?"
SELECT_DOCS_SQL = "SELECT path, version, stamp FROM backend_documents WHERE path >= ? AND path < ?"
UPSERT_DOC_SQL = """
INSERT INTO backend_documents(path, version, mtime, size, sha256, stamp) VALUES (?,?,?,?,'',?)
ON CONFLICT(path) DO UPDATE SET version = excluded.version, mtime = excluded.mtime,
    size = excluded.size, sha256 = '', stamp = excluded.stamp
"""

#: Top-level names of the memory directory that are not documents.
NOT_DOCUMENTS = ("memory.db", "memory.db-wal", "memory.db-shm", "entries")
#: The one hidden folder that holds documents (the orchestrator's task list and registry),
#: minus its live-process markers, which mean nothing elsewhere.
DOCUMENT_DOT_DIR = ".tether"
NOT_DOCUMENT_DIRS = (".tether/running",)
#: A folder changed this recently may change again within its mtime's granularity.
FRESH_S = 0.05


def is_document_path(rel: str) -> bool:
    """Whether a relative path of a memory tree is a document (not tether's own storage)."""
    parts = rel.split("/")
    if parts[0] in NOT_DOCUMENTS or any(rel.startswith(d + "/") for d in NOT_DOCUMENT_DIRS):
        return False
    hidden = [p for p in parts if p.startswith(".")]
    return not hidden or (parts[0] == DOCUMENT_DOT_DIR and len(hidden) == 1)


def walk_documents(root: Path, under: str = "") -> Iterator[tuple[str, str]]:
    """`(relative path, absolute path)` of every document file under `root/under`, sorted."""
    found = []
    start = os.path.join(root, under) if under else str(root)
    for dirpath, dirnames, filenames in os.walk(start):
        rel_dir = Path(dirpath).relative_to(root).as_posix()
        prefix = "" if rel_dir == "." else rel_dir + "/"
        dirnames[:] = sorted(d for d in dirnames if is_document_path(prefix + d + "/x"))
        for name in filenames:
            if is_document_path(prefix + name):
                found.append((prefix + name, os.path.join(dirpath, name)))
    return iter(sorted(found))


def stamp_of(st: os.stat_result) -> str:
    return f"{st.st_ino}:{st.st_mtime_ns}:{st.st_size}"


def _version(row: sqlite3.Row | None, st: os.stat_result, data: Callable[[], bytes]) -> int:
    """The version readers see for a file with stat `st` and row `row` (module docstring)."""
    if row is None:
        return 1
    if row["stamp"]:
        return row["version"] if row["stamp"] == stamp_of(st) else row["version"] + 1
    # a row written before stamps: compare the content's hash once
    same = row["sha256"] and row["sha256"] == hashlib.sha256(data()).hexdigest()
    return row["version"] if same else row["version"] + 1


class DocumentFiles:
    """The document operations of the files backend (mixed into `FilesBackend`)."""

    layout: Layout
    connect: Callable[[], sqlite3.Connection]
    _write: Callable[..., AbstractContextManager[sqlite3.Connection]]
    check_writable: Callable[..., None]

    def _file(self, path: str) -> Path:
        check_doc_path(path)
        if not is_document_path(path):
            raise InvalidInputError(
                f"document path {path!r} names tether's own storage; use another path"
            )
        return confine(self.layout.root, path)

    def get_document(self, path: str, *, offset: int = 0) -> Document | None:
        file = self._file(path)
        row = self.connect().execute(SELECT_DOC_SQL, (path,)).fetchone()  # row first
        try:
            with open(file, "rb") as fh:
                st = os.fstat(fh.fileno())
                fh.seek(offset)
                data = fh.read()
                whole: Callable[[], bytes] = (
                    (lambda: data) if offset == 0 else (lambda: file.read_bytes())
                )
                version = _version(row, st, whole)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None
        return Document(path, version, st.st_mtime, st.st_size, data)

    def stat_document(self, path: str) -> DocumentInfo | None:
        file = self._file(path)
        row = self.connect().execute(SELECT_DOC_SQL, (path,)).fetchone()
        try:
            st = os.stat(file)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not os.path.isfile(file):
            return None
        return DocumentInfo(path, _version(row, st, file.read_bytes), st.st_mtime, st.st_size)

    def _current(self, conn: sqlite3.Connection, path: str, file: Path) -> tuple[int, int]:
        """(version readers see now, highest version ever given) for `path`."""
        row = conn.execute(SELECT_DOC_SQL, (path,)).fetchone()
        last = row["version"] if row else 0
        try:
            st = os.stat(file)
        except FileNotFoundError:
            return 0, last
        have = _version(row, st, file.read_bytes)
        return have, max(have, last)

    def put_document(
        self, path: str, data: bytes, *, expected_version: int | None = None
    ) -> DocumentInfo:
        file = self._file(path)
        data = check_data(data)
        self.check_writable("write documents")
        with self._write(durable_commit=False) as conn:
            have, last = self._current(conn, path, file)
            check_version(path, have, expected_version)
            if expected_version == 0:
                if not durable.create_exclusive(file, data):  # a writer outside the backend
                    raise ConflictError(f"{path!r} exists now; read it and retry")
            else:
                durable.atomic_write_bytes(file, data)
            st = os.stat(file)
            conn.execute(UPSERT_DOC_SQL, (path, last + 1, time.time(), len(data), stamp_of(st)))
        return DocumentInfo(path, last + 1, st.st_mtime, len(data))

    def append_lines(self, path: str, lines: Sequence[bytes | str]) -> int:
        file = self._file(path)
        payload = encode_lines(lines)
        self.check_writable("append to documents")
        return durable.append_lines(file, payload)

    def delete_document(self, path: str, *, expected_version: int | None = None) -> bool:
        file = self._file(path)
        self.check_writable("delete documents")
        with self._write(durable_commit=False) as conn:
            have, last = self._current(conn, path, file)
            check_version(path, have, expected_version)
            if not have:
                return False
            conn.execute(UPSERT_DOC_SQL, (path, last, time.time(), 0, ""))
            file.unlink()
            durable.fsync_dir(file.parent)
        return True

    def list_documents(self, prefix: str = "") -> list[DocumentInfo]:
        under = prefix.rsplit("/", 1)[0] if "/" in prefix else ""
        rows = {
            r["path"]: r
            for r in self.connect().execute(SELECT_DOCS_SQL, (prefix, prefix + "\U0010ffff"))
        }
        out = []
        for rel, full in walk_documents(self.layout.root, under):
            if not rel.startswith(prefix):
                continue
            try:
                st = os.stat(full)
            except FileNotFoundError:
                continue
            row = rows.get(rel)
            if row is None:
                version = 1
            elif row["stamp"]:
                version = row["version"] + (row["stamp"] != stamp_of(st))
            else:
                version = row["version"]
            out.append(DocumentInfo(rel, version, st.st_mtime, st.st_size))
        return out

    def list_changes(
        self, prefix: str, token: str | None = None
    ) -> tuple[list[DocumentInfo] | None, str]:
        """As the base, but a folder's own stat says whether anything directly in it moved."""
        folder = self.layout.root / prefix
        if not prefix.endswith("/"):
            return super().list_changes(prefix, token)  # type: ignore[misc]
        try:
            st = os.stat(folder)
        except (FileNotFoundError, NotADirectoryError):
            return [], "absent"
        stamp = f"{st.st_ino}:{st.st_mtime_ns}"
        if time.time() - st.st_mtime < FRESH_S:
            stamp += ":fresh"  # may change again unseen: never matches next time
        elif stamp == token:
            return None, stamp
        return self.list_documents(prefix), stamp
