"""Entries: large outputs kept outside the token window, as every backend stores them.

An entry is a piece of UTF-8 text logged once and fetched back byte-exact. Its size decides its
*tier* (`memory.text.tokens.estimate_tokens`):

* `inline`  (< 500 tokens): kept in one piece beside its metadata;
* `file`    (500..4000 tokens): one compressed piece plus an extractive summary;
* `chunked` (> 4000 tokens): pieces of at most 4000 tokens, cut at a line end where one exists
  (never inside a character), plus a parent summary; `fetch --chunk N` returns piece N.

This module holds what is the same on every backend: the `Entry` record, validation of what
is logged, ids (`mem-YYYYMMDD-HHMMSS-xxxxxxxx`, UTC, 8 random hex), the chunking rule and the
choice of what `prune` removes. Where the pieces live is the backend's business (gzip files
under `entries/` and rows of `memory.db` on the files backend, rows elsewhere).
"""

from __future__ import annotations

import os
import re
import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from memory.clock import iso
from memory.errors import InvalidInputError
from memory.text.summarize import Summarizer, headline
from memory.text.tokens import CHARS_PER_TOKEN, estimate_tokens

__all__ = [
    "ENTRY_TYPES",
    "Entry",
    "TIERS",
    "check_type",
    "normalize_directory",
    "split_chunks",
]

ENTRY_TYPES = ("transcript", "output", "summary", "context", "chunk")
TIERS = ("inline", "file", "chunked")
INLINE_MAX_TOKENS = 499  # < 500 tokens stays in one piece beside the metadata
FILE_MAX_TOKENS = 4000  # 500..4000 tokens is one compressed piece
CHUNK_MAX_TOKENS = 4000
CHUNK_MAX_CHARS = CHUNK_MAX_TOKENS * CHARS_PER_TOKEN
SUMMARY_MAX_TOKENS = 200
ENTRY_ID_RE = re.compile(r"mem-\d{8}-\d{6}-[0-9a-f]{8}")


@dataclass
class Entry:
    """Metadata of one stored entry (the content itself comes from `fetch`)."""

    id: str
    type: str
    tier: str
    """`inline`, `file` or `chunked`."""
    tokens: int
    """Estimated tokens of the whole content."""
    bytes: int
    """Size of the content in UTF-8 bytes."""
    chunks: int
    """Number of chunks (0 unless `tier == "chunked"`); `fetch(chunk=N)` counts from 0."""
    summary: str
    tags: list[str] = field(default_factory=list)
    checkpoint: str | None = None
    directory: str | None = None
    created_at: str = ""
    """ISO 8601 UTC, e.g. `2026-01-23T12:34:56.123456Z`."""
    path: str | None = None
    """Files backend: the gzip file (`file`) or the chunk folder (`chunked`), from the root."""
    seq: int = 0
    """Order of logging within one backend (grows, never reused)."""
    stored_bytes: int = 0
    """Bytes the backend keeps for the content (compressed on the files backend)."""

    @property
    def pieces(self) -> int:
        """How many pieces `fetch(chunk=N)` accepts (1 for an entry kept in one piece)."""
        return max(self.chunks, 1)

    @property
    def summary_line(self) -> str:
        """The summary's most telling line: totals, else an error, else its first line."""
        return headline(self.summary)

    @property
    def reference(self) -> str:
        """The reference line: `mem-...: 156 passed, 2 failed (12000 tokens)`."""
        label = self.summary_line or ",".join(self.tags) or self.type
        return f"{self.id}: {label} ({self.tokens} tokens)"

    def to_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "type": self.type,
            "tier": self.tier,
            "tokens": self.tokens,
            "bytes": self.bytes,
            "stored_bytes": self.stored_bytes,
            "chunks": self.chunks,
            "summary": self.summary,
            "tags": list(self.tags),
            "checkpoint": self.checkpoint,
            "directory": self.directory,
            "created_at": self.created_at,
            "path": self.path,
            "seq": self.seq,
        }


def normalize_directory(directory: str | os.PathLike[str]) -> str:
    """An absolute, normalised path, so `./pipeline` and `/abs/pipeline` name one place."""
    raw = os.fspath(directory)
    if not raw.strip():
        raise InvalidInputError("empty --directory: give a path such as './pipeline'")
    return os.path.normpath(os.path.abspath(os.path.expanduser(raw)))


def under_directory(directory: str | None, wanted: str) -> bool:
    """Whether an entry linked to `directory` is linked to `wanted` or below it."""
    if directory is None:
        return False
    norm = normalize_directory(wanted)
    return directory == norm or directory.startswith(norm.rstrip("/") + "/")


def split_chunks(text: str, max_chars: int = CHUNK_MAX_CHARS) -> list[str]:
    """Cut `text` into pieces of at most `max_chars` characters, at line ends if possible.

    `"".join(split_chunks(t)) == t` always; a line longer than `max_chars` is cut inside
    the line (between characters, never inside one).
    """
    pieces, start, size = [], 0, len(text)
    while size - start > max_chars:
        cut = text.rfind("\n", start, start + max_chars)
        end = cut + 1 if cut >= start else start + max_chars
        pieces.append(text[start:end])
        start = end
    if start < size or not pieces:
        pieces.append(text[start:])
    return pieces


def check_type(type: str) -> str:
    if type not in ENTRY_TYPES:
        raise InvalidInputError(f"unknown entry type {type!r}: use one of {', '.join(ENTRY_TYPES)}")
    return type


def tier_of(tokens: int) -> str:
    """The tier an entry of `tokens` estimated tokens is stored in."""
    if tokens <= INLINE_MAX_TOKENS:
        return "inline"
    return "file" if tokens <= FILE_MAX_TOKENS else "chunked"


