"""The orchestrator on a shared backend: a local memory directory mirrored to PostgreSQL.

Every module of the orchestrator reads and writes the files of a memory directory. With
`--memory-url postgresql://...` each process keeps its own local directory (in its own
working directory) and the backend is the shared truth:

* `Mirror.pull()` (before a command) writes every document of the backend into the local
  directory where its bytes differ;
* `Mirror.push()` uploads every local file that changed since the last pull or push (a log
  that grew is appended to); the backend indexes what `memory search` searches;
* `MirroringSaver`, LangGraph's `PostgresSaver` with one addition: it pushes before it saves
  a checkpoint or a task's writes. So whatever a node wrote (a subagent's findings) is in
  the backend before the graph state that says the node ran: another process resuming from
  that state never lacks a file, and the subagents it records are not run again.

What is mirrored is what `memory.backends.files.is_document_path` calls a document: not
`memory.db` and `entries/` (per-machine index and large outputs), `.locks/`, `.langgraph/`
(graph state is in PostgreSQL) or `.tether/running/` (live-process markers mean nothing on
another machine). Local deletions are not propagated.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
from langgraph.checkpoint.postgres import PostgresSaver

from memory import durable
from memory.backends.files import walk_documents
from memory.backends.postgres import PostgresBackend
from memory.backends.savers import pg_connect
from orchestrator.errors import OrchestratorUserError


class Mirror:
    """Keeps the local memory directory `root` and `backend` in step (see module docstring).

    What was last brought in step is remembered per path in `root/.mirror.json` (hidden, so
    never mirrored): the backend's version and size, and the local file's mtime and size
    then. A path whose two sides are both as remembered is skipped without reading either,
    and a log that only grew locally is appended to without reading the backend's copy. A
    path changed on both sides, or not remembered, is compared byte for byte as before.
    """

    MANIFEST = ".mirror.json"

    def __init__(self, backend: Any, root: Path):
        self.backend = backend
        self.root = Path(root)
        self._lock = threading.Lock()
        #: path -> [backend version, backend size, local mtime_ns, local size] when in step
        self._synced: dict[str, list[int]] = self._load_manifest()

    def _load_manifest(self) -> dict[str, list[int]]:
        try:
            found = json.loads((self.root / self.MANIFEST).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}  # none yet, or damaged: everything is compared once
        return found if isinstance(found, dict) else {}

    def _save_manifest(self) -> None:
        durable.atomic_write_text(self.root / self.MANIFEST, json.dumps(self._synced))

    def _files(self) -> dict[str, os.stat_result]:
        found = {}
        for rel, full in walk_documents(self.root):
            try:
                found[rel] = os.stat(full)
            except FileNotFoundError:
                continue
        return found

    def _remember(self, rel: str, version: int, size: int) -> None:
        st = (self.root / rel).stat()
        self._synced[rel] = [version, size, st.st_mtime_ns, st.st_size]

    def pull(self) -> int:
        """Write the backend's documents locally; returns how many files changed."""
        changed = 0
        with self._lock:
            local = self._files()
            for info in self.backend.list_documents():
                st = local.get(info.path)
                if st is not None and self._synced.get(info.path) == [
                    info.version,
                    info.size,
                    st.st_mtime_ns,
                    st.st_size,
                ]:
                    continue  # both sides as they were when last in step
                doc = self.backend.get_document(info.path)
                if doc is None:
                    continue
                target = self.root / info.path
                if not (target.is_file() and target.read_bytes() == doc.data):
                    durable.atomic_write_bytes(target, doc.data)
                    changed += 1
                self._remember(info.path, doc.version, doc.size)
            self._save_manifest()
        return changed

    def _upload(self, rel: str, data: bytes) -> bool:
        """Bring the backend's `rel` to `data`; False when it already was. The backend
        indexes what is searched; a log that only grew by whole lines is appended to."""
        known = self._synced.get(rel)
        info = self.backend.stat_document(rel)
        untouched = (
            known is not None and info is not None and known[:2] == [info.version, info.size]
        )
        if untouched:  # the backend holds what this side last had: no need to read it
            old_size = info.size
            grew = rel.endswith(".jsonl") and len(data) > old_size
            if grew and data[old_size - 1 : old_size] in (b"\n", b"") and data.endswith(b"\n"):
                self.backend.append_lines(rel, data[old_size:].split(b"\n")[:-1])
            else:
                self.backend.put_document(rel, data)
        else:
            old = self.backend.get_document(rel)
            if old is not None and old.data == data:
                self._remember(rel, old.version, old.size)
                return False
            if old is not None and known is not None and self._merge_log(rel, data, known[3]):
                return True
            grew = old is not None and len(data) > len(old.data) and data.startswith(old.data)
            ends = old is not None and old.data.endswith(b"\n") and data.endswith(b"\n")
            if grew and ends and rel.endswith(".jsonl"):
                self.backend.append_lines(rel, data[len(old.data) :].split(b"\n")[:-1])
            else:
                self.backend.put_document(rel, data)
        after = self.backend.stat_document(rel)
        self._remember(rel, after.version, after.size)
        return True

    def _merge_log(self, rel: str, data: bytes, in_step: int) -> bool:
        """Both sides appended to the log `rel` since it was in step at `in_step` bytes (two
        machines starting tasks add lines to one task list): append this side's new lines
        to the backend's and take the result locally. False when `rel` is no such log."""
        mine = data[in_step:]
        boundary = data[in_step - 1 : in_step] in (b"\n", b"")
        if not (rel.endswith(".jsonl") and mine and boundary and mine.endswith(b"\n")):
            return False
        self.backend.append_lines(rel, mine.split(b"\n")[:-1])
        merged = self.backend.get_document(rel)
        durable.atomic_write_bytes(self.root / rel, merged.data)
        self._remember(rel, merged.version, merged.size)
        return True

    def push(self) -> int:
        """Upload and index local files changed since the last pull/push; returns how many."""
        pushed = 0
        with self._lock:
            for rel, st in sorted(self._files().items()):
                known = self._synced.get(rel)
                if known is not None and known[2:] == [st.st_mtime_ns, st.st_size]:
                    continue
                try:
                    data = (self.root / rel).read_bytes()
                except FileNotFoundError:
                    continue
                pushed += self._upload(rel, data)
            if pushed:
                self._save_manifest()
        return pushed


