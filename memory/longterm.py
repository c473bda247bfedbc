"""Long-term memory across tasks : `facts/*.md` and `episodes/YYYY-MM.md`.

Plain markdown a person can open, read and edit. Each file carries a file-level
`> Summary:` line that is regenerated after every write, patch or append (facts: the keys
of its `- Key: value` bullets; episodes: the titles of its entries, newest last), and each
episode entry carries its own `- Summary:` line. `list_memory()` reads those lines, and at a
task's first lead call `memory_index_message()` turns them into the "Available
memory" user message, so the agent decides what to `memory_read`.

Invariants:
* Every path an agent gives goes through `memory.paths.confine` (no `..`, absolute paths,
  symlinks out, NUL bytes, over-long names) and, for writes, `_check_writable`: only
  `facts/*.md`, `episodes/*.md` and a task's `overview.md` / `detail/*.md` notes; never
  `messages.jsonl`, archive summaries, plans, checkpoints or `memory.db`.
* Nothing is read from a cache: a hand edit is what the next read returns.
* A patch that replaces a fact keeps the old value readable below it, struck through with
  the date (`  - ~~old value~~ (superseded 2026-11-22)`), because users audit memory.
* Writes are atomic (`memory.durable`), read-modify-writes run under the file's lock.

`reflect()` is the post-task reflector: with a chat model it runs a tool-use loop with the
read/write/patch/append tools, pre-loaded with every fact file and the episode index;
with no model (offline) or when the model records no episode, it appends the episode
(objective, outcome, files touched) deterministically. LangChain is imported lazily.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from memory import durable
from memory.errors import InvalidInputError, PatchNotFoundError, PathEscapeError
from memory.paths import confine
from memory.templating import render

LONGTERM_FOLDERS = ("facts", "episodes")
MAX_FILE_BYTES = 1_000_000
SUMMARY_PREFIX = "> Summary:"
_BULLET_KEY = re.compile(r"^- ([^:\n]{1,40}):\s*\S")
_ENTRY_HEADING = re.compile(r"^## (.+)$", re.M)
_ENTRY_SUMMARY = re.compile(r"^- Summary:\s*(.+)$", re.M)
_EPISODE_FILE = re.compile(r"^\d{4}-\d{2}\.md$")
_SUMMARY_MAX_CHARS = 160


@dataclass(frozen=True)
class MemoryFile:
    """One long-term memory file as `memory_list` shows it."""

    path: str
    summary: str
    size: int

    def line(self) -> str:
        return f"- {self.path} ({format_size(self.size)}): {self.summary or '(no summary)'}"


@dataclass
class PatchReport:
    path: str
    applied: int
    total: int


@dataclass
class ReflectionReport:
    """What the reflector recorded."""

    episode: str | None = None
    """Citation of the episode entry (`episodes/2026-11.md#L12`)."""
    tool_calls: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


def format_size(size: int) -> str:
    """`320B`, `1.2KB`, `3.4MB` (the listing style of `memory facts`)."""
    if size < 1024:
        return f"{size}B"
    if size < 1024 * 1024:
        return f"{size / 1024:.1f}KB"
    return f"{size / (1024 * 1024):.1f}MB"


def today_utc() -> date:
    return datetime.now(UTC).date()


# -- paths -------------------------------------------------------------------------------
def resolve(store: Any, path: str) -> tuple[Path, str]:
    """Confine an agent-given path: (absolute path, root-relative posix path)."""
    resolved = confine(store.root, path)
    rel = store.layout.relative(resolved)
    if any(part.startswith(".") for part in rel.split("/")) or rel.startswith("memory.db"):
        raise PathEscapeError(
            f"path {path!r} is internal to tether; use memory_list to see memory files"
        )
    return resolved, rel


def _check_writable(rel: str) -> None:
    parts = rel.split("/")
    ok = (
        (len(parts) == 2 and parts[0] in LONGTERM_FOLDERS and parts[1].endswith(".md"))
        or (len(parts) == 3 and parts[0] == "working" and parts[2] == "overview.md")
        or (
            len(parts) == 4
            and parts[0] == "working"
            and parts[2] == "detail"
            and parts[3].endswith(".md")
            and not parts[3].startswith("summary-")
        )
    )
    if not ok:
        raise PathEscapeError(
            f"path {rel!r} is not writable: write facts/NAME.md, episodes/YYYY-MM.md, "
            "working/TASK/overview.md or working/TASK/detail/NOTE.md"
        )


def _read_text(path: Path, rel: str) -> str:
    if not path.is_file():
        raise InvalidInputError(f"no memory file {rel!r}: use memory_list to see what exists")
    if path.stat().st_size > MAX_FILE_BYTES:
        raise InvalidInputError(
            f"{rel!r} is {format_size(path.stat().st_size)}; too big to read whole, "
            "use recall_memory to find the part you need"
        )
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InvalidInputError(
            f"{rel!r} is not a UTF-8 text file; use memory_fetch for stored entries"
        ) from None


# -- summary lines -----------------------------------------------------------------------
def file_summary(rel: str, text: str) -> str:
    """The summary a file's `> Summary:` line should carry, derived from its content."""
    body = "\n".join(line for line in text.splitlines() if not line.startswith(SUMMARY_PREFIX))
    if rel.startswith("episodes/"):
        items = [h.strip() for h in _ENTRY_HEADING.findall(body)]
    else:
        items = [
            m.group(1).strip().lower()
            for line in body.splitlines()
            if (m := _BULLET_KEY.match(line)) and m.group(1).strip().lower() != "updated"
        ]
    if not items:
        items = [
            line.strip("#> -").strip()
            for line in body.splitlines()
            if line.strip() and not line.startswith("# ")
        ][:1]
    return _join_capped(items)