def new_entry_id(moment: datetime) -> str:
    """`mem-YYYYMMDD-HHMMSS-xxxxxxxx` for `moment` (UTC) with 8 random hex digits."""
    return f"mem-{moment.astimezone(UTC):%Y%m%d-%H%M%S}-{secrets.token_hex(4)}"


def as_text(content: str | bytes) -> tuple[str, bytes]:
    """The content as text and as its exact UTF-8 bytes; rejects invalid or empty input."""
    if isinstance(content, bytes | bytearray | memoryview):
        data = bytes(content)
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise InvalidInputError(
                f"content is not valid UTF-8 (byte {data[exc.start]:#04x} at offset "
                f"{exc.start}); store text, or encode binary data first (e.g. base64)"
            ) from None
    elif isinstance(content, str):
        text = content
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError as exc:
            raise InvalidInputError(
                f"content has an unencodable character {text[exc.start]!r} at {exc.start}; "
                "store valid unicode text"
            ) from None
    else:
        raise InvalidInputError(f"content must be text, not {type(content).__name__!r}")
    if not text or text.isspace():
        raise InvalidInputError("content is empty: nothing to store (give TEXT, --file or --stdin)")
    return text, data


def prepare_entry(
    content: str | bytes,
    *,
    type: str,
    tags: Iterable[str],
    directory: str | os.PathLike[str] | None,
    checkpoint: str | None,
    moment: datetime,
    summarizer: Summarizer,
) -> tuple[Entry, str, bytes]:
    """Validate what is logged: `(entry with a new id, text, exact bytes)`.

    The entry's `tier` and `chunks` follow its size (`pieces()` cuts the chunks);
    `path`, `seq` and `stored_bytes` are the backend's to fill in.
    """
    check_type(type)
    text, data = as_text(content)
    if isinstance(tags, str):  # a single tag, not its characters
        tags = [tags]
    tags = list(tags)
    if any("\x00" in t for t in tags):
        raise InvalidInputError(f"tag with a NUL character in {tags!r}; use plain text tags")
    if checkpoint is not None:
        checkpoint = checkpoint.strip() or None
    tokens = estimate_tokens(text)
    tier = tier_of(tokens)
    entry = Entry(
        id=new_entry_id(moment),
        type=type,
        tier=tier,
        tokens=tokens,
        bytes=len(data),
        chunks=len(split_chunks(text)) if tier == "chunked" else 0,
        summary=summarizer(text, SUMMARY_MAX_TOKENS).replace("\x00", ""),
        tags=sorted({t.strip() for t in tags if t and t.strip()}),
        checkpoint=checkpoint,
        directory=normalize_directory(directory) if directory is not None else None,
        created_at=iso(moment),
    )
    return entry, text, data


def pieces(entry: Entry, text: str) -> list[str]:
    """The pieces an entry's text is stored in: its chunks, or the whole text."""
    return split_chunks(text) if entry.tier == "chunked" else [text]


#: Entries with this tag are never pruned: the previous content of a file an agent
#: overwrote (`orchestrator.tools.workdir_write`), the only copy of what a user had there.
PREVIOUS_CONTENT_TAG = "previous-content"


def prune_victims(
    entries: list[Entry],
    *,
    keep_days: int | None,
    keep_entries: int | None,
    now: datetime,
    keep: frozenset[str] | set[str] = frozenset(),
) -> list[Entry]:
    """The entries (given newest first) that `prune` removes, oldest first.

    An entry goes if it is older than `keep_days` or not among the newest `keep_entries`,
    unless its id is in `keep` or it is tagged `PREVIOUS_CONTENT_TAG`.
    """
    for name, value in (("keep-days", keep_days), ("keep-entries", keep_entries)):
        if value is not None and value < 0:
            raise InvalidInputError(f"invalid --{name} {value!r}: use 0 or a positive number")
    if keep_days is None and keep_entries is None:
        raise InvalidInputError("prune needs --keep-days N and/or --keep-entries N")
    cutoff = iso(now - timedelta(days=keep_days)) if keep_days is not None else None
    victims = [
        e
        for rank, e in enumerate(entries)
        if (
            (cutoff is not None and e.created_at < cutoff)
            or (keep_entries is not None and rank >= keep_entries)
        )
        and e.id not in keep
        and PREVIOUS_CONTENT_TAG not in e.tags
    ]
    return list(reversed(victims))


def empty_stats() -> dict[str, int]:
    return {"entries": 0, "tokens": 0, "bytes": 0, "stored_bytes": 0, "chunks": 0}


def entry_stats(entries: list[Entry], *, pruned: int) -> dict[str, Any]:
    """Counts, tokens, bytes (content and stored) overall, by tier and by type."""
    by_tier = {tier: empty_stats() for tier in TIERS}
    by_type = {kind: empty_stats() for kind in ENTRY_TYPES}
    total = empty_stats()
    tags: set[str] = set()
    for e in entries:
        for bucket in (by_tier.setdefault(e.tier, empty_stats()),
                       by_type.setdefault(e.type, empty_stats()), total):  # fmt: skip
            bucket["entries"] += 1
            bucket["tokens"] += e.tokens
            bucket["bytes"] += e.bytes
            bucket["stored_bytes"] += e.stored_bytes
            bucket["chunks"] += e.chunks
        tags.update(e.tags)
    created = [e.created_at for e in entries]
    return {
        **total,
        "by_tier": by_tier,
        "by_type": by_type,
        "oldest": min(created, default=None),
        "newest": max(created, default=None),
        "tags": len(tags),
        "pruned": pruned,
    }


Clock = Callable[[], datetime]
