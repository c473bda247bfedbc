"""Never-delete archive and multi-level summary tree of a task's conversation.

Every N user turns (default 10, per task, `summary.json` beside the log) the active messages
are summarised into a level-1 summary; when more than `fanout` (5) summaries of one level
are active, the oldest `fanout` are folded into one summary of the next level, recursively.

The summary files are the whole truth (`working/{task}/detail/summary-L{level}-{seq}.md`,
documents of the store's backend; their format and the tree read from them are in
`memory.task.archive`, the `summary.json` settings in `memory.task.archive`).
Each names what it covers in its META block: an L1 names a line range of `messages.jsonl`
(`messages.jsonl#L41-L60`), an L2+ names the summary files it folds. From these files:

* a message is *archived* when an L1 names its line (its chunk id is that L1's id);
* a summary is *archived* when a higher summary names it; otherwise it is *active*;
* nothing is ever removed or rewritten: messages stay in `messages.jsonl`, folded summaries
  stay in `detail/`.

Invariant (crash consistency): a summary file is written atomically, and it is the *only*
write of a summarisation, so it is the commit point. A kill before the rename leaves the
messages (or child summaries) active and the next trigger retries; a kill after it leaves a
complete summary naming exactly what it covers. No message is ever archived without a
summary naming it, and no summary names lines it does not cover. All summarisations of a
task run under one lock (`backend.mutex`), so two writers never cover the same lines twice.

A summariser failure (exception or timeout) writes nothing: the messages stay active, the
turn counter is not reset, and the next trigger retries. `memory.db` holds nothing here, so
deleting it loses no archive state.

The summary tree as its files define it (`parse_summary`, `ArchiveState`): a summary file
(`detail/summary-L{level}-{seq}.md`) names what it covers in its META block, and the tree
(parents, the active set, the last archived line) holds nothing the files do not say, so it
can always be rebuilt by reading them again. A task's summary settings live in
`working/{task}/summary.json` (`SummaryConfig`): a missing or garbled file means the
defaults, and a threshold read from it is clamped to 1..`MAX_THRESHOLD`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from memory.clock import now_iso
from memory.errors import InvalidInputError, SummarizerFailed
from memory.task.working import Message, WorkingMemory
from memory.templating import render
from memory.text.summarize import Summarizer, call_with_timeout, extractive_summary
from memory.text.words import keywords

DEFAULT_FANOUT = 5
DEFAULT_SUMMARY_TOKENS = 150
_MESSAGE_CHARS = 400


@dataclass
class SummarizeResult:
    """What one summarisation pass did."""

    written: list[Summary] = field(default_factory=list)
    error: str | None = None
    reason: str = ""

    @property
    def ok(self) -> bool:
        return self.error is None


@dataclass
class SummaryStatus:
    """`memory summary status` in data form."""

    task_id: str
    enabled: bool
    threshold: int
    turns_since_last: int
    total_messages: int
    archived_messages: int
    active_per_level: dict[int, int]
    highest_level: int


class Archive:
    """The summary tree of one task.

    Args:
        wm: the task's `WorkingMemory`.
        summarizer: `(text, max_tokens) -> str`; default `extractive_summary`.
        fanout: fold when more than this many summaries of a level are active.
        summary_tokens: budget of each summary's text.
        timeout_s: abandon a summariser call after this long (treated as a failure).
    """

    def __init__(
        self,
        wm: WorkingMemory,
        summarizer: Summarizer | Callable[..., str] | None = None,
        *,
        fanout: int = DEFAULT_FANOUT,
        summary_tokens: int = DEFAULT_SUMMARY_TOKENS,
        timeout_s: float | None = None,
    ):
        if fanout < 2:
            raise InvalidInputError(f"fanout {fanout!r} must be at least 2")
        self.wm = wm
        self.summarizer = summarizer or extractive_summary
        self.fanout = fanout
        self.summary_tokens = summary_tokens
        self.timeout_s = timeout_s
        self.backend = wm.backend
        self.config_doc = f"{wm.task_doc}/{CONFIG_NAME}"
        self._state = ArchiveState()
        self._listing: str | None = None
        self._holding = False  # summarising under the mutex: no one else writes summaries
        self._skipped: set[str] = set()
        self.last_error: str | None = None

    # -- configuration -----------------------------------------------------------------
    def config(self) -> SummaryConfig:
        """The task's settings; a missing or garbled `summary.json` means the defaults."""
        return read_config(self.backend, self.config_doc)

    def configure(
        self, *, enabled: bool | None = None, threshold: int | None = None
    ) -> SummaryConfig:
        """Change and persist the task's settings; returns the new ones."""
        return write_config(self.backend, self.config_doc, enabled=enabled, threshold=threshold)

    # -- state -------------------------------------------------------------------------
    def state(self) -> ArchiveState:
        """The tree as the summary files say now (re-reads only new summary files)."""
        if self._holding and self._listing is not None:
            return self._state
        listing, self._listing = self.backend.list_changes(self.wm.detail_doc + "/", self._listing)
        if listing is not None:
            self._scan([info.path for info in listing])
        return self._state

    def _scan(self, docs: list[str]) -> None:
        state = self._state
        new = False
        for doc in docs:
            name = doc.rsplit("/", 1)[1]
            match = FILE_RE.match(name)
            if not match or name in state.summaries or name in self._skipped:
                continue
            summary = self._parse(doc, int(match.group(1)), int(match.group(2)))
            if summary is None:
                self._skipped.add(name)
            else:
                state.add(summary)
                new = True
        if new:
            state.link()

    def _parse(self, doc: str, level: int, seq: int) -> Summary | None:
        path = self.wm.store.path_of(doc)
        try:
            text = self.backend.read_text(doc) or ""
        except UnicodeDecodeError as exc:
            self._state.warnings.append(f"skipped unreadable summary {path.name!r}: {exc}")
            return None
        return parse_summary(path, text, level=level, seq=seq, warnings=self._state.warnings)

    # -- counters ----------------------------------------------------------------------
    def active_messages(self) -> list[Message]:
        return self.wm.messages_after(self.state().covered_until)

    def turns_since_last(self) -> int:
        return sum(1 for m in self.active_messages() if m.is_user_turn)

    def status(self) -> SummaryStatus:
        cfg, state = self.config(), self.state()
        messages = self.wm.messages()
        archived = sum(1 for m in messages if m.line <= state.covered_until)
        per_level: dict[int, int] = {}
        for s in state.active():
            per_level[s.level] = per_level.get(s.level, 0) + 1
        return SummaryStatus(
            task_id=self.wm.task_id,
            enabled=cfg.enabled,
            threshold=cfg.threshold,
            turns_since_last=sum(
                1 for m in messages if m.line > state.covered_until and m.is_user_turn
            ),
            total_messages=len(messages),
            archived_messages=archived,
            active_per_level=dict(sorted(per_level.items())),
            highest_level=state.highest_level,
        )

    # -- summarising -------------------------------------------------------------------
    def due(self) -> bool:
        cfg = self.config()
        return cfg.enabled and self.turns_since_last() >= cfg.threshold

    def maybe_summarize(self) -> SummarizeResult | None:
        """Summarise if enabled and N user turns are active; None when not due."""
        if not self.due():
            return None
        return self.summarize_now()

    def summarize_now(self) -> SummarizeResult:
        """Summarise all active messages now (then fold); failures are returned, not raised."""
        result = SummarizeResult()
        with self.backend.mutex(f"{self.wm.task_doc}/summaries"):
            self._listing = None  # another process may have written before we got the lock
            self.state()
            self._holding = True
            try:
                level1 = self._write_level1()
                if level1 is None:
                    result.reason = "nothing to summarise: no active messages"
                else:
                    result.written.append(level1)
                    result.written.extend(self._fold())
            except SummarizerFailed as exc:
                result.error = str(exc)
            finally:
                self._holding = False
        self.last_error = result.error
        return result

    def _write_level1(self) -> Summary | None:
        state = self.state()
        active = self.wm.messages_after(state.covered_until)
        if not active:
            return None
        first, last = state.covered_until + 1, active[-1].line
        # one paragraph per message, so the extractive summariser weighs every message's
        # opening (not only the first and last lines of the batch)
        text = "\n\n".join(_message_line(m) for m in active)
        content = self._summarize(text)
        covers = (f"messages.jsonl#L{first}-L{last}",)
        turns = sum(1 for m in active if m.is_user_turn)
        return self._commit(1, covers, first, last, turns, content)

    def _fold(self) -> list[Summary]:
        written: list[Summary] = []
        level = 1
        while True:
            active = self.state().active(level)
            if len(active) > self.fanout:
                children = active[: self.fanout]
                text = "\n\n".join(f"[{c.name} {c.span}]\n{_strip_gaps(c.text)}" for c in children)
                content = self._summarize(text)
                turns = sum(c.turns for c in children)
                written.append(
                    self._commit(
                        level + 1,
                        tuple(c.name for c in children),
                        children[0].first_line,
                        children[-1].last_line,
                        turns,
                        content,
                    )
                )
                continue
            if level >= self.state().highest_level:
                return written
            level += 1

    def _summarize(self, text: str) -> str:
        try:
            if self.timeout_s is None:
                summary = self.summarizer(text, self.summary_tokens)
            else:
                summary = call_with_timeout(
                    self.summarizer, text, self.summary_tokens, self.timeout_s
                )
        except Exception as exc:  # noqa: BLE001 - any summariser failure leaves messages active
            raise SummarizerFailed(
                f"summariser failed ({type(exc).__name__}: {exc}); what it was given stays "
                "active and the next trigger retries"
            ) from None
        if not isinstance(summary, str) or not summary.strip():
            raise SummarizerFailed("summariser returned nothing; what it was given stays active")
        return summary.strip()

    def _commit(
        self,
        level: int,
        covers: tuple[str, ...],
        first: int,
        last: int,
        turns: int,
        content: str,
    ) -> Summary:
        """Write one summary file atomically: the commit point of a summarisation."""
        state = self.state()
        seq = state.next_seq(level)
        name = f"summary-L{level}-{seq:06d}.md"
        span = f"messages.jsonl#L{first}-L{last}"
        created = now_iso()
        text = render(
            "summary.md.j2",
            level=level,
            seq=seq,
            span=span,
            created=created,
            keywords=keywords(content),
            summary_id=f"L{level}-{seq:06d}",
            covers=list(covers),
            turns=turns,
            summarizer=getattr(self.summarizer, "name", None)
            or getattr(self.summarizer, "__name__", type(self.summarizer).__name__),
            content=content,
        )
        doc = f"{self.wm.detail_doc}/{name}"
        self.backend.write_text(doc, text)
        path = self.wm.store.path_of(doc)
        summary = Summary.from_file(
            path,
            text,
            level=level,
            seq=seq,
            lines=(first, last),
            covers=covers,
            created=created,
            turns=turns,
        )
        state.record(summary)
        return summary


