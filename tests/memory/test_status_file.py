"""`memory status-file`: tether's block in STATUS.md, idempotent, a person's lines kept,
about one task only, valid Markdown, and every command it suggests working when pasted.

Drives the `memory` CLI and reads the file on disk; the orchestrator's own refresh after
each phase is covered in tests/orchestrator/graph/test_status_after_phase.py.
"""

from __future__ import annotations

import json
import re
import shlex

from click.testing import CliRunner
from markdown_it import MarkdownIt

from memory import MemoryStore
from memory.cli.app import cli
from memory.task.status_file import BEGIN, END


def _memory(*args: str):
    return CliRunner().invoke(cli, list(args))


def _checkpoint(memory_dir, name, task, phase, pending=(), blocked=(), **more):
    """A checkpoint file as the orchestrator writes it (every field of its schema)."""
    folder = memory_dir / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "checkpoint_id": name, "task_id": task, "phase": phase,
        "timestamp": "2026-11-23T10:00:00Z",
        "state": {"completed_subtasks": ["exploration/a"], "pending_subtasks": list(pending),
                  "active_agents": [], "blocked_agents": list(blocked), "findings_count": 1},
        "context_summary": "", "next_action": "Plan phase review", "recovery_instructions": "",
        "plan": None, "findings": [], "entries": [],
        "langgraph": {"thread_id": task, "checkpoint_id": None}, "objective": "o",
        "workdir": None, "phases": ["exploration", phase], "phase_index": 1, "subtasks": [],
        "completed_findings": {}, "extra": {}, **more,
    }  # fmt: skip
    (folder / f"{name}.json").write_text(json.dumps(data))


def _code_spans(text: str) -> list[str]:
    """The contents of the inline code spans of a Markdown text, as a renderer reads them."""
    tokens = [t for t in MarkdownIt().parse(text) if t.type == "inline"]
    return [c.content for t in tokens for c in t.children or [] if c.type == "code_inline"]


def test_block_names_task_checkpoint_and_entries_by_directory(tmp_path, memory_dir):
    logged = _memory("log", "FAILED test_login\n" * 400, "--directory", "tests", "--tag", "pytest")
    assert logged.exit_code == 0, logged.output
    entry_id = logged.output.split()[1]
    _checkpoint(memory_dir, "cp_exploration_20261123T100000000000Z", "shop", "exploration")
    _checkpoint(memory_dir, "cp_planning_20261123T110000000000Z", "shop", "planning",
                pending=["planning/b"], blocked=["planning/c"])  # fmt: skip
    (memory_dir / "checkpoints" / "cp_review_20261123T120000000000Z.json").write_text("{torn")

    result = _memory("status-file", str(tmp_path / "STATUS.md"))
    assert result.exit_code == 0, result.output
    text = (tmp_path / "STATUS.md").read_text()
    assert text.startswith(BEGIN) and text.rstrip().endswith(END)
    assert "- Task: `shop`" in text
    assert "`checkpoints/cp_planning_20261123T110000000000Z.json`" in text  # torn one skipped
    assert "- Pending: `planning/b`" in text and "- Blocked: `planning/c`" in text
    assert f"- `{tmp_path / 'tests'}` (1 entries)" in text
    assert f"  - `{entry_id}`: `FAILED test_login" in text


def test_rewrites_only_its_block_and_is_idempotent(tmp_path, memory_dir):
    _checkpoint(memory_dir, "cp_exploration_20261123T100000000000Z", "shop", "exploration")
    status = tmp_path / "STATUS.md"
    status.write_text("# Project status\n\nMine, keep it.\n")
    assert _memory("status-file", str(tmp_path)).exit_code == 0  # a folder: its STATUS.md
    first = status.read_text()
    assert first.startswith("# Project status\n\nMine, keep it.\n\n" + BEGIN)
    status.write_text(first + "\nAdded after the block.\n")
    before = status.read_bytes()
    assert _memory("status-file", str(status)).exit_code == 0
    assert status.read_bytes() == before  # nothing changed in memory: same bytes

    _memory("log", "x " * 3000, "--directory", "build")
    assert _memory("status-file", str(status)).exit_code == 0
    after = status.read_text()
    assert after.startswith("# Project status\n\nMine, keep it.\n\n" + BEGIN)
    assert after.endswith(END + "\n\nAdded after the block.\n")
    assert after.count(BEGIN) == 1 and "(1 entries)" in after


