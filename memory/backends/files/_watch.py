"""The folder watch that lets a search skip the index sync's file scan (Linux inotify).

`Watch` answers one question for one memory directory: may anything under its indexed
folders have changed since the last scan? `Index.sync` asks it before stat'ing every file;
when the answer is no (and no other connection committed to `memory.db`), the scan is
skipped. One `_Inotify` instance per process is shared by every watched directory; events
only mark watches changed, nothing here reads or indexes a file. Where inotify is missing
or not trustworthy (not Linux, network or FUSE file systems, no watches left) the watch is
inactive and every sync scans.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import struct
import sys
import threading
import weakref

_IN_MODIFY, _IN_ATTRIB = 0x2, 0x4
_IN_MOVED_FROM, _IN_MOVED_TO, _IN_CREATE, _IN_DELETE = 0x40, 0x80, 0x100, 0x200
_IN_DELETE_SELF, _IN_MOVE_SELF = 0x400, 0x800
_IN_Q_OVERFLOW, _IN_IGNORED = 0x4000, 0x8000
_IN_ONLYDIR, _IN_MASK_ADD = 0x01000000, 0x20000000
_TREE_EVENTS = (
    _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF
)
_FOLDER_EVENTS = _TREE_EVENTS | _IN_MODIFY | _IN_ATTRIB
_EVENT = struct.Struct("iIII")
#: File systems where the kernel reports every change to inotify, whoever makes it. On
#: network and FUSE file systems another machine's edit would go unseen: those are scanned.
_LOCAL_FS = frozenset(
    "ext2 ext3 ext4 xfs btrfs tmpfs f2fs zfs overlay jfs reiserfs bcachefs".split()
)


class _Inotify:
    """One Linux inotify instance per process, shared by every watched memory directory.

    Events only mark watches changed; nothing here reads or indexes a file.
    """

    _instance: _Inotify | None = None
    _guard = threading.Lock()

    def __init__(self, libc: ctypes.CDLL):
        self.libc = libc
        self.pid = os.getpid()
        self.lock = threading.Lock()
        self.owners: dict[int, dict[int, bool]] = {}
        """wd -> {watch key: whether that watch's memory root is this folder}."""
        self.watches: weakref.WeakValueDictionary[int, Watch] = weakref.WeakValueDictionary()
        self.released: list[tuple[int, dict[str, int]]] = []
        """Watches whose folders are to be dropped, queued by `release`."""
        self.fd = libc.inotify_init1(os.O_NONBLOCK | os.O_CLOEXEC)

    @classmethod
    def get(cls) -> _Inotify | None:
        """This process's instance (a forked child makes its own); `None` where unusable."""
        with cls._guard:
            inst = cls._instance
            if inst is not None and inst.pid == os.getpid():
                return inst if inst.fd >= 0 else None
            if inst is not None and inst.fd >= 0:
                os.close(inst.fd)  # the parent's queue: reading it would steal its events
            libc = _libc()
            if libc is None:
                return None
            cls._instance = inst = cls(libc)
            return inst if inst.fd >= 0 else None

    def add(self, watch: Watch, path: str, root: bool) -> bool:
        """Watch the folder `path` for `watch`; False when inotify refuses (no watches left)."""
        mask = (_TREE_EVENTS if root else _FOLDER_EVENTS) | _IN_ONLYDIR | _IN_MASK_ADD
        with self.lock:
            self._drop_released()
            wd = self.libc.inotify_add_watch(self.fd, os.fsencode(path), mask)
            if wd < 0:
                return ctypes.get_errno() in (errno.ENOENT, errno.ENOTDIR)  # not there: fine
            self.owners.setdefault(wd, {})[watch.key] = root
            self.watches[watch.key] = watch
            watch.paths[path] = wd
            return True

    def poll(self) -> None:
        """Read every queued event and mark the watches it concerns changed."""
        with self.lock:
            self._drop_released()
            while True:
                try:
                    data = os.read(self.fd, 1 << 16)
                except BlockingIOError:
                    return
                except OSError:
                    self._all_changed()
                    return
                if not data:
                    return
                self._dispatch(data)

    def _dispatch(self, data: bytes) -> None:
        at = 0
        while at + _EVENT.size <= len(data):
            wd, mask, _cookie, length = _EVENT.unpack_from(data, at)
            name = data[at + _EVENT.size : at + _EVENT.size + length].rstrip(b"\0")
            at += _EVENT.size + length
            if mask & _IN_Q_OVERFLOW:
                self._all_changed()
                continue
            owners = self.owners.get(wd)
            if not owners:
                continue
            if mask & _IN_IGNORED:  # the folder is gone (or was unwatched): forget the wd
                for key in self.owners.pop(wd):
                    watch = self.watches.get(key)
                    if watch is not None:
                        watch.changed = True
                        watch.forget(wd)
                continue
            if mask & _IN_MOVE_SELF:
                self.libc.inotify_rm_watch(self.fd, wd)  # its path now names another folder
            itself = mask & (_IN_DELETE_SELF | _IN_MOVE_SELF)
            if not itself and name.startswith(b"."):
                continue  # hidden files are never indexed (editors' swap files, temp files)
            for key, root in owners.items():
                if root and not itself and name.startswith(b"memory.db"):
                    continue  # the index's own database
                watch = self.watches.get(key)
                if watch is not None:
                    watch.changed = True

    def _all_changed(self) -> None:
        for watch in list(self.watches.values()):
            watch.changed = True

    def release(self, key: int, paths: dict[str, int]) -> None:
        """Drop a watch's folders (the kernel's watch goes when no other watch uses it).

        A dead `Watch`'s finalizer calls this, and the garbage collector runs finalizers
        inside any allocation, this instance's locked code included: so it only queues the
        folders, and drops them at once only when the lock is free (else the next `add` or
        `poll` does). Waiting for the lock here deadlocked a search whose `add` collected an
        old watch.
        """
        if self.pid != os.getpid() or self.fd < 0:
            return
        self.released.append((key, paths))
        if self.lock.acquire(blocking=False):
            try:
                self._drop_released()
            finally:
                self.lock.release()

    def _drop_released(self) -> None:
        """Drop the queued watches' folders (the caller holds the lock)."""
        while self.released:
            key, paths = self.released.pop()
            for wd in set(paths.values()):
                owners = self.owners.get(wd)
                if owners is None:
                    continue
                owners.pop(key, None)
                if not owners:
                    del self.owners[wd]
                    self.libc.inotify_rm_watch(self.fd, wd)
            paths.clear()


def _libc() -> ctypes.CDLL | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or None, use_errno=True)
        for name in ("inotify_init1", "inotify_add_watch", "inotify_rm_watch"):
            getattr(libc, name)
    except (OSError, AttributeError):
        return None
    libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
    return libc