def _join_capped(items: list[str]) -> str:
    seen: list[str] = []
    for item in items:
        if item and item not in seen:
            seen.append(item)
    text = ", ".join(seen)
    while len(text) > _SUMMARY_MAX_CHARS and len(seen) > 1:
        seen.pop(0)  # keep the newest entries; say how many older ones exist
        text = f"(+{len(items) - len(seen)} older) " + ", ".join(seen)
    return text[:_SUMMARY_MAX_CHARS]


def summary_line_of(text: str) -> str:
    for line in text.splitlines():
        if line.startswith(SUMMARY_PREFIX):
            return line[len(SUMMARY_PREFIX) :].strip()
    return ""


def with_summary_line(text: str, summary: str) -> str:
    """`text` with its `> Summary:` line set (replaced, else put under the title)."""
    line = f"{SUMMARY_PREFIX} {summary}".rstrip()
    lines = text.splitlines()
    for i, existing in enumerate(lines):
        if existing.startswith(SUMMARY_PREFIX):
            lines[i] = line
            return "\n".join(lines) + "\n"
    if lines and lines[0].startswith("# "):
        return "\n".join([lines[0], "", line, *lines[1:]]).rstrip("\n") + "\n"
    return "\n".join([line, "", *lines]).rstrip("\n") + "\n"


def _finish(rel: str, text: str, summary: str | None = None) -> str:
    if rel.split("/")[0] not in LONGTERM_FOLDERS:
        return text
    return with_summary_line(text, summary if summary is not None else file_summary(rel, text))


# -- the five operations -----------------------------------------------------------------
def list_memory(store: Any) -> list[MemoryFile]:
    """Every `facts/*.md` and `episodes/*.md` with its summary line and size."""
    found = []
    for folder in LONGTERM_FOLDERS:
        directory = store.root / folder
        if not directory.is_dir():
            continue
        for path in sorted(directory.glob("*.md")):
            if path.name.startswith(".") or not path.is_file():
                continue
            try:
                summary = summary_line_of(path.read_text(encoding="utf-8"))
            except (OSError, UnicodeDecodeError):
                summary = "(unreadable)"
            found.append(MemoryFile(f"{folder}/{path.name}", summary, path.stat().st_size))
    return found


def read_memory(store: Any, path: str) -> str:
    """The file's content exactly as on disk."""
    resolved, rel = resolve(store, path)
    return _read_text(resolved, rel)


def write_memory(store: Any, path: str, content: str) -> MemoryFile:
    """Create or overwrite a memory file; its `> Summary:` line is regenerated."""
    resolved, rel = resolve(store, path)
    _check_writable(rel)
    if not content.strip():
        raise InvalidInputError(f"empty content for {rel!r}: nothing to write")
    text = _finish(rel, content if content.endswith("\n") else content + "\n")
    if rel.split("/")[2:3] == ["detail"] and "META:" not in text:
        text = with_meta_block(text)
    with durable.file_lock(resolved):
        durable.atomic_write_text(resolved, text)
    return MemoryFile(rel, summary_line_of(text), len(text.encode("utf-8")))


