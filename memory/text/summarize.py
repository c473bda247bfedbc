"""Model-free extractive summaries of tool output and prose.

A summary is a selection of the text's own lines, never invented words, so it can be
trusted without a model and costs no tokens to make. Lines are picked by priority until
the token budget is spent, then printed in their original order with `...` marking gaps:

1. totals (`156 passed, 2 failed in 3.2s`, `Ran 42 tests`, `Tests: 2 failed, 40 total`,
   `FAILED (failures=2)`, `ok  pkg 0.1s`),
2. names of failing tests (pytest `FAILED tests/x.py::test_y`, unittest `FAIL: test_y (...)`,
   jest `✕ name` / `● Suite › name`, go `--- FAIL: TestY`),
3. error lines (tracebacks, `SomeError: ...`, `error:`, `fatal`, `panic`, pytest `E   ...`),
4. the command's last lines (where tools print their verdict),
5. for prose: the first lines and headings.

Text over ~1.8 MB is scanned at its head (256 KB) and tail (1.5 MB) only.

Invariant: `estimate_tokens(extractive_summary(text, n)) <= n` for every `n >= 1`, and a text
that already fits the budget is returned unchanged (stripped of surrounding blank lines).
Pluggable summarizers (e.g. model-backed) follow the `Summarizer` protocol.
"""

from __future__ import annotations

import concurrent.futures
import re
from collections.abc import Callable
from typing import Any, Protocol

from memory.text.tokens import CHARS_PER_TOKEN, estimate_tokens

__all__ = [
    "ChatModelSummarizer",
    "ExtractiveSummarizer",
    "Summarizer",
    "call_with_timeout",
    "extractive_summary",
    "headline",
]

#: Longest line kept verbatim; longer lines are cut with an ellipsis.
MAX_LINE_CHARS = 240
GAP = "..."
#: Huge inputs are scanned only at the head and the tail (where verdicts are), keeping
#: the cost of a summary bounded (~0.5 s) however large the text.
SCAN_HEAD_CHARS = 256 * 1024
SCAN_TAIL_CHARS = 1536 * 1024

_COUNT_WORDS = (
    r"passed|failed|failures?|errors?|error|skipped|xfailed|xpassed|warnings?|deselected"
    r"|tests?|pass|fail|ok|todo|pending|suites?|snapshots?"
)
_TOTALS = re.compile(
    rf"(\b\d+\s+(?:{_COUNT_WORDS})\b.*\b\d+\s+(?:{_COUNT_WORDS})\b)"  # two counts on a line
    rf"|(^=+ .*\b\d+\s+(?:{_COUNT_WORDS})\b.*=+$)"  # pytest's final banner
    rf"|(^\s*\d+\s+(?:{_COUNT_WORDS})\b.*\bin\s+[\d.]+\s*m?s\b)"  # `pytest -q`: "17 passed in 1.2s"
    r"|(^\s*Ran \d+ tests?\b)"  # unittest
    r"|(^\s*(?:OK|FAILED)\s*(?:\(.*\))?\s*$)"  # unittest verdict
    r"|(^\s*(?:Tests|Test Suites|Suites|Snapshots):\s+.*\d+\s+total)"  # jest
    r"|(^(?:ok|FAIL|PASS)\s+\S+\s+[\d.]+s)"  # go test package lines
    r"|(^\s*(?:total|summary)\b.*\d)",
    re.IGNORECASE,
)
_FAILING_TEST = re.compile(
    r"^\s*(?:FAILED|ERROR)\s+\S+::\S+"  # pytest short summary
    r"|^\s*(?:FAIL|ERROR):\s+\w+"  # unittest
    r"|^\s*--- FAIL:\s+\S+"  # go
    r"|^\s*(?:✕|✗|×|✖)\s+\S"  # jest / mocha marks
    r"|^\s*●\s+\S.*›"  # jest failure headers
    r"|^\s*\S+::\S+\s+(?:FAILED|ERROR)\b"  # pytest -v lines
    r"|^\s*not ok \d+"  # TAP
)
_ERROR_LINE = re.compile(
    r"^\s*Traceback \(most recent call last\)"
    r"|^\s*[\w.]*(?:Error|Exception|Exit|Interrupt|Warning)\b:?"
    r"|\b(?:error|exception|fatal|panic|segmentation fault|assertion ?error|abort(?:ed)?)\b"
    r"|^E\s{2,}\S"  # pytest assertion detail
    r"|^\S+:\d+:(?:\d+:)?\s",  # file:line: diagnostics (compilers, pytest locations)
    re.IGNORECASE,
)
_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]")
_HEADING = re.compile(r"^\s{0,3}(?:#{1,6}\s+\S|\*\*[^*]+\*\*\s*$)")