TRY_TASK_LOCK_SQL = "SELECT pg_try_advisory_lock(hashtext(%s))"


class MirroringSaver(PostgresSaver):
    """`PostgresSaver` that pushes the mirror before saving graph state.

    `task_lock(task_id)` is the cross-machine run lock: a PostgreSQL session advisory lock
    on its own connection, so a machine that dies releases it with its connection.
    """

    def __init__(self, conn: Any, mirror: Mirror, url: str = ""):
        super().__init__(conn)
        self.mirror = mirror
        self.url = url

    @contextmanager
    def task_lock(self, task_id: str) -> Iterator[None]:
        with psycopg.connect(self.url, autocommit=True) as conn:
            if not conn.execute(TRY_TASK_LOCK_SQL, (f"tether-task:{task_id}",)).fetchone()[0]:
                raise OrchestratorUserError(
                    f"task {task_id!r} is running on another machine; wait for it to finish, "
                    f"or stop it and run `orchestrator resume --task {task_id}`"
                )
            yield  # closing the connection releases the lock

    def put(self, *args: Any, **kwargs: Any) -> Any:
        self.mirror.push()
        return super().put(*args, **kwargs)

    def put_writes(self, *args: Any, **kwargs: Any) -> None:
        self.mirror.push()
        return super().put_writes(*args, **kwargs)


def attach(ctx: Any, url: str, root: Path) -> MirroringSaver:
    """Open the backend on `url`, pull into `root`, and push again when `ctx` closes."""
    backend = ctx.with_resource(PostgresBackend.open(url))
    mirror = Mirror(backend, root)
    mirror.pull()
    conn = pg_connect(url)
    ctx.call_on_close(conn.close)
    ctx.call_on_close(mirror.push)  # runs before the connections close (LIFO)
    saver = MirroringSaver(conn, mirror, url)
    saver.setup()
    return saver
