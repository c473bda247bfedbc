"""Working memory of one task : overview, detail notes and the raw message log.

Documents of the store's backend (files of the memory directory by default)::

    working/{task_id}/overview.md       always in the lead's context (objective, state, context)
    working/{task_id}/detail/*.md       notes with a META block, and compaction summaries
    working/{task_id}/messages.jsonl    every message, append-only, never rewritten

Invariant: `messages.jsonl` only grows. Each message is one JSON line appended with the
backend's `append_lines` (whole lines, durable, never interleaved), whose returned 1-based
line number is the message's permanent citation (`messages.jsonl#L45`). Nothing here rewrites
or deletes a line; archiving (`memory.task.archive`) is recorded in summary files that *name* lines.

`WorkingMemory` keeps an in-process cache of the log that it extends incrementally from the
last byte it read (`get_document(offset=...)`), so the context builder can look at recent
turns on every lead call without re-reading a log that grows to millions of lines.
"""

from __future__ import annotations

import bisect
import json
import re
import secrets
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from memory.clock import now_iso
from memory.errors import InvalidInputError
from memory.paths import check_name
from memory.templating import render
from memory.text.names import slugify

OVERVIEW_SECTIONS = (
    "Current Task",
    "Key Decisions",
    "Known Context",
    "Pending Issues",
    "Recent Operations",
)
ROLES = ("system", "user", "assistant", "tool")


@dataclass(frozen=True)
class Message:
    """One line of `messages.jsonl`."""

    line: int
    """1-based line number in `messages.jsonl` (the citation `messages.jsonl#L{line}`)."""
    record: dict[str, Any] = field(repr=False)

    @property
    def role(self) -> str:
        return str(self.record.get("role", ""))

    @property
    def content(self) -> str:
        content = self.record.get("content", "")
        return content if isinstance(content, str) else json.dumps(content, ensure_ascii=False)

    @property
    def is_user_turn(self) -> bool:
        """A real user turn (summaries count user turns; injected notes do not count)."""
        return self.role == "user" and not self.record.get("synthetic", False)

    @property
    def citation(self) -> str:
        return f"messages.jsonl#L{self.line}"


