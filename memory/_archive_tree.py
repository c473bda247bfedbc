"""The summary tree as its files define it: the file format, and the tree derived from it.

A summary file (`detail/summary-L{level}-{seq}.md`, rendered from `summary.md.j2` by
`Archive`) names what it covers in its META block; `parse_summary` reads it back into a
`Summary`. `ArchiveState` is the tree derived from the files (parents, the active set, the
last archived line) and holds nothing they do not say, so it can always be rebuilt by
reading them again. `memory.archive` states the design and its crash-consistency invariant.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

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
