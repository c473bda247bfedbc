"""A task's objective: a short line on the command line, or a long brief kept in one file.

The objective travels in the graph state, every checkpoint, every plan and every agent's
prompt, so a long one is multiplied many times over (a 104K-character objective once made
2.5 MB checkpoints and agents that failed on their first call). Hence:

* an objective given inline is capped at `MAX_OBJECTIVE_CHARS`; a longer one is a one-line
  user error pointing at `--objective-file`;
* a brief given as a file is stored once, as `working/{task_id}/brief.md` in the memory
  directory, and the task's objective becomes its title plus a reference to that document,
  which agents read with `memory_read` and recall finds like any other memory file.

Invariant: nothing here writes outside the memory directory, and a rejected brief writes
nothing.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from memory.paths import check_name
from orchestrator.errors import OrchestratorUserError

if TYPE_CHECKING:
    from orchestrator.artifacts.documents import Docs

MAX_OBJECTIVE_CHARS = 4_000
"""Longest objective accepted inline (about a page); longer briefs go in a file."""
MAX_BRIEF_BYTES = 2_000_000
"""Largest brief file accepted with `--objective-file`."""
TITLE_CHARS = 200
BRIEF_NAME = "brief.md"

__all__ = [
    "MAX_BRIEF_BYTES",
    "MAX_OBJECTIVE_CHARS",
    "brief_objective",
    "brief_path",
    "brief_title",
    "check_objective",
    "read_brief",
    "store_brief",
]


def check_objective(objective: str) -> str:
    """`objective` if it is usable inline.

    Raises:
        OrchestratorUserError: empty, or longer than `MAX_OBJECTIVE_CHARS`.
    """
    if not objective or not objective.strip():
        raise OrchestratorUserError("empty objective: say what the task should achieve")
    if len(objective) > MAX_OBJECTIVE_CHARS:
        raise OrchestratorUserError(
            f"objective is {len(objective):,} characters, over the {MAX_OBJECTIVE_CHARS:,} "
            "limit; put a long brief in a file and pass --objective-file FILE"
        )
    return objective


def read_brief(path: str | os.PathLike[str]) -> str:
    """The text of a brief file.

    Raises:
        OrchestratorUserError: missing, a directory, too large, binary, not UTF-8 or empty.
    """
    where = str(path)
    try:
        size = Path(path).stat().st_size
        if Path(path).is_dir():
            raise OrchestratorUserError(f"objective file {where!r} is a directory, not a file")
        if size > MAX_BRIEF_BYTES:
            raise OrchestratorUserError(
                f"objective file {where!r} is {size:,} bytes, over the {MAX_BRIEF_BYTES:,} "
                "byte limit; keep the brief to what the agents need"
            )
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise OrchestratorUserError(f"objective file {where!r} not found; check the path") from None
    except OSError as exc:
        raise OrchestratorUserError(
            f"cannot read objective file {where!r}: {exc.strerror}"
        ) from None
    if b"\x00" in data:
        raise OrchestratorUserError(f"objective file {where!r} is binary, not a text brief")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise OrchestratorUserError(f"objective file {where!r} is not UTF-8 text") from None
    if not text.strip():
        raise OrchestratorUserError(f"objective file {where!r} is empty")
    return text


def brief_title(text: str) -> str:
    line = next(line for line in text.splitlines() if line.strip())
    title = " ".join(line.strip().lstrip("#").split())
    if len(title) > TITLE_CHARS:
        title = title[:TITLE_CHARS].rsplit(" ", 1)[0] + " ..."
    return title


def brief_path(task_id: str) -> str:
    """The document that keeps the brief of `task_id`: `working/{task_id}/brief.md`."""
    return f"working/{check_name(task_id, 'task id')}/{BRIEF_NAME}"


def brief_objective(text: str, task_id: str) -> str:
    """The objective a task with this brief carries: its title and where the brief is."""
    return (
        f"{brief_title(text)} (the full brief, {len(text):,} characters, is the memory file "
        f"working/{task_id}/{BRIEF_NAME}; read it with memory_read)"
    )


def store_brief(docs: Docs, task_id: str, text: str) -> Path:
    """Write the brief once, atomically, into the task's working folder."""

    return docs.write_text(brief_path(task_id), text)