def _strip_gaps(text: str) -> str:
    """Drop the extractive summariser's `...` gap lines before summarising again."""
    return "\n".join(line for line in text.splitlines() if line.strip() != "...")


def _message_line(message: Message) -> str:
    content = " ".join(message.content.split())
    if len(content) > _MESSAGE_CHARS:
        content = content[: _MESSAGE_CHARS - 3] + "..."
    calls = message.record.get("tool_calls")
    if calls and not content:
        names = [c.get("name", "?") for c in calls if isinstance(c, dict)]
        content = f"(calls {', '.join(names)})"
    return f"[L{message.line}] {message.role}: {content}"


DEFAULT_THRESHOLD = 10
MAX_THRESHOLD = 500
CONFIG_NAME = "summary.json"


@dataclass
class SummaryConfig:
    """Per-task settings, persisted in `working/{task}/summary.json`."""

    enabled: bool = True
    threshold: int = DEFAULT_THRESHOLD


def read_config(backend: Any, doc: str) -> SummaryConfig:
    """The task's settings; a missing or garbled `summary.json` means the defaults."""
    try:
        data = json.loads(backend.read_text(doc) or "")
        threshold = int(data.get("threshold", DEFAULT_THRESHOLD))
        enabled = data.get("enabled", True)
    except (ValueError, TypeError, AttributeError):
        return SummaryConfig()
    return SummaryConfig(
        enabled=enabled is not False, threshold=min(max(threshold, 1), MAX_THRESHOLD)
    )


