"""What every `memory` verb shares: the store of the invocation, opened once, the task a
verb acts on when none is named (`latest_task`: the most recently changed task record, as
every `orchestrator` verb takes it), and the warnings the memory library logs (logger
`memory`), printed as `Warning: ...` lines."""

from __future__ import annotations

import logging
from typing import Any

import click

from memory.backends import is_directory
from memory.errors import MemoryDirError
from memory.paths import ENV_VAR, resolve_root
from memory.store import MemoryStore

#: Verbs that only read: they never create a memory directory (or tables) where there is none.
READ_ONLY_VERBS = frozenset({"fetch", "list", "refs", "stats", "search", "status", "facts",
                             "episodes", "export"})  # fmt: skip


def get_store(ctx: click.Context) -> MemoryStore:
    """The `MemoryStore` for this invocation (opened on first use, closed with the command).

    `--memory-url` / `TETHER_MEMORY_URL` choose the backend; without one it is the memory
    directory. A verb that only reads fails with one line when the memory directory does
    not exist, instead of creating an empty one (a typo in `--memory-dir`, or the wrong
    cwd), and opens a database without creating tether's tables in it.
    """
    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    if "store" not in obj:
        verb = ctx.command.name
        url = obj.get("memory_url")
        if is_directory(url):
            where = resolve_root(url.removeprefix("file://") if url else obj.get("memory_dir"))
            if verb in READ_ONLY_VERBS and not where.exists():
                raise MemoryDirError(
                    f"no memory directory at {str(where)!r}; pass --memory-dir or set "
                    f"{ENV_VAR} (nothing was created)"
                )
            store = MemoryStore(where)
        else:
            store = MemoryStore.from_url(
                url, memory_dir=obj.get("memory_dir"), setup=verb not in READ_ONLY_VERBS
            )
        root.call_on_close(store.close)
        if store.read_only:
            if verb not in READ_ONLY_VERBS:
                store.check_writable(f"run `{_command_of(ctx)}`")
            click.echo(
                f"Note: {store.location!r} is read-only; the index was not refreshed, "
                "results may be stale",
                err=True,
            )
        obj["store"] = store
        root.obj = obj
    return obj["store"]


def _command_of(ctx: click.Context) -> str:
    """`memory summary on`: the command as typed, whatever the program was called."""
    names = []
    while ctx.parent is not None:
        names.append(ctx.info_name or "")
        ctx = ctx.parent
    return " ".join(["memory", *reversed(names)])


def latest_task(store: Any) -> str | None:
    """The most recent task of the memory: the one whose task record changed last (the
    orchestrator's "most recent task"), None when the memory holds no task record."""
    tasks = store.backend.list_tasks()  # most recently updated first
    return tasks[0].task_id if tasks else None


#: Exit code of a verb that did its work but could not do all of it (the orchestrator's too).
EXIT_PARTIAL = 3


class _WarningLines(logging.Handler):
    """Each warning of the memory library as one `Warning: ...` line on stderr."""

    def emit(self, record: logging.LogRecord) -> None:
        try:
            click.echo(f"Warning: {record.getMessage()}", err=True)
        except Exception:  # noqa: BLE001 - a warning must never break the command
            self.handleError(record)


def show_warnings() -> None:
    """Print the memory library's warnings on stderr from now on (idempotent)."""
    logger = logging.getLogger("memory")
    if not any(isinstance(h, _WarningLines) for h in logger.handlers):
        logger.addHandler(_WarningLines(logging.WARNING))
