"""Search documents of a memory file for the contract index: one per paragraph or message.

Ids are citations (`findings/x.md#L12`, `working/T1/messages.jsonl#L45`) and sources are
the scopes of `memory search`, so results on any backend read like the files backend's.
"""

from __future__ import annotations

from memory.base import SearchDoc
from memory.index import FLAT_FOLDERS, message_text, split_blocks


def source_of(path: str) -> str:
    """The search scope of a document path, as `memory search --scope` names it."""
    parts = path.split("/")
    if parts[0] == "working" and len(parts) >= 3:
        if parts[2] == "detail":
            return "detail"
        return {"overview.md": "overview", "messages.jsonl": "messages"}.get(parts[2], "working")
    return {folder: source for folder, source, _ in FLAT_FOLDERS}.get(parts[0], parts[0])


def search_blocks(path: str, data: bytes) -> list[SearchDoc]:
    """The index documents of one file: a block per paragraph, or a message per jsonl line.

    Ids are citations (`findings/x.md#L12`, `working/T1/messages.jsonl#L45`), so a hit
    points at the line, as `memory search` on a memory directory does.
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return []
    source = source_of(path)
    if path.endswith(".jsonl"):
        pieces = [
            (n, message_text(line.encode()) or "")
            for n, line in enumerate(text.split("\n"), start=1)
        ]
    else:
        pieces = split_blocks(text)
    return [
        SearchDoc(f"{path}#L{line}", source, body, path, {"line": line})
        for line, body in pieces
        if body.strip()
    ]