class WorkingMemory:
    """The working memory of one task, as documents of the store's backend.

    Args:
        store: a `memory.store.MemoryStore` (its backend holds the documents).
        task_id: the task's id (a single safe path component).
    """

    def __init__(self, store: Any, task_id: str):
        self.store = store
        self.backend = store.backend
        self.task_id = check_name(task_id, "task id")
        self.task_doc = f"working/{task_id}"
        self.overview_doc = f"{self.task_doc}/overview.md"
        self.detail_doc = f"{self.task_doc}/detail"
        self.messages_doc = f"{self.task_doc}/messages.jsonl"
        self._cache: list[Message] = []
        self._cache_offset = 0
        self._cache_next_line = 1

    # -- paths on a memory directory -------------------------------------------------
    @property
    def task_dir(self) -> Path:
        return self.store.path_of(self.task_doc)

    @property
    def overview_path(self) -> Path:
        return self.store.path_of(self.overview_doc)

    @property
    def detail_dir(self) -> Path:
        return self.store.path_of(self.detail_doc)

    @property
    def messages_path(self) -> Path:
        return self.store.path_of(self.messages_doc)

    # -- overview ----------------------------------------------------------------------
    def ensure(self, *, objective: str = "") -> WorkingMemory:
        """Create `overview.md` (from the template) and `detail/` if missing; never overwrites."""
        self.store.make_folder(self.detail_doc)
        if self.backend.stat_document(self.overview_doc) is None:
            text = render(
                "overview.md.j2",
                task_id=self.task_id,
                objective=objective,
                created=now_iso(),
                sections=list(OVERVIEW_SECTIONS),
            )
            self.backend.create_document(self.overview_doc, text.encode("utf-8"))
        return self

    def exists(self) -> bool:
        return bool(self.backend.list_documents(self.task_doc + "/"))

    def overview_text(self) -> str:
        """The overview as it is stored (a hand edit is what the next call returns)."""
        doc = self.backend.get_document(self.overview_doc)
        if doc is None:
            doc = self.ensure().backend.get_document(self.overview_doc)
        return doc.text if doc is not None else ""

    def write_overview(self, text: str) -> Path:
        """Replace the whole overview (atomic)."""
        self.backend.write_text(self.overview_doc, text)
        return self.overview_path

    def update_overview_section(self, section: str, body: str) -> Path:
        """Replace the body of `## {section}` (appended as a new section if absent)."""
        return self.update_overview_sections({section: body})

    def update_overview_sections(
        self, bodies: Mapping[str, str] | Callable[[str], Mapping[str, str]]
    ) -> Path:
        """Replace the bodies of several `## {section}`s in one atomic write (each appended
        if absent). `bodies` may be a function of the overview's current text, for a body
        that keeps what its section held; it is called again if a writer got in between."""
        self.ensure()

        def edit(old: bytes | None) -> bytes:
            text = (old or b"").decode("utf-8")
            for section, body in (bodies(text) if callable(bodies) else bodies).items():
                text = _with_section(text, section, body)
            return text.encode("utf-8")

        self.backend.update_document(self.overview_doc, edit)
        return self.overview_path

    # -- detail notes ------------------------------------------------------------------
    def write_note(
        self,
        title: str,
        content: str,
        *,
        keywords: list[str] | tuple[str, ...] = (),
        name: str | None = None,
    ) -> Path:
        """Write `detail/{name or slug(title)}.md` with a META block; returns its path."""
        if not title.strip():
            raise InvalidInputError("empty note title: give the note a topic")
        stem = slugify(name or title)
        if stem.startswith("summary-"):
            stem = "note-" + stem  # summary-* names belong to the archive
        doc = f"{self.detail_doc}/{stem}.md"
        text = render(
            "detail_note.md.j2",
            title=title.strip(),
            created=now_iso(),
            keywords=list(keywords),
            content=content.rstrip("\n"),
        )
        self.ensure()
        self.backend.write_text(doc, text)
        return self.store.path_of(doc)

    def notes(self) -> list[Path]:
        """Detail notes written by agents (not the archive's summary files), by name."""
        return [
            self.store.path_of(info.path)
            for info in self.backend.list_documents(self.detail_doc + "/")
            if "/" not in info.path[len(self.detail_doc) + 1 :]
            and info.path.endswith(".md")
            and not info.path.rsplit("/", 1)[1].startswith((".", "summary-"))
        ]

    # -- messages ----------------------------------------------------------------------
    def append_message(self, role: str, content: Any, **fields: Any) -> int:
        """Append one message to `messages.jsonl`; returns its line number.

        Args:
            role: `system`, `user`, `assistant` or `tool`.
            content: text (or a JSON-serialisable list of content blocks).
            **fields: anything else to keep: `tool_calls`, `tool_call_id`, `name`, `id`,
                `usage`, `synthetic=True` for injected notes that are not user turns.
        """
        return self.append_messages([{"role": role, "content": content, **fields}])

    def append_messages(self, messages: list[dict[str, Any]]) -> int:
        """Append several messages in one durable write; returns the first line number."""
        if not messages:
            raise InvalidInputError("no messages to append")
        records = [self._record(m) for m in messages]
        return self.backend.append_jsonl(self.messages_doc, records)

    def append_chat_messages(self, messages: list[Any]) -> int:
        """Append LangChain messages (duck-typed: `.type`, `.content`, `.tool_calls`, ...).

        `human` becomes `user`, `ai` becomes `assistant`; tool calls, tool call ids, names,
        message ids and token usage are kept. LangChain is not imported here.
        """
        return self.append_messages([chat_record(m) for m in messages])

    def _record(self, message: dict[str, Any]) -> dict[str, Any]:
        role = message.get("role")
        if role not in ROLES:
            raise InvalidInputError(f"unknown message role {role!r}: use one of {', '.join(ROLES)}")
        record = {
            "id": message.get("id") or f"msg-{secrets.token_hex(6)}",
            "ts": message.get("ts") or now_iso(),
        }
        record.update({k: v for k, v in message.items() if v is not None})
        try:
            json.dumps(record, ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidInputError(
                f"message fields must be JSON-serialisable ({exc}); convert objects first"
            ) from None
        return record

    def messages(self) -> list[Message]:
        """Every good line of the log, in order (cached; reads only what was appended)."""
        self._refresh()
        return list(self._cache)

    def tail(self, count: int) -> list[Message]:
        """The last `count` messages."""
        self._refresh()
        return self._cache[-count:] if count > 0 else []

    def first_message(self) -> Message | None:
        """The log's first good message, or None for an empty log."""
        self._refresh()
        return self._cache[0] if self._cache else None

    def messages_after(self, line: int) -> list[Message]:
        """Messages whose line number is greater than `line`."""
        self._refresh()
        return self._cache[self._index_after(line) :]

    def message_range(self, first: int, last: int) -> list[Message]:
        """Messages with `first <= line <= last` (two binary searches: a recalled line's
        neighbours are looked up this way on every context build)."""
        self._refresh()
        return self._cache[self._index_after(first - 1) : self._index_after(last)]

    def _index_after(self, line: int) -> int:
        """The position of the first cached message whose line number is above `line`."""
        return bisect.bisect_right(self._cache, line, key=lambda m: m.line)

    def line_count(self) -> int:
        """Complete lines in the log (good or bad); the last line number handed out."""
        self._refresh()
        return self._cache_next_line - 1

    def _refresh(self) -> None:
        info = self.backend.stat_document(self.messages_doc)
        if info is None or info.size == self._cache_offset:
            return
        if info.size < self._cache_offset:  # replaced behind our back: start over
            self._cache, self._cache_offset, self._cache_next_line = [], 0, 1
        doc = self.backend.get_document(self.messages_doc, offset=self._cache_offset)
        if doc is None:
            return
        # only complete lines: a last line without its newline may still be being written
        complete = doc.data[: doc.data.rfind(b"\n") + 1]
        pos, line_no = self._cache_offset, self._cache_next_line
        for raw in complete.split(b"\n")[:-1]:
            number, pos, line_no = line_no, pos + len(raw) + 1, line_no + 1
            self._cache_offset, self._cache_next_line = pos, line_no
            try:
                record = json.loads(raw.decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError):
                continue  # a torn line closed by a later append stays a numbered bad line
            if isinstance(record, dict):
                self._cache.append(Message(number, record))


_ROLE_OF_TYPE = {"human": "user", "ai": "assistant", "tool": "tool", "system": "system"}


def chat_record(message: Any) -> dict[str, Any]:
    """A `messages.jsonl` record for a LangChain message (or a dict passed through)."""
    if isinstance(message, dict):
        return message
    kind = getattr(message, "type", "")
    role = _ROLE_OF_TYPE.get(kind)
    if role is None:
        raise InvalidInputError(f"cannot log a message of type {kind!r}: use human/ai/tool/system")
    record: dict[str, Any] = {"role": role, "content": message.content}
    calls = getattr(message, "tool_calls", None)
    if calls:
        record["tool_calls"] = [
            {"name": c["name"], "args": c.get("args", {}), "id": c.get("id")} for c in calls
        ]
    for field_name in ("tool_call_id", "name", "usage_metadata"):
        value = getattr(message, field_name, None)
        if value:
            record[field_name] = dict(value) if isinstance(value, dict) else value
    if getattr(message, "id", None):
        record["id"] = message.id
    return record


def list_tasks(store: Any) -> list[str]:
    """Task ids that have working memory, sorted."""
    tasks = {info.path.split("/")[1] for info in store.backend.list_documents("working/")}
    return sorted(t for t in tasks if not t.startswith("."))


def _with_section(text: str, section: str, body: str) -> str:
    """`text` with the body of `## {section}` replaced (the section appended if absent)."""
    pattern = re.compile(rf"(^## {re.escape(section)}[ \t]*\n)(.*?)(?=^## |\Z)", re.M | re.S)
    replacement = body.rstrip("\n") + "\n\n"
    if pattern.search(text):
        return pattern.sub(lambda m: m.group(1) + replacement, text, count=1)
    return text.rstrip("\n") + f"\n\n## {section}\n{replacement}"