def _local_fs(path: str) -> bool:
    """True when `path` is on a local file system that inotify fully covers (`_LOCAL_FS`)."""
    try:
        with open("/proc/self/mounts", encoding="utf-8", errors="replace") as fh:
            mounts = [line.split() for line in fh]
    except OSError:
        return False
    real = os.path.realpath(path)
    best, kind = "", ""
    for fields in mounts:
        if len(fields) < 3:
            continue
        point = fields[1].encode("latin-1", "replace").decode("unicode_escape", "replace")
        inside = real == point or real.startswith(point.rstrip("/") + "/")
        if inside and len(point) >= len(best):
            best, kind = point, fields[2]
    return kind in _LOCAL_FS


class Watch:
    """Whether anything under one memory directory's indexed folders may have changed since
    the last scan. Inactive (always "changed", so every sync scans) where inotify is not
    available or not trustworthy: not Linux, a network or FUSE file system, no watches left.

    What it cannot see: a file changed through a hard link in an unwatched folder, or
    written through a shared memory map; `memory reindex` (a full scan) covers those.
    """

    _keys = iter(range(1, 1 << 62))

    def __init__(self, active: bool):
        self.key = next(self._keys)
        self.active = active
        self.changed = True
        self.paths: dict[str, int] = {}
        self.inotify: _Inotify | None = None

    @classmethod
    def inactive(cls) -> Watch:
        return cls(False)

    @classmethod
    def for_root(cls, root: str) -> Watch:
        if _Inotify.get() is None or not _local_fs(root):
            return cls(False)
        return cls(True)

    def _current(self) -> _Inotify | None:
        inot = _Inotify.get() if self.active else None
        if inot is None:
            self.active = False
            return None
        if inot is not self.inotify:  # first use, or a forked child: watch afresh
            self.inotify = inot
            self.paths = {}
            self.changed = True
            weakref.finalize(self, inot.release, self.key, self.paths)
        return inot

    def unchanged(self) -> bool:
        inot = self._current()
        if inot is None:
            return False
        inot.poll()
        return not self.changed

    def begin_scan(self) -> None:
        """Take the queued events; every change from now on marks the watch changed."""
        inot = self._current()
        if inot is not None:
            inot.poll()
            with inot.lock:
                self.changed = False

    def add(self, path: str, *, root: bool = False) -> None:
        """Watch the folder `path` (before it is listed); nothing when it does not exist."""
        inot = self._current() if self.active else None
        if inot is None or path in self.paths:
            return
        if not inot.add(self, path, root):
            self.active = False  # out of inotify watches: scan every time instead
            inot.release(self.key, self.paths)

    def forget(self, wd: int) -> None:
        for path in [p for p, w in self.paths.items() if w == wd]:
            del self.paths[path]
