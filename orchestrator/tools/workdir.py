"""Read-only file tools over the `--workdir`: `list_files`, `read_file`, `grep_files`.

Agents explore the project they work on through these three LangChain tools. The design:

* **Read-only and confined.** Every path an agent passes goes through
  `memory.paths.confine`, so nothing outside the workdir can be read: no absolute paths,
  no `..`, no symlink leading out. Nothing here opens a file for writing.
* **Errors are answers.** A bad path, a binary file or a wrong argument comes back to the
  agent as a one-line string starting with `Error:` (the agent can correct itself); only
  `check_workdir` raises, because a missing workdir is the user's mistake, not the agent's.
* **Noise is skipped.** VCS and tool folders (`.git`, `.temp`, `__pycache__`,
  `node_modules`, `.venv`, any hidden folder), build output (`build`, `dist`,
  `*.egg-info`), virtualenvs (any folder holding `pyvenv.cfg`), tether memories (any
  folder holding `.tether/`: a `--memory-dir` inside the workdir), what the workdir's
  `.gitignore` ignores (simple glob lines; `!` negations are not honoured), hidden
  files, binary files, and (for
  `grep_files`) files larger than `MAX_GREP_BYTES` never show up. Paths through a
  `SKIP_DIRS` folder are refused even when named explicitly; other hidden files can be
  read when asked for by name (e.g. `.github/workflows/ci.yml`).
* **Credentials are kept from agents** (`orchestrator.config.secret_files`): a file a
  rule matches (`.env*`, `*.env`, `.npmrc`, `.netrc`, `.aws/`, `.ssh/`, `id_rsa`, `*.pem`,
  ..., and the workflow's `secret_files`) is refused by name with the rule named, never its
  content, and left out of listings and searches.
* **Stable, parseable output** (tether's offline model reads it back):
  `list_files` prints one `path (N bytes)` line per file, paths relative to the workdir,
  breadth-first (shallow files first, then by name); `read_file` prints `N: text` lines
  under a `# path (lines a-b of N)` header; `grep_files` prints `path:line: text` lines.

Invariant: for the same tree and arguments the output is the same, byte for byte.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typing_extensions import TypedDict

from memory.errors import PathEscapeError
from memory.paths import confine, read_bounded
from memory.task.status_file import BEGIN as STATUS_BEGIN
from memory.task.status_file import FILE_NAME as STATUS_FILE
from orchestrator.config.secret_files import SecretFiles, kept_message
from orchestrator.config.settings import check_workdir
from orchestrator.tools._dirfd import NotRegularError, open_regular

if TYPE_CHECKING:
    from langchain_core.tools import BaseTool

#: What marks a folder as a tether memory (its records), never walked into.
MEMORY_MARK = ".tether"

#: Folder names never walked into (hidden folders are skipped as well).
SKIP_DIRS = frozenset(
    ".git .hg .svn .temp __pycache__ node_modules .venv venv .mypy_cache .pytest_cache"
    " .ruff_cache .tox .eggs dist build".split()
)
#: Extensions treated as binary without looking inside.
BINARY_SUFFIXES = frozenset(
    """.png .jpg .jpeg .gif .bmp .ico .webp .pdf .zip .gz .tgz .bz2 .xz .7z .tar .whl .jar
    .so .dylib .dll .exe .bin .o .a .pyc .pyo .class .db .sqlite .sqlite3 .woff .woff2 .ttf
    .otf .mp3 .mp4 .wav .mov .avi .npy .npz .pkl .parquet .onnx .pt .safetensors .ai .eps .psd
    .sketch .fig .xcf .tif .tiff .heic .avif .icns .dmg .iso .rlib .wasm""".split()
)
#: Extensions of source and text files, taken as text without opening them (a tree of 19K
#: files: one open each made up most of a listing).
TEXT_SUFFIXES = frozenset(
    """.py .pyi .md .rst .txt .json .yaml .yml .toml .cfg .ini .js .jsx .ts .tsx .mjs .cjs
    .go .rs .java .kt .c .h .cc .cpp .hpp .cs .rb .php .swift .sh .bash .html .css .scss
    .xml .sql .j2 .jinja .csv .tsv""".split()
)
MAX_GREP_BYTES = 1_000_000
"""Files larger than this are not searched by `grep_files` (listing and reading still work)."""
MAX_LINE_CHARS = 400
#: A capped listing names at most this many folders (with their text-file counts).
MAX_FOLDERS = 200
FOLDERS_PREFIX = "# text files per folder: "
"""Longer lines are cut in `read_file` and `grep_files` output."""
MAX_WALK_FILES = 20_000
"""A walk stops after this many files, so a huge tree cannot stall an agent."""
_SNIFF_BYTES = 4096
MAX_GITIGNORE_BYTES = 1_000_000
COUNT_CHARS = 32_000_000
"""`read_file` counts a file's lines up to this many characters past what it shows; a
larger file's header says "at least"."""
#: Line breaks `str.splitlines` knows besides "\n" (where `^`/`$` of MULTILINE do not match).
_OTHER_BREAKS = re.compile("[\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def has_nul(data: bytes) -> bool:
    """Whether the first 4 KiB of `data` hold a NUL byte (binary content)."""
    return b"\x00" in data[:_SNIFF_BYTES]


def shown_name(name: str) -> str:
    """A file name as the tools show it: a name that is not UTF-8 (kept by Python as lone
    surrogates) with its bytes escaped (`caf\\xe9.txt`), so no answer, log or JSON line
    ever holds a character it cannot encode."""
    try:
        name.encode("utf-8")
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")
    return name


def is_binary(path: Path) -> bool:
    """True for files with a binary extension, or with another extension than a text one
    (`TEXT_SUFFIXES`) and a NUL byte in their first 4 KiB."""
    suffix = path.suffix.lower()
    if suffix in BINARY_SUFFIXES:
        return True
    if suffix in TEXT_SUFFIXES:
        return False
    try:
        with path.open("rb") as fh:
            return b"\x00" in fh.read(_SNIFF_BYTES)
    except OSError:
        return True


def _written_by_tether(path: Path) -> bool:
    """True for a STATUS.md that carries tether's status block (`memory status-file`)."""
    try:
        with open(path, "rb") as fh:
            return STATUS_BEGIN.split(" (")[0].encode() in fh.read(1 << 16)
    except OSError:
        return False


def _skipped_dir(name: str) -> bool:
    return name in SKIP_DIRS or name.startswith(".") or name.endswith(".egg-info")


def _gitignore(root: Path) -> list[tuple[str, bool]]:
    """`(glob, directories only)` pairs of the root `.gitignore` (none if unreadable, not a
    regular file inside the workdir, or over `MAX_GITIGNORE_BYTES`)."""
    try:
        data = read_bounded(root / ".gitignore", MAX_GITIGNORE_BYTES, within=root)
    except OSError:  # PathEscapeError included
        return []
    text = data.decode("utf-8", errors="replace")
    out = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line.startswith(("#", "!")):
            continue
        out.append(
            (
                line.rstrip("/").lstrip("/") if "/" in line.rstrip("/") else line.rstrip("/"),
                line.endswith("/"),
            )
        )
    return out


def _clamp(value: object, default: int, high: int) -> int:
    try:
        n = int(value)  # type: ignore[call-overload]
    except (TypeError, ValueError):
        return default
    return max(1, min(n, high))


class WorkdirFiles:
    """The logic behind the three tools, as plain methods returning strings.

    Args:
        root: the workdir (checked with `check_workdir`).
        secret_files: the workflow's own patterns of files kept from agents, besides
            `DEFAULT_SECRET_FILES`.
    """

    def __init__(self, root: str | os.PathLike[str], secret_files: Sequence[str] = ()) -> None:
        self.root = check_workdir(root)
        self._ignored = _gitignore(self.root)
        self.secrets = SecretFiles(secret_files)

    # -- helpers -------------------------------------------------------------------------

    def _resolve(self, user_path: str) -> Path:
        """Confine `user_path` to the workdir; raises PathEscapeError/FileNotFoundError."""
        raw = (user_path or ".").strip() or "."
        if raw in (".", "./"):
            return self.root
        target = confine(self.root, raw, label="the workdir")
        if not target.exists():
            raise FileNotFoundError(f"path {raw!r} does not exist in the workdir")
        parts = target.relative_to(self.root).parts
        is_dir = target.is_dir()
        folders = parts if is_dir else parts[:-1]  # a script named `build` is a file
        if any(p in SKIP_DIRS for p in folders):
            raise PathEscapeError(
                f"path {raw!r} is excluded from the file tools (tool or VCS folder)"
            )
        # the name asked for and the file it leads to (a link named `notes` to `id_rsa`)
        rule = self.secrets.rule(parts, is_dir=is_dir) or self.secrets.rule(
            Path(raw).parts, is_dir=is_dir
        )
        if rule is not None:
            raise PathEscapeError(kept_message(raw, rule))
        return target

    def _resolve_many(self, user_path: str) -> list[Path]:
        """`_resolve` of a path, or of each of several separated by commas (a path whose
        own name holds a comma is taken whole when it exists)."""
        raw = (user_path or ".").strip() or "."
        try:
            return [self._resolve(raw)]
        except FileNotFoundError:
            if "," not in raw:
                raise
        parts = [p.strip() for p in raw.split(",") if p.strip()]
        return list(dict.fromkeys(self._resolve(p) for p in parts)) or [self.root]

    def ignored(self, path: Path, is_dir: bool) -> bool:
        """Is `path` build output, a virtualenv or ignored by the root `.gitignore`?"""
        if is_dir and (
            _skipped_dir(path.name)
            or (path / "pyvenv.cfg").is_file()
            or (path / MEMORY_MARK).is_dir()  # a tether memory (`--memory-dir` inside it)
        ):
            return True
        rel = self.rel(path)
        for glob, dirs_only in self._ignored:
            if dirs_only and not is_dir:
                continue
            target = rel if "/" in glob else path.name
            if fnmatch.fnmatchcase(target, glob):
                return True
        return False

    def rel(self, path: Path) -> str:
        """`path` relative to the workdir, with forward slashes (escaped: `shown_name`)."""
        return shown_name(path.relative_to(self.root).as_posix()) if path != self.root else "."

    def iter_files(self, start: Path) -> Iterator[Path]:
        """Text-candidate files under `start`, breadth-first, skipping noise and symlinks out."""
        if start.is_file():
            yield start
            return
        level = [start]
        seen = 0
        while level:
            next_level: list[Path] = []
            for folder in level:
                try:
                    entries = sorted(os.scandir(folder), key=lambda e: e.name)
                except OSError:
                    continue
                for entry in entries:
                    path = Path(entry.path)
                    if entry.is_dir(follow_symlinks=False):
                        if not self.ignored(path, True) and not self._kept(path, True):
                            next_level.append(path)
                        continue
                    if entry.name.startswith(".") or not entry.is_file():
                        continue
                    if self.secrets.name_kept(entry.name) or (
                        self.secrets.has_path_rules and self._kept(path, False)
                    ):
                        continue  # credentials: never listed, never searched
                    if self._ignored and self.ignored(path, False):
                        continue
                    if entry.name == STATUS_FILE and _written_by_tether(path):
                        continue  # tether's own memory pointer is not evidence about the project
                    if entry.is_symlink() and (
                        not self._inside(path) or self._kept(path.resolve(), False)
                    ):
                        continue  # out of the workdir, or a link to credentials
                    seen += 1
                    if seen > MAX_WALK_FILES:
                        return
                    yield path
            level = next_level

    def _kept(self, path: Path, is_dir: bool) -> bool:
        """Whether a secret-files rule keeps `path` from agents."""
        return self.secrets.rule(path.relative_to(self.root).parts, is_dir=is_dir) is not None

    def _inside(self, path: Path) -> bool:
        resolved = path.resolve()
        return resolved == self.root or self.root in resolved.parents

    # -- the tools -----------------------------------------------------------------------

    def list_files(self, path: str = ".", max_entries: int = 200, recursive: bool = False) -> str:
        """The entries of folder `path`: its subfolders with the text files each holds, then
        its text files with their sizes; `recursive`: every text file under it, one
        `path (N bytes)` line each (at most `max_entries`)."""
        limit = _clamp(max_entries, 200, 2000)
        try:
            start = self._resolve(path)
        except (PathEscapeError, FileNotFoundError) as exc:
            return f"Error: {exc}"
        if not recursive and start.is_dir():
            return self._list_level(start, limit)
        lines: list[str] = []
        total = 0
        folders: dict[str, int] = {}  # text files per folder directly under `start`
        for file in self.iter_files(start):
            if is_binary(file):
                continue
            total += 1
            parts = file.relative_to(start).parts if file != start else ()
            if len(parts) > 1:
                folders[parts[0]] = folders.get(parts[0], 0) + 1
            if len(lines) < limit:
                try:
                    size = file.stat().st_size
                except OSError:
                    continue
                lines.append(f"{self.rel(file)} ({size} bytes)")
        where = repr(self.rel(start))
        if start == self.root:  # the project's own name: a word every file of it may hold
            where += f" (workdir {self.root.name!r})"
        if not lines:
            return f"# no text files under {where}"
        head = [f"# {total} text files under {where}"]
        if total > len(lines):
            head[0] += f", showing the first {len(lines)}; pass a sub-path to see more"
        if total > len(lines) and folders:
            # what the cut hides: every folder, so a plan can name those not shown
            names = sorted(folders)
            shown = ", ".join(f"{n}/ {folders[n]}" for n in names[:MAX_FOLDERS])
            more = f", +{len(names) - MAX_FOLDERS} more" if len(names) > MAX_FOLDERS else ""
            head.append(f"{FOLDERS_PREFIX}{shown}{more}")
        return "\n".join([*head, *lines])

    def _list_level(self, start: Path, limit: int) -> str:
        """One level of `start`: `name/ (N files)` per subfolder, `name (N bytes)` per file."""
        counts: dict[str, int] = {}
        files: list[str] = []
        for file in self.iter_files(start):
            if is_binary(file):
                continue
            parts = file.relative_to(start).parts
            if len(parts) > 1:
                counts[parts[0]] = counts.get(parts[0], 0) + 1
            else:
                try:
                    files.append(f"{self.rel(file)} ({file.stat().st_size} bytes)")
                except OSError:
                    continue
        where = repr(self.rel(start))
        if start == self.root:
            where += f" (workdir {self.root.name!r})"
        if not counts and not files:
            return f"# no text files under {where}"
        prefix = "" if start == self.root else self.rel(start) + "/"
        folders = [f"{prefix}{name}/ ({n} files)" for name, n in sorted(counts.items())]
        entries = [*folders, *sorted(files)]
        head = (
            f"# {where}: {len(folders)} folders, {len(files)} text files "
            "(recursive=true lists every file)"
        )
        if len(entries) > limit:
            head += f", showing the first {limit}"
        return "\n".join([head, *entries[:limit]])

    def read_file(self, path: str, start_line: int = 1, max_lines: int = 200) -> str:
        """Lines `start_line`.. of a text file, numbered as `N: text`."""
        return self.read_outcome(path, start_line, max_lines)[0]

    def read_outcome(
        self, path: str, start_line: int = 1, max_lines: int = 200
    ) -> tuple[str, ReadOutcome | None]:
        """`read_file`'s answer and what it read: the file, or None when it read none (an
        `Error:` answer)."""
        start_no = _clamp(start_line, 1, 10**9)
        limit = _clamp(max_lines, 200, 2000)
        try:
            target = self._resolve(path)
        except (PathEscapeError, FileNotFoundError) as exc:
            return f"Error: {exc}", None
        rel = self.rel(target)
        if target.is_dir():
            return f"Error: {rel!r} is a directory: use list_files to see its files", None
        if target.suffix.lower() in BINARY_SUFFIXES:
            return f"Error: {rel!r} is a binary file: read_file shows text files only", None
        try:
            fd = open_regular(target, rel)
        except NotRegularError:
            return f"Error: {rel!r} is not a regular file (a FIFO, device or socket)", None
        except OSError as exc:
            return f"Error: cannot read {rel!r} ({exc.strerror or exc})", None
        try:
            with open(fd, encoding="utf-8", errors="replace") as fh:
                if has_nul(os.pread(fd, _SNIFF_BYTES, 0)):
                    return f"Error: {rel!r} is a binary file: read_file shows text files only", None
                shown, count, whole = _window(fh, start_no, limit)
        except OSError as exc:
            return f"Error: cannot read {rel!r} ({exc.strerror or exc})", None
        total = str(count) if whole else f"at least {count}"
        if not shown:
            return f"# {rel} has {total} lines; start_line {start_no} is past the end", None
        last = start_no + len(shown) - 1
        out = [f"# {rel} (lines {start_no}-{last} of {total})", *shown]
        if last < count:
            more = count - last if whole else f"at least {count - last}"
            out.append(f"# ... {more} more lines: call read_file with start_line={last + 1}")
        return "\n".join(out), {"read": [rel]}

    def grep_files(self, pattern: str, path: str = ".", max_matches: int = 50) -> str:
        """Case-insensitive regex (literal if the regex is invalid) search: `path:line: text`."""
        return self.grep_outcome(pattern, path, max_matches)[0]

    def grep_outcome(
        self, pattern: str, path: str = ".", max_matches: int = 50
    ) -> tuple[str, ReadOutcome | None]:
        """`grep_files`' answer and what it read: the files whose lines it shows, or None
        when it shows none."""
        limit = _clamp(max_matches, 50, 1000)
        if not pattern:
            return "Error: empty pattern: give a word or a regular expression", None
        try:
            regex = re.compile(pattern, re.IGNORECASE)
        except re.error:
            regex = re.compile(re.escape(pattern), re.IGNORECASE)
        try:
            starts = self._resolve_many(path)
        except (PathEscapeError, FileNotFoundError) as exc:
            return f"Error: {exc}", None
        # a file without a match anywhere is skipped after one scan of its whole text. `^`
        # and `$` match at its line breaks too (MULTILINE) where every break is a "\n", as
        # `splitlines` breaks; `\A` and `\Z` would not, so those patterns go line by line
        anchored = bool(re.search(r"[$^]", regex.pattern))
        whole: re.Pattern[str] | None = regex
        if re.search(r"\\[AZz]", regex.pattern):
            whole = None
        elif anchored:
            whole = re.compile(regex.pattern, regex.flags | re.MULTILINE)
        hits: list[tuple[str, int, str]] = []  # (file, line number, shown line)
        # per file: its match count and first lines, so that a capped search shows lines of
        # many files (not the first file's fifty) and says where the matches are
        per_file: dict[str, list[tuple[str, int, str]]] = {}
        counts: dict[str, int] = {}
        sample = max(3, limit // 10)
        total = 0
        seen: set[Path] = set()
        for file in (f for start in starts for f in self.iter_files(start)):
            if len(starts) > 1:  # a file under two of the paths is searched once
                if file in seen:
                    continue
                seen.add(file)
            try:
                if file.stat().st_size > MAX_GREP_BYTES or file.suffix.lower() in BINARY_SUFFIXES:
                    continue
                data = file.read_bytes()
            except OSError:
                continue
            if b"\x00" in data[:_SNIFF_BYTES]:  # binary (`is_binary`, without a second open)
                continue
            text = data.decode("utf-8", errors="replace")
            if (
                whole is not None
                and not (anchored and _OTHER_BREAKS.search(text))
                and not whole.search(text)
            ):
                continue
            rel = self.rel(file)
            for no, line in enumerate(text.splitlines(), start=1):
                if regex.search(line):
                    total += 1
                    counts[rel] = counts.get(rel, 0) + 1
                    shown = (rel, no, f"{rel}:{no}: {line.strip()[:MAX_LINE_CHARS]}")
                    if len(hits) < limit:
                        hits.append(shown)
                    if counts[rel] <= sample:
                        per_file.setdefault(rel, []).append(shown)
        where = ", ".join(self.rel(start) for start in starts)
        if not hits:
            return f"# no matches for {pattern!r} under {where!r}", None
        if total <= len(hits):
            return "\n".join(shown for _, _, shown in hits), _shown_files(hits)
        picked = _spread(hits, per_file, limit)
        out = [shown for _, _, shown in picked]
        busiest = sorted(counts, key=lambda r: -counts[r])[:10]
        out += [
            f"# {total} lines in {len(counts)} file(s) match {pattern!r}; "
            f"{total - len(out)} more matches not shown: narrow the path or pattern",
            "# most matches: " + ", ".join(f"{r} ({counts[r]})" for r in busiest),
        ]
        return "\n".join(out), _shown_files(picked)


def _window(fh: Any, start_no: int, limit: int) -> tuple[list[str], int, bool]:
    """`(shown lines, lines counted, whether the count is the whole file)` of a text file:
    lines `start_no`.. (at most `limit`, each cut at `MAX_LINE_CHARS`), never holding more
    than a cut line in memory, and counting the lines after them up to `COUNT_CHARS`."""
    shown: list[str] = []
    count = 0
    while count < start_no + limit - 1:
        line = fh.readline(MAX_LINE_CHARS + 1)
        if not line:
            return shown, count, True
        if not line.endswith("\n"):  # a long line: its rest is skipped, a chunk at a time
            rest = line
            while rest and not rest.endswith("\n"):
                rest = fh.readline(1 << 16)
        count += 1
        if count >= start_no:
            shown.append(f"{count}: {line.rstrip()[:MAX_LINE_CHARS]}")
    counted, last = 0, "\n"
    while counted < COUNT_CHARS:
        chunk = fh.read(1 << 20)
        if not chunk:
            return shown, count + (last != "\n"), True
        count += chunk.count("\n")
        counted += len(chunk)
        last = chunk[-1]
    return shown, count, False


def _spread(
    first: list[tuple[str, int, str]],
    per_file: dict[str, list[tuple[str, int, str]]],
    limit: int,
) -> list[tuple[str, int, str]]:
    """`limit` lines of a capped search taken across its files: each file's first lines
    in turn (round by round, files in search order), then more of the first lines found;
    shown in search order (file by file, line by line)."""
    picked: dict[tuple[str, int, str], None] = {}
    for k in range(max(len(lines) for lines in per_file.values())):
        for lines in per_file.values():
            if k < len(lines) and len(picked) < limit:
                picked.setdefault(lines[k], None)
    for hit in first:
        if len(picked) >= limit:
            break
        picked.setdefault(hit, None)
    order = {rel: i for i, rel in enumerate(per_file)}
    return sorted(picked, key=lambda h: (order[h[0]], h[1]))


def _shown_files(hits: list[tuple[str, int, str]]) -> ReadOutcome:
    """The files whose lines `hits` (a search's shown lines) come from, in order."""
    return {"read": list(dict.fromkeys(rel for rel, _, _ in hits))}


class ReadOutcome(TypedDict):
    """What a reading tool read, carried beside its answer as the `ToolMessage`'s
    `artifact` (`response_format="content_and_artifact"`): a finding's files read come
    from these (`orchestrator.graph.written.tool_log`), never from the answer's text."""

    read: list[str]
    """The workdir files whose lines the answer shows, relative to the workdir."""


#: The arguments model LangChain infers from each tool function's signature, kept from the
#: first `workdir_tools` call: the signatures never change, and inferring one builds a
#: pydantic model (about 1 ms, three per run).
_ARGS_SCHEMAS: dict[str, Any] = {}


def workdir_tools(
    workdir: str | os.PathLike[str], secret_files: Sequence[str] = ()
) -> list[BaseTool]:
    """The three read-only LangChain tools over `workdir`, in the order list, read, grep
    (`secret_files`: the workflow's own patterns of files kept from agents).

    Raises:
        WorkdirError: `workdir` is missing, not a directory or unreadable.
    """
    # LangChain only for the tools: `check_workdir` serves `orchestrator status` without it
    from langchain_core.tools import StructuredTool

    files = WorkdirFiles(workdir, secret_files)

    def list_files(path: str = ".", recursive: bool = False, max_entries: int = 200) -> str:
        """List a workdir folder: subfolders with file counts, files with sizes
        (recursive: every file under it)."""
        return files.list_files(path, max_entries, recursive)

    def read_file(
        path: str, start_line: int = 1, max_lines: int = 200
    ) -> tuple[str, ReadOutcome | None]:
        """Read a text file of the workdir, `max_lines` lines from `start_line`, numbered."""
        return files.read_outcome(path, start_line, max_lines)

    def grep_files(
        pattern: str, path: str = ".", max_matches: int = 50
    ) -> tuple[str, ReadOutcome | None]:
        """Search text files under `path` for a case-insensitive regex or literal text.

        `path` is a folder or file of the workdir, or several separated by commas.
        Returns `file:line: text` lines.
        """
        return files.grep_outcome(pattern, path, max_matches)

    tools = []
    for fn in (list_files, read_file, grep_files):
        tool = StructuredTool.from_function(
            func=fn,
            name=fn.__name__,
            description=fn.__doc__ or "",
            args_schema=_ARGS_SCHEMAS.get(fn.__name__),
            handle_validation_error=_bad_arguments,
            # what read_file and grep_files read travels beside their answer (`ReadOutcome`)
            response_format="content" if fn is list_files else "content_and_artifact",
        )
        _ARGS_SCHEMAS.setdefault(fn.__name__, tool.args_schema)
        tools.append(tool)
    return tools


def _bad_arguments(error: Exception) -> str:
    """Wrong argument types come back to the agent as one line, like every other error."""
    errors = getattr(error, "errors", None)
    if callable(errors):
        parts = [f"{'.'.join(map(str, e.get('loc', ())))}: {e.get('msg')}" for e in errors()]
        return "Error: invalid arguments (" + "; ".join(parts) + ")"
    return f"Error: invalid arguments ({error})"