def write_config(
    backend: Any, doc: str, *, enabled: bool | None, threshold: int | None
) -> SummaryConfig:
    """Change and persist the task's settings; returns the new ones."""
    if threshold is not None and not 1 <= threshold <= MAX_THRESHOLD:
        raise InvalidInputError(
            f"threshold {threshold!r} out of range: give 1 to {MAX_THRESHOLD} user turns"
        )
    result: list[SummaryConfig] = []

    def edit(_old: bytes | None) -> bytes:
        cfg = read_config(backend, doc)
        if enabled is not None:
            cfg.enabled = enabled
        if threshold is not None:
            cfg.threshold = threshold
        result[:] = [cfg]
        data = {"enabled": cfg.enabled, "threshold": cfg.threshold}
        return (json.dumps(data, indent=2, ensure_ascii=False) + "\n").encode("utf-8")

    backend.update_document(doc, edit)
    cfg = result[0]
    return cfg


FILE_RE = re.compile(r"^summary-L(\d+)-(\d{6,})\.md$")
_RANGE_RE = re.compile(r"^messages\.jsonl#L(\d+)-L(\d+)$")


@dataclass(frozen=True)
class Summary:
    """One summary file of the tree, parsed from its META block."""

    id: str
    level: int
    seq: int
    path: Path
    first_line: int
    """First `messages.jsonl` line under this summary (through its children for L2+)."""
    last_line: int
    covers: tuple[str, ...]
    """L1: `("messages.jsonl#L41-L60",)`; L2+: the child summary file names."""
    created: str
    text: str = field(repr=False)
    turns: int = 0
    """User turns under this summary."""

    @classmethod
    def from_file(
        cls,
        path: Path,
        text: str,
        *,
        level: int,
        seq: int,
        lines: tuple[int, int],
        covers: tuple[str, ...],
        created: str,
        turns: int,
    ) -> Summary:
        """The summary of the file at `path` whose full text is `text`."""
        return cls(
            id=f"L{level}-{seq:06d}",
            level=level,
            seq=seq,
            path=path,
            first_line=lines[0],
            last_line=lines[1],
            covers=covers,
            created=created,
            text=_content_of(text),
            turns=turns,
        )

    @property
    def name(self) -> str:
        return self.path.name

    @property
    def span(self) -> str:
        return f"messages.jsonl#L{self.first_line}-L{self.last_line}"


