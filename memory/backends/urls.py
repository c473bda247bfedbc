"""Memory URLs: which backend a URL names, the URL from the environment, and a URL as shown.

* no URL, a path or `file://`: a memory directory (`is_directory`);
* `memory://`: the in-memory reference backend;
* `postgresql://...` or `postgres://...`: PostgreSQL (`is_postgres`).

`resolve_url` takes `TETHER_MEMORY_URL` when no URL is given; `redact` is every URL as it is
shown or stored, without its password.

A leaf: it imports nothing of tether, so every backend and the savers can use it.
"""

from __future__ import annotations

import os
import re

ENV_URL = "TETHER_MEMORY_URL"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def resolve_url(url: str | None = None) -> str | None:
    """The URL given, else `$TETHER_MEMORY_URL`, else `None` (the files default)."""
    return url or os.environ.get(ENV_URL) or None


def is_postgres(url: str | None) -> bool:
    """Whether `url` names a PostgreSQL database."""
    return bool(url) and url.startswith(POSTGRES_SCHEMES)


def is_directory(url: str | None) -> bool:
    """Whether `url` names a memory directory (no URL, a path, or `file://`)."""
    return url is None or url.startswith("file://") or "://" not in url


def redact(url: str) -> str:
    """`url` without its password (`postgresql://user:***@host/db`)."""
    return re.sub(r"(//[^:/@]+):[^@/]*@", r"\1:***@", url)