def with_meta_block(text: str) -> str:
    """A detail note given without a META block gets one under its title."""
    from memory.archive import keywords
    from memory.working import utc_now

    meta = f"<!--\nMETA:\n- created: {utc_now()}\n- keywords: {json.dumps(keywords(text))}\n-->"
    lines = text.splitlines()
    if lines and lines[0].startswith("# "):
        return "\n".join([lines[0], "", meta, *lines[1:]]).rstrip("\n") + "\n"
    return "\n".join([meta, "", *lines]).rstrip("\n") + "\n"


def patch_memory(
    store: Any, path: str, patches: list[tuple[str, str]], *, today: date | None = None
) -> PatchReport:
    """Apply exact `(old, new)` replacements, all or none.

    Each old text must occur exactly once. In `facts/`, a replaced value stays readable
    under the new one, struck through with the date.

    Raises:
        PatchNotFoundError: an old text is absent or ambiguous; the file is unchanged.
    """
    resolved, rel = resolve(store, path)
    _check_writable(rel)
    if not patches:
        raise InvalidInputError("no patches given: pass [{old_text, new_text}, ...]")
    stamp = (today or today_utc()).isoformat()
    with durable.file_lock(resolved):
        text = _read_text(resolved, rel)
        for number, (old, new) in enumerate(patches, start=1):
            count = text.count(old) if old else 0
            if count != 1:
                problem = "not found" if count == 0 else f"found {count} times (add context)"
                raise PatchNotFoundError(
                    f"patch {number} of {len(patches)}: old text {old[:80]!r} {problem} in "
                    f"{rel!r}; nothing was changed, memory_read the file and retry"
                )
            text = _replace_keeping_history(text, old, new, stamp, rel.startswith("facts/"))
        durable.atomic_write_text(resolved, _finish(rel, text))
    return PatchReport(rel, len(patches), len(patches))


def _replace_keeping_history(text: str, old: str, new: str, stamp: str, keep: bool) -> str:
    start = text.index(old)
    replaced = text[:start] + new + text[start + len(old) :]
    if not keep or old.strip() in new:
        return replaced
    struck = [_struck(line, new, stamp) for line in old.splitlines() if line.strip()]
    end = start + len(new)
    eol = replaced.find("\n", end)
    eol = len(replaced) if eol < 0 else eol
    history = "".join(f"\n  - {s}" for s in struck)
    return replaced[:eol] + history + replaced[eol:]


def _struck(line: str, new: str, stamp: str) -> str:
    value = line.strip()
    value = value[2:] if value.startswith("- ") else value
    key, sep, rest = value.partition(":")
    if sep and rest.strip() and f"{key.strip()}:" in new:
        value = rest.strip()  # same key: strike just the old value
    return f"~~{value}~~ (superseded {stamp})"


def append_memory(store: Any, path: str, entry: str, summary: str | None = None) -> MemoryFile:
    """Append a markdown block (an episode entry) to a file; the summary line is regenerated.

    Args:
        path: e.g. `episodes/2026-11.md` (created with a title if missing).
        entry: markdown, usually `## Title` + `- Summary: ...` + details.
        summary: overrides the regenerated file-level summary.
    """
    resolved, rel = resolve(store, path)
    _check_writable(rel)
    if not entry.strip():
        raise InvalidInputError(f"empty entry for {rel!r}: nothing to append")
    with durable.file_lock(resolved):
        if resolved.exists():
            text = _read_text(resolved, rel).rstrip("\n") + "\n\n"
        else:
            text = render("longterm_file.md.j2", title=_title_for(rel)).rstrip("\n") + "\n\n"
        text = _finish(rel, text + entry.strip("\n") + "\n", summary)
        durable.atomic_write_text(resolved, text)
    return MemoryFile(rel, summary_line_of(text), len(text.encode("utf-8")))


def _title_for(rel: str) -> str:
    folder, name = rel.split("/", 1)[0], rel.rsplit("/", 1)[-1][:-3]
    if folder == "episodes":
        return f"{name} Episodes"
    return f"{name.replace('-', ' ').replace('_', ' ').title()} Facts"


# -- episodes and the index message ------------------------------------------------------
def episode_path(when: date) -> str:
    return f"episodes/{when:%Y-%m}.md"


def episode_summary(objective: str, outcome: str) -> str:
    """An ultra-concise entry summary (under ~10 words): objective -> outcome."""
    obj = _words(objective, 6)
    out = _words(outcome, 4)
    return f"{obj} → {out}" if out else obj