@dataclass
class ArchiveState:
    """The tree as derived from the summary files."""

    summaries: dict[str, Summary] = field(default_factory=dict)
    """By file name."""
    parent: dict[str, str] = field(default_factory=dict)
    """Child file name -> parent file name."""
    covered_until: int = 0
    """Last `messages.jsonl` line archived (L1 ranges are contiguous from line 1)."""
    active_names: set[str] = field(default_factory=set)
    max_seq: dict[int, int] = field(default_factory=dict)
    """Highest sequence number per level."""
    warnings: list[str] = field(default_factory=list)

    def add(self, summary: Summary) -> None:
        self.summaries[summary.name] = summary
        self.max_seq[summary.level] = max(self.max_seq.get(summary.level, 0), summary.seq)

    def active(self, level: int | None = None) -> list[Summary]:
        """Active summaries (not folded), oldest first; all levels or one."""
        found = [
            self.summaries[name]
            for name in self.active_names
            if level is None or self.summaries[name].level == level
        ]
        return sorted(found, key=lambda s: (s.first_line, -s.level))

    def chunk_of(self, line: int) -> str | None:
        """The id of the L1 summary that archived message `line`, or None if active."""
        for s in self.summaries.values():
            if s.level == 1 and s.first_line <= line <= s.last_line:
                return s.id
        return None

    @property
    def highest_level(self) -> int:
        return max(self.max_seq, default=0)

    def next_seq(self, level: int) -> int:
        return 1 + self.max_seq.get(level, 0)

    def link(self) -> None:
        """Derive parents, L2+ spans and the active set from the summaries parsed so far."""
        for name, s in sorted(self.summaries.items(), key=lambda kv: kv[1].level):
            if s.level == 1:
                self.covered_until = max(self.covered_until, s.last_line)
                continue
            children = [self.summaries.get(c) for c in s.covers]
            if any(c is None for c in children):
                continue  # a child not parsed yet; linked on a later scan
            for child in s.covers:
                self.parent[child] = name
            if not s.first_line:
                self.summaries[name] = _with_span(s, children)  # type: ignore[arg-type]
        self.active_names = set(self.summaries) - set(self.parent)

    def record(self, summary: Summary) -> None:
        """Add a summary just written: it is active, and what it covers is archived."""
        self.add(summary)
        self.active_names.add(summary.name)
        if summary.level == 1:
            self.covered_until = max(self.covered_until, summary.last_line)
        else:
            for child in summary.covers:
                self.parent[child] = summary.name
                self.active_names.discard(child)


