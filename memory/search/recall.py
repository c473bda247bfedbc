"""Ranked recall over all of memory: natural-language queries, scopes, citations.

`search(backend, query, scope, limit)` is what `memory search`, `recall_memory` and the
context builder use on every backend: it validates the query and the scope, brings the
backend's index up to date (`sync_index`: on the files backend the cheap mtime/size scan that
makes a hand edit searchable at the next query), asks `index_query`, and turns each hit into a
`SearchResult` with a citation in the form people read (`working/T1/detail/auth.md#L10`,
`working/T1/messages.jsonl#L45`, `mem-...#chunk-2`) and a one-line snippet of about 300
characters around the best match. The files backend ranks with its own query planner and cuts
its own snippets (`memory.backends.files._planner`); for the others the snippet and the cited
line inside a block are chosen here from the words of the query.

Every backend weighs a match by the kind of record it is in (`SOURCE_WEIGHTS`): the agents'
distilled records (plans, findings, snapshots, overview, notes, facts, episodes) count in
full, raw output (offloaded tool results and logged texts: `entries`; conversation log lines:
`messages`) and checkpoints (a run's JSON state) at half, a merged batch's copy of a finding
at `COPY_WEIGHT`. For the same words, what an agent concluded comes before the
file it read to conclude it; a raw output that matches much better still comes first, and a
search of one kind of record alone ranks as before.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from memory.contract.base import BaseBackend, SearchHit
from memory.errors import InvalidQueryError
from memory.text.words import STOPWORDS

SCOPES = (
    "all",
    "plans",
    "findings",
    "checkpoints",
    "snapshots",
    "overview",
    "detail",
    "messages",
    "entries",
    "facts",
    "episodes",
)
SOURCES = SCOPES[1:]
SNIPPET_CHARS = 300
#: What a match weighs by the view it is in (its score is multiplied by this; 1.0 when not
#: named): raw output, the text agents read or said on the way, weighs half as much as the
#: records they distilled from it, and so does a checkpoint, the JSON state a run keeps for
#: itself (it quotes plan lines and finding paths word for word).
SOURCE_WEIGHTS: dict[str, float] = {"messages": 0.5, "entries": 0.5, "checkpoints": 0.5}
#: A line of a merged batch (`findings/merged_*`) copies a finding's line: it weighs this
#: much, so the finding an agent wrote comes before the batch that repeats it.
COPY_WEIGHT = 0.8
COPY_PREFIXES = ("findings/merged_",)
#: The most hits a search asks for again when near-copies left it short.
MAX_ASKED = 80
#: Two results of one view with this share of their words in common are one (Jaccard).
SAME_WORDS = 0.8
#: A result quoting this many words in a row of an earlier result's match (two of them
#: query words) echoes it.
ECHO_WORDS = 8
_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_SPACE = re.compile(r"\s+")
_LINE_ID = re.compile(r"#L(\d+)$")


@dataclass
class SearchResult:
    """One recalled snippet and where it came from."""

    source: str
    """The view it belongs to: one of `SOURCES` (plans, detail, messages, entries, ...)."""
    path: str | None
    """File path relative to the memory root (`None` for entries)."""
    line: int | None
    """1-based line in `path` (the jsonl line for messages), `None` for entries."""
    citation: str
    """`detail/x.md#L10`-style reference, `working/T1/messages.jsonl#L45`, `mem-...#chunk-2`."""
    text: str
    """The snippet: about 300 characters around the best match, on one line."""
    score: float
    """Relevance (higher is better); comparable within one search only."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def search(
    memory: BaseBackend | Any,
    query: str,
    scope: str | Sequence[str] = "all",
    limit: int = 5,
    *,
    widen: bool = True,
    past_echoes: bool = False,
) -> list[SearchResult]:
    """Ranked recall of `query` over the views named by `scope`, near-copies dropped.

    Args:
        memory: the storage backend (or a `MemoryStore`) whose index is searched, synced first.
        query: natural-language text; not every word has to match.
        scope: one of `SCOPES`, a comma-separated string of them, or a list.
        limit: the most results to return (>= 1).
        widen: ask the index again for twice as many hits while near-copies leave the
            results short (up to `MAX_ASKED` hits); False: one query, fewer results (a
            context builder, which fills its budget with what it gets, in a memory of
            many alike tasks).
        past_echoes: with `widen`, also ask again while echoes leave the results short of
            new ones: a task's objective, which its plan, checkpoints, snapshots and the
            lead's prompts all quote, fills the first hits of a question asked in its
            words. For a person or an agent reading the results (`memory search`, the
            recall tool); it costs further queries wherever memory repeats itself.

    Raises:
        InvalidQueryError: empty query, unknown scope or limit below 1.
    """
    if not isinstance(query, str) or not query.strip():
        raise InvalidQueryError(
            f"empty query {query!r}: give words to search for, e.g. 'auth flow decision'"
        )
    sources = resolve_scope(scope)
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise InvalidQueryError(f"invalid limit {limit!r}: give a number of results >= 1")
    backend: BaseBackend = getattr(memory, "backend", memory)
    backend.sync_index()
    # up to twice the limit: room to put echoes last (the index ranks the same candidates)
    asked = max(limit, min(2 * limit, MAX_ASKED)) if widen else limit
    while True:
        hits = backend.index_query(query, sources=sources, limit=asked)
        kept, echoes = _distinct([to_result(hit, query) for hit in hits], query)
        short = len(kept) + len(echoes) < limit or (past_echoes and len(kept) < limit)
        if not short or not widen or len(hits) < asked or 2 * asked > MAX_ASKED:
            return (kept + echoes)[:limit]
        asked *= 2


