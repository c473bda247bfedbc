"""What `orchestrator` lists and says about tasks (issue 43 items 3 and 7, `orchestrator tasks`).

* `tasks`: every task, newest first, with the status and phase `status` shows; cut to the
  terminal's width; `--json` one object per line; cheap; on both backends.
* `checkpoint list` / `snapshot list`: the latest task's (or `--task`'s) files, a line each
  with task, phase, trigger or reason, time and the path last; `--json` one object a line.
* A done task: its report says nothing about resuming, `resume` says in one line there is
  nothing to resume (no model, no key, nothing started), and the report names the snapshot
  `status` names.

One memory with two done tasks (`alpha`, then `beta`) is made once for the module, by the
offline model, and only read.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator import Orchestrator
from orchestrator.cli.app import cli
from tests.orchestrator.conftest import build_repo
from tests.pg import private_schema

LONG = (
    "Survey the shop service: how does an order flow from the cart to the payment, and "
    "where are refunds handled when a payment fails halfway?"
)


@pytest.fixture(scope="module")
def shared(tmp_path_factory):
    """`(memory, outputs)`: a memory holding the done tasks `alpha` (long objective) and
    `beta`, and what `orchestrator run` printed for `beta`."""
    root = tmp_path_factory.mktemp("listings")
    repo = build_repo(root / "repo")
    workflow = root / "tiny.yaml"
    workflow.write_text("name: tiny\nphases: [exploration, review]\n")
    memory = root / "memory"
    with Orchestrator(memory_dir=memory, workdir=repo, workflow=workflow, model="offline") as o:
        assert o.run(LONG, task_id="alpha").status == "done"
    args = ["run", "Map the docs", "--task", "beta", "--workdir", str(repo)]
    args += ["--workflow", str(workflow), "--model", "offline", "--memory-dir", str(memory)]
    beta = CliRunner().invoke(cli, args)
    assert beta.exit_code == 0, beta.output
    return memory, beta.stdout


def orch(*args: str, memory: Path, env: dict | None = None):
    return CliRunner().invoke(cli, [*args, "--memory-dir", str(memory)], env=env)


def _files(root: Path) -> dict[str, int]:
    """Every file with its modification time, but SQLite's `-wal` and `-shm` files, which
    a reader opens too (`status` asks LangGraph's database whether it holds the task)."""
    return {
        str(p): p.stat().st_mtime_ns
        for p in root.rglob("*")
        if p.is_file() and not p.name.endswith(("-shm", "-wal"))
    }


def _checkpoint_tasks(memory: Path) -> dict[str, str]:
    return {
        str(p): json.loads(p.read_text())["task_id"] for p in (memory / "checkpoints").iterdir()
    }


class TestCheckpointAndSnapshotList:
    def test_checkpoint_list_is_the_latest_tasks_with_what_each_file_is(self, shared):
        memory, _ = shared
        owners = _checkpoint_tasks(memory)
        listed = orch("checkpoint", "list", memory=memory)
        assert listed.exit_code == 0
        lines = listed.stdout.splitlines()
        assert len(lines) == sum(1 for t in owners.values() if t == "beta")
        for line in lines:
            task, phase, trigger, when, path = line.split()
            assert owners[path] == task == "beta"
            saved = json.loads(Path(path).read_text())
            assert phase == saved["phase"] and trigger == saved["extra"]["trigger"]
            assert when == saved["timestamp"][:19] + "Z"
        assert lines[0].split()[2] == "task_complete"  # newest first

    def test_checkpoint_list_json_is_one_object_per_line_of_the_task(self, shared):
        memory, _ = shared
        help_text = orch("checkpoint", "list", "--help", memory=memory).output
        assert "one JSON object per line" in " ".join(help_text.split())
        listed = orch("checkpoint", "list", "--task", "alpha", "--json", memory=memory)
        rows = [json.loads(line) for line in listed.stdout.splitlines()]
        owners = _checkpoint_tasks(memory)
        assert len(rows) == sum(1 for t in owners.values() if t == "alpha")
        for row in rows:
            assert set(row) == {"path", "task_id", "phase", "trigger", "timestamp"}
            assert owners[row["path"]] == row["task_id"] == "alpha"

    def test_snapshot_list_takes_task_and_defaults_to_the_latest(self, shared):
        memory, _ = shared
        latest = orch("snapshot", "list", memory=memory)
        alpha = orch("snapshot", "list", "--task", "alpha", "--json", memory=memory)
        assert latest.exit_code == 0 and alpha.exit_code == 0, alpha.output
        (line,) = latest.stdout.splitlines()  # beta's closing snapshot only
        task, phase, reason, _when, path = line.split()
        assert (task, phase, reason) == ("beta", "review", "phase_end")
        assert Path(path).parent == memory / "context_snapshots"
        (row,) = [json.loads(line) for line in alpha.stdout.splitlines()]
        assert row["task_id"] == "alpha" and row["path"] != path
        assert f"Task: {row['task_id']}" in Path(row["path"]).read_text()


class TestTasks:
    def test_tasks_newest_first_as_status_sees_them(self, shared):
        memory, _ = shared
        listed = orch("tasks", "--json", memory=memory)
        assert listed.exit_code == 0, listed.output
        rows = [json.loads(line) for line in listed.stdout.splitlines()]
        assert [r["task_id"] for r in rows] == ["beta", "alpha"]
        assert rows[1]["objective"] == LONG  # whole
        for row in rows:
            status = json.loads(
                orch("status", "--task", row["task_id"], "--json", memory=memory).stdout
            )
            assert (row["status"], row["phase"]) == (status["status"], status["phase"])
            assert row["objective"] == status["objective"]
            assert datetime.fromisoformat(row["updated"]).tzinfo is not None
        assert rows[0]["updated"] >= rows[1]["updated"]

    @pytest.mark.parametrize("width", [100, 60, 40])
    def test_tasks_fit_the_terminal(self, shared, width):
        memory, _ = shared
        listed = orch("tasks", memory=memory, env={"COLUMNS": str(width)})
        lines = listed.stdout.splitlines()
        assert lines and all(len(line) <= width for line in lines), lines
        assert lines[0].split()[:3] == ["TASK", "STATUS", "PHASE"]  # a header row
        lines = lines[2:] if lines[1].split()[:1] == ["UPDATED"] else lines[1:]
        assert lines[0].split()[:3] == ["beta", "done", "review"]
        text = " ".join(listed.stdout.split())
        assert "Survey the shop" in text and "…" in text  # alpha's, cut
        assert LONG not in text
        if width == 40:  # too narrow for the objective beside: a second line, indented
            assert len(lines) == 4 and lines[1].startswith("  20") and "Map the docs" in lines[1]

    def test_tasks_in_a_pipe_are_whole(self, shared):
        memory, _ = shared
        listed = orch("tasks", memory=memory, env={"COLUMNS": None})
        header, _, alpha = listed.stdout.splitlines()
        assert header.split() == ["TASK", "STATUS", "PHASE", "UPDATED", "(UTC)", "OBJECTIVE"]
        assert alpha.startswith("alpha ") and alpha.endswith(LONG)

    def test_an_empty_memory_says_so_as_status_does(self, memory_dir):
        listed = CliRunner().invoke(cli, ["tasks"])
        status = CliRunner().invoke(cli, ["status"])
        assert listed.exit_code == status.exit_code == 1
        assert listed.output == status.output
        assert listed.output.startswith("Error: no task in memory directory")
        assert len(listed.output.splitlines()) == 1

    def test_tasks_loads_neither_langgraph_nor_langchain(self, shared, cli_env):
        memory, _ = shared
        code = (
            "import sys\n"
            "from orchestrator.cli.app import main\n"
            f"sys.argv = ['orchestrator', 'tasks', '--memory-dir', {str(memory)!r}]\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "loaded = sorted({m.split('.')[0] for m in sys.modules})\n"
            "print([m for m in loaded if m.startswith(('langgraph', 'langchain'))])\n"
        )
        done = subprocess.run(
            [sys.executable, "-c", code], env=cli_env, capture_output=True, text=True
        )
        assert done.returncode == 0, done.stderr
        *listed, loaded = done.stdout.strip().splitlines()
        assert loaded == "[]" and [line.split()[0] for line in listed] == ["TASK", "beta", "alpha"]

    @pytest.mark.parametrize("json_mode", [False, True])
    def test_damaged_task_records_are_named_in_one_warning(self, shared, tmp_path, json_mode):
        """A record that is not one (a hand edit, a cut file) is not left out in silence:
        the good tasks are listed, one `Warning:` line names each damaged record's path."""
        memory, _ = shared
        copy = tmp_path / "memory"
        shutil.copytree(memory, copy)
        records = copy / ".tether" / "records" / "tasks"
        (records / "beta.json").write_text('{"task_id": "beta", "sta')  # cut mid-write
        (records / "gamma.json").write_text("[1, 2]\n")
        listed = orch("tasks", *(["--json"] if json_mode else []), memory=copy)
        assert listed.exit_code == 0, listed.output
        assert [line.split()[0] for line in listed.stdout.splitlines()] == (
            ['{"task_id":'] if json_mode else ["TASK", "alpha"]
        )
        (warning,) = listed.stderr.splitlines()
        assert warning.startswith("Warning: 2 damaged task records not listed: ")
        assert str(records / "beta.json") in warning and str(records / "gamma.json") in warning

    def test_tasks_on_postgresql(self, tmp_path):
        repo = build_repo(tmp_path / "repo", modules=1, docs=0, readme=False)
        workflow = tmp_path / "one.yaml"
        workflow.write_text("name: one\nphases: [exploration]\n")
        with private_schema() as url:
            with Orchestrator(memory_url=url, workdir=repo, workflow=workflow) as o:
                assert o.run("Survey the shop", task_id="pg1").status == "done"
            listed = CliRunner().invoke(cli, ["tasks", "--json", "--memory-url", url])
        assert listed.exit_code == 0, listed.output
        (row,) = [json.loads(line) for line in listed.stdout.splitlines()]
        assert (row["task_id"], row["status"], row["phase"]) == ("pg1", "done", "exploration")
        assert row["objective"] == "Survey the shop"


class TestADoneTask:
    def test_its_report_says_nothing_about_resuming(self, shared):
        _, printed = shared
        assert printed.startswith("Task beta: done")
        assert "Hand off: orchestrator handoff --task beta" in printed
        assert "Resume" not in printed and "orchestrator resume" not in printed

    def test_resume_says_there_is_nothing_to_resume_and_starts_nothing(self, shared, cli_env):
        """No model is resolved (a provider that is not installed is not asked for), and
        neither LangGraph nor LangChain is loaded: nothing runs."""
        memory, _ = shared
        before = _files(memory)
        code = (
            "import sys\n"
            "from orchestrator.cli.app import main\n"
            f"sys.argv = ['orchestrator', 'resume', '--memory-dir', {str(memory)!r}]\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    print('exit', exc.code)\n"
            "loaded = sorted({m.split('.')[0] for m in sys.modules})\n"
            "print([m for m in loaded if m.startswith(('langgraph', 'langchain'))])\n"
        )
        env = {**cli_env, "TETHER_MODEL": "anthropic:claude-x"}  # would be one Error: line
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
        said, code_line, loaded = done.stdout.splitlines()
        assert said == (
            f"Task beta: done; nothing to resume (see `orchestrator status --task beta "
            f"--memory-dir {memory}`)"
        )
        assert code_line in ("exit 0", "exit None") and loaded == "[]"
        assert done.stderr == ""
        assert _files(memory) == before

    def test_resume_json_says_so_in_one_object(self, shared):
        memory, _ = shared
        done = orch("resume", "--task", "alpha", "--json", memory=memory)
        assert done.exit_code == 0
        (line,) = done.stdout.splitlines()
        said = json.loads(line)
        assert (said["event"], said["task_id"], said["status"]) == (
            "nothing_to_resume",
            "alpha",
            "done",
        )


def test_the_report_names_the_snapshot_status_names(fixture_repo, tmp_path, memory_dir):
    """A waiting task handed off, then resumed (it waits again): the report's snapshot is
    the handoff's, as in `status`, and `tasks` shows it waiting, as `status` does."""
    workflow = tmp_path / "gate.yaml"
    workflow.write_text("name: gate\nphases: [exploration, review]\napprove_plan: true\n")
    runner = CliRunner()
    run = ["run", "Survey", "--task", "w", "--workdir", str(fixture_repo), "--workflow"]
    assert runner.invoke(cli, [*run, str(workflow)]).exit_code == 4
    handed = Path(runner.invoke(cli, ["handoff"]).stdout.strip())
    resumed = runner.invoke(cli, ["resume"])
    assert resumed.exit_code == 4, resumed.output
    (line,) = [ln for ln in resumed.stdout.splitlines() if ln.startswith("  snapshot")]
    status = runner.invoke(cli, ["status"]).stdout
    assert f"Latest snapshot: {handed}" in status.splitlines()
    assert line.split()[-1] == str(handed)
    (row,) = [json.loads(ln) for ln in runner.invoke(cli, ["tasks", "--json"]).stdout.splitlines()]
    info = json.loads(runner.invoke(cli, ["status", "--json"]).stdout)
    assert (
        (row["status"], row["phase"])
        == (info["status"], info["phase"])
        == (
            "waiting",
            "exploration",
        )
    )


def test_an_interrupted_task_is_listed_as_status_says(tmp_path, tiny_workflow, cli_env):
    """Killed mid-run: no process holds it, so it is `interrupted`, in the phase it was."""
    repo = build_repo(tmp_path / "small", modules=1, docs=0, readme=False)
    run = [sys.executable, "-m", "orchestrator.cli", "run", "Survey", "--task", "k"]
    run += ["--workdir", str(repo), "--workflow", str(tiny_workflow)]
    env = {**cli_env, "TETHER_FAULT": "merge_after_checkpoint:1"}
    killed = subprocess.run(run, env=env, capture_output=True, timeout=120)
    assert killed.returncode == -9, killed.stderr
    (row,) = [
        json.loads(ln) for ln in CliRunner().invoke(cli, ["tasks", "--json"]).stdout.splitlines()
    ]
    info = json.loads(CliRunner().invoke(cli, ["status", "--json"]).stdout)
    assert row["status"] == info["status"] == "interrupted"
    assert row["phase"] == info["phase"]
