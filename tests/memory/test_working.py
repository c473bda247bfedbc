"""Working memory of a task through `memory.task.working.WorkingMemory`.

Covers: overview.md created from the template with its sections and never
overwritten, hand edits read back, section updates, detail notes with a META block, and the
append-only `messages.jsonl` log whose line numbers are permanent citations.
"""

from __future__ import annotations

import json

import pytest

from memory.errors import InvalidInputError, PathEscapeError
from memory.store import MemoryStore
from memory.task.archive import note_meta
from memory.task.working import OVERVIEW_SECTIONS, WorkingMemory, list_tasks


@pytest.fixture
def wm():
    return WorkingMemory(MemoryStore(), "task-1")


class TestOverview:
    def test_ensure_creates_overview_with_seed_sections(self, wm, memory_dir):
        wm.ensure(objective="Port the parser to Rust")
        path = memory_dir / "working" / "task-1" / "overview.md"
        text = path.read_text()
        assert text.startswith("# Working Memory\n")
        headings = [line[3:] for line in text.splitlines() if line.startswith("## ")]
        assert headings == list(OVERVIEW_SECTIONS)
        assert "Port the parser to Rust" in text
        assert (memory_dir / "working" / "task-1" / "detail").is_dir()
        assert list_tasks(wm.store) == ["task-1"]

    def test_ensure_never_overwrites_and_hand_edits_are_read(self, wm):
        wm.ensure()
        wm.overview_path.write_text("# Working Memory\n\nedited by hand\n")
        wm.ensure(objective="other")
        assert wm.overview_text() == "# Working Memory\n\nedited by hand\n"

    def test_update_section_replaces_only_that_section(self, wm):
        wm.ensure()
        wm.update_overview_section("Key Decisions", "- use JWT with refresh rotation")
        wm.update_overview_section("Key Decisions", "- use sessions after all")
        text = wm.overview_text()
        assert "- use sessions after all" in text and "JWT" not in text
        assert "## Known Context\n" in text and text.count("## Key Decisions") == 1
        wm.update_overview_section("Blockers", "- CI is red")
        assert wm.overview_text().rstrip().endswith("## Blockers\n- CI is red")

    def test_several_sections_change_in_one_write_from_the_current_text(self, wm):
        wm.ensure()
        wm.update_overview_section("Recent Operations", "- first")
        before = wm.backend.stat_document(wm.overview_doc).version

        def bodies(text):
            earlier = text.split("## Recent Operations\n", 1)[1].split("\n\n", 1)[0]
            return {"Current Task": "Port it", "Recent Operations": f"- second\n{earlier}"}

        wm.update_overview_sections(bodies)
        text = wm.overview_text()
        assert wm.backend.stat_document(wm.overview_doc).version == before + 1  # one write
        assert "## Current Task\nPort it\n" in text
        assert "## Recent Operations\n- second\n- first\n" in text
        assert text.count("## Current Task") == 1 and "## Known Context\n" in text

    def test_bad_task_id_is_refused(self):
        with pytest.raises(PathEscapeError, match="invalid task id '../x'"):
            WorkingMemory(MemoryStore(), "../x")


class TestNotes:
    def test_note_has_meta_block_and_content(self, wm):
        path = wm.write_note("Auth design", "Decided JWT.", keywords=["auth", "jwt"])
        assert path.name == "auth-design.md"
        text = path.read_text()
        assert text.startswith("# Auth design\n")
        meta = note_meta(text)
        assert json.loads(meta["keywords"]) == ["auth", "jwt"]
        assert meta["created"].endswith("Z")
        assert "## Content\nDecided JWT." in text
        assert wm.notes() == [path]

    def test_note_cannot_take_an_archive_name(self, wm):
        path = wm.write_note("Summary L1 000001", "x")
        assert not path.name.startswith("summary-")


