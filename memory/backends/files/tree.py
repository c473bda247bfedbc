"""A memory tree as files: what `memory export` writes and `memory import` reads.

The tree is the `.temp/memory` layout people read: every document as its file, and the
entries as the files backend keeps them (`entries/journal.jsonl` with one line per entry,
inline content in the line, larger content in `entries/{id}/content.gz` or
`entries/{id}/chunk-NNNN.gz`). A files backend opened on an exported tree restores its
entries from that journal on first use, so the tree is a working memory directory too.
"""

from __future__ import annotations

import gzip
import logging
from dataclasses import replace
from pathlib import Path

import memory.durable as durable
from memory.backends.files import FilesBackend
from memory.backends.files._documents import walk_documents
from memory.backends.files._journal import (
    JOURNAL_NAME,
    chunk_name,
    journal_record,
    read_tree_entries,
)
from memory.contract.base import BaseBackend
from memory.contract.capabilities import ImportsEntries
from memory.contract.doc_records import LOCKS, is_record_document, load_records, record_documents
from memory.contract.entries import Entry, pieces
from memory.errors import InvalidInputError, PathEscapeError
from memory.paths import Inside

GZIP_LEVEL = 6

log = logging.getLogger(__name__)


def export_tree(backend: BaseBackend, directory: Path) -> tuple[int, int]:
    """Write every document and entry of `backend` under `directory`; `(documents, entries)`.

    Raises:
        PathEscapeError: a folder of `directory` that a file would go into is a symlink
            leading out of it (checked before anything is written).
    """
    exported = {**record_documents(backend), **backend.export_documents()}
    entries = list(reversed(backend.list_entries(limit=None)))  # oldest first, as logged
    _check_targets(directory, [*exported, "entries/x", *(f"entries/{e.id}/x" for e in entries)])
    documents = 0
    for path, data in exported.items():
        durable.atomic_write_bytes(directory / path, data)
        documents += 1
    records = []
    for entry in entries:
        data = backend.fetch_entry(entry.id).encode("utf-8")
        entry, blob = _write_entry_files(directory, entry, data)
        records.append(journal_record(entry, blob))
    if records:
        lines = b"".join(durable.encode_line(r) for r in records)
        durable.atomic_write_bytes(directory / "entries" / JOURNAL_NAME, lines)
    return documents, len(records)


def _write_entry_files(directory: Path, entry: Entry, data: bytes) -> tuple[Entry, bytes | None]:
    """The entry's gzip files under `directory/entries/{id}/`; `(entry, inline bytes)`."""
    if entry.tier == "inline":
        return replace(entry, path=None, stored_bytes=len(data)), data
    folder = directory / "entries" / entry.id
    parts = [data] if entry.tier == "file" else [p.encode() for p in pieces(entry, data.decode())]
    names = ["content.gz"] if entry.tier == "file" else [chunk_name(n) for n in range(len(parts))]
    stored = 0
    for name, part in zip(names, parts, strict=True):
        blob = gzip.compress(part, compresslevel=GZIP_LEVEL, mtime=0)
        durable.atomic_write_bytes(folder / name, blob)
        stored += len(blob)
    rel = f"entries/{entry.id}" + ("/content.gz" if entry.tier == "file" else "")
    return replace(entry, path=rel, stored_bytes=stored), None


def _check_targets(directory: Path, paths: list[str]) -> None:
    """Refuse to write through a folder of `directory` that resolves outside it."""
    inside = Inside(directory)
    for folder in {str(Path(path).parent) for path in paths}:
        if not inside(directory / folder):
            raise PathEscapeError(
                f"cannot export into {str(directory / folder)!r}: it resolves outside "
                f"{str(directory)!r} (a symlink); export to a directory without one"
            )


def tree_documents(directory: Path) -> list[str]:
    """The document paths of a memory tree (relative POSIX, sorted)."""
    if not directory.is_dir():
        raise InvalidInputError(f"no directory {str(directory)!r} to import; give a memory tree")
    return [rel for rel, _ in walk_documents(directory)]


def import_tree(directory: Path, backend: BaseBackend) -> tuple[int, int, list[str]]:
    """Load the documents and entries of the tree `directory` into `backend`.

    Entries keep their ids (citations stay valid); one already there is left as it is.
    A tree that is a live memory directory (with `memory.db`) is read through a files
    backend, else through its journal. Nothing that resolves outside the tree is read
    (`walk_documents`, `read_tree_entries`).

    Returns:
        `(documents, entries, problems)`: what was loaded, and one line per journal line
        whose entry was not (each also logged as a warning).
    """
    if not isinstance(backend, ImportsEntries):
        raise InvalidInputError(f"{type(backend).__name__} cannot import entries")
    paths = tree_documents(directory)
    records = {}
    for path in paths:
        if path.startswith(LOCKS + "/"):
            continue  # a lease of the exporting machine: it means nothing here
        if is_record_document(path):
            records[path] = (directory / path).read_bytes()
        else:
            backend.put_document(path, (directory / path).read_bytes())
    load_records(backend, records)
    loaded, problems = 0, []
    for entry, data in _tree_entries(directory, problems):
        loaded += backend.put_entry(entry, data)
    for problem in problems:
        log.warning(problem)
    return len(paths), loaded, problems


def _tree_entries(directory: Path, problems: list[str]):
    if not (directory / "memory.db").exists():
        yield from read_tree_entries(directory, problems)
        return
    with FilesBackend.open(directory) as source:
        for entry in reversed(source.list_entries(limit=None)):
            yield entry, source.fetch_entry(entry.id).encode("utf-8")
