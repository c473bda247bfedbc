"""How memory files become search documents, the same on every backend.

A markdown or JSON file is cut into blocks (a paragraph or section each, with its first line),
a `.jsonl` log into one document per message line (its text without the JSON), and each gets
an id that is its citation (`findings/x.md#L12`, `working/T1/messages.jsonl#L45`) and a source
that is a scope of `memory search`. Which files are searched at all (`indexed_source`) is
decided here too, so every backend finds the same things.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from memory.contract.base import SearchDoc
from memory.contract.entries import Entry

#: `(folder attribute of Layout, source name, file suffixes)` for the flat folders.
FLAT_FOLDERS = (
    ("research_plans", "plans", (".md",)),
    ("findings", "findings", (".md",)),
    ("checkpoints", "checkpoints", (".json",)),
    ("context_snapshots", "snapshots", (".md", ".json")),
    ("facts", "facts", (".md",)),
    ("episodes", "episodes", (".md",)),
)

BLOCK_MAX_CHARS = 1500
BLOCK_MAX_LINES = 40
JSON_BLOCK_MAX_LINES = 20
# Keys of a message record that carry bookkeeping, not content worth searching.
_SKIP_KEYS = frozenset(
    {
        "id",
        "ts",
        "timestamp",
        "time",
        "created_at",
        "tool_call_id",
        "seq",
        "line",
        "usage",
        "usage_metadata",
        "response_metadata",
        "tokens",
        "index",
    }
)
METADATA_PREFIX = "<!-- tether:"
_HEADING = re.compile(r"^\s{0,3}#{1,6}\s")
_WORDY = re.compile(r"[^\W_]", re.UNICODE)
_DAY = re.compile(r"\d{4}-\d\d-\d\d")


# -- extraction ------------------------------------------------------------------------
def split_blocks(text: str, max_lines: int = BLOCK_MAX_LINES) -> list[tuple[int, str]]:
    """Split a markdown/JSON text into `(first_line, block)` pieces worth indexing.

    A blank line ends a block, a heading starts one (and stays with the paragraph under
    it), and long runs are cut every `max_lines` lines or `BLOCK_MAX_CHARS` characters.
    Blocks without a single letter or digit are dropped.
    """
    blocks: list[tuple[int, str]] = []
    cur: list[str] = []
    start = 1
    only_headings = False

    def flush() -> None:
        body = "\n".join(cur).strip("\n")
        if body and _WORDY.search(body):
            blocks.append((start, body))
        cur.clear()

    for number, line in enumerate(text.split("\n"), start=1):
        # `<!-- tether:KIND {json} -->` repeats a file's readable sections for machines;
        # indexing it too would only crowd search results with JSON.
        if not line.strip() or line.startswith(METADATA_PREFIX):
            if cur and not only_headings:
                flush()
            elif cur:
                cur.append("")  # keep line numbers exact inside a heading's block
            continue
        heading = bool(_HEADING.match(line))
        too_big = len(cur) >= max_lines or sum(len(x) + 1 for x in cur) >= BLOCK_MAX_CHARS
        if cur and ((heading and not only_headings) or too_big):
            flush()
        if not cur:
            start, only_headings = number, heading
        else:
            only_headings = only_headings and heading
        cur.append(line)
    if cur:
        flush()
    return blocks


def message_text(raw: bytes) -> str | None:
    """The searchable text of one jsonl line: role then every content string, no JSON."""
    return message_fields(raw)[0]


def message_fields(raw: bytes) -> tuple[str | None, str | None, str | None]:
    """`(searchable text, UTC day, speaker)` of one jsonl line: the text as `message_text`
    gives it, the `YYYY-MM-DD` of its `ts` and its `name` (who or what wrote it: a person in
    a chat log, an agent, a tool), each None when the line has none."""
    lenient = False
    try:
        obj = orjson.loads(raw)  # 5x the standard parser: most of an index build is parsing
    except orjson.JSONDecodeError:
        try:  # what orjson refuses and Python accepts (NaN, big integers, lone surrogates)
            obj = json.loads(raw)
        except (UnicodeDecodeError, ValueError):
            return None, None, None
        lenient = True
    if not isinstance(obj, dict):
        return None, None, None
    parts: list[str] = []
    role = obj.get("role")
    if isinstance(role, str) and role:
        parts.append(f"{role}:")
    for key, value in obj.items():
        if key == "role" or key in _SKIP_KEYS:
            continue
        if type(value) is str:
            parts.append(value)
        else:
            _collect_strings(value, parts)
    text = " ".join(p for p in parts if p)
    if lenient:  # a `\ud800` escape decodes to a lone surrogate, which no database stores
        text = text.encode("utf-8", "replace").decode("utf-8")
    ts = obj.get("ts")
    day = ts[:10] if isinstance(ts, str) and _DAY.match(ts) else None
    name = obj.get("name")
    speaker = name if type(name) is str and _WORDY.search(name) else None
    return (text if _WORDY.search(text) else None), day, speaker


def _collect_strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for key, inner in value.items():
            if key not in _SKIP_KEYS:
                _collect_strings(inner, out)
    elif isinstance(value, list):
        for inner in value:
            _collect_strings(inner, out)


WORDY = _WORDY


def source_of(path: str) -> str:
    """The search scope of a document path, as `memory search --scope` names it."""
    parts = path.split("/")
    if parts[0] == "working" and len(parts) >= 3:
        if parts[2] == "detail":
            return "detail"
        return {"overview.md": "overview", "messages.jsonl": "messages"}.get(parts[2], "working")
    return {folder: source for folder, source, _ in FLAT_FOLDERS}.get(parts[0], parts[0])


def indexed_source(path: str) -> str | None:
    """The scope a document is searched under, or `None` when it is not searched.

    Searched: `*.md` of plans, findings, facts and episodes, checkpoint `*.json`, snapshot
    `*.md`/`*.json` (in their folder or below), and per task `overview.md`,
    `messages.jsonl` and `detail/**/*.md`. Hidden names are never searched.
    """
    parts = path.split("/")
    if any(p.startswith(".") for p in parts):
        return None
    if parts[0] == "working":
        if len(parts) == 3 and parts[2] in ("overview.md", "messages.jsonl"):
            return source_of(path)
        if len(parts) >= 4 and parts[2] == "detail" and path.endswith(".md"):
            return "detail"
        return None
    for folder, source, suffixes in FLAT_FOLDERS:
        if parts[0] == folder and len(parts) >= 2 and path.endswith(suffixes):
            return source
    return None


def message_docs(path: str, lines: list[tuple[int, bytes]]) -> list[SearchDoc]:
    """The search documents of numbered jsonl lines (`(line number, raw line)`)."""
    out = []
    for number, raw in lines:
        text = message_text(raw)
        if text:
            out.append(SearchDoc(f"{path}#L{number}", "messages", text, path, {"line": number}))
    return out


def search_blocks(path: str, data: bytes) -> list[SearchDoc]:
    """The search documents of one file: a block per paragraph, or a message per jsonl line.

    Ids are citations (`findings/x.md#L12`, `working/T1/messages.jsonl#L45`), so a hit
    points at the line, as `memory search` on a memory directory does.
    """
    if path.endswith(".jsonl"):
        raw_lines = data.split(b"\n")
        if not data.endswith(b"\n"):
            raw_lines = raw_lines[:-1]  # a torn or unfinished last line is not indexed yet
        return message_docs(path, list(enumerate(raw_lines, start=1)))
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        text = data.decode("utf-8", errors="replace")
    source = source_of(path)
    max_lines = JSON_BLOCK_MAX_LINES if path.endswith(".json") else BLOCK_MAX_LINES
    return [
        SearchDoc(f"{path}#L{line}", source, body, path, {"line": line})
        for line, body in split_blocks(text, max_lines)
        if body.strip()
    ]


def document_docs(path: str, data: bytes) -> list[SearchDoc]:
    """The search documents of a document, if it is one that is searched (`indexed_source`)."""
    return search_blocks(path, data) if indexed_source(path) else []


def entry_docs(entry: Entry, parts: list[str]) -> list[SearchDoc]:
    """The search documents of an entry: its text, or one per chunk (`mem-...#chunk-N`)."""
    if entry.tier != "chunked":
        cites = [entry.id]
    else:
        cites = [f"{entry.id}#chunk-{n}" for n in range(len(parts))]
    return [
        SearchDoc(cite, "entries", text, "", {"entry": entry.id})
        for cite, text in zip(cites, parts, strict=True)
        if text and WORDY.search(text)
    ]
