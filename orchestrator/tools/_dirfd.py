"""Files of the workdir opened from a held directory descriptor, never through a link.

A path checked first and opened later can change in between: a folder swapped for a
symlink after `memory.paths.confine` said yes would take a write outside the workdir. So the
write tools (and the read tools, for the file itself) open every folder of a path from
the workdir's own descriptor, one name at a time, with `O_NOFOLLOW` (`openat`), and check
what they opened with `fstat`: what they read or replace is the regular file at that place
inside the workdir, or nothing. A FIFO or a device is refused without blocking
(`O_NONBLOCK`), and a read takes at most a given number of bytes.

Invariant: no byte is read from or written to a file that is not a regular file reached
from the workdir's descriptor without following a link.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator, Sequence

from memory.errors import PathEscapeError

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_NEW_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class NotRegularError(ValueError):
    """The path names a FIFO, a device, a socket or a folder, not a regular file."""


def _moved(shown: str) -> PathEscapeError:
    return PathEscapeError(
        f"path {shown!r} changed while it was opened (a folder on it is a link or not a "
        "folder); nothing was written"
    )


@contextlib.contextmanager
def held_parent(
    root: str | os.PathLike[str], parts: Sequence[str], shown: str, *, create: bool = False
) -> Iterator[int]:
    """The descriptor of the folder `parts[:-1]` below `root`, opened name by name from
    `root`'s descriptor without following links (missing folders made with `create`).

    Raises:
        PathEscapeError: a folder on the way is a link or not a folder.
        FileNotFoundError: a folder is missing (and `create` is false).
    """
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    try:
        for name in parts[:-1]:
            try:
                nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=fd)
                try:
                    nxt = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError as exc:
                    raise _moved(shown) from exc
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR, errno.EMLINK):
                    raise _moved(shown) from None
                raise
            os.close(fd)
            fd = nxt
        yield fd
    finally:
        os.close(fd)


def read_at(dir_fd: int, name: str, limit: int, shown: str) -> tuple[bytes, int] | None:
    """`(content, mode)` of the regular file `name` in `dir_fd`, or None when there is none.

    Raises:
        NotRegularError: `name` is a FIFO, device, socket or folder.
        PathEscapeError: `name` is a link (it changed after it was checked).
        ValueError: the file holds more than `limit` bytes.
    """
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=dir_fd)
    except FileNotFoundError:
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.EMLINK):
            raise _moved(shown) from None
        if exc.errno in (errno.ENXIO, errno.EISDIR):  # a socket, or a folder
            raise NotRegularError(f"{shown!r} is not a regular file; it is left as it is") from None
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularError(f"{shown!r} is not a regular file; it is left as it is")
        if info.st_size > limit:
            raise ValueError(f"{shown!r} is larger than {limit} bytes; it is left as it is")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise ValueError(f"{shown!r} is larger than {limit} bytes; it is left as it is")
        return b"".join(chunks), stat.S_IMODE(info.st_mode)
    finally:
        os.close(fd)


def replace_at(dir_fd: int, name: str, data: bytes, mode: int | None) -> None:
    """Replace (or create) `name` in `dir_fd` with `data`: a hidden temp file beside it,
    fsynced, renamed over it, the folder fsynced. `mode` None: a new file's default mode."""
    tmp = f".{name[:200]}.tmp-{secrets.token_hex(4)}"
    fd = os.open(tmp, _NEW_FLAGS, 0o644 if mode is None else 0o600, dir_fd=dir_fd)
    try:
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if mode is not None:
                os.fchmod(fd, mode)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp, dir_fd=dir_fd)
        raise
    os.fsync(dir_fd)


def open_regular(path: str | os.PathLike[str], shown: str) -> int:
    """A read descriptor of the regular file `path` (a FIFO or device never blocks it).

    Raises:
        NotRegularError: not a regular file.
        OSError: it cannot be opened.
    """
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularError(f"{shown!r} is not a regular file")
    except BaseException:
        os.close(fd)
        raise
    return fd