class Summarizer(Protocol):
    """Anything that turns text into a short summary within a token budget."""

    def __call__(self, text: str, max_tokens: int = 200) -> str: ...


class ExtractiveSummarizer:
    """The default `Summarizer`: `extractive_summary` as an object (no model, no state)."""

    def __call__(self, text: str, max_tokens: int = 200) -> str:
        return extractive_summary(text, max_tokens)


def extractive_summary(text: str, max_tokens: int = 200) -> str:
    """Pick the lines of `text` a reader needs, within `max_tokens` estimated tokens.

    Args:
        text: tool output or prose, any size.
        max_tokens: budget for the result as counted by `memory.text.tokens.estimate_tokens`.

    Returns:
        The selected lines in original order, gaps shown as `...`; `""` for blank text.
    """
    max_tokens = max(1, int(max_tokens))
    stripped = _strip_ansi(text).strip("\n")
    if not stripped.strip():
        return ""
    if estimate_tokens(stripped) <= max_tokens:
        return stripped
    lines = _scan_lines(stripped)
    chosen = _choose(lines, max_tokens * CHARS_PER_TOKEN)
    if not chosen:  # budget smaller than any line: keep the opening characters
        return _fit(stripped, max_tokens)
    return _fit(_render(lines, chosen), max_tokens)


def headline(summary: str, max_chars: int = 100) -> str:
    """The single most telling line of a summary: totals, else an error, else the first line."""
    lines = [ln.strip() for ln in summary.splitlines() if ln.strip() and ln.strip() != GAP]
    if not lines:
        return ""
    best = next(
        (
            ln
            for pattern in (_TOTALS, _FAILING_TEST, _ERROR_LINE)
            for ln in lines
            if pattern.search(ln)
        ),
        lines[0],
    )
    best = best.strip("=-_ ") or best
    return best if len(best) <= max_chars else best[: max_chars - 3] + GAP


def _strip_ansi(text: str) -> str:
    """Drop terminal colour codes (`pytest --color=yes`): they cost tokens and hide words."""
    if "\x1b" not in text[: SCAN_HEAD_CHARS + SCAN_TAIL_CHARS] and "\x1b" not in text[-1000:]:
        return text
    if len(text) > SCAN_HEAD_CHARS + SCAN_TAIL_CHARS:  # only the scanned windows matter
        text = text[:SCAN_HEAD_CHARS] + "\n\n" + text[-SCAN_TAIL_CHARS:]
    return _ANSI.sub("", text)


def _scan_lines(text: str) -> list[str]:
    """The lines to consider; for huge text the head and tail, split by a blank line."""
    if len(text) <= SCAN_HEAD_CHARS + SCAN_TAIL_CHARS:
        return text.splitlines()
    head = text[:SCAN_HEAD_CHARS].splitlines()[:-1]  # drop the partial last line
    tail = text[-SCAN_TAIL_CHARS:].splitlines()[1:]  # drop the partial first line
    return [*head, "", *tail]  # the blank line is never chosen, so a gap `...` shows