def parse_summary(
    path: Path, text: str, *, level: int, seq: int, warnings: list[str]
) -> Summary | None:
    """The summary whose file at `path` reads `text`; None, with a warning, if malformed."""
    meta = note_meta(text)
    covers = tuple(c.strip() for c in meta.get("covers", "").split(",") if c.strip())
    first = last = 0
    if level == 1:
        match = _RANGE_RE.match(covers[0]) if len(covers) == 1 else None
        if match is None:
            warnings.append(f"skipped summary {path.name!r}: bad covers")
            return None
        first, last = int(match.group(1)), int(match.group(2))
    elif not covers:
        warnings.append(f"skipped summary {path.name!r}: covers nothing")
        return None
    try:
        turns = int(meta.get("turns", "0"))
    except ValueError:
        turns = 0
    return Summary.from_file(
        path,
        text,
        level=level,
        seq=seq,
        lines=(first, last),
        covers=covers,
        created=meta.get("created", ""),
        turns=turns,
    )


def note_meta(text: str) -> dict[str, str]:
    """The `- key: value` lines of a note's `<!-- META: ... -->` block."""
    start = text.find("META:")
    if start < 0:
        return {}
    end = text.find("-->", start)
    meta: dict[str, str] = {}
    for line in text[start + 5 : end if end >= 0 else None].splitlines():
        line = line.strip()
        if line.startswith("- ") and ":" in line:
            key, _, value = line[2:].partition(":")
            meta[key.strip()] = value.strip()
    return meta


def _content_of(text: str) -> str:
    match = re.search(r"^## Content\n(.*?)(?=^## |\Z)", text, re.M | re.S)
    return (match.group(1) if match else text).strip()


def _with_span(summary: Summary, children: list[Summary]) -> Summary:
    return replace(
        summary,
        first_line=min(c.first_line for c in children),
        last_line=max(c.last_line for c in children),
    )
