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
import stat
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager
from pathlib import Path

import memory.durable as durable
from memory.contract.base import (
    Document,
    DocumentInfo,
    check_data,
    check_doc_path,
    check_version,
    encode_lines,
)
from memory.errors import ConflictError, InvalidInputError
from memory.paths import Inside, Layout, confine

_create_exclusive = durable.create_exclusive  # `create_document`'s `durable` hides the module

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
#: minus the run-lock files tether kept there before its run lock became the backend's
#: mutex (`.locks/`): live-process markers mean nothing elsewhere.
DOCUMENT_DOT_DIR = ".tether"
NOT_DOCUMENT_DIRS = (".tether/running",)
#: A folder changed this recently may change again within its mtime's granularity (the
#: kernel stamps files with a coarse clock: one tick is 1 to 4 ms on common kernels).
FRESH_S = 0.01


def is_document_path(rel: str) -> bool:
    """Whether a relative path of a memory tree is a document (not tether's own storage)."""
    parts = rel.split("/")
    if parts[0] in NOT_DOCUMENTS or any(rel.startswith(d + "/") for d in NOT_DOCUMENT_DIRS):
        return False
    if len(parts) == 1 and parts[0].startswith("memory.db."):  # a damaged one moved aside
        return False
    hidden = [p for p in parts if p.startswith(".")]
    return not hidden or (parts[0] == DOCUMENT_DOT_DIR and len(hidden) == 1)


