"""Budgeted context assembly through `memory.window.context.ContextBuilder`.

Covers: the default budgets, the order of the parts (system prompt, overview,
summaries highest level first, recalled snippets, recent turns), per-part and total budgets
holding for any input size, trimming in priority order (snippets, then recent turns, then
older summaries) with every omission reported, snippets already in context skipped, tool
calls kept with their results, and the archive running when it is due.
"""

from __future__ import annotations

import pytest

from memory.search.recall import SearchResult
from memory.store import MemoryStore
from memory.task.archive import Archive
from memory.task.working import WorkingMemory
from memory.window.context import ContextBudgets, ContextBuilder, build_context, count_tokens


def _turns(wm, count, start=1, size=40):
    for i in range(start, start + count):
        wm.append_messages(
            [
                {"role": "user", "content": f"question {i} " + "q" * size},
                {"role": "assistant", "content": f"answer {i} " + "a" * size},
            ]
        )


def _result(citation, text, line=None, path=None):
    return SearchResult(
        source="messages", path=path, line=line, citation=citation, text=text, score=1.0
    )


@pytest.fixture
def wm():
    return WorkingMemory(MemoryStore(), "t1").ensure(objective="Ship the release")


def test_defaults_are_seed_001s():
    b = ContextBudgets()
    assert (b.total, b.summaries, b.recent, b.snippets, b.system) == (8000, 2000, 3000, 1500, 1500)
    assert b.recent_turns == 4


def test_parts_in_priority_order(wm):
    _turns(wm, 60)
    archive = Archive(wm)
    for _ in range(6):
        archive.summarize_now()  # enough summaries for a level 2
        _turns(wm, 10, start=100)
    results = [
        _result(
            "detail/auth.md#L3",
            "we chose JWT with refresh rotation",
            line=3,
            path="working/t1/detail/auth.md",
        )
    ]
    builder = ContextBuilder(wm.store, "t1", archive=archive, search=lambda q, n: results)
    built = builder.build("SYSTEM PROMPT", query="auth")
    system = built.messages[0]
    assert system["role"] == "system"
    text = system["content"]
    order = [
        text.index(s)
        for s in (
            "SYSTEM PROMPT",
            "# Working memory (overview.md)",
            "Ship the release",
            "# Conversation summaries",
            "[L2 detail/summary-L2-000001.md",
            "[L1 detail/",
            "# Recalled from memory",
            "- [detail/auth.md#L3] we chose JWT",
        )
    ]
    assert order == sorted(order)
    recent = built.messages[1:]
    assert [m["role"] for m in recent] == ["user", "assistant"] * 4
    assert recent[-1]["content"].startswith("answer 109")
    assert built.tokens == count_tokens(built.messages) <= 8000
    assert set(built.parts) == {"system", "overview", "summaries", "snippets", "recent", "fill"}


@pytest.mark.parametrize(
    "system_size, overview_size, message_size",
    [
        (50, 10, 100_000),  # a huge tool output in the latest turn
        (40_000, 10, 10),  # a huge system prompt
        (50, 30_000, 10),  # a huge overview
        (20_000, 20_000, 50_000),
    ],
)
def test_total_budget_holds_for_any_input(wm, system_size, overview_size, message_size):
    wm.write_overview("# Working Memory\n" + "o" * overview_size)
    _turns(wm, 3, size=message_size)
    budgets = ContextBudgets(total=3000, system=1000, overview=600, recent=1200)
    built = ContextBuilder(wm.store, "t1", budgets, search=lambda q, n: []).build(
        "s" * system_size, query=""
    )
    assert built.tokens == count_tokens(built.messages) <= 3000
    assert built.parts["system"] <= 1000 and built.parts["overview"] <= 600
    assert built.omitted  # something was cut and said so
    assert built.messages[-1]["role"] == "assistant"  # the latest turn is still there