_STOP_TAIL = {"a", "an", "the", "in", "of", "to", "for", "with", "and", "or", "on", "at", "by"}


def _words(text: str, n: int) -> str:
    words = text.split()[:n]
    while len(words) > 1 and words[-1].lower().strip(".,;:") in _STOP_TAIL:
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
    """Seed 004's "Available memory" user message, or None when there is no memory yet."""
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


# -- the reflector -----------------------------------------------------------------------
REFLECTOR_PROMPT = """You are tether's post-task reflector. Decide what is worth remembering \
across tasks, and record it with the memory tools:
- persistent facts (about the user, the project, preferences, conventions): memory_write a \
new facts/NAME.md as `# Title` plus `- Key: value` bullets, or memory_patch an existing fact \
with exact old/new text;
- the episode: memory_append to {episode_path} one block `## Title` with `- Summary:` (under \
10 words), `- Date:`, `- Objective:`, `- Outcome:`, `- Files:`, `- Lesson:`.
Skip what has no lasting value. Stop (answer without tool calls) when done.

Existing facts:
{facts}

Episode index:
{episodes}"""


def reflect(
    store: Any,
    *,
    task_id: str,
    objective: str,
    outcome: str,
    files_touched: list[str] | tuple[str, ...] = (),
    model: Any = None,
    transcript: str = "",
    max_steps: int = 8,
    when: date | None = None,
) -> ReflectionReport:
    """Record what a finished task taught: facts (with a model) and at least the episode.

    Args:
        model: a LangChain chat model supporting `bind_tools`; None runs offline.
        transcript: optional digest of the task (e.g. the overview) shown to the model.
    """
    when = when or today_utc()
    report = ReflectionReport()
    if model is not None:
        _reflect_with_model(
            store,
            model,
            report,
            task_id=task_id,
            objective=objective,
            outcome=outcome,
            files_touched=files_touched,
            transcript=transcript,
            max_steps=max_steps,
            when=when,
        )
    if report.episode is None:
        report.episode = record_episode(
            store,
            objective=objective,
            outcome=outcome,
            files_touched=files_touched,
            task_id=task_id,
            when=when,
        )
    return report


def _reflect_with_model(
    store: Any,
    model: Any,
    report: ReflectionReport,
    *,
    task_id: str,
    objective: str,
    outcome: str,
    files_touched: Any,
    transcript: str,
    max_steps: int,
    when: date,
) -> None:
    from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

    from memory.tools import longterm_tools

    tools = {t.name: t for t in longterm_tools(store)}
    episodes = "\n".join(f"- {c}: {s}" for c, s in episode_index(store)) or "(no episodes yet)"
    messages: list[Any] = [
        SystemMessage(
            REFLECTOR_PROMPT.format(
                episode_path=episode_path(when), facts=facts_text(store), episodes=episodes
            )
        ),
        HumanMessage(
            f"Task {task_id} finished.\nObjective: {objective}\nOutcome: {outcome}\n"
            f"Files touched: {', '.join(map(str, files_touched)) or '(none)'}\n\n{transcript}"
        ),
    ]
    bound = model.bind_tools(list(tools.values()))
    for _ in range(max_steps):
        try:
            reply = bound.invoke(messages)
        except Exception as exc:  # noqa: BLE001 - a model failure must not lose the episode
            report.errors.append(f"reflector model failed: {type(exc).__name__}: {exc}")
            return
        messages.append(reply)
        calls = getattr(reply, "tool_calls", None) or []
        if not calls:
            return
        for call in calls:
            output = _run_tool(tools, call)
            report.tool_calls.append(call["name"])
            if (
                call["name"] == "memory_append"
                and str(output).startswith("Appended")
                and str(call["args"].get("path", "")).startswith("episodes/")
            ):
                report.episode = str(call["args"]["path"])
            messages.append(ToolMessage(str(output), tool_call_id=call.get("id") or call["name"]))


def _run_tool(tools: dict[str, Any], call: dict[str, Any]) -> str:
    """One tool call's result; bad arguments become an error the model can read."""
    tool = tools.get(call["name"])
    if tool is None:
        return f"Error: unknown tool {call['name']!r}; use one of {', '.join(sorted(tools))}"
    try:
        return str(tool.invoke(call.get("args") or {}))
    except Exception as exc:  # noqa: BLE001 - e.g. pydantic validation of the arguments
        first = str(exc).splitlines()[0] if str(exc) else ""
        return f"Error: {call['name']} arguments rejected ({type(exc).__name__}: {first})"