def source_weight(source: str, path: str | None = None) -> float:
    """The weight of a match in the view `source` (`SOURCE_WEIGHTS`), in the file `path`
    (a merged batch's: `COPY_WEIGHT` too)."""
    copy = COPY_WEIGHT if path and path.startswith(COPY_PREFIXES) else 1.0
    return SOURCE_WEIGHTS.get(source, 1.0) * copy


def distinct(results: Sequence[SearchResult], query: str = "") -> list[SearchResult]:
    """`results` without near-repeats, and echoes last.

    Near-repeats of one view are dropped: thirteen checkpoints quote the same objective
    line (their other fields differ a little), a merged file repeats its findings; near
    means `SAME_WORDS` of their words in common. Messages are never dropped (two turns
    saying the same are two turns).

    Echoes, of any view, come after the other results: with `query`, a result quoting the
    passage an earlier result matched (`ECHO_WORDS` words in a row, two of them query
    words) says nothing new. A task's objective, which its plan, snapshots, checkpoints,
    episode and the lead's messages all repeat, would otherwise fill the results of any
    question asked in its words.
    """
    kept, echoes = _distinct(results, query)
    return kept + echoes


def _distinct(
    results: Sequence[SearchResult], query: str
) -> tuple[list[SearchResult], list[SearchResult]]:
    """`distinct`'s two parts: the results that say something new, then the echoes."""
    asked = _query_prefixes(query)
    kept: list[tuple[SearchResult, set[str]]] = []
    echoed: list[tuple[SearchResult, set[str]]] = []
    passages: set[tuple[str, ...]] = set()
    for result in results:
        tokens = [w for w in _WORD.findall(result.text.lower()) if len(w) > 2]
        words = set(tokens)
        if result.source != "messages" and any(  # echoes too: 39 checkpoints, one copy
            other.source == result.source and _overlap(words, seen) >= SAME_WORDS
            for other, seen in kept + echoed
        ):
            continue
        mine = _passages(tokens, asked)
        if mine & passages:
            echoed.append((result, words))
            continue
        passages |= mine
        kept.append((result, words))
    return [result for result, _ in kept], [result for result, _ in echoed]


def _query_prefixes(query: str) -> set[str]:
    """The query's words as stem-like prefixes (`redirects` -> `redir`), stopwords left out."""
    return {w[:5] for w in _WORD.findall(query.lower()) if len(w) > 2 and w not in STOPWORDS}


def _passages(tokens: list[str], asked: set[str]) -> set[tuple[str, ...]]:
    """Runs of `ECHO_WORDS` words of `tokens` holding at least two of the query's words (one
    when the query has one)."""
    need = min(2, len(asked))
    if not need:
        return set()
    hit = [t[:5] in asked for t in tokens]
    runs: set[tuple[str, ...]] = set()
    if sum(hit) < need:
        return runs
    held = sum(hit[: ECHO_WORDS - 1])  # query words in the window, kept as it slides
    for i in range(len(tokens) - ECHO_WORDS + 1):
        held += hit[i + ECHO_WORDS - 1]
        if held >= need:
            runs.add(tuple(tokens[i : i + ECHO_WORDS]))
        held -= hit[i]
    return runs


