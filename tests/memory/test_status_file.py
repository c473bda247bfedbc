"""`memory status-file`: tether's block in STATUS.md, idempotent, a person's lines kept.

Drives the `memory` CLI and reads the file on disk; the orchestrator's own refresh after
each phase is covered in tests/orchestrator/graph/test_status_after_phase.py.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from memory.cli.app import cli
from memory.status_file import BEGIN, END


def _memory(*args: str):
    return CliRunner().invoke(cli, list(args))


def _checkpoint(memory_dir, name, task, phase, pending=(), blocked=()):
    folder = memory_dir / "checkpoints"
    folder.mkdir(parents=True, exist_ok=True)
    data = {
        "checkpoint_id": name, "task_id": task, "phase": phase,
        "timestamp": "2026-11-23T10:00:00Z",
        "state": {"completed_subtasks": ["exploration/a"], "pending_subtasks": list(pending),
                  "active_agents": [], "blocked_agents": list(blocked), "findings_count": 1},
        "next_action": "Plan phase review",
    }  # fmt: skip
    (folder / f"{name}.json").write_text(json.dumps(data))


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
    assert f"  - `{entry_id}: FAILED test_login" in text


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
    from memory.status_file import write_status_file

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
