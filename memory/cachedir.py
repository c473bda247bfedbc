"""A private folder for caches that a new process may reuse (compiled templates, the
compiled checkpoint validator).

`tether-cache-{uid}` in the system temp directory, created with mode 0700 and used only when
it belongs to this user and nobody else can write it (what Jinja checks for its own
bytecode cache): what is loaded from it is code. Everything in it can be deleted at any time;
a missing or unusable folder only means compiling again.
"""

from __future__ import annotations

import functools
import os
import stat
import tempfile
import threading
from pathlib import Path


@functools.lru_cache(maxsize=1)
def cache_dir() -> Path | None:
    """The folder, or None when there is no safe one (another user's, a read-only temp)."""
    if not hasattr(os, "getuid"):
        return None
    path = Path(tempfile.gettempdir()) / f"tether-cache-{os.getuid()}"
    try:
        path.mkdir(mode=stat.S_IRWXU, exist_ok=True)
        st = os.lstat(path)
    except OSError:
        return None
    private = stat.S_ISDIR(st.st_mode) and stat.S_IMODE(st.st_mode) == stat.S_IRWXU
    return path if private and st.st_uid == os.getuid() else None


def write_cache_file(name: str, data: bytes) -> None:
    """Put `data` in the folder as `name` whole or not at all (never raises)."""
    folder = cache_dir()
    if folder is None:
        return
    tmp = folder / f".{name}.{os.getpid()}.{threading.get_ident()}.tmp"
    try:
        tmp.write_bytes(data)
        os.replace(tmp, folder / name)
    except OSError:
        tmp.unlink(missing_ok=True)


def read_cache_file(name: str) -> bytes | None:
    folder = cache_dir()
    if folder is None:
        return None
    try:
        return (folder / name).read_bytes()
    except OSError:
        return None
