"""Every write tether makes goes through this module.

Invariant: a crash at any instant leaves each file either as it was or as it was meant to
become, never torn.

* `atomic_write_bytes` / `atomic_write_text` / `atomic_write_json` write a hidden temp file
  in the same directory, flush and fsync it, `os.replace` it over the target and fsync the
  directory, so the rename itself is durable.
* `append_jsonl` appends whole lines to a `.jsonl` file under an exclusive `flock` on the
  file's lock file (the same lock `filelock` takes; threads of one process queue on an
  in-process lock first), in one `write()`, then fsyncs. If an
  earlier writer was killed mid-line, the torn fragment is closed with a newline first, so
  it stays one bad line and never corrupts the new one. A write that fails half-way (a full
  disk) is cut back to where the file ended, so it leaves no partial line either.
* `create_exclusive` makes a new file appear whole under a name that was free: written in an
  unnamed `O_TMPFILE` (a hidden temp name where that is missing), then hard-linked.
* `read_jsonl` returns every good line with its 1-based line number and reports bad ones
  (a torn last line, or anything that is not a JSON object) instead of failing.
* `file_lock` is the one lock primitive (cross-process and cross-thread).

Lock files and temp files are hidden (`.name.lock`, `.name.tmp-*`) beside their target;
readers and the index ignore every path component that starts with a dot.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import secrets
import threading
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from filelock import FileLock

try:
    import fcntl
except ImportError:  # Windows: `FileLock` below
    fcntl = None  # type: ignore[assignment]

from memory.errors import MemoryRuntimeError

LOCK_TIMEOUT_S = 60.0


def _raise_os(
    exc: OSError, path: Path, state: str = "the previous version of the file is intact"
) -> None:
    """Raise `exc` as one line; `state` says what the failed write left behind."""
    if exc.errno == errno.ENOSPC:
        raise MemoryRuntimeError(
            f"disk full while writing {str(path)!r}: free space and retry; {state}"
        ) from None
    raise MemoryRuntimeError(f"cannot write {str(path)!r}: {exc.strerror or exc}") from None


def fsync_dir(directory: Path) -> None:
    """fsync a directory so a rename or a new file inside it survives a power cut."""
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _open_new(path: Path, flags: int) -> int:
    """`os.open(path, flags, 0o644)`, creating the missing parent folders first if needed
    (tried after a failed open, so the common case costs no `mkdir`)."""
    try:
        return os.open(path, flags, 0o644)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        return os.open(path, flags, 0o644)


def lock_path(path: Path) -> Path:
    """The hidden lock file that guards `path`."""
    return path.parent / f".{path.name}.lock"


def file_lock(path: Path, timeout: float = LOCK_TIMEOUT_S) -> FileLock:
    """A cross-process lock guarding `path` (use as a context manager)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(lock_path(path)), timeout=timeout)


