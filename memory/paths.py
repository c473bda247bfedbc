"""Where the memory directory is and what lives inside it: the one place paths are made.

The root is chosen once, in this order: an explicit argument (`--memory-dir`), the
`TETHER_MEMORY_DIR` environment variable, then `./.temp/memory` under the current
directory. Every other module asks `Layout` for a path instead of joining strings, so the
layout (research_plans, findings, checkpoints, ...) is written down exactly once, here.

`confine()` is the path sandbox used by every tool that takes a path from an agent: the
result is always inside the root (no `..`, no absolute paths, no symlink leading out, no
NUL bytes, no absurdly long names). `Inside` holds the same rule for what tether reads on
its own (the index's scan, entry files, a tree being imported): nothing that resolves
outside the memory root is indexed, searched or read.
"""

from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from memory.errors import MemoryDirError, PathEscapeError

ENV_VAR = "TETHER_MEMORY_DIR"
DEFAULT_RELATIVE = Path(".temp") / "memory"
MAX_PATH_CHARS = 1024
MAX_NAME_CHARS = 255

#: The sub-directories of the memory root, by their role .
SUBDIRS = (
    "research_plans",
    "findings",
    "checkpoints",
    "context_snapshots",
    "working",
    "entries",
    "facts",
    "episodes",
)


def resolve_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """The memory root: `explicit`, else `$TETHER_MEMORY_DIR`, else `./.temp/memory`.

    The path is made absolute but not created; `Layout.ensure()` creates it.
    """
    if explicit is not None and str(explicit) != "":
        chosen = Path(explicit)
    elif os.environ.get(ENV_VAR):
        chosen = Path(os.environ[ENV_VAR])
    else:
        chosen = Path.cwd() / DEFAULT_RELATIVE
    return chosen.expanduser().absolute()


@dataclass(frozen=True)
class Layout:
    """The paths of one memory directory."""

    root: Path

    @classmethod
    def at(cls, explicit: str | os.PathLike[str] | None = None) -> Layout:
        return cls(resolve_root(explicit))

    # -- top-level folders -------------------------------------------------------------
    @property
    def research_plans(self) -> Path:
        return self.root / "research_plans"

    @property
    def findings(self) -> Path:
        return self.root / "findings"

    @property
    def checkpoints(self) -> Path:
        return self.root / "checkpoints"

    @property
    def context_snapshots(self) -> Path:
        return self.root / "context_snapshots"

    @property
    def working(self) -> Path:
        return self.root / "working"

    @property
    def entries(self) -> Path:
        return self.root / "entries"

    @property
    def facts(self) -> Path:
        return self.root / "facts"

    @property
    def episodes(self) -> Path:
        return self.root / "episodes"

    @property
    def db(self) -> Path:
        return self.root / "memory.db"

    @property
    def locks(self) -> Path:
        """Lock files live apart so that no reader mistakes them for memory."""
        return self.root / ".locks"

    # -- per-task files ----------------------------------------------------------------
    def plan(self, task_id: str) -> Path:
        return self.research_plans / f"{check_name(task_id, 'task id')}.md"

    def task_dir(self, task_id: str) -> Path:
        return self.working / check_name(task_id, "task id")

    def overview(self, task_id: str) -> Path:
        return self.task_dir(task_id) / "overview.md"

    def detail_dir(self, task_id: str) -> Path:
        return self.task_dir(task_id) / "detail"

    def messages(self, task_id: str) -> Path:
        return self.task_dir(task_id) / "messages.jsonl"

    # -- lifecycle ---------------------------------------------------------------------
    def ensure(self) -> Layout:
        """Create the root and its folders; a root that is a file is a `MemoryDirError`."""
        if self.root.exists() and not self.root.is_dir():
            raise MemoryDirError(
                f"memory directory {str(self.root)!r} is not a directory; "
                f"pass --memory-dir or set {ENV_VAR} to a folder"
            )
        try:
            for name in (*SUBDIRS, ".locks"):
                (self.root / name).mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError) as exc:
            raise MemoryDirError(
                f"cannot create memory folder {exc.filename!r}: a file is in the way"
            ) from None
        except PermissionError as exc:
            raise MemoryDirError(
                f"memory directory {str(self.root)!r} is not writable ({exc.strerror})"
            ) from None
        return self

    def relative(self, path: Path) -> str:
        """`path` relative to the root, with forward slashes (the form used in citations)."""
        return Path(os.path.relpath(path, self.root)).as_posix()