def test_missing_folder_is_one_error_line(tmp_path, memory_dir):
    memory_dir.mkdir()
    result = _memory("status-file", str(tmp_path / "nowhere" / "STATUS.md"))
    assert result.exit_code == 1
    assert result.output == (
        f"Error: cannot write {str(tmp_path / 'nowhere' / 'STATUS.md')!r}: folder "
        f"{str(tmp_path / 'nowhere')!r} does not exist\n"
    )


def test_a_run_names_the_checkpoint_it_just_wrote_and_falls_back_when_it_is_unreadable(
    tmp_path, memory_dir
):
    from memory import MemoryStore
    from memory.task.status_file import write_status_file

    _checkpoint(memory_dir, "cp_exploration_20261123T100000000000Z", "shop", "exploration")
    _checkpoint(memory_dir, "cp_planning_20261123T110000000000Z", "shop", "planning")
    # another task's checkpoint is the newest by name: `latest` is this task's
    _checkpoint(memory_dir, "cp_review_20261123T120000000000Z", "other", "review")
    with MemoryStore(memory_dir) as store:
        write_status_file(
            store,
            tmp_path,
            task_id="shop",
            latest="checkpoints/cp_exploration_20261123T100000000000Z.json",
        )
        assert "cp_exploration_20261123T100000000000Z.json" in (tmp_path / "STATUS.md").read_text()
        # a torn `latest`: the newest valid checkpoint of the task instead
        torn = memory_dir / "checkpoints" / "cp_planning_20261123T130000000000Z.json"
        torn.write_text("{torn")
        write_status_file(store, tmp_path, task_id="shop", latest=f"checkpoints/{torn.name}")
    assert "cp_planning_20261123T110000000000Z.json" in (tmp_path / "STATUS.md").read_text()


def _snapshot(memory_dir, name, task):
    folder = memory_dir / "context_snapshots"
    folder.mkdir(parents=True, exist_ok=True)
    meta = json.dumps({"task_id": task, "reason": "handoff"})
    (folder / name).write_text(f"# Context Snapshot\n\n<!-- tether:snapshot {meta} -->\n")


def test_the_block_counts_and_names_only_its_tasks_findings_and_snapshot(tmp_path, memory_dir):
    folder = memory_dir / "findings"
    folder.mkdir(parents=True)
    for name in ("a_1.md", "a_2.md", "merged_a.md", "b_1.md", "b_2.md", "b_3.md", "merged_b.md"):
        (folder / name).write_text("# Findings\n")
    _snapshot(memory_dir, "snap_20261123T100000000000Z.md", "shop")
    _snapshot(memory_dir, "snap_20261123T120000000000Z.md", "other")  # the newest: not shop's
    _checkpoint(
        memory_dir, "cp_planning_20261123T110000000000Z", "shop", "planning",
        completed_findings={"exploration/a": "findings/a_1.md", "planning/a": "findings/a_2.md"},
        extra={"merged": {"exploration": "findings/merged_a.md"},
               "snapshots": ["context_snapshots/snap_20261123T100000000000Z.md"]},
    )  # fmt: skip
    _checkpoint(
        memory_dir,
        "cp_review_20261123T130000000000Z",
        "other",
        "review",
        completed_findings={f"review/{n}": f"findings/b_{n}.md" for n in (1, 2, 3)},
        extra={"merged": {"review": "findings/merged_b.md"}},
    )
    result = _memory("status-file", str(tmp_path), "--task", "shop")
    assert result.exit_code == 0, result.output
    text = (tmp_path / "STATUS.md").read_text()
    assert "- Findings files of this task: 2 by subagents, 1 merged\n" in text
    assert "- Latest context snapshot: `context_snapshots/snap_20261123T100000000000Z.md`" in text
    # a snapshot written for the task after its checkpoint (`orchestrator handoff`) is its own
    _snapshot(memory_dir, "snap_20261123T140000000000Z.md", "shop")
    assert _memory("status-file", str(tmp_path), "--task", "shop").exit_code == 0
    assert "snap_20261123T140000000000Z.md`" in (tmp_path / "STATUS.md").read_text()


