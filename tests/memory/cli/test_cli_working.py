"""`memory summary status|on|off|now`, `memory facts`, `memory episodes` on the command line.

Covers: exact output lines, `--task` defaulting to the most recent task (as `orchestrator`
verbs take it) and the errors when there is none, settings persisting across invocations,
and the CLI path never importing LangChain.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from datetime import date

import pytest
from click.testing import CliRunner

from memory.cli.app import cli
from memory.facts import longterm, memfiles
from memory.store import MemoryStore
from memory.task.working import WorkingMemory


def run(*args: str):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def _task(task_id: str, turns: int) -> WorkingMemory:
    wm = WorkingMemory(MemoryStore(), task_id).ensure()
    for i in range(turns):
        wm.append_messages(
            [{"role": "user", "content": f"q{i}"}, {"role": "assistant", "content": f"a{i}"}]
        )
    return wm


def test_status_of_a_fresh_task():
    _task("t1", 23)
    result = run("summary", "status")
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        "task: t1",
        "enabled: yes",
        "threshold: every 10 user turns",
        "turns since last summary: 23",
        "messages: 46 total, 0 archived, 46 active",
        "active summaries: none",
        "highest level: 0",
    ]


def test_now_then_status_and_json():
    _task("t1", 23)
    result = run("summary", "now", "--task", "t1")
    assert (
        result.output == "wrote detail/summary-L1-000001.md: level 1, covers "
        "messages.jsonl#L1-L46\n"
    )
    assert run("summary", "now").output == "nothing to summarise: no active messages\n"
    lines = run("summary", "status").output.splitlines()
    assert lines[3:] == [
        "turns since last summary: 0",
        "messages: 46 total, 46 archived, 0 active",
        "active summaries: L1=1",
        "highest level: 1",
    ]
    data = json.loads(run("summary", "status", "--json").output)
    assert data["active_per_level"] == {"L1": 1} and data["archived_messages"] == 46


def test_on_off_persist():
    _task("t1", 1)
    assert run("summary", "off").output == "summaries disabled for task t1 (nothing deleted)\n"
    assert run("summary", "status").output.splitlines()[1] == "enabled: no"
    result = run("summary", "on", "--every", "15")
    assert result.output == "summaries enabled for task t1 (every 15 user turns)\n"
    assert run("summary", "status").output.splitlines()[1:3] == [
        "enabled: yes",
        "threshold: every 15 user turns",
    ]


@pytest.mark.parametrize(
    "tasks, args, error",
    [
        ((), (), "Error: no task has working memory yet; run a task first (orchestrator run ...)"),
        (("a",), ("--task", "zz"), "Error: unknown task 'zz'; tasks with working memory: a"),
    ],
)
def test_task_selection_errors(tasks, args, error):
    MemoryStore().close()  # the memory directory exists, but may hold no task
    for t in tasks:
        _task(t, 1)
    result = CliRunner().invoke(cli, ["summary", "status", *args])
    assert result.exit_code == 1
    assert result.output.strip().splitlines()[-1] == error


def test_without_task_every_summary_verb_takes_the_most_recent_task():
    store = MemoryStore()
    _task("older", 3)
    _task("newer", 1)
    # the task records say which task changed last (as for `orchestrator status`), whatever
    # working memory was written last
    store.backend.merge_task("newer", {"objective": "n"}, status="running")
    store.backend.merge_task("older", {"objective": "o"}, status="running")
    assert run("summary", "status").output.splitlines()[:4] == [
        "task: older",
        "enabled: yes",
        "threshold: every 10 user turns",
        "turns since last summary: 3",
    ]
    assert run("summary", "off").output == "summaries disabled for task older (nothing deleted)\n"
    assert run("summary", "on").output == "summaries enabled for task older (every 10 user turns)\n"
    assert run("summary", "now").output.startswith("wrote detail/summary-L1-000001.md")
    assert run("summary", "status", "--task", "newer").output.splitlines()[0] == "task: newer"
    store.backend.merge_task("newer", {"phase": "planning"})
    assert run("summary", "status").output.splitlines()[0] == "task: newer"


def test_without_task_records_the_task_whose_working_memory_changed_last(memory_dir):
    older, _newer = _task("older", 1), _task("newer", 1)
    for path in (memory_dir / "working" / "older").rglob("*"):
        os.utime(path, (time.time() - 100, time.time() - 100))
    assert run("summary", "status").output.splitlines()[0] == "task: newer"
    os.utime(older.messages_path, (time.time() + 100, time.time() + 100))
    assert run("summary", "status").output.splitlines()[0] == "task: older"


def test_the_most_recent_task_without_working_memory_is_named():
    _task("a", 1)
    MemoryStore().backend.merge_task("fresh", {"objective": "x"}, status="running")
    result = CliRunner().invoke(cli, ["summary", "status"])
    assert (result.exit_code, result.output) == (
        1,
        "Error: the most recent task 'fresh' has no working memory yet; pick one with "
        "--task ID: a\n",
    )


def test_bad_threshold_is_refused():
    _task("t1", 1)
    result = CliRunner().invoke(cli, ["summary", "on", "--every", "0"])
    assert result.exit_code == 1
    assert result.output.strip() == ("Error: threshold 0 out of range: give 1 to 500 user turns")


def test_facts_and_episodes_listings():
    store = MemoryStore()
    assert run("facts").output == "no facts yet\n"
    assert run("episodes").output == "no episodes yet\n"
    memfiles.write_memory(store, "facts/user.md", "# User\n\n- Name: Zhang San\n- Role: dev\n")
    longterm.record_episode(
        store,
        objective="Fix the logger leak",
        outcome="custom transport",
        title="Logger fix",
        when=date(2026, 11, 22),
    )
    assert run("facts").output == "facts/user.md  61B  name, role\n"
    assert run("episodes").output == (
        "episodes/2026-11.md#L5  Logger fix: Fix the logger leak → custom transport\n"
    )


def test_cli_never_imports_langchain(cli_env):
    code = (
        "import sys; from memory.cli.app import cli; "
        "print(sorted(m for m in sys.modules if m.startswith(('langchain', 'langgraph'))))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], env=cli_env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "[]"
