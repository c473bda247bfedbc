"""A simulated 10,000-turn conversation through working memory, archive and context builder.

What a user relies on over a very long session: every turn is kept in `messages.jsonl`,
the context handed to the lead never exceeds its budget at any turn, the summary tree
grows upward (level 3 or more) instead of the context growing, and a fact stated at turn 37
is recalled at turn 9,000 with a citation to the exact line it was stated on.
"""

from __future__ import annotations

import json
import os

import pytest

from memory.store import MemoryStore
from memory.task.archive import Archive
from memory.task.working import WorkingMemory
from memory.window.context import ContextBudgets, ContextBuilder, count_tokens

TURNS = 10_000
FACT_TURN = 37
ASK_TURN = 9_000
TOPICS = (
    "parser",
    "scheduler",
    "cache layer",
    "auth middleware",
    "billing export",
    "retry policy",
    "CLI flags",
    "log rotation",
    "test fixtures",
    "search ranking",
)


def _user_text(turn: int) -> str:
    if turn == FACT_TURN:
        return (
            "Note for later: the staging vault path for the quarterly credential rotation "
            "is secret/ops/zephyr-kestrel, rotated on Thursdays."
        )
    topic = TOPICS[turn % len(TOPICS)]
    return f"Turn {turn}: please review the {topic} and report issue #{turn * 7 % 1000}."


def _assistant_text(turn: int) -> str:
    topic = TOPICS[turn % len(TOPICS)]
    body = "Checked the code paths and the tests. " * (1 + turn % 5)
    return f"Reviewed the {topic} for turn {turn}. {body}No regression found."


@pytest.mark.slow
def test_ten_thousand_turns_stay_bounded_and_recall_an_early_fact(monkeypatch):
    # fsync durability is covered by the kill tests in test_archive.py; here 11,000 fsyncs
    # would only measure the disk, so they are skipped to keep the test under ~30 s.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    store = MemoryStore()
    wm = WorkingMemory(store, "long").ensure(objective="Maintain the service")
    budgets = ContextBudgets()
    builder = ContextBuilder(store, "long", budgets, archive=Archive(wm))
    fact_line = None
    max_tokens = 0
    recalled = None
    for turn in range(1, TURNS + 1):
        first = wm.append_messages(
            [
                {"role": "user", "content": _user_text(turn)},
                {"role": "assistant", "content": _assistant_text(turn)},
            ]
        )
        if turn == FACT_TURN:
            fact_line = first
        query = "what is the staging vault path for credential rotation" if turn == ASK_TURN else ""
        built = builder.build("You are the lead agent of a long task.", query=query)
        assert built.tokens <= budgets.total, f"turn {turn}: {built.tokens} tokens"
        assert count_tokens(built.messages) == built.tokens
        assert not built.warnings, built.warnings
        max_tokens = max(max_tokens, built.tokens)
        if turn == ASK_TURN:
            recalled = built

    # every turn is in messages.jsonl, in order, at the line it was given
    lines = wm.messages_path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 2 * TURNS
    assert json.loads(lines[2 * 37 - 2])["content"] == _user_text(37)
    assert json.loads(lines[-2])["content"] == _user_text(TURNS)
    assert fact_line == 2 * FACT_TURN - 1

    status = Archive(WorkingMemory(store, "long")).status()
    assert status.highest_level >= 3
    assert status.total_messages == 2 * TURNS
    assert status.archived_messages == 2 * TURNS  # the last trigger archived everything

    # the early fact was recalled into the context at turn 9,000, cited by its exact line
    system = recalled.messages[0]["content"]
    assert f"messages.jsonl#L{fact_line}]" in system
    assert "secret/ops/zephyr-kestrel" in system
    assert recalled.parts["snippets"] > 0
    assert max_tokens <= budgets.total
