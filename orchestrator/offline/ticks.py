"""Which key questions the findings so far answer, as the offline lead declares them.

A real lead reads the findings and lists the questions they answer in `PhasePlan.answered`
(1-based, as its system message numbers them under "Key questions"). The offline lead does
the same from what its conversation holds: the numbered questions (those already marked
"(answered)" stay answered, also after a fresh context) and the merged findings digests
(`Findings of phase P (...)` turns: each subagent's discoveries, with the file paths they
name taken as the files it cited), judged by `evidence.answered_by`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from orchestrator.offline.evidence import answered_by

if TYPE_CHECKING:
    from orchestrator.types import JsonObject

_BLOCK_RE = re.compile(r"^Key questions[^\n]*:\n((?:\d+\. [^\n]*\n?)+)", re.MULTILINE)
_ITEM_RE = re.compile(r"^(\d+)\. (.*?)( \(answered\))?$", re.MULTILINE)
_RECORD_RE = re.compile(r"^- (\S+) \[[^\]]*\]: ", re.MULTILINE)
_CITED_RE = re.compile(r"(?<![\w./-])([\w.-]+(?:/[\w.-]+)*\.[A-Za-z]\w*)(?=[:;,)\s]|$)")


def _numbered(messages: Sequence[BaseMessage]) -> tuple[list[str], set[int]]:
    for message in messages:
        if isinstance(message, SystemMessage):
            block = _BLOCK_RE.search(str(message.text))
            if block:
                items = _ITEM_RE.findall(block.group(1))
                return [q for _n, q, _a in items], {int(n) for n, _q, a in items if a}
    return [], set()


def _digests(messages: Sequence[BaseMessage]) -> dict[str, JsonObject]:
    records: dict[str, dict[str, Any]] = {}
    for message in messages:
        text = str(message.text) if isinstance(message, HumanMessage) else ""
        if not text.startswith("Findings of phase "):
            continue
        current = None
        for line in text.splitlines():
            head = _RECORD_RE.match(line)
            if head:
                key = head.group(1)
                current = records[key] = {"phase": key.split("/", 1)[0], "key_discoveries": []}
            elif current is not None and line.startswith("  * "):
                current["key_discoveries"].append(line[4:])
    for rec in records.values():
        cited = {m for d in rec["key_discoveries"] for m in _CITED_RE.findall(d)}
        rec["files"] = [{"path": p} for p in sorted(cited)]
    return records


def answered_questions(messages: Sequence[BaseMessage], new: Sequence[str]) -> list[int]:
    """1-based numbers of the key questions (those listed, then `new` ones) the findings in
    `messages` answer."""
    questions, answered = _numbered(messages)
    questions += [q for q in dict.fromkeys(new) if q not in questions]
    findings = _digests(messages)
    if findings:
        answered |= {i for i, q in enumerate(questions, 1) if answered_by(q, findings)}
    return sorted(answered)