def _overlap(a: set[str], b: set[str]) -> float:
    return len(a & b) / len(a | b) if a or b else 1.0


def resolve_scope(scope: str | Sequence[str]) -> tuple[str, ...]:
    """The sources a scope names (`all` -> every source); raises `InvalidQueryError`."""
    names = [scope] if isinstance(scope, str) else list(scope)
    wanted: list[str] = []
    for name in names:
        for part in str(name).split(","):
            part = part.strip()
            if part not in SCOPES:
                raise InvalidQueryError(f"unknown scope {part!r}: use one of {', '.join(SCOPES)}")
            wanted.extend(SOURCES if part == "all" else [part])
    if not wanted:
        raise InvalidQueryError(f"empty scope {scope!r}: use one of {', '.join(SCOPES)}")
    return tuple(dict.fromkeys(wanted))


def to_result(hit: SearchHit, query: str) -> SearchResult:
    """A backend's hit as the `SearchResult` people read (snippet, cited line)."""
    path = hit.path or None
    score = round(hit.score, 4)
    if hit.citation:  # the backend chose the snippet and the cited line itself
        return SearchResult(hit.source, path, hit.line, hit.citation, hit.text, score)
    text, offset = snippet(hit.text, query)
    match = _LINE_ID.search(hit.doc_id)
    line = None
    if match and hit.source != "entries":
        line = int(match.group(1)) + (0 if hit.source == "messages" else offset)
    citation = f"{path}#L{line}" if path and line is not None else hit.doc_id
    return SearchResult(hit.source, path, line, citation, text, score)


def snippet(body: str, query: str) -> tuple[str, int]:
    """About `SNIPPET_CHARS` of `body` from the line holding most query words, on one line.

    Returns the snippet and that line's offset inside `body` (0 for the first line). Words
    match on a shared stem-like prefix (`cookies` finds `cookie`), ignoring stopwords. In a
    line longer than the snippet, it starts just before the line's first match (a word at
    the end of a 100 MB message is shown, not the message's start); lines are scanned for
    the query's prefixes alone (in C), never split into words.
    """
    stems = {w.lower()[:5] for w in _WORD.findall(query) if w.lower() not in STOPWORDS}
    found = _prefix_pattern(stems)
    lines = body.split("\n")
    best, best_score = 0, 0
    for number, line in enumerate(lines):
        score = len({m.group().lower() for m in found.finditer(line)}) if found else 0
        if score > best_score:
            best, best_score = number, score
    start = sum(len(line) + 1 for line in lines[:best])
    line = lines[best]
    first = found.search(line) if found and len(line) > SNIPPET_CHARS else None
    if first and first.start() > SNIPPET_CHARS // 2:
        start += first.start() - SNIPPET_CHARS // 5
    end = min(len(body), start + SNIPPET_CHARS)
    return _one_line(body[start:end], start > 0, end < len(body)), best


def _prefix_pattern(stems: set[str]) -> re.Pattern | None:
    """Words whose first five characters (the whole word if shorter) are one of `stems`."""
    if not stems:
        return None
    alternatives = sorted((re.escape(s) + ("" if len(s) >= 5 else r"(?![^\W_])") for s in stems),
                          key=len, reverse=True)  # fmt: skip
    return re.compile(r"(?<![^\W_])(?:" + "|".join(alternatives) + ")", re.IGNORECASE)


def _one_line(text: str, cut_left: bool, cut_right: bool) -> str:
    text = _SPACE.sub(" ", text).strip()
    return ("…" if cut_left else "") + text + ("…" if cut_right else "")


def format_results(query: str, results: Sequence[SearchResult]) -> str:
    """The text format: numbered results with source, file:line, content, citation."""
    lines = [f'Found {len(results)} result(s) for: "{query}"']
    for number, hit in enumerate(results, start=1):
        lines.append("")
        lines.append(f"[{number}] Source: {hit.source}")
        if hit.path and hit.line is not None:
            lines.append(f"    File: {hit.path}:{hit.line}")
        elif hit.path:
            lines.append(f"    File: {hit.path}")
        lines.append(f"    Content: {hit.text}")
        lines.append(f"    Citation: {hit.citation}")
    return "\n".join(lines)
