"""Storage backends and how a URL chooses one.

* no URL, or a path: `FilesBackend` on that memory directory (the default);
* `memory://`: `InMemoryBackend` (nothing persists; for tests);
* `postgresql://...` (or `postgres://`): `PostgresBackend`.

`backend_for(url)` opens one (the caller closes it), `open_backend(url)` does the same as a
context manager; `TETHER_MEMORY_URL` supplies the URL when none is given. Errors name the URL
without its password. `backend_class(url)` names the class without opening anything, so a
caller asks what the memory can do (`is_shared(url)`: shared between machines) before
connecting, never which backend it is.
`resolve_url`, `is_postgres` and `is_directory` are `memory.backends.urls`'s.

The wing: `files/` (the memory directory plus `memory.db`), `postgres/` (psycopg 3),
`inmemory.py` (the reference backend), `urls.py` (which backend a URL names; redaction),
`savers.py` (LangGraph's checkpointers beside the memory), `checkpoint_prune.py` (LangGraph
checkpoints pruned to the latest), `blocks.py` (how memory files become search documents),
and `conformance.py`, the storage contract's tests every backend passes (tether's three and
anyone's). Invariant: every backend passes the same conformance suite, so what the
contract (`memory.contract`) promises holds on each.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from memory.backends.files import FilesBackend
from memory.backends.inmemory import InMemoryBackend
from memory.backends.postgres import PostgresBackend
from memory.backends.urls import (
    ENV_URL,
    POSTGRES_SCHEMES,
    is_directory,
    is_postgres,
    redact,
    resolve_url,
)
from memory.contract.base import BaseBackend
from memory.errors import InvalidInputError

__all__ = [
    "ENV_URL",
    "POSTGRES_SCHEMES",
    "backend_class",
    "backend_for",
    "is_directory",
    "is_postgres",
    "is_shared",
    "open_backend",
    "redact",
    "resolve_url",
    "shared_url_forms",
]

BACKENDS: tuple[type[BaseBackend], ...] = (FilesBackend, InMemoryBackend, PostgresBackend)


def backend_class(url: str | None = None) -> type[BaseBackend]:
    """The class of the backend `url` names (see the module docstring), opening nothing.

    Raises:
        InvalidInputError: no backend takes `url`.
    """
    url = resolve_url(url)
    if is_directory(url):
        return FilesBackend
    if url == "memory://":
        return InMemoryBackend
    if is_postgres(url):
        return PostgresBackend
    raise InvalidInputError(
        f"unknown memory URL {redact(url)!r}: use a directory, memory:// or postgresql://..."
    )


def is_shared(url: str | None) -> bool:
    """Whether the memory `url` names is shared between machines (`BaseBackend.shared`);
    False for a URL no backend takes."""
    try:
        return backend_class(url).shared
    except InvalidInputError:
        return False


def shared_url_forms() -> str:
    """The URLs of the backends shared between machines, for a message: `postgresql://...`."""
    return " or ".join(cls.url_form for cls in BACKENDS if cls.shared)


def backend_for(
    url: str | None = None, *, memory_dir: str | os.PathLike[str] | None = None, setup: bool = True
) -> BaseBackend:
    """The backend `url` names (see the module docstring), open; close it when done.

    `setup=False` (read-only callers) refuses a database without tether's tables instead of
    creating them.
    """
    url = resolve_url(url)
    cls = backend_class(url)
    if cls is FilesBackend:
        backend = FilesBackend(url.removeprefix("file://") if url else memory_dir)
        if setup:
            backend.setup()
        return backend
    if cls is InMemoryBackend:
        return InMemoryBackend()
    return PostgresBackend.from_url(str(url), setup=setup)


@contextmanager
def open_backend(
    url: str | None = None, *, memory_dir: str | None = None, setup: bool = True
) -> Iterator[BaseBackend]:
    """`backend_for(url)`, set up and closed after use."""
    backend = backend_for(url, memory_dir=memory_dir, setup=setup)
    try:
        yield backend
    finally:
        backend.close()
