"""`Docs`: the orchestrator's memory, read and written through the storage contract.

Every plan, findings file, snapshot, checkpoint, the task list and the artifact registry is a
*document* of the memory's backend (`memory.contract.base.BaseBackend`): a relative path such as
`findings/scout_20250104T120000000000Z.md` and its bytes. Nothing in the orchestrator opens a
memory file itself; it asks a `Docs`:

* on the files backend (the default) a document is the file of that name in the memory
  directory, written atomically and durably, exactly as people read it;
* on PostgreSQL a document is a row, so processes that share no filesystem share a task.

Paths: the writers return `docs.path(rel)`, the file on the files backend (what a person
opens) and the bare document path on others; `docs.rel(path)` gives the relative form that
state, checkpoints and citations store. The run lock is the backend's `mutex` (an OS file
lock on the files backend, a session advisory lock on PostgreSQL: both released when their
holder dies).

Importing this module is cheap (no pydantic, Jinja or LangGraph): `orchestrator status`
reads through it.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any, TypeAlias

from memory.contract.base import BaseBackend, DocumentInfo, LockHeldError
from memory.durable import JsonlRead, encode_line, parse_jsonl
from memory.errors import InvalidInputError
from memory.paths import Layout, check_name

if TYPE_CHECKING:
    from memory.store import MemoryStore

    MemoryTarget: TypeAlias = "Docs | BaseBackend | MemoryStore | Layout | str | os.PathLike[str]"
    """What `Docs.of` takes: the memory as a `Docs`, a backend, a store, a layout or a
    directory (what a public function accepts as its `memory`)."""

MAX_NAME_TRIES = 20

#: The folders of the memory tree the orchestrator writes (relative document prefixes).
RESEARCH_PLANS = "research_plans"
FINDINGS = "findings"
CHECKPOINTS = "checkpoints"
CONTEXT_SNAPSHOTS = "context_snapshots"

_FILES: dict[Path, Any] = {}
_FILES_LOCK = threading.Lock()


def _files_backend(root: Path) -> BaseBackend:
    """One files backend per memory directory for callers that name only a directory."""
    from memory.backends.files import FilesBackend

    with _FILES_LOCK:
        backend = _FILES.get(root)
        if backend is None:
            backend = _FILES[root] = FilesBackend(root, create=False)
        return backend


class Docs:
    """The documents of one memory (see the module docstring)."""

    def __init__(self, backend: BaseBackend):
        self.backend = backend
        root = getattr(backend, "root", None)
        #: The memory directory on the files backend, else None.
        self.root: Path | None = Path(root) if root is not None else None
        self._prefix = os.path.join(os.path.normpath(self.root), "") if self.root else None

    @classmethod
    def of(cls, target: MemoryTarget) -> Docs:
        """`target` as `Docs`: a `Docs`, a backend, a `MemoryStore`, a `Layout` or a directory."""
        if isinstance(target, Docs):
            return target
        if isinstance(target, BaseBackend):
            return cls(target)
        backend = getattr(target, "backend", None)
        if isinstance(backend, BaseBackend):  # a MemoryStore
            return cls(backend)
        root = target.root if isinstance(target, Layout) else Layout.at(target).root
        return cls(_files_backend(root))

    @property
    def location(self) -> str:
        """Where the memory is, for messages: the directory, or the URL without password."""
        return self.backend.location

    # -- names --------------------------------------------------------------------------
    @staticmethod
    def plan(task_id: str) -> str:
        return f"{RESEARCH_PLANS}/{check_name(task_id, 'task id')}.md"

    def path(self, rel: str) -> Path:
        """What a person opens for document `rel`: its file, or the document path itself."""
        return self.root / rel if self.root is not None else PurePosixPath(rel)  # type: ignore[return-value]

    def rel(self, path: str | os.PathLike[str]) -> str:
        """The document path of `path` (a file of the memory directory, or a document path)."""
        text = os.fspath(path)
        prefix = self._prefix
        if prefix is not None and text.startswith(prefix) and os.sep == "/":
            rel = text[len(prefix) :]  # the common case: a path this class made
            if rel[:1] not in ("", "/") and os.path.normpath(rel) == rel:
                return rel
        if self.root is not None and Path(path).is_absolute():
            return Path(os.path.relpath(path, self.root)).as_posix()
        return PurePosixPath(path).as_posix()

    def inside(self, path: str | os.PathLike[str]) -> str | None:
        """The document path of a path a person or a listing gave, when it names a document
        of this memory; None for a path elsewhere. On the files backend a relative path is
        relative to the working directory, as for any file; on others it is a document path.
        """
        if self.root is not None:
            rel = Path(os.path.relpath(Path(path).absolute(), self.root)).as_posix()
        else:
            rel = PurePosixPath(path).as_posix()
        outside = rel in (".", "..") or rel.startswith(("../", "/"))
        return None if outside else rel

    # -- reading ------------------------------------------------------------------------
    def read_bytes(self, rel: str, *, offset: int = 0) -> bytes | None:
        """The document's bytes from `offset` (None when it does not exist, or `rel` names
        no document: tether's own storage)."""
        try:
            return self.backend.read_document_bytes(rel, offset=offset)
        except InvalidInputError:
            return None

    def read_head(self, rel: str, size: int) -> bytes | None:
        """At most the first `size` bytes of document `rel` (None as `read_bytes`)."""
        try:
            return self.backend.read_document_head(rel, size)
        except InvalidInputError:
            return None

    def read_named(self, path: str | os.PathLike[str]) -> bytes | None:
        """The bytes of the document a person or a listing named by `path` (see `inside`);
        None when `path` names no document of this memory (then it is a file elsewhere)."""
        rel = self.inside(path)
        return self.read_bytes(rel) if rel is not None else None

    def read_text(self, rel: str) -> str | None:
        """The document's text (None when it does not exist).

        Raises:
            UnicodeDecodeError: the bytes are not UTF-8.
        """
        data = self.read_bytes(rel)
        return None if data is None else data.decode("utf-8")

    def stat(self, rel: str) -> DocumentInfo | None:
        return self.backend.stat_document(rel)

    def exists(self, rel: str | None) -> bool:
        """Whether document `rel` exists (False for an empty name or tether's own storage)."""
        if not rel:
            return False
        try:
            return self.backend.document_exists(self.rel(rel))
        except InvalidInputError:
            return False

    def list(self, folder: str, suffix: str = "") -> list[DocumentInfo]:
        """The documents directly in `folder` whose names end in `suffix` (hidden names left
        out), in name order."""
        prefix = folder.rstrip("/") + "/"
        found = []
        for info in self.backend.list_documents(prefix):
            name = info.path[len(prefix) :]
            if "/" not in name and not name.startswith(".") and name.endswith(suffix):
                found.append(info)
        return sorted(found, key=lambda i: i.path)

    def read_jsonl(self, rel: str) -> JsonlRead:
        """A jsonl document's records by line number, tolerating bad and torn lines."""
        return parse_jsonl(self.read_bytes(rel) or b"")

    # -- writing ------------------------------------------------------------------------
    def write_text(self, rel: str, text: str) -> Path:
        """Replace document `rel` with `text` (atomic: readers see the old or the new)."""
        self.backend.put_document(rel, text.encode("utf-8"))
        return self.path(rel)

    def create_unique(
        self,
        folder: str,
        stem: str,
        ext: str,
        text: str | Callable[[str], str],
        *,
        durable: bool = True,
    ) -> Path:
        """Create `folder/stem.ext`, or `stem_{suffix}.ext` if taken; never overwrites.

        Args:
            text: the content, or a function of the final stem that renders it (for files
                that name themselves, like a checkpoint's `checkpoint_id`).
            durable: False when the content is durable elsewhere (see
                `BaseBackend.create_document`).

        Raises:
            FileExistsError: after `MAX_NAME_TRIES` taken names (practically impossible).
        """
        from orchestrator.artifacts.names import new_suffix

        candidate = stem
        for _ in range(MAX_NAME_TRIES):
            content = text(candidate) if callable(text) else text
            rel = f"{folder}/{candidate}{ext}"
            if self.backend.create_document(rel, content.encode("utf-8"), durable=durable):
                return self.path(rel)
            candidate = f"{stem}_{new_suffix()}"
        raise FileExistsError(f"could not find a free name for {stem!r} in {folder!r}")

    def append_jsonl(self, rel: str, record: Any) -> None:
        """Append one record as a whole, durable line."""
        self.backend.append_lines(rel, [encode_line(record).rstrip(b"\n")])

    # -- the run lock -------------------------------------------------------------------
    @contextlib.contextmanager
    def run_lock(self, task_id: str) -> Iterator[None]:
        """Hold `task_id`'s run lock for the block (`LockHeldError` when a live process
        holds it)."""
        with self.backend.mutex(_run_lock_name(task_id), timeout=0):
            yield

    def running(self, task_id: str) -> bool:
        """True while a live process holds `task_id`'s run lock.

        A memory directory this process cannot write has no lock to take; nothing can be
        running a task there, so the answer is False.
        """
        try:
            with self.backend.mutex(_run_lock_name(task_id), timeout=0):
                return False
        except LockHeldError:
            return True
        except OSError:
            return False


