"""Storage backends and how a URL chooses one.

* no URL, or a path: `FilesBackend` on that memory directory (today's default);
* `memory://`: `InMemoryBackend` (nothing persists; for tests);
* `postgresql://...` (or `postgres://`): `PostgresBackend`.

`open_backend(url)` is the one entry point the CLIs use; `TETHER_MEMORY_URL` supplies the URL
when none is given. Errors name the URL without its password.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from memory.base import BaseBackend
from memory.errors import InvalidInputError

ENV_URL = "TETHER_MEMORY_URL"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def resolve_url(url: str | None = None) -> str | None:
    """The URL given, else `$TETHER_MEMORY_URL`, else `None` (the files default)."""
    return url or os.environ.get(ENV_URL) or None


def is_postgres(url: str | None) -> bool:
    return bool(url) and url.startswith(POSTGRES_SCHEMES)


@contextmanager
def open_backend(
    url: str | None = None, *, memory_dir: str | None = None, setup: bool = True
) -> Iterator[BaseBackend]:
    """The backend `url` names (see the module docstring), set up and closed after use."""
    url = resolve_url(url)
    if url is None or url.startswith("file://") or "://" not in url:
        from memory.backends.files import FilesBackend

        root = url.removeprefix("file://") if url else memory_dir
        with FilesBackend.open(root) as backend:
            yield backend
    elif url == "memory://":
        from memory.backends.inmemory import InMemoryBackend

        yield InMemoryBackend()
    elif is_postgres(url):
        from memory.backends.postgres import PostgresBackend

        with PostgresBackend.open(url, setup=setup) as backend:
            yield backend
    else:
        from memory.backends.postgres import redact

        raise InvalidInputError(
            f"unknown memory URL {redact(url)!r}: use a directory, memory:// or postgresql://..."
        )
