"""What every backend gets for free: conveniences built on the contract's primitives
(text, JSON lines, compare-and-set updates, changes since a version, a mutex, entry
pruning and stats, subagent claims, the task lock, export). `BaseBackend` inherits them;
a backend may override any with a faster one of its own."""

from __future__ import annotations

import hashlib
import json
import secrets
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from memory.contract.entries import ENTRY_ID_RE, Entry, prune_victims
from memory.contract.entries import entry_stats as _entry_stats
from memory.contract.records import (
    DocumentInfo,
    LockInfo,
    wait_for_lock,
)
from memory.errors import (
    ConflictError,
    InvalidInputError,
    LockHeldError,
)


class BackendConveniences:
    """Mixin of `BaseBackend`: every method here calls only the abstract primitives."""

    def read_text(self, path: str) -> str | None:
        doc = self.get_document(path)
        return None if doc is None else doc.text

    def write_text(self, path: str, text: str) -> DocumentInfo:
        return self.put_document(path, text.encode("utf-8"))

    def create_document(self, path: str, data: bytes, *, durable: bool = True) -> bool:
        """Write `data` only if `path` does not exist yet; `False` if it did.

        `durable=False`: the caller keeps the content durable elsewhere and can write the
        document again, so a backend may skip what makes it survive a machine crash (the
        files backend skips its fsyncs; a database commits as always).
        """
        try:
            self.put_document(path, data, expected_version=0)
        except ConflictError:
            return False
        return True

    def append_jsonl(self, path: str, records: Sequence[Any]) -> int:
        """Append JSON records as whole lines; returns the first new line's number."""
        lines = []
        for record in records:
            line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
            try:
                lines.append(line.encode("utf-8"))
            except UnicodeEncodeError:  # a lone surrogate: escaped, so it round-trips
                lines.append(json.dumps(record, separators=(",", ":")).encode("ascii"))
        return self.append_lines(path, lines)

    def update_document(self, path: str, fn: Any, *, attempts: int = 50) -> DocumentInfo:
        """Read-modify-write `path` with `fn(old bytes or None) -> new bytes`, retrying."""
        for _ in range(attempts):
            doc = self.get_document(path)
            new = fn(None if doc is None else doc.data)
            try:
                return self.put_document(path, new, expected_version=doc.version if doc else 0)
            except ConflictError:
                time.sleep(0.005)
        raise ConflictError(f"{path!r} kept changing under {attempts} attempts; try again")

    def list_changes(
        self, prefix: str, token: str | None = None
    ) -> tuple[list[DocumentInfo] | None, str]:
        """`(documents under prefix, token)`, or `(None, token)` if none changed since `token`.

        The token is opaque; pass back the last one to learn cheaply whether to look again.
        """
        listing = self.list_documents(prefix)
        digest = hashlib.blake2b(digest_size=16)
        for info in listing:
            digest.update(f"{info.path}\x00{info.version}\x00{info.size}\n".encode())
        new = digest.hexdigest()
        return (None if new == token else listing), new

    @contextmanager
    def mutex(self, name: str, *, timeout: float = 60.0) -> Iterator[None]:
        """Hold an exclusive section named `name` across processes for the block.

        Waits up to `timeout` seconds (then `LockHeldError`). Built on the lease lock here;
        backends with a lock released when its holder dies override it.
        """
        owner = f"mutex-{secrets.token_hex(8)}"
        wait_for_lock(lambda: self.acquire_lock(name, owner, ttl=max(timeout, 60.0)), name, timeout)
        try:
            yield
        finally:
            self.release_lock(name, owner)

    def refs(self, *, checkpoint: str | None = None, directory: str | None = None) -> list[Entry]:
        """Entries linked to a checkpoint and/or a directory, oldest first."""
        if checkpoint is None and directory is None:
            raise InvalidInputError("refs needs --checkpoint ID or --directory DIR")
        found = self.list_entries(checkpoint=checkpoint, directory=directory, limit=None)
        return list(reversed(found))

    def prune_entries(
        self,
        *,
        keep_days: int | None = None,
        keep_entries: int | None = None,
        dry_run: bool = False,
    ) -> list[Entry]:
        """Remove entries older than `keep_days` or beyond the newest `keep_entries`.

        Only entries go; nothing else is touched, and never an entry that keeps the
        previous content of a file (`PREVIOUS_CONTENT_TAG`) or one a live task cites
        (`cited_entries`). Returns the removed entries (with `dry_run`, those that would
        be removed), oldest first.
        """
        entries = self.list_entries(limit=None)
        victims = prune_victims(
            entries,
            keep_days=keep_days,
            keep_entries=keep_entries,
            now=self.clock(),
            keep=self.cited_entries(entries),
        )
        if dry_run or not victims:
            return victims
        removed = {e.id for e in self.delete_entries([e.id for e in victims])}
        return [e for e in victims if e.id in removed]

    def cited_entries(self, entries: Sequence[Entry]) -> set[str]:
        """The ids of `entries` a task that is not done cites: tagged `task:ID`, or named in
        its record or its subagents' records (findings, the files they wrote)."""
        cited: set[str] = set()
        for task in self.list_tasks():  # type: ignore[attr-defined]
            if task.status == "done":
                continue
            records = [task.data, *(r.data for r in self.list_subagents(task.task_id))]  # type: ignore[attr-defined]
            cited.update(ENTRY_ID_RE.findall(json.dumps(records, default=str)))
            tag = f"task:{task.task_id}"
            cited.update(e.id for e in entries if tag in e.tags)
        return cited

    def entry_stats(self) -> dict[str, Any]:
        """Counts, tokens, bytes (content and stored) overall, by tier and by type."""
        return _entry_stats(self.list_entries(limit=None), pruned=self.count_pruned())

    def claim_subagent(self, task_id: str, agent_id: str, owner: str) -> bool:
        """Mark a pending (or unregistered) subagent running for `owner`; `False` if taken."""
        return self.transition_subagent(
            task_id,
            agent_id,
            from_status=(None, "pending"),
            to_status="running",
            data={"owner": owner},
        )

    @contextmanager
    def task_lock(self, task_id: str, owner: str, *, ttl: float = 60.0) -> Iterator[LockInfo]:
        """Hold the task's lock for the block; `LockHeldError` names the current holder."""
        if not self.acquire_lock(task_id, owner, ttl=ttl):
            held = self.get_lock(task_id)
            holder = held.owner if held else "another process"
            raise LockHeldError(
                f"task {task_id!r} is locked by {holder!r}; wait for it to finish or let "
                f"the lease expire ({ttl:.0f}s)"
            )
        try:
            yield LockInfo(task_id, owner, time.time() + ttl)
        finally:
            self.release_lock(task_id, owner)

    def export_documents(self) -> dict[str, bytes]:
        """Every document's bytes by path (what `memory export` writes out)."""
        out: dict[str, bytes] = {}
        for info in self.list_documents():
            doc = self.get_document(info.path)
            if doc is not None:
                out[info.path] = doc.data
        return out