def _run_lock_name(task_id: str) -> str:
    return f"run:{check_name(task_id, 'task id')}"


class MemoryHandle:
    """The memory an `Orchestrator` runs against, opened once for its lifetime.

    One of: a backend the caller gives (and keeps: it is never closed here), a shared
    backend a URL names (PostgreSQL, open until `close`), or the files backend on the
    memory directory `root` (the default; a run opens its own `MemoryStore` on it).
    """

    def __init__(self, root: Path, *, url: str | None = None, backend: BaseBackend | None = None):
        from memory.store import MemoryStore  # the store is loaded only by what writes

        self.root = root
        #: The shared backend's store (given, or opened from `url`).
        self.shared: MemoryStore | None = None
        self._owned: BaseBackend | None = None
        self._borrowed = backend is not None
        if backend is not None:
            self.shared = MemoryStore(backend=backend)
        elif url:
            self.shared = MemoryStore.from_url(url)
        else:
            from memory.backends.files import FilesBackend

            self._owned = FilesBackend(root, create=False)
        #: The one handle on the memory's documents.
        self.docs = Docs(self.shared.backend if self.shared is not None else self._owned)

    @contextlib.contextmanager
    def store(self) -> Iterator[Any]:
        """The `MemoryStore` a run writes through for the block (a shared one stays open)."""
        if self.shared is not None:
            yield self.shared
            return
        from memory.store import MemoryStore

        with MemoryStore(self.root) as store:  # closes its checkpointer too
            yield store

    def check_writable(self, action: str) -> None:
        """One-line `MemoryDirError` when the memory directory is read-only (before any
        write)."""
        if self.shared is None:
            from memory.store import MemoryStore

            MemoryStore(self.root, create=False).check_writable(action)

    def close(self) -> None:
        """Close what was opened here (database connections), never a backend given."""
        if self.shared is not None and not self._borrowed:
            self.shared.close()
        if self._owned is not None:
            self._owned.close()