class TestMessages:
    def test_append_returns_permanent_line_numbers(self, wm):
        assert wm.append_message("user", "hello") == 1
        calls = [{"name": "read_file", "args": {"path": "a.py"}, "id": "c1"}]
        assert wm.append_message("assistant", "", tool_calls=calls) == 2
        assert wm.append_message("tool", "print(1)", tool_call_id="c1", name="read_file") == 3
        lines = [json.loads(x) for x in wm.messages_path.read_text().splitlines()]
        assert [r["role"] for r in lines] == ["user", "assistant", "tool"]
        assert lines[1]["tool_calls"] == calls
        assert lines[2]["tool_call_id"] == "c1"
        assert all(r["id"].startswith("msg-") and r["ts"].endswith("Z") for r in lines)
        assert [m.citation for m in wm.messages()] == [
            "messages.jsonl#L1",
            "messages.jsonl#L2",
            "messages.jsonl#L3",
        ]

    def test_other_instance_sees_appends_incrementally(self, wm):
        reader = WorkingMemory(wm.store, "task-1")
        wm.append_message("user", "one")
        assert [m.content for m in reader.messages()] == ["one"]
        wm.append_messages(
            [{"role": "assistant", "content": "two"}, {"role": "user", "content": "three"}]
        )
        assert [m.line for m in reader.messages()] == [1, 2, 3]
        assert [m.content for m in reader.messages_after(1)] == ["two", "three"]
        assert [m.content for m in reader.tail(1)] == ["three"]

    def test_torn_line_keeps_its_number_and_is_skipped(self, wm):
        wm.append_message("user", "before crash")
        with open(wm.messages_path, "ab") as fh:  # simulate a writer killed mid-line
            fh.write(b'{"role": "assist')
        assert wm.append_message("user", "after crash") == 3
        assert [(m.line, m.content) for m in wm.messages()] == [
            (1, "before crash"),
            (3, "after crash"),
        ]

    def test_message_range_is_by_line_number_around_torn_lines(self, wm):
        wm.append_messages([{"role": "user", "content": f"m{i}"} for i in (1, 2)])
        with open(wm.messages_path, "ab") as fh:
            fh.write(b'{"role": "assist\n')  # line 3: torn, then closed by a newline
        wm.append_messages([{"role": "user", "content": f"m{i}"} for i in (4, 5, 6)])
        reader = WorkingMemory(wm.store, "task-1")
        assert [m.line for m in reader.message_range(2, 4)] == [2, 4]
        assert reader.message_range(3, 3) == []
        assert [m.content for m in reader.message_range(6, 9)] == ["m6"]
        assert [m.line for m in reader.message_range(0, 1)] == [1]
        assert reader.message_range(5, 4) == [] and reader.message_range(7, 9) == []
        wm.append_message("user", "m7")  # a range reads what was appended since
        assert [m.content for m in reader.message_range(6, 7)] == ["m6", "m7"]

    @pytest.mark.parametrize(
        "role, content, error",
        [
            ("robot", "x", "unknown message role 'robot'"),
            ("user", object(), "must be JSON-serialisable"),
        ],
    )
    def test_invalid_messages_are_refused(self, wm, role, content, error):
        with pytest.raises(InvalidInputError, match=error):
            wm.append_message(role, content)
        assert not wm.messages_path.exists() or wm.messages() == []

    def test_synthetic_user_messages_are_not_turns(self, wm):
        wm.append_message("user", "Available memory: ...", synthetic=True)
        wm.append_message("user", "real question")
        assert [m.is_user_turn for m in wm.messages()] == [False, True]


def test_langchain_messages_are_logged_with_their_tool_calls(wm):
    from langchain_core.messages import AIMessage, HumanMessage, ToolMessage

    call = {"name": "read_file", "args": {"path": "a.py"}, "id": "c1", "type": "tool_call"}
    first = wm.append_chat_messages(
        [
            HumanMessage("read a.py"),
            AIMessage(
                "",
                tool_calls=[call],
                usage_metadata={"input_tokens": 10, "output_tokens": 2, "total_tokens": 12},
            ),
            ToolMessage("print(1)", tool_call_id="c1", name="read_file"),
        ]
    )
    assert first == 1
    records = [m.record for m in wm.messages()]
    assert [r["role"] for r in records] == ["user", "assistant", "tool"]
    assert records[1]["tool_calls"] == [{"name": "read_file", "args": {"path": "a.py"}, "id": "c1"}]
    assert records[1]["usage_metadata"]["total_tokens"] == 12
    assert records[2]["tool_call_id"] == "c1" and records[2]["name"] == "read_file"
