"""What a sync of the full-text index stats: every indexable file of a memory directory.

`scan` walks the layout's own folders and each task's `working/` folder with `os.scandir`,
reading no file, and watches each folder before it lists it (`_watch.Watch`). Hidden files
and folders (names starting with '.') are skipped, and nothing that resolves outside the
memory root is taken (`memory.paths.Inside`).
"""

from __future__ import annotations

import os

from memory.backends.blocks import FLAT_FOLDERS
from memory.backends.files._index_plan import Seen
from memory.backends.files._watch import Watch
from memory.paths import Inside, Layout


def scan(layout: Layout, watch: Watch | None = None) -> dict[str, Seen]:
    """Stat every indexable file: `{relative path: Seen}` (no file is read).

    Each folder is watched (`watch`) before it is listed, so a change made while the
    scan runs is seen by the next sync. Nothing that resolves outside the memory root
    is taken (`Inside`): a symlinked file counts only when its target is inside (and
    is read there), a symlinked folder below the layout's own folders is not entered.
    """
    watch = watch or Watch.inactive()
    watch.add(str(layout.root), root=True)  # folders created or removed
    inside = Inside(layout.root)
    seen: dict[str, Seen] = {}
    for attr, source, suffixes in FLAT_FOLDERS:
        folder = getattr(layout, attr)
        if _leaves(str(folder), inside):
            continue
        rel = layout.relative(folder)
        _scan_dir(str(folder), rel, source, suffixes, seen, inside, watch)
    working = str(layout.working)
    if _leaves(working, inside):
        return seen
    watch.add(working)
    for task in _scandir(working):
        if task.name.startswith(".") or not task.is_dir():
            continue
        if task.is_symlink() and not inside(task.path):
            continue
        rel_task = f"working/{task.name}"
        watch.add(task.path)
        for name, source in (("overview.md", "overview"), ("messages.jsonl", "messages")):
            path = os.path.join(task.path, name)
            _add_file(path, f"{rel_task}/{name}", source, seen, inside)
        detail = os.path.join(task.path, "detail")
        if not _leaves(detail, inside):
            _scan_dir(detail, f"{rel_task}/detail", "detail", (".md",), seen, inside, watch)
    return seen


def _scan_dir(
    folder: str,
    rel: str,
    source: str,
    suffixes: tuple[str, ...],
    seen: dict[str, Seen],
    inside: Inside,
    watch: Watch,
) -> None:
    watch.add(folder)
    for item in _scandir(folder):
        if item.name.startswith("."):
            continue
        if item.is_dir(follow_symlinks=False):
            _scan_dir(item.path, f"{rel}/{item.name}", source, suffixes, seen, inside, watch)
        elif item.name.endswith(suffixes):
            _add_file(item.path, f"{rel}/{item.name}", source, seen, inside, item)


def _leaves(folder: str, inside: Inside) -> bool:
    """True when the folder `folder` is a symlink whose target is outside the memory root."""
    return os.path.islink(folder) and not inside(folder)


def _add_file(
    path: str,
    rel: str,
    source: str,
    seen: dict[str, Seen],
    inside: Inside,
    item: os.DirEntry | None = None,
) -> None:
    """Add `path` to `seen` if it is a regular file inside the memory root (a symlink is
    followed only when its target is inside, and recorded by that target's path)."""
    try:
        link = item.is_symlink() if item is not None else os.path.islink(path)
        if link:
            path = inside.real(path)
            if path is None:
                return
            st = os.stat(path)
        else:
            st = item.stat() if item is not None else os.stat(path)
    except OSError:
        return
    if (st.st_mode & 0o170000) == 0o100000:  # regular files only
        seen[rel] = Seen(rel, source, path, st.st_mtime_ns, st.st_size)


def _scandir(path: str) -> list[os.DirEntry]:
    try:
        with os.scandir(path) as it:
            return list(it)
    except (FileNotFoundError, NotADirectoryError, PermissionError):
        return []