def test_trim_order_snippets_then_recent_then_summaries(wm):
    _turns(wm, 30, size=200)
    archive = Archive(wm)
    archive.summarize_now()
    _turns(wm, 4, start=31, size=200)
    results = [
        _result(
            f"working/t1/messages.jsonl#L{i}",
            f"snippet {i} " + "s" * 300,
            line=i,
            path="working/t1/messages.jsonl",
        )
        for i in (1, 3, 5)
    ]
    builder = ContextBuilder(
        wm.store, "t1", ContextBudgets(fill_limit=0), archive=archive, search=lambda q, n: results
    )
    full = builder.build("sys", query="x")
    assert full.parts["snippets"] > 0 and full.parts["summaries"] > 0
    need = full.tokens

    def build(total):
        b = ContextBuilder(
            wm.store,
            "t1",
            ContextBudgets(total=total, fill_limit=0),  # the trim order alone, without the fill
            archive=archive,
            search=lambda q, n: results,
        )
        return b.build("sys", query="x")

    less = build(need - 10)  # just over: one snippet goes, nothing else
    assert less.tokens <= need - 10
    assert len(less.omitted) == 1 and less.omitted[0].startswith("snippet left out")
    assert less.parts["recent"] == full.parts["recent"]
    no_snippets = need - full.parts["snippets"] - 30
    fewer = build(no_snippets)  # all snippets gone, then the oldest recent turn
    assert fewer.parts["snippets"] == 0
    assert fewer.parts["recent"] < full.parts["recent"]
    assert fewer.parts["summaries"] == full.parts["summaries"]
    assert any(
        o.startswith("recent turn left out (total budget): messages.jsonl#L") for o in fewer.omitted
    )
    tight = build(full.parts["recent"] // 4 + 200)  # only now do summaries go
    assert tight.parts["summaries"] == 0
    assert any(
        o.startswith("summary left out (total budget): detail/summary-L1-000001.md")
        for o in tight.omitted
    )
    assert tight.tokens <= full.parts["recent"] // 4 + 200


def test_summary_budget_keeps_newest_whole_and_reports_the_rest(wm):
    archive = Archive(wm, lambda text, n: "x" * 1000 + "\nmore")
    for k in range(5):
        _turns(wm, 10, start=1 + 10 * k)
        archive.summarize_now()
    budgets = ContextBudgets(summaries=700)
    built = ContextBuilder(wm.store, "t1", budgets, archive=archive).build("s", query="")
    assert built.parts["summaries"] <= 700
    assert "summary-L1-000005.md covers" in built.messages[0]["content"]
    assert "summary left out: detail/summary-L1-000001.md (messages.jsonl#L1-L20)" in built.omitted


def test_snippets_already_in_context_are_skipped(wm):
    _turns(wm, 3)
    in_recent = _result(
        "working/t1/messages.jsonl#L6", "answer 3", line=6, path="working/t1/messages.jsonl"
    )
    overview = _result(
        "working/t1/overview.md#L1", "Working Memory", line=1, path="working/t1/overview.md"
    )
    elsewhere = _result(
        "working/t2/messages.jsonl#L6",
        "answer in another task",
        line=6,
        path="working/t2/messages.jsonl",
    )
    builder = ContextBuilder(wm.store, "t1", search=lambda q, n: [in_recent, overview, elsewhere])
    text = builder.build("s", query="answer").messages[0]["content"]
    assert "[working/t2/messages.jsonl#L6] answer in another task" in text
    assert "working/t1/messages.jsonl#L6" not in text
    assert "working/t1/overview.md#L1" not in text


def test_query_defaults_to_last_user_message_and_empty_disables(wm):
    _turns(wm, 2)
    seen = []
    builder = ContextBuilder(wm.store, "t1", search=lambda q, n: seen.append(q) or [])
    builder.build("s")
    builder.build("s", query="")
    assert seen == ["question 2 " + "q" * 40]


def test_tool_calls_stay_with_their_results(wm):
    wm.append_message("user", "read a.py")
    calls = [{"name": "read_file", "args": {"path": "a.py"}, "id": "c1", "type": "tool_call"}]
    wm.append_message("assistant", "", tool_calls=calls)
    wm.append_message("tool", "print(1)", tool_call_id="c1", name="read_file")
    wm.append_message("assistant", "a.py prints 1")
    built = build_context(wm.store, "t1", "s", query="")
    assert built.messages[1:] == [
        {"role": "user", "content": "read a.py"},
        {"role": "assistant", "content": "", "tool_calls": calls},
        {"role": "tool", "content": "print(1)", "tool_call_id": "c1", "name": "read_file"},
        {"role": "assistant", "content": "a.py prints 1"},
    ]
    lc = built.to_langchain()
    assert [m.type for m in lc] == ["system", "human", "ai", "tool", "ai"]
    assert lc[2].tool_calls[0]["id"] == "c1" and lc[3].tool_call_id == "c1"


def test_build_runs_the_archive_when_due_and_reports_failures(wm):
    _turns(wm, 10)
    built = ContextBuilder(wm.store, "t1", search=lambda q, n: []).build("s", query="")
    assert built.summarized == ["summary-L1-000001.md"]
    assert (
        "[L1 detail/summary-L1-000001.md covers messages.jsonl#L1-L20]"
        in built.messages[0]["content"]
    )
    _turns(wm, 10, start=11)

    def broken(text, n):
        raise ConnectionError("provider down")

    failing = ContextBuilder(wm.store, "t1", archive=Archive(wm, broken), search=lambda q, n: [])
    built = failing.build("s", query="")
    assert built.warnings == [
        "summariser failed (ConnectionError: provider down); what it "
        "was given stays active and the next trigger retries"
    ]
    assert built.summarized == []


def test_fresh_task_and_failing_recall_still_build(wm):
    def broken(query, limit):
        raise OSError("index unavailable")

    built = ContextBuilder(MemoryStore(), "fresh", search=broken).build("s", query="anything")
    assert built.messages[0]["content"].startswith("s\n\n# Working memory (overview.md)")
    assert built.warnings == ["recall skipped (OSError: index unavailable)"]
    assert built.messages[1:] == []


def test_first_build_logs_the_memory_index_once(wm):
    from memory.facts.memfiles import write_memory

    write_memory(wm.store, "facts/user.md", "# User\n\n- Name: Zhang San\n")
    wm.append_message("user", "Survey the repo")
    first = ContextBuilder(wm.store, "t1", search=lambda q, n: []).build("s", query="")
    assert [m["role"] for m in first.messages[1:]] == ["user", "user"]
    assert first.messages[2]["content"].startswith("Available memory:\n- facts/user.md (")
    again = ContextBuilder(wm.store, "t1", search=lambda q, n: []).build("s", query="")
    assert again.messages == first.messages  # a new builder (a restart) adds nothing
    assert sum(1 for m in wm.messages() if m.record.get("kind") == "memory_index") == 1


def test_messages_before_the_first_user_turn_are_kept_at_the_start(wm):
    wm.append_message("user", "Available memory: ...", synthetic=True, kind="memory_index")
    wm.append_message("user", "first question")
    built = ContextBuilder(wm.store, "t1", search=lambda q, n: []).build("s", query="")
    assert [m["content"] for m in built.messages[1:]] == ["Available memory: ...", "first question"]


def _long_log(wm, turns=60):
    """A decision asked early whose answer (the next message) shares no word with it."""
    for i in range(1, turns + 1):
        if i == 10:
            user = "Which port should the zephyr service listen on?"
            reply = "Going with 31337, behind the gateway."
        else:
            user = f"Turn {i}: please review the parser and report issue #{i}."
            reply = f"Reviewed the parser for turn {i}. " + "Checked the code paths. " * (i % 4)
        wm.append_messages(
            [{"role": "user", "content": user}, {"role": "assistant", "content": reply}]
        )


def test_unused_budget_is_filled_with_the_neighbouring_turn_of_a_hit(wm):
    _long_log(wm)
    question = "What port does zephyr use?"
    filled = ContextBuilder(wm.store, "t1").build("s", query=question)
    plain = ContextBuilder(wm.store, "t1", ContextBudgets(fill_limit=0)).build("s", query=question)
    system = filled.messages[0]["content"]
    assert "messages.jsonl#L19] user: Which port should the zephyr service" in system
    assert "messages.jsonl#L20] assistant: Going with 31337" in system  # the reply, not a hit
    assert system.index("#L19]") < system.index("#L20]")
    assert "#L20]" not in plain.messages[0]["content"]
    assert filled.parts["fill"] > 0 and plain.parts["fill"] == 0
    assert plain.tokens < filled.tokens == count_tokens(filled.messages) <= 8000
    again = ContextBuilder(wm.store, "t1").build("s", query=question)
    assert again.messages == filled.messages  # deterministic


@pytest.mark.parametrize("total", [300, 700, 1200, 2000, 4000, 8000])
def test_fill_never_exceeds_the_total_budget(wm, total):
    _long_log(wm, turns=120)
    budgets = ContextBudgets(total=total, recent=min(3000, total // 3))
    built = ContextBuilder(wm.store, "t1", budgets).build("s", query="parser issue turn review")
    assert built.tokens == count_tokens(built.messages) <= total
    budgets.fill_limit = 0
    plain = ContextBuilder(wm.store, "t1", budgets).build("s", query="parser issue turn review")
    if plain.tokens < total - 200:  # room for more: the fill used some of it
        assert built.parts["fill"] > 0 and built.tokens > plain.tokens


def test_no_fill_when_the_caller_keeps_the_recent_turns(wm):
    _long_log(wm, turns=120)
    # the builder does not see such a caller's whole context: it cannot know what is unused
    budgets = ContextBudgets(total=100_000, recent=0, recent_turns=0, snippets=300)
    built = ContextBuilder(wm.store, "t1", budgets).build("", query="parser issue turn review")
    assert built.parts["fill"] == 0 and 0 < built.parts["snippets"] <= 300
    assert built.tokens <= 1500 + 1000 + 2000 + 300


def test_fill_stays_within_the_part_budgets(wm):
    _long_log(wm, turns=120)
    budgets = ContextBudgets(total=100_000, recent=500, snippets=300)
    built = ContextBuilder(wm.store, "t1", budgets).build("", query="parser issue turn review")
    assert built.parts["fill"] > 0
    assert built.tokens <= 1500 + 1000 + 2000 + 300 + 500


def test_recall_is_asked_for_the_fill_s_candidates_only_when_it_fills(wm):
    _turns(wm, 2)
    asked = []

    def search(query, n):
        asked.append(n)
        return []

    ContextBuilder(wm.store, "t1", search=search).build("s", query="answer")
    no_turns = ContextBudgets(recent=0, recent_turns=0)
    ContextBuilder(wm.store, "t1", no_turns, search=search).build("s", query="answer")
    ContextBuilder(wm.store, "t1", ContextBudgets(fill_limit=0), search=search).build("s", "x")
    assert asked == [60, 10, 10]