def walk_documents(root: Path, under: str = "") -> Iterator[tuple[str, str]]:
    """`(relative path, absolute path)` of every document file under `root/under`, sorted.

    Symlinked folders are not entered, and a symlinked file is a document only when its
    target is inside `root` (`memory.paths.Inside`): nothing outside the tree is listed,
    exported or imported.
    """
    found = []
    inside = Inside(root)
    start = os.path.join(root, under) if under else str(root)
    if os.path.islink(start) and not inside(start):
        return iter(())
    base = "" if not under else Path(under).as_posix().rstrip("/") + "/"
    folders = [(start, base)]
    while folders:
        folder, prefix = folders.pop()
        try:
            with os.scandir(folder) as it:
                items = list(it)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            continue
        for item in items:
            rel = prefix + item.name
            if item.is_dir(follow_symlinks=False):
                if is_document_path(rel + "/x"):
                    folders.append((item.path, rel + "/"))
            elif not is_document_path(rel) or item.is_dir():
                continue  # tether's own storage, or a symlinked folder
            elif not item.is_symlink() or inside(item.path):
                found.append((rel, item.path))
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

    _real_dirs: dict[str, str]
    #: `path -> (stamp, version)` last seen here: a file whose stamp is unchanged is at the
    #: same version (every recorded write replaces the file, so changes its stamp), which
    #: spares reads a query.
    _versions: dict[str, tuple[str, int]]

    def _file(self, path: str) -> Path:
        """The file of a document, refusing paths that leave the root through a symlink.

        The real path of each existing parent folder is resolved once per backend; the file
        itself is checked each time (one `lstat`), so a symlink put in place of a document
        is resolved and refused if it leads out.
        """
        check_doc_path(path)
        if not is_document_path(path):
            raise InvalidInputError(
                f"document path {path!r} names tether's own storage; use another path"
            )
        parent, _, name = path.rpartition("/")
        real = self._real_dirs.get(parent)
        if real is None:
            real = str(confine(self.layout.root, parent or "."))
            if os.path.isdir(real):
                self._real_dirs[parent] = real
        file = Path(real, name)
        if os.path.islink(file):
            return confine(self.layout.root, path)
        return file

    def _known(self, path: str, st: os.stat_result) -> int | None:
        """The version remembered for this exact file (stamp), if any."""
        known = self._versions.get(path)
        return known[1] if known is not None and known[0] == stamp_of(st) else None

    def get_document(self, path: str, *, offset: int = 0) -> Document | None:
        file = self._file(path)
        for attempt in (0, 1):
            row = None
            if attempt:  # the row first, then the file: a writer between its rename and its
                row = self.connect().execute(SELECT_DOC_SQL, (path,)).fetchone()  # commit
            try:
                with open(file, "rb") as fh:
                    st = os.fstat(fh.fileno())
                    version = self._known(path, st)
                    if version is None and not attempt:
                        continue  # not seen in this state yet: read the row
                    fh.seek(offset)
                    data = fh.read()
            except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
                return None
            if version is None:
                whole = (lambda data=data: data) if offset == 0 else file.read_bytes
                version = _version(row, st, whole)
                self._versions[path] = (stamp_of(st), version)
            return Document(path, version, st.st_mtime, st.st_size, data)
        return None  # unreachable: the second attempt always returns

    def read_document_bytes(self, path: str, *, offset: int = 0) -> bytes | None:
        file = self._file(path)
        try:
            with open(file, "rb") as fh:
                if offset:
                    fh.seek(offset)
                return fh.read()
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def read_document_head(self, path: str, size: int) -> bytes | None:
        file = self._file(path)
        try:
            with open(file, "rb") as fh:
                return fh.read(size)
        except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
            return None

    def document_exists(self, path: str) -> bool:
        try:
            return stat.S_ISREG(os.stat(self._file(path)).st_mode)
        except (FileNotFoundError, NotADirectoryError):
            return False

    def stat_document(self, path: str) -> DocumentInfo | None:
        file = self._file(path)
        try:
            st = os.stat(file)
        except (FileNotFoundError, NotADirectoryError):
            return None
        if not stat.S_ISREG(st.st_mode):
            return None
        version = self._known(path, st)
        if version is None:
            row = self.connect().execute(SELECT_DOC_SQL, (path,)).fetchone()
            try:
                st = os.stat(file)  # again, after the row (see `get_document`)
            except FileNotFoundError:
                return None
            version = _version(row, st, file.read_bytes)
            self._versions[path] = (stamp_of(st), version)
        return DocumentInfo(path, version, st.st_mtime, st.st_size)

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
        self._versions[path] = (stamp_of(st), last + 1)
        return DocumentInfo(path, last + 1, st.st_mtime, len(data))

    def create_document(self, path: str, data: bytes, *, durable: bool = True) -> bool:
        """The file, made durable under a hidden name and linked into place only if the name
        is free: no row is written, since a file without one is at version 1 (and a path
        whose document was deleted reads one above the version it had then)."""
        file = self._file(path)
        data = check_data(data)
        self.check_writable("write documents")
        return _create_exclusive(file, data, sync=durable)

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
        if not self.layout.root.is_dir():
            return []  # nothing to list, and a reader must not create the memory directory
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
        """As the base, but the folder's own stat says whether anything directly in it moved.

        A folder changed within `FRESH_S` may change again within the same mtime tick, so
        then its names are compared too (a `listdir`, not a full listing).
        """
        if not prefix.endswith("/"):
            return super().list_changes(prefix, token)  # type: ignore[misc]
        folder = self.layout.root / prefix
        try:
            st = os.stat(folder)
        except (FileNotFoundError, NotADirectoryError):
            return [], "absent"
        stamp = f"{st.st_ino}:{st.st_mtime_ns}"
        fresh = time.time() - st.st_mtime < FRESH_S
        if token == stamp and not fresh:
            return None, stamp
        if token is not None and token.startswith(stamp + ":"):
            names = f"{stamp}:{_names_digest(folder)}"
            if names == token:
                return None, names if fresh else stamp
        new = f"{stamp}:{_names_digest(folder)}" if fresh else stamp
        return self.list_documents(prefix), new


def _names_digest(folder: Path) -> str:
    names = "\x00".join(sorted(os.listdir(folder)))
    return hashlib.blake2b(names.encode(), digest_size=12).hexdigest()
