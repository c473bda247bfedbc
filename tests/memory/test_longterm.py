"""Long-term facts and episodes through `memory.facts.longterm` and its tools.

Covers the long-term memory's promises (a fact given in one process is used after a
restart; "what did we do last time" finds the episode; files are readable markdown; a hand
edit is what the next read returns), `> Summary:` lines regenerated on every write and
append, superseded facts kept readable, the "Available memory" message, and the reflector
offline and with a tool-calling model.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from datetime import date
from pathlib import Path

import pytest
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult

from memory.errors import PatchNotFoundError
from memory.facts import longterm, memfiles
from memory.facts.reflect import reflect
from memory.facts.tools import memory_tools
from memory.store import MemoryStore

REPO = Path(__file__).resolve().parents[2]
DAY = date(2026, 11, 22)


def _run(code: str, memory_dir: Path) -> str:
    """Run `code` in a fresh Python process (a restart) and return its stdout."""
    env = dict(os.environ, TETHER_MEMORY_DIR=str(memory_dir), PYTHONPATH=str(REPO))
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        env=env,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return out.stdout


class ScriptedModel(BaseChatModel):
    """A chat model that replays queued replies and records what it was sent."""

    replies: list = []
    seen: list = []

    @property
    def _llm_type(self) -> str:
        return "scripted"

    def bind_tools(self, tools, **kwargs):
        return self

    def _generate(self, messages, stop=None, run_manager=None, **kwargs):
        self.seen.append(list(messages))
        reply = self.replies.pop(0) if self.replies else AIMessage("done")
        return ChatResult(generations=[ChatGeneration(message=reply)])


def _call(name, args, i=0):
    return {"name": name, "args": args, "id": f"call{i}", "type": "tool_call"}


class TestAcceptance:
    def test_1_fact_given_in_one_process_is_used_after_restart(self, memory_dir):
        _run(
            """
            from memory.store import MemoryStore
            from memory.facts.tools import memory_tools
            tools = {t.name: t for t in memory_tools(MemoryStore())}
            print(tools["memory_write"].invoke({"path": "facts/user.md", "content":
                  "# User Facts\\n\\n- Name: Zhang San\\n- Language: Chinese discussion\\n"}))
        """,
            memory_dir,
        )
        out = _run(
            """
            from memory.facts.longterm import memory_index_message
            from memory.store import MemoryStore
            from memory.facts.tools import memory_tools
            store = MemoryStore()
            print(memory_index_message(store))
            tools = {t.name: t for t in memory_tools(store)}
            print(tools["memory_read"].invoke({"path": "facts/user.md"}))
        """,
            memory_dir,
        )
        assert "- facts/user.md (" in out and "): name, language" in out
        assert "- Name: Zhang San" in out

    def test_2_what_did_we_do_last_time_finds_the_episode(self, memory_dir):
        _run(
            """
            from datetime import date
            from memory.facts.reflect import reflect
            from memory.store import MemoryStore
            reflect(MemoryStore(), task_id="t7", objective="Fix the logger stdout leak",
                    outcome="replaced the pino pipeline with a line transport",
                    files_touched=["src/log.ts"], when=date(2026, 11, 22))
        """,
            memory_dir,
        )
        store = MemoryStore()
        index = longterm.memory_index_message(store)
        assert "- episodes/2026-11.md (" in index and "Fix the logger stdout leak" in index
        assert longterm.episode_index(store) == [
            (
                "episodes/2026-11.md#L5",
                "Fix the logger stdout leak: Fix the logger stdout leak → replaced the pino "
                "pipeline",
            )
        ]
        text = memfiles.read_memory(store, "episodes/2026-11.md")
        assert "- Outcome: replaced the pino pipeline with a line transport" in text
        assert "- Files: src/log.ts" in text
        hits = store.search("logger leak fix", scope="episodes")
        assert hits and hits[0].path == "episodes/2026-11.md"

    def test_3_files_are_readable_markdown(self, memory_dir):
        store = MemoryStore()
        memfiles.write_memory(
            store,
            "facts/user.md",
            "# User Facts\n\n- Name: Zhang San\n"
            "- Role: Full-stack developer\n- Updated: 2026-11-22\n",
        )
        longterm.record_episode(
            store,
            objective="Short ID implementation",
            outcome="UUID to 16-char hex",
            when=DAY,
            title="Short ID",
        )
        assert (memory_dir / "facts" / "user.md").read_text() == (
            "# User Facts\n\n> Summary: name, role\n\n- Name: Zhang San\n"
            "- Role: Full-stack developer\n- Updated: 2026-11-22\n"
        )
        assert (memory_dir / "episodes" / "2026-11.md").read_text() == (
            "# 2026-11 Episodes\n\n> Summary: Short ID\n\n## Short ID\n"
            "- Summary: Short ID implementation → UUID to 16-char hex\n- Date: 2026-11-22\n"
            "- Objective: Short ID implementation\n- Outcome: UUID to 16-char hex\n"
            "- Files: (none)\n"
        )

    def test_4_hand_edit_is_what_the_next_read_returns(self, memory_dir):
        store = MemoryStore()
        memfiles.write_memory(store, "facts/user.md", "# User Facts\n\n- Name: Zhang San\n")
        edited = "# User Facts\n\n> Summary: name\n\n- Name: Li Si (edited by hand)\n"
        (memory_dir / "facts" / "user.md").write_text(edited)
        tools = {t.name: t for t in memory_tools(store)}
        assert tools["memory_read"].invoke({"path": "facts/user.md"}) == edited
        out = _run(
            """
            from memory.facts.memfiles import read_memory
            from memory.store import MemoryStore
            print(read_memory(MemoryStore(), "facts/user.md"), end="")
        """,
            memory_dir,
        )
        assert out == edited


class TestSummaryLines:
    def test_write_regenerates_the_summary_line(self):
        store = MemoryStore()
        memfiles.write_memory(
            store,
            "facts/project.md",
            "# Project\n\n> Summary: stale\n\n- Stack: Python\n- CI: GitHub\n",
        )
        assert memfiles.list_memory(store)[0].summary == "stack, ci"
        memfiles.write_memory(store, "facts/project.md", "# Project\n\n- Stack: Rust\n")
        text = memfiles.read_memory(store, "facts/project.md")
        assert text.count("> Summary:") == 1 and "> Summary: stack\n" in text

    def test_append_regenerates_and_can_be_overridden(self):
        store = MemoryStore()
        memfiles.append_memory(store, "episodes/2026-11.md", "## Logger fix\n- Summary: a")
        memfiles.append_memory(store, "episodes/2026-11.md", "## Short ID\n- Summary: b")
        assert memfiles.list_memory(store)[0].summary == "Logger fix, Short ID"
        memfiles.append_memory(
            store, "episodes/2026-11.md", "## Config\n- Summary: c", summary="logger, ids, config"
        )
        assert memfiles.list_memory(store)[0].summary == "logger, ids, config"
        assert (
            memfiles.list_memory(store)[0].size
            == (store.root / "episodes" / "2026-11.md").stat().st_size
        )


class TestPatch:
    def test_superseded_fact_stays_readable_with_the_date(self):
        store = MemoryStore()
        memfiles.write_memory(
            store, "facts/user.md", "# User\n\n- Name: Zhang San\n- Role: Full-stack developer\n"
        )
        report = memfiles.patch_memory(
            store, "facts/user.md", [("- Role: Full-stack developer", "- Role: Manager")], today=DAY
        )
        assert (report.applied, report.total) == (1, 1)
        memfiles.patch_memory(
            store, "facts/user.md", [("- Role: Manager", "- Role: CTO")], today=date(2026, 12, 1)
        )
        assert memfiles.read_memory(store, "facts/user.md").endswith(
            "- Role: CTO\n  - ~~Manager~~ (superseded 2026-12-01)\n"
            "  - ~~Full-stack developer~~ (superseded 2026-11-22)\n"
        )
        assert memfiles.list_memory(store)[0].summary == "name, role"

    @pytest.mark.parametrize(
        "patches, error",
        [
            ([("- Name: Nobody", "x")], "patch 1 of 1: old text '- Name: Nobody' not found"),
            (
                [("- Name: Zhang San", "- Name: Z"), ("absent", "x")],
                "patch 2 of 2: old text 'absent' not found",
            ),
            ([("- ", "* ")], "patch 1 of 1: old text '- ' found 2 times"),
        ],
    )
    def test_failed_patch_changes_nothing(self, patches, error):
        store = MemoryStore()
        memfiles.write_memory(store, "facts/user.md", "# User\n\n- Name: Zhang San\n- Age: 30\n")
        before = memfiles.read_memory(store, "facts/user.md")
        with pytest.raises(PatchNotFoundError, match=error):
            memfiles.patch_memory(store, "facts/user.md", patches)
        assert memfiles.read_memory(store, "facts/user.md") == before


class TestReflector:
    def test_offline_records_the_episode(self):
        store = MemoryStore()
        report = reflect(
            store,
            task_id="t1",
            objective="Survey the repo",
            outcome="wrote findings for 3 packages",
            files_touched=["memory/", "orchestrator/"],
            when=DAY,
        )
        assert report.episode == "episodes/2026-11.md#L5"
        text = memfiles.read_memory(store, "episodes/2026-11.md")
        assert "- Task: t1\n- Objective: Survey the repo\n" in text
        assert "- Files: memory/, orchestrator/\n" in text

    def test_model_loop_writes_facts_and_is_preloaded(self):
        store = MemoryStore()
        memfiles.write_memory(store, "facts/user.md", "# User\n\n- Name: Zhang San\n")
        longterm.record_episode(store, objective="Earlier task", outcome="ok", when=DAY)
        model = ScriptedModel()
        model.replies = [
            AIMessage(
                "",
                tool_calls=[
                    _call(
                        "memory_patch",
                        {
                            "path": "facts/user.md",
                            "patches": [
                                {
                                    "old_text": "- Name: Zhang San",
                                    "new_text": "- Name: Zhang San\n- Editor: vim",
                                }
                            ],
                        },
                        1,
                    )
                ],
            ),
            AIMessage(
                "",
                tool_calls=[
                    _call(
                        "memory_append",
                        {
                            "path": "episodes/2026-11.md",
                            "entry": "## Editor setup\n- Summary: vim config\n- Outcome: done",
                        },
                        2,
                    )
                ],
            ),
            AIMessage("nothing else worth keeping"),
        ]
        model.seen = []
        report = reflect(
            store,
            task_id="t2",
            objective="Set up the editor",
            outcome="done",
            model=model,
            when=DAY,
        )
        assert report.tool_calls == ["memory_patch", "memory_append"]
        assert report.episode == "episodes/2026-11.md"
        system = model.seen[0][0].content
        assert "- Name: Zhang San" in system and "Earlier task" in system
        assert "- Editor: vim" in memfiles.read_memory(store, "facts/user.md")
        episodes = memfiles.read_memory(store, "episodes/2026-11.md")
        assert episodes.count("## ") == 2  # the model's episode, no duplicate fallback

    def test_bad_tool_calls_are_reported_to_the_model(self):
        model = ScriptedModel()
        model.replies = [
            AIMessage(
                "",
                tool_calls=[
                    _call("memory_write", {"path": "facts/x.md"}, 1),
                    _call("rm_rf", {}, 2),
                    _call("memory_write", {"path": "../x.md", "content": "# x"}, 3),
                ],
            ),
            AIMessage("done"),
        ]
        model.seen = []
        report = reflect(
            MemoryStore(), task_id="t", objective="Task", outcome="ok", model=model, when=DAY
        )
        results = [m.content for m in model.seen[1][-3:]]
        assert results[0].startswith("Error: memory_write arguments rejected (ValidationError")
        assert results[1].startswith("Error: unknown tool 'rm_rf'; use one of memory_append")
        assert results[2].startswith("Error: path '../x.md' leaves the memory directory")
        assert report.episode == "episodes/2026-11.md#L5"  # fallback still records it

    def test_model_failure_still_records_the_episode(self):
        class Broken(ScriptedModel):
            def _generate(self, *a, **k):
                raise ConnectionError("offline")

        report = reflect(
            MemoryStore(),
            task_id="t3",
            objective="Do a thing",
            outcome="partly",
            model=Broken(),
            when=DAY,
        )
        assert report.errors == ["reflector model failed: ConnectionError: offline"]
        assert report.episode == "episodes/2026-11.md#L5"


def test_no_memory_means_no_index_message():
    assert longterm.memory_index_message(MemoryStore()) is None


def test_index_message_is_injected_once_per_task():
    from memory.task.working import WorkingMemory

    store = MemoryStore()
    wm = WorkingMemory(store, "t1").ensure()
    wm.append_message("user", "Survey the repo")
    assert longterm.ensure_memory_index(wm) is None  # no memory yet: nothing injected
    memfiles.write_memory(store, "facts/user.md", "# User\n\n- Name: Zhang San\n")
    assert longterm.ensure_memory_index(wm) == 2
    assert longterm.ensure_memory_index(wm) is None
    injected = wm.messages()[1]
    assert injected.role == "user" and not injected.is_user_turn
    assert injected.content.startswith("Available memory:\n- facts/user.md (")
    assert injected.content.endswith("Use memory_read to load relevant files before responding.")


def test_episode_heading_is_the_objective_or_cut_at_a_word(memory_dir):
    store = MemoryStore()
    short = longterm.record_episode(store, objective="Fix the logger leak", outcome="ok")
    long_objective = "Survey this repository: " + "what each package does and how " * 4
    longterm.record_episode(store, objective=long_objective, outcome="ok")
    text = (memory_dir / short.split("#")[0]).read_text()
    headings = [line for line in text.splitlines() if line.startswith("## ")]
    assert headings[0] == "## Fix the logger leak"
    assert headings[1].endswith("…") and len(headings[1]) <= 3 + 81
    assert long_objective.startswith(headings[1][3:-1])  # cut between words, not inside one
    assert not headings[1][3:-1].endswith((" ", ":"))
