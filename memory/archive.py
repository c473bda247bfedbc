"""Never-delete archive and multi-level summary tree of a task's conversation.

Every N user turns (default 10, per task, `summary.json` beside the log) the active messages
are summarised into a level-1 summary; when more than `fanout` (5) summaries of one level
are active, the oldest `fanout` are folded into one summary of the next level, recursively.

The summary files are the whole truth (`working/{task}/detail/summary-L{level}-{seq}.md`,
documents of the store's backend; their format and the tree read from them are in
`memory._archive_tree`, the `summary.json` settings in `memory._archive_config`).
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
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from memory._archive_config import CONFIG_NAME, SummaryConfig, read_config, write_config
from memory._archive_config import DEFAULT_THRESHOLD as DEFAULT_THRESHOLD
from memory._archive_config import MAX_THRESHOLD as MAX_THRESHOLD
from memory._archive_tree import FILE_RE, ArchiveState, Summary, parse_summary
from memory._archive_tree import note_meta as note_meta
from memory.clock import now_iso
from memory.errors import InvalidInputError, SummarizerFailed
from memory.summarize import Summarizer, call_with_timeout, extractive_summary
from memory.templating import render
from memory.words import keywords
from memory.working import Message, WorkingMemory

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
