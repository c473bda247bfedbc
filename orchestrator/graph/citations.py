"""Checked citations: what the lead's answer cites, held against the task and the workdir.

The lead's `SubmitAnswer` names the findings files and the workdir files its answer rests
on, and its text may cite `file:line`. A model can name anything there (a finding that
does not exist, `../../../etc/passwd`, `/etc/shadow`), so nothing it names is written as a
source unchecked (`check_citations`):

* a cited **finding** must be one of this task's findings files (its path under the memory
  directory, as the answer call was given it, or its subtask key) or merged batches;
* a cited **workdir file** must exist inside the workdir, resolved there (`confine`: no
  `..`, no absolute path outside it, no link out); an absolute path inside the workdir is
  taken as its relative path;
* a **`file:line`** (or `file:start-end`) citation, in the files list or in the answer's
  text, must name a line the file has. In the text, a citation is a `path:line` token
  whose path has a file extension and is either in backticks or holds a `/` (so `host:80`
  in prose is not one).

What passes stays a source; the rest is listed as *not found*, with why, beside the
answer (`merged_findings.md.j2`'s `Citations checked` line). The answer's text is kept
as the model wrote it.

Invariant: a finding or file listed as a source of the answer exists (was found when the
answer was written); the check only reads, with a bounded read per file.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from memory.errors import PathEscapeError
from memory.paths import confine

MAX_CITATIONS = 200
"""Workdir citations checked per answer (the rest are dropped, counted as unchecked)."""
MAX_READ = 8 * 1024 * 1024
"""Bytes of a file read to count its lines."""

_LINE = re.compile(r"^(?P<path>.+?):(?P<start>\d+)(?:[-\u2013](?P<end>\d+))?$")
_PATH = r"[\w.][\w./-]*\.[A-Za-z]\w*"
_TICKED = re.compile(rf"`({_PATH}:\d+(?:[-\u2013]\d+)?)`")
_SLASHED = re.compile(r"(?<![\w./:-])((?:[\w.-]+/)+[\w.-]*\.[A-Za-z]\w*:\d+(?:[-\u2013]\d+)?)")


def text_citations(text: str) -> list[str]:
    """The `file:line` citations of an answer's text, in order, once each."""
    found = [*_TICKED.findall(text or ""), *_SLASHED.findall(text or "")]
    return list(dict.fromkeys(found))


def _split_line(cite: str) -> tuple[str, int | None, int | None]:
    """`path`, first line and last line of a citation (`a.py:3-5`); no line: None."""
    match = _LINE.match(cite.strip())
    if not match:
        return cite.strip(), None, None
    start = int(match["start"])
    end = int(match["end"]) if match["end"] else start
    return match["path"], start, end


def _lines(path: Path) -> int:
    """How many lines the file holds (within `MAX_READ` bytes)."""
    with open(path, "rb") as handle:
        data = handle.read(MAX_READ)
    return data.count(b"\n") + (1 if data and not data.endswith(b"\n") else 0)


def file_problem(workdir: Path, cite: str) -> str:
    """Why `cite` (a workdir path, maybe with `:line`) is not a file of the workdir; ''
    when it is."""
    raw, start, end = _split_line(cite)
    if not raw:
        return "an empty path"
    root = workdir.resolve()
    if os.path.isabs(raw):
        absolute = Path(os.path.normpath(raw))
        if absolute != root and root not in absolute.parents:
            return "outside the workdir"
        raw = absolute.relative_to(root).as_posix() or "."
    try:
        target = confine(root, raw, label="the workdir") if raw != "." else root
    except PathEscapeError:
        return "outside the workdir"
    if not target.exists():
        return "not found in the workdir"
    if start is None:
        return ""
    if not target.is_file():
        return "not a file (a line was cited)"
    try:
        count = _lines(target)
    except OSError as exc:
        return f"unreadable ({type(exc).__name__})"
    if start < 1 or (end or start) > count:
        line = (end or start) if start >= 1 else start
        return f"line {line} is past the end: the file has {count} lines"
    return ""


def _finding_key(path: str) -> str:
    text = path.strip().strip("`")
    return text[2:] if text.startswith("./") else text


def check_citations(
    answer: Mapping[str, Any], *, workdir: str | os.PathLike[str], findings: Iterable[str]
) -> dict[str, Any]:
    """`answer` (`SubmitAnswer`'s fields) with only the sources that hold, and
    `citations`: `{"checked": N, "not_found": [{"cite", "why"}, ...], "unchecked": M}`
    (M: citations past `MAX_CITATIONS`, dropped unchecked).

    Args:
        workdir: the task's workdir.
        findings: this task's findings, by file path (relative to the memory directory)
            and subtask key.
    """
    own = {_finding_key(f) for f in findings if f}
    root = Path(workdir)
    failed: list[dict[str, str]] = []
    kept_findings, kept_files = [], []
    cited_findings = list(dict.fromkeys(str(f) for f in answer.get("findings") or []))
    for cited in cited_findings:
        if _finding_key(cited) in own:
            kept_findings.append(cited)
        else:
            failed.append({"cite": cited, "why": "not a finding of this task"})
    cites = list(dict.fromkeys(str(f) for f in answer.get("files") or []))
    in_text = [c for c in text_citations(str(answer.get("answer") or "")) if c not in cites]
    files = [*cites, *in_text]
    for cited in files[:MAX_CITATIONS]:
        problem = file_problem(root, cited)
        if problem:
            failed.append({"cite": cited, "why": problem})
        elif cited in cites:
            kept_files.append(cited)
    checked = len(cited_findings) + min(len(files), MAX_CITATIONS)
    return {
        **answer,
        "findings": kept_findings,
        "files": kept_files,
        "citations": {
            "checked": checked,
            "not_found": failed,
            "unchecked": max(len(files) - MAX_CITATIONS, 0),
        },
    }