def atomic_write_bytes(path: Path, data: bytes) -> Path:
    """Replace `path` with `data` atomically and durably; returns `path`."""
    path = Path(path)
    try:
        tmp = path.parent / f".{path.name}.tmp-{secrets.token_hex(4)}"
        fd = _open_new(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            os.fsync(fd)
        finally:
            os.close(fd)
        try:
            os.replace(tmp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(tmp)
            raise
        fsync_dir(path.parent)
    except OSError as exc:
        with contextlib.suppress(OSError, UnboundLocalError):
            os.unlink(tmp)  # type: ignore[possibly-undefined]
        _raise_os(exc, path)
    return path


def atomic_write_text(path: Path, text: str) -> Path:
    """Replace `path` with UTF-8 `text` atomically and durably."""
    return atomic_write_bytes(path, text.encode("utf-8"))


def atomic_write_json(path: Path, obj: Any) -> Path:
    """Replace `path` with `obj` as indented UTF-8 JSON, atomically and durably."""
    return atomic_write_text(path, json.dumps(obj, indent=2, ensure_ascii=False) + "\n")


def create_exclusive(path: Path, data: bytes, *, sync: bool = True) -> bool:
    """Write `data` to `path` only if no file has that name yet; False if one had.

    The content is written (and made durable) in a file that has no name yet, which is
    then hard-linked to `path`: the link fails atomically when the name is taken, other
    processes see the file whole or not at all, and a crash before the link leaves nothing
    behind. On Linux the unnamed file is an `O_TMPFILE`; elsewhere (or on a file system
    without it) a hidden temp name is written, linked and removed again. `sync=False`
    skips both fsyncs, for a file whose content is durable elsewhere (other processes
    still see it whole at once; only a crash of the machine may leave it missing, empty
    or cut short).
    """
    path = Path(path)
    try:
        linked = _create_unnamed(path, data, sync)
        if linked is None:
            linked = _create_named(path, data, sync)
            if linked and sync:
                fsync_dir(path.parent)
        return linked
    except OSError as exc:
        _raise_os(exc, path)
        raise  # unreachable: _raise_os always raises


#: `open()` errors meaning "no `O_TMPFILE` here" (an old kernel or another file system).
_NO_TMPFILE = frozenset({errno.EOPNOTSUPP, errno.ENOTSUP, errno.EISDIR, errno.EINVAL})


def _write_all(fd: int, data: bytes, sync: bool) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    if sync:
        os.fsync(fd)


def _create_unnamed(path: Path, data: bytes, sync: bool) -> bool | None:
    """`create_exclusive` through an `O_TMPFILE` linked into place (and the folder fsynced
    when `sync`); None when this system cannot, having created nothing."""
    flag = getattr(os, "O_TMPFILE", 0)
    if not flag or not os.path.isdir("/proc/self/fd"):
        return None
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    except FileNotFoundError:
        path.parent.mkdir(parents=True, exist_ok=True)
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fd = os.open(".", flag | os.O_WRONLY, 0o644, dir_fd=folder)
        except OSError as exc:
            if exc.errno in _NO_TMPFILE:
                return None
            raise
        try:
            _write_all(fd, data, sync)
            # linkat(AT_SYMLINK_FOLLOW) of the descriptor's link in /proc names the file
            os.link(f"/proc/self/fd/{fd}", path.name, dst_dir_fd=folder)
        except FileExistsError:
            return False
        finally:
            os.close(fd)
        if sync:
            os.fsync(folder)
        return True
    finally:
        os.close(folder)


def _create_named(path: Path, data: bytes, sync: bool) -> bool:
    """`create_exclusive` through a hidden temp name, linked into place and removed."""
    tmp = path.parent / f".{path.name}.tmp-{secrets.token_hex(4)}"
    try:
        fd = _open_new(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        try:
            _write_all(fd, data, sync)
        finally:
            os.close(fd)
        try:
            os.link(tmp, path)
        except FileExistsError:
            return False
        return True
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tmp)


def encode_line(record: Any) -> bytes:
    """One JSON record as a whole jsonl line (UTF-8, ending in a newline)."""
    line = json.dumps(record, ensure_ascii=False, separators=(",", ":"))
    if "\n" in line:  # json.dumps escapes newlines; this guards custom encoders
        raise ValueError("a jsonl record must serialise to a single line")
    try:
        return (line + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (a file name that is not UTF-8): escaped
        return (json.dumps(record, separators=(",", ":")) + "\n").encode("ascii")


def append_jsonl(path: Path, records: Any | Iterable[Any], *, many: bool = False) -> int:
    """Append one record (or `many`) as whole lines; returns the first new line's number.

    The line number is 1-based and counts every physical line, good or bad, so that
    citations such as `messages.jsonl#L45` stay valid forever (the file is append-only).
    """
    batch = list(records) if many else [records]
    return append_lines(path, b"".join(encode_line(r) for r in batch))


def append_lines(path: Path, payload: bytes) -> int:
    """Append `payload` (whole lines, each ending in a newline) under the file's lock.

    One `write()` under the lock, then fsync after it: the call returns once its lines are
    durable, and appenders that overlap (parallel subagents noting their findings) share
    the file system's journal commits instead of queueing behind each other's fsync. A torn
    last line left by a crash is closed first. Returns the first new line's 1-based number
    (counting every physical line).
    """
    path = Path(path)
    state = "the file is as it was"
    try:
        fd = _open_new(path, os.O_RDWR | os.O_CREAT | os.O_APPEND)
        thread_lock, process_lock = _append_locks(path)
        try:
            with thread_lock, process_lock:
                st = os.fstat(fd)
                size = st.st_size
                first_line = 1
                if size:
                    lines, whole = _count_lines(fd, st)
                    first_line = lines + 1
                    if not whole:
                        # Close a torn fragment left by a crash; `_count_lines` already
                        # counted it as a line, so the new record's number is unchanged.
                        payload = b"\n" + payload
                try:
                    _write_all(fd, payload, sync=False)
                except OSError:
                    state = _cut_back(fd, size)  # no partial line stays (a full disk)
                    raise
            state = "its new lines may not be durable"  # written; only the fsync failed
            os.fsync(fd)
        finally:
            os.close(fd)
        if size == 0:
            fsync_dir(path.parent)
    except OSError as exc:
        _raise_os(exc, path, state)
    return first_line


def _cut_back(fd: int, size: int) -> str:
    """Truncate `fd` to `size` after a failed append; what the file is left as."""
    try:
        os.ftruncate(fd, size)
    except OSError:
        return "a partial last line was left (readers skip it)"
    return "the file is as it was"


#: Per appended file: an in-process lock, taken before the file lock, so threads of one
#: process (parallel subagents) queue on it instead of polling the file lock; and the file
#: lock itself. The most recently used `MAX_KEPT` files keep theirs (a long-lived process,
#: such as a server running task after task, appends to ever new files); a pair dropped
#: while in use still excludes through the file lock.
_APPEND_LOCKS: dict[str, tuple[threading.Lock, Any]] = {}
_APPEND_LOCKS_GUARD = threading.Lock()
MAX_KEPT = 256


def _forget_append_locks() -> None:
    # a forked child must not inherit a thread lock held by one of the parent's threads
    global _APPEND_LOCKS_GUARD, _LINE_COUNTS_LOCK
    _APPEND_LOCKS.clear()
    _APPEND_LOCKS_GUARD = threading.Lock()
    _LINE_COUNTS_LOCK = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_append_locks)


class _FlockFile:
    """An exclusive `flock` on a lock file, opened for each hold.

    It excludes, and is excluded by, `filelock.FileLock` on the same file (both `flock`
    it), at about 15 µs per acquire and release against 180 µs for `FileLock`, which
    parallel subagents paid on each registry line. (Keeping the descriptor open between
    holds saved ~10 µs more but kept one open per file ever appended to: a process running
    task after task ran out of descriptors.) Not reentrant; callers hold the in-process
    lock of `_append_locks` around it.
    """

    def __init__(self, path: Path, timeout: float = LOCK_TIMEOUT_S) -> None:
        self.path, self.timeout, self.fd = path, timeout, -1

    def __enter__(self) -> _FlockFile:
        deadline, delay = None, 0.001
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                except BlockingIOError:  # another process holds it: poll until the deadline
                    now = time.monotonic()
                    deadline = deadline or now + self.timeout
                    if now >= deadline:
                        raise TimeoutError(
                            errno.ETIMEDOUT,
                            f"lock held by another process for {self.timeout:g} s",
                        ) from None
                    time.sleep(delay)
                    delay = min(delay * 2, 0.05)
                    continue
                if os.fstat(fd).st_nlink:
                    self.fd = fd
                    return self
                # the lock file was deleted while this descriptor was open: lock the new one
                os.close(fd)
                fd = -1
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except BaseException:
            if fd >= 0:
                os.close(fd)
            raise

    def __exit__(self, *exc: object) -> None:
        fd, self.fd = self.fd, -1
        try:
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)


def _append_locks(path: Path) -> tuple[threading.Lock, Any]:
    key = str(path)
    with _APPEND_LOCKS_GUARD:
        locks = _APPEND_LOCKS.pop(key, None)  # put back last: the most recently used
        if locks is None:
            process_lock = (
                _FlockFile(lock_path(path))
                if fcntl is not None
                else FileLock(str(lock_path(path)), timeout=LOCK_TIMEOUT_S)
            )
            locks = (threading.Lock(), process_lock)
            _drop_oldest(_APPEND_LOCKS)
        _APPEND_LOCKS[key] = locks
        return locks


def _drop_oldest(kept: dict[Any, Any]) -> None:
    """Make room for one more in `kept` (oldest first out; callers hold its lock)."""
    while len(kept) >= MAX_KEPT:
        del kept[next(iter(kept))]


#: Newline counts of jsonl prefixes already counted, per (device, inode): appends then only
#: read the new tail. An entry is trusted only if the bytes just before its offset still
#: match the remembered probe, so a file rewritten in place is counted again from scratch.
_LINE_COUNTS: dict[tuple[int, int], tuple[int, int, bytes]] = {}
_LINE_COUNTS_LOCK = threading.Lock()
_PROBE = 64
BLOCK = 1 << 20


def _count_lines(fd: int, st: os.stat_result) -> tuple[int, bool]:
    """`(physical lines, whether the file ends in a newline)` of the non-empty file `fd`
    (a final line without newline counts as one).

    A file counted before is read from just before where that count ended (the remembered
    probe must still be there), in one read when the new tail is small.
    """
    key, size = (st.st_dev, st.st_ino), st.st_size
    offset, count, tail = 0, 0, b""
    cached = _LINE_COUNTS.get(key)
    if cached is not None and cached[0] <= size:
        done, newlines, probe = cached
        start = done - len(probe)
        block = os.pread(fd, min(size - start, BLOCK), start)
        if block[: len(probe)] == probe:
            offset, count = start + len(block), newlines + block.count(b"\n", len(probe))
            tail = block
    while offset < size:
        block = os.pread(fd, BLOCK, offset)
        if not block:
            break
        count += block.count(b"\n")
        offset += len(block)
        tail = block if len(block) >= _PROBE else tail[-_PROBE:] + block
    counted = (offset, count, tail[-_PROBE:])
    with _LINE_COUNTS_LOCK:  # the most recently counted `MAX_KEPT` files are remembered
        if _LINE_COUNTS.pop(key, None) is None:
            _drop_oldest(_LINE_COUNTS)
        _LINE_COUNTS[key] = counted
    whole = tail.endswith(b"\n")
    return count + (0 if whole else 1), whole


@dataclass
class JsonlRead:
    """What `read_jsonl` found: good records by line number, and the bad lines."""

    records: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    bad_lines: list[int] = field(default_factory=list)
    torn_tail: bool = False
    """True when the last line has no newline and does not parse (a crash mid-append)."""


def iter_jsonl_lines(
    path: Path, start_offset: int = 0, start_line: int = 1
) -> Iterator[tuple[int, int, bytes]]:
    """Yield `(line_number, byte_offset, raw_line_without_newline)` from `start_offset`.

    Only complete lines (ending in a newline) are yielded; a trailing fragment is left for
    the caller to detect with the file size, because it may still be being written.
    """
    with open(path, "rb") as fh:
        fh.seek(start_offset)
        line_no, offset = start_line, start_offset
        for raw in fh:
            if not raw.endswith(b"\n"):
                return
            yield line_no, offset, raw[:-1]
            line_no += 1
            offset += len(raw)


def read_jsonl(path: Path) -> JsonlRead:
    """Read a jsonl file, tolerating and reporting bad and torn lines."""
    path = Path(path)
    if not path.exists():
        return JsonlRead()
    return parse_jsonl(path.read_bytes())


def parse_jsonl(data: bytes) -> JsonlRead:
    """The records of jsonl `data` by line number, with its bad and torn lines."""
    result = JsonlRead()
    lines = data.split(b"\n")
    tail_without_newline = not data.endswith(b"\n") and data != b""
    if data.endswith(b"\n"):
        lines = lines[:-1]
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            obj = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            obj = None
        if isinstance(obj, dict):
            result.records.append((number, obj))
        else:
            result.bad_lines.append(number)
            if tail_without_newline and number == len(lines):
                result.torn_tail = True
    return result
