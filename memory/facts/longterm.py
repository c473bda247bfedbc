"""Long-term memory across tasks: episodes, and the index of what is remembered.

`record_episode()` appends a task's episode to `episodes/YYYY-MM.md` (with its own
`- Summary:` line), `episode_index()` lists them, and at a task's first lead call
`memory_index_message()` turns the facts' and episodes' summary lines into the "Available
memory" user message, so the agent decides what to `memory_read` (`ensure_memory_index`
logs it once per task). The files themselves are read and written through
`memory.facts.memfiles`; the post-task reflector is `memory.facts.reflect`.
"""

from datetime import date
from typing import Any

from memory.clock import today_utc
from memory.errors import InvalidInputError
from memory.facts.memfiles import (
    _ENTRY_SUMMARY,
    append_memory,
    list_memory,
    read_memory,
)
from memory.templating import render
from memory.text.words import STOPWORDS


# -- episodes and the index message ------------------------------------------------------
def episode_path(when: date) -> str:
    return f"episodes/{when:%Y-%m}.md"


def episode_summary(objective: str, outcome: str) -> str:
    """An ultra-concise entry summary (under ~10 words): objective -> outcome."""
    obj = _words(objective, 6)
    out = _words(outcome, 4)
    return f"{obj} → {out}" if out else obj


def _words(text: str, n: int) -> str:
    words = text.split()[:n]
    while len(words) > 1 and words[-1].lower().strip(".,;:") in STOPWORDS:
        words.pop()
    return " ".join(words).rstrip(".,;:")


def _title(objective: str, max_chars: int = 80) -> str:
    """The objective as a heading: whole when short, else cut at a word with an ellipsis."""
    text = " ".join(objective.split())
    if len(text) <= max_chars:
        return text
    return text[:max_chars].rsplit(" ", 1)[0].rstrip(".,;:") + "…"


def record_episode(
    store: Any,
    *,
    objective: str,
    outcome: str,
    files_touched: list[str] | tuple[str, ...] = (),
    title: str | None = None,
    task_id: str | None = None,
    lesson: str | None = None,
    summary: str | None = None,
    when: date | None = None,
) -> str:
    """Append one episode entry to `episodes/YYYY-MM.md`; returns its citation (`...#L12`)."""
    if not objective.strip():
        raise InvalidInputError("empty objective: an episode needs what the task was for")
    when = when or today_utc()
    entry = render(
        "episode_entry.md.j2",
        title=(title or _title(objective)).strip(),
        summary=summary or episode_summary(objective, outcome),
        date=when.isoformat(),
        task_id=task_id or "",
        objective=" ".join(objective.split()),
        outcome=" ".join(outcome.split()) or "(not recorded)",
        files=[str(f) for f in files_touched],
        lesson=lesson or "",
    )
    rel = episode_path(when)
    append_memory(store, rel, entry)
    text = read_memory(store, rel)
    heading = entry.strip().splitlines()[0]
    line = max(i for i, text_line in enumerate(text.splitlines(), start=1) if text_line == heading)
    return f"{rel}#L{line}"


def episode_index(store: Any) -> list[tuple[str, str]]:
    """`(citation, "title: summary")` of every episode entry, oldest first."""
    out = []
    for item in list_memory(store):
        if not item.path.startswith("episodes/"):
            continue
        lines = read_memory(store, item.path).splitlines()
        for i, line in enumerate(lines, start=1):
            if line.startswith("## "):
                summary = next(
                    (
                        m.group(1)
                        for below in lines[i : i + 6]
                        if (m := _ENTRY_SUMMARY.match(below))
                    ),
                    "",
                )
                out.append((f"{item.path}#L{i}", f"{line[3:].strip()}: {summary}".rstrip(": ")))
    return out


def facts_text(store: Any) -> str:
    """Every fact file in full, each under its path (what the reflector is given)."""
    parts = [
        f"### {f.path}\n{read_memory(store, f.path).strip()}"
        for f in list_memory(store)
        if f.path.startswith("facts/")
    ]
    return "\n\n".join(parts) or "(no facts yet)"


def memory_index_message(store: Any) -> str | None:
    """The "Available memory" user message, or None when there is no memory yet."""
    files = list_memory(store)
    if not files:
        return None
    lines = [
        "Available memory:",
        *(f.line() for f in files),
        "",
        "Use memory_read to load relevant files before responding.",
    ]
    return "\n".join(lines)


def ensure_memory_index(wm: Any) -> int | None:
    """Append the "Available memory" message to a task's log once; returns its line.

    It is a user message marked `synthetic` (not a user turn) with `kind: memory_index`;
    None when there is no long-term memory or the task already has the message.
    """
    if any(m.record.get("kind") == "memory_index" for m in wm.messages()):
        return None
    text = memory_index_message(wm.store)
    if text is None:
        return None
    return wm.append_message("user", text, synthetic=True, kind="memory_index")