def test_an_unknown_task_is_one_error_line_and_no_file(tmp_path, memory_dir):
    _checkpoint(memory_dir, "cp_planning_20261123T110000000000Z", "shop", "planning")
    with MemoryStore(memory_dir) as store:
        store.backend.merge_task("shop", {"objective": "s"}, status="running")
    result = _memory("status-file", str(tmp_path), "--task", "shpo")
    assert (result.exit_code, result.output) == (
        1,
        "Error: unknown task 'shpo': this memory has no record, checkpoint or plan of it; "
        "known: shop\n",
    )
    assert not (tmp_path / "STATUS.md").exists()


def test_without_task_the_block_is_about_the_most_recent_task(tmp_path, memory_dir):
    _checkpoint(memory_dir, "cp_planning_20261123T110000000000Z", "shop", "planning")
    _checkpoint(memory_dir, "cp_review_20261123T120000000000Z", "other", "review")
    with MemoryStore(memory_dir) as store:  # `shop` changed last, after `other`'s checkpoint
        store.backend.merge_task("other", {"objective": "o"}, status="done")
        store.backend.merge_task("shop", {"objective": "s"}, status="running")
    assert _memory("status-file", str(tmp_path)).exit_code == 0
    text = (tmp_path / "STATUS.md").read_text()
    assert "- Task: `shop`" in text and "cp_planning_20261123T110000000000Z.json`" in text


def test_names_and_summaries_with_backticks_stay_valid_markdown(tmp_path, memory_dir):
    summary = "ran ``pytest -k `login` `` then `ok"
    logged = _memory("log", summary, "--directory", "odd `dir`", "-q")
    entry_id = logged.output.strip()
    _checkpoint(memory_dir, "cp_planning_20261123T110000000000Z", "shop", "planning",
                pending=["planning/`b`"])  # fmt: skip
    assert _memory("status-file", str(tmp_path)).exit_code == 0
    spans = _code_spans((tmp_path / "STATUS.md").read_text())
    assert entry_id in spans
    assert any(re.fullmatch(re.escape(summary) + r" \(\d+ tokens\)", s) for s in spans)
    assert str(tmp_path / "odd `dir`") in spans
    assert "planning/`b`" in spans


def _run_pasted(command: str):
    program, *args = shlex.split(command)
    if program == "orchestrator":
        from orchestrator.cli.app import cli as orchestrator_cli

        return CliRunner().invoke(orchestrator_cli, args)
    return CliRunner().invoke(cli, args)


def test_every_command_the_block_suggests_works_when_pasted(tmp_path, memory_dir, monkeypatch):
    memory_dir.mkdir()
    assert _memory("status-file", str(tmp_path)).exit_code == 0
    empty = [c for c in _code_spans((tmp_path / "STATUS.md").read_text()) if " " in c]
    assert empty == ["memory log --help"]
    assert _run_pasted(empty[0]).stdout.startswith("Usage: ")
    in_dir = [_memory("log", f"build step {n}", "--directory", "my build", "-q").output.strip()
              for n in range(12)]  # fmt: skip
    no_dir = [_memory("log", f"note {n}", "-q").output.strip() for n in range(11)]
    _checkpoint(memory_dir, "cp_planning_20261123T110000000000Z", "shop", "planning")
    assert _memory("status-file", str(tmp_path)).exit_code == 0
    text = (tmp_path / "STATUS.md").read_text()
    commands = [c for c in _code_spans(text) if c.startswith(("memory ", "orchestrator "))]
    assert [c.split()[:2] for c in commands] == [
        ["orchestrator", "checkpoint"], ["memory", "list"], ["memory", "list"],
        ["memory", "fetch"],
    ]  # fmt: skip

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)  # pasted in another folder, without $TETHER_MEMORY_DIR
    monkeypatch.delenv("TETHER_MEMORY_DIR")
    outputs = []
    for command in commands:
        ran = _run_pasted(command)
        assert ran.exit_code == 0, (command, ran.output)
        outputs.append(ran.stdout)
    assert "Phase: planning" in outputs[0]
    assert all(entry_id in outputs[1] for entry_id in in_dir)
    assert all(entry_id in outputs[2] for entry_id in no_dir)
    assert outputs[3] == "note 10\n"
    assert not (elsewhere / ".temp").exists()