def check_name(name: str, what: str = "name") -> str:
    """A single safe path component (task ids, agent names): no separators, no dots-only."""
    if (
        not name
        or "/" in name
        or "\\" in name
        or "\x00" in name
        or name in {".", ".."}
        or len(name) > MAX_NAME_CHARS
    ):
        raise PathEscapeError(
            f"invalid {what} {name!r}: use letters, digits, '-', '_' or '.' without slashes"
        )
    return name


def check_relative(
    user_path: str | os.PathLike[str], *, label: str = "the memory directory"
) -> str:
    """`user_path` as a normalised relative POSIX path, refusing anything that leaves the root.

    Refused: empty paths, NUL bytes, absolute paths, `..` components, over-long paths or
    names. (`confine` also refuses paths that leave through a symlink.)

    Raises:
        PathEscapeError: with the offending path and what is allowed.
    """
    raw = os.fspath(user_path)
    if not raw or raw.strip() == "":
        raise PathEscapeError(f"empty path: give a path relative to {label}")
    if "\x00" in raw:
        raise PathEscapeError(f"path {raw!r} contains a NUL byte")
    if len(raw) > MAX_PATH_CHARS or any(len(p) > MAX_NAME_CHARS for p in raw.split("/")):
        raise PathEscapeError(f"path {raw[:60]!r}... is too long (max {MAX_PATH_CHARS} chars)")
    candidate = Path(raw)
    if candidate.is_absolute() or raw.startswith("~") or (len(raw) > 1 and raw[1] == ":"):
        raise PathEscapeError(f"path {raw!r} is absolute: give a path relative to {label}")
    if any(part == ".." for part in candidate.parts):
        raise PathEscapeError(f"path {raw!r} leaves {label} ('..' is not allowed)")
    rel = candidate.as_posix()
    return "" if rel == "." else rel


def confine(
    root: Path, user_path: str | os.PathLike[str], *, label: str = "the memory directory"
) -> Path:
    """Resolve `user_path` (relative to `root`) and refuse anything that leaves `root`.

    Refused: what `check_relative` refuses, and paths that resolve outside `root` through a
    symlink.

    Args:
        root: the sandbox folder.
        user_path: the path as the agent or user gave it.
        label: how error messages name the sandbox (e.g. "the workdir").

    Raises:
        PathEscapeError: with the offending path and what is allowed.
    """
    raw = os.fspath(user_path)
    candidate = Path(check_relative(raw, label=label) if raw != "." else ".")
    real_root = root.resolve()
    resolved = (real_root / candidate).resolve()
    if resolved != real_root and real_root not in resolved.parents:
        raise PathEscapeError(f"path {raw!r} resolves outside {label} (through a symlink)")
    return resolved


class Inside:
    """Whether paths under one root resolve inside it (the root's own real path, once).

    A path with no symlink in it below the root is inside by construction, so callers
    that walk the tree ask only about the symlinks they meet (`os.DirEntry.is_symlink`
    costs nothing), and readers of a known file ask once per read.
    """

    def __init__(self, root: str | os.PathLike[str]):
        self.real_root = os.path.realpath(root)
        self._prefix = self.real_root.rstrip(os.sep) + os.sep

    def __call__(self, path: str | os.PathLike[str]) -> bool:
        """True when `path` (following every symlink in it) is the root or below it."""
        real = os.path.realpath(path)
        return real == self.real_root or real.startswith(self._prefix)

    def real(self, path: str | os.PathLike[str]) -> str | None:
        """`path` with every symlink resolved, or None when that leaves the root."""
        real = os.path.realpath(path)
        return real if real == self.real_root or real.startswith(self._prefix) else None


def read_bounded(
    path: str | os.PathLike[str], limit: int, *, within: str | os.PathLike[str] | None = None
) -> bytes:
    """The content of the regular file `path`, at most `limit` bytes, read without blocking
    on what is not a regular file (a FIFO, a device: a project's `.gitignore` or skill file
    is untrusted) and, with `within`, only when it resolves inside that folder.

    Raises:
        PathEscapeError: `path` resolves outside `within` (through a symlink).
        OSError: it is missing or unreadable, not a regular file (`EINVAL`), or larger than
            `limit` (`EFBIG`).
    """
    if within is not None and not Inside(within)(path):
        raise PathEscapeError(f"{os.fspath(path)!r} resolves outside {os.fspath(within)!r}")
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file (a FIFO, device or socket?)", path)
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        if size > limit:
            raise OSError(errno.EFBIG, f"larger than {limit} bytes", path)
        return b"".join(chunks)
    finally:
        os.close(fd)