def _priorities(lines: list[str]) -> list[list[int]]:
    """Line numbers per priority class, most important class first."""
    totals, failing, errors, headings = [], [], [], []
    for i, line in enumerate(lines):
        if not line.strip():
            continue
        if _FAILING_TEST.search(line):
            failing.append(i)
        elif _TOTALS.search(line):
            totals.append(i)
        elif _ERROR_LINE.search(line):
            errors.append(i)
        elif _HEADING.search(line):
            headings.append(i)
    nonblank = [i for i, line in enumerate(lines) if line.strip()]
    first, last = nonblank[:3], nonblank[-3:]
    if totals or failing or errors:  # tool output: the verdict sits at the end
        return [totals, failing, last, errors, first, headings]
    return [first, headings, last, _paragraph_leads(lines)]


def _paragraph_leads(lines: list[str]) -> list[int]:
    return [
        i for i, line in enumerate(lines) if line.strip() and (i == 0 or not lines[i - 1].strip())
    ]


def _choose(lines: list[str], budget_chars: int) -> list[int]:
    """Greedy pick by priority; repeated lines (same text modulo digits) are kept once."""
    chosen: set[int] = set()
    seen: set[str] = set()
    used = 0
    for group in _priorities(lines):
        for i in group:
            if i in chosen:
                continue
            key = re.sub(r"\d+", "#", lines[i].strip())
            if key in seen:
                continue
            cost = min(len(lines[i]), MAX_LINE_CHARS) + len(GAP) + 2
            if used + cost > budget_chars:
                continue  # a shorter line further down may still fit
            chosen.add(i)
            seen.add(key)
            used += cost
    return sorted(chosen)


def _render(lines: list[str], chosen: list[int]) -> str:
    out: list[str] = []
    previous = -1
    for i in chosen:
        if i != previous + 1:
            out.append(GAP)
        line = lines[i]
        if len(line) > MAX_LINE_CHARS:
            line = line[: MAX_LINE_CHARS - 3] + GAP
        out.append(line)
        previous = i
    if chosen and chosen[-1] != len(lines) - 1:
        out.append(GAP)
    return "\n".join(out)


def _fit(summary: str, max_tokens: int) -> str:
    """Hard cap: cut at a line (else a character) boundary so the budget always holds."""
    limit = max_tokens * CHARS_PER_TOKEN
    if len(summary) <= limit:
        return summary
    cut = summary.rfind("\n", 0, limit)
    return summary[:cut] if cut > 0 else summary[:limit]


def call_with_timeout(fn: Callable[..., str], text: str, max_tokens: int, timeout: float) -> str:
    """`fn(text, max_tokens)`, abandoned (`TimeoutError`) after `timeout` seconds."""
    pool = concurrent.futures.ThreadPoolExecutor(max_workers=1)
    try:
        return pool.submit(fn, text, max_tokens).result(timeout=timeout)
    except concurrent.futures.TimeoutError:
        raise TimeoutError(f"no answer within {timeout:g}s") from None
    finally:
        pool.shutdown(wait=False, cancel_futures=True)


class ChatModelSummarizer:
    """A `Summarizer` backed by a LangChain chat model (imported lazily).

    Args:
        model: any `BaseChatModel`.
        timeout_s: a call that takes longer counts as a failure (messages stay active).
    """

    name = "chat-model"

    def __init__(self, model: Any, *, timeout_s: float = 120.0):
        self.model = model
        self.timeout_s = timeout_s

    def _invoke(self, text: str, max_tokens: int) -> str:
        # LangChain is imported only when a model summarises (the CLI never imports it)
        from langchain_core.messages import HumanMessage, SystemMessage

        reply = self.model.invoke(
            [
                SystemMessage(
                    "Summarise this conversation excerpt for an agent's long-term context. "
                    f"At most {max_tokens * 3} words. Keep decisions, facts, names, numbers, "
                    "file paths and open questions; keep the [L123] line references you rely on."
                ),
                HumanMessage(text),
            ]
        )
        content = reply.content
        return content if isinstance(content, str) else str(content)

    def __call__(self, text: str, max_tokens: int = 200) -> str:
        return call_with_timeout(self._invoke, text, max_tokens, self.timeout_s)
