"""The `orchestrator` command line: runs, handoff, status, checkpoints, errors, views."""

from __future__ import annotations

import importlib.util
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from orchestrator.cli.app import cli

CMD = [sys.executable, "-m", "orchestrator.cli"]


def orch(*args: str, env: dict, timeout: float = 60) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], env=env, capture_output=True, text=True, timeout=timeout)


def tree(root: Path) -> dict[str, float]:
    """Every file under `root` with its modification time (to prove nothing changed)."""
    if not root.exists():
        return {}
    return {str(p): p.stat().st_mtime_ns for p in root.rglob("*") if p.is_file()}


class TestRunInASubprocess:
    def test_run_prints_where_the_files_went_and_how_to_resume(
        self, fixture_repo, tiny_workflow, cli_env, memory_dir
    ):
        done = orch(
            "run",
            "Survey the shop service",
            "--task",
            "shop",
            "--workdir",
            str(fixture_repo),
            "--workflow",
            str(tiny_workflow),
            env=cli_env,
        )
        assert done.returncode == 0, done.stderr
        out = done.stdout
        assert out.startswith("Task shop: done (phase review, 6 finding(s), 0 failed)")
        for part in (
            "research_plans/shop.md",
            "findings",
            "checkpoints",
            "context_snapshots",
            "orchestrator handoff --task shop",
        ):
            assert part in out
        assert "orchestrator resume" not in out  # a done task has nothing to resume
        assert "offline model" in done.stderr  # the banner, on stderr
        assert "\x1b[" not in done.stderr + out  # no ANSI codes in a pipe
        assert "phase exploration (1/2)" in done.stderr

        status = orch("status", "--json", env=cli_env)
        info = json.loads(status.stdout)
        assert info["status"] == "done" and info["findings"] == 6
        assert info["phases"] == ["exploration", "review"]

    def test_json_mode_prints_one_object_per_line(self, fixture_repo, tiny_workflow, cli_env):
        done = orch(
            "run",
            "Survey",
            "--task",
            "j",
            "--workdir",
            str(fixture_repo),
            "--workflow",
            str(tiny_workflow),
            "--json",
            env=cli_env,
        )
        assert done.returncode == 0, done.stderr
        objects = [json.loads(line) for line in done.stdout.splitlines()]
        kinds = [o["event"] for o in objects]
        assert kinds[:2] == ["model", "start"] and kinds[-1] == "result"
        assert "offline model" in done.stderr
        assert {"phase", "agent", "checkpoint", "merged", "done"} <= set(kinds)
        assert objects[-1]["status"] == "done"

    def test_handoff_then_resume_from_snapshot_in_a_new_process(
        self, fixture_repo, tiny_workflow, cli_env, memory_dir
    ):
        env = {**cli_env, "TETHER_FAULT": "advance_after_checkpoint:1"}
        killed = orch(
            "run",
            "Survey the shop service",
            "--task",
            "h",
            "--workdir",
            str(fixture_repo),
            "--workflow",
            str(tiny_workflow),
            env=env,
        )
        assert killed.returncode == -signal.SIGKILL
        handoff = orch("handoff", env=cli_env)
        assert handoff.returncode == 0, handoff.stderr
        snap = Path(handoff.stdout.strip())
        assert snap.parent == memory_dir / "context_snapshots" and snap.is_file()
        resumed = orch("resume", "--from-snapshot", str(snap), env=cli_env)
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.startswith("Task h: done")
        assert "snapshot" in resumed.stderr.splitlines()[1]
        agent_files = [p for p in (memory_dir / "findings").glob("researcher-*.md")]
        assert len(agent_files) == 6  # exploration's 3 were not redone

    @pytest.mark.parametrize(
        ("signum", "code", "said"),
        [(signal.SIGINT, 130, "Interrupted"), (signal.SIGTERM, 143, "Terminated (SIGTERM)")],
    )
    def test_ctrl_c_stops_cleanly_with_a_checkpoint_and_resume_finishes(
        self, fixture_repo, tiny_workflow, cli_env, memory_dir, signum, code, said
    ):
        # SIGTERM (`kill`, `timeout`, `docker stop`) stops a run as Ctrl-C does: its
        # `interrupted` checkpoint, the resume hint, 128 + the signal's number
        proc = subprocess.Popen(
            [
                *CMD,
                "run",
                "Survey",
                "--task",
                "int",
                "--workdir",
                str(fixture_repo),
                "--workflow",
                str(tiny_workflow),
            ],
            env=cli_env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        deadline = time.monotonic() + 120  # a loaded machine starts the CLI slowly
        while time.monotonic() < deadline and proc.poll() is None:
            if list((memory_dir / "checkpoints").glob("cp_*.json")):
                break
            time.sleep(0.005)
        proc.send_signal(signum)
        _out, err = proc.communicate(timeout=30)
        assert proc.returncode == code, err
        assert f"{said}; resume with `orchestrator resume --task int" in err
        resumed = orch("resume", env=cli_env)
        assert resumed.returncode == 0 and resumed.stdout.startswith("Task int: done")


@pytest.fixture
def finished(fixture_repo, tiny_workflow, memory_dir):
    runner = CliRunner()
    result = runner.invoke(
        cli,
        [
            "run",
            "Survey",
            "--task",
            "done",
            "--workdir",
            str(fixture_repo),
            "--workflow",
            str(tiny_workflow),
        ],
    )
    assert result.exit_code == 0, result.output
    return runner


class TestInspect:
    def test_status_text(self, finished):
        out = finished.invoke(cli, ["status"]).output
        assert out.startswith("Task done: done\nObjective: Survey\n")
        # one spend figure, said what it counts; where a resume would continue from
        info = json.loads(finished.invoke(cli, ["status", "--json"]).output)
        spent = [line for line in out.splitlines() if line.startswith("Spent: ")]
        assert spent == [
            f"Spent: nothing ({info['usage']['calls']:,} offline model call(s): no provider was "
            "called)"
        ]
        assert "Tokens: " not in out and "Usage: " not in out
        assert "Saved state: LangGraph's database" in out
        assert "Phase: review (2/2: exploration, review)" in out
        listed = [line.split()[1] for line in out.splitlines() if line.startswith("  done ")]
        assert [key.split("/")[0] for key in listed] == ["exploration"] * 3 + ["review"] * 3
        info = json.loads(finished.invoke(cli, ["status", "--json"]).output)
        assert info["phase_number"] == 2 and info["phases"][info["phase_number"] - 1] == "review"

    def test_checkpoint_verbs(self, finished, memory_dir):
        listed = [
            ln.split()[-1]
            for ln in finished.invoke(cli, ["checkpoint", "list"]).output.splitlines()
        ]
        assert listed and all(Path(p).parent == memory_dir / "checkpoints" for p in listed)
        load = finished.invoke(cli, ["checkpoint", "load", "--json"])
        assert json.loads(load.output)["task_id"] == "done"
        report = finished.invoke(cli, ["checkpoint", "report"])
        assert report.exit_code == 0 and "[MEMORY REFERENCES]" in report.output
        now = finished.invoke(cli, ["checkpoint", "now", "--notes", "before refactor"])
        written = Path(now.output.strip())
        data = json.loads(written.read_text())
        assert data["extra"]["notes"] == "before refactor" and data["task_id"] == "done"
        assert data["next_action"] == "Task complete; nothing to do"  # notes don't replace it
        report = finished.invoke(cli, ["checkpoint", "report", str(written)]).output
        assert "[NOTES]\n  before refactor" in report

    def test_snapshot_verbs(self, finished, memory_dir):
        path = Path(finished.invoke(cli, ["snapshot", "write"]).output.strip())
        assert path.is_file()
        assert str(path) in finished.invoke(cli, ["snapshot", "list"]).output


BAD = [
    (["status", "--task", "nope"], "Error: unknown task 'nope'"),
    (["resume"], "Error: no task in memory directory"),
    (["run", "x", "--workdir", "missing-dir"], "Error: "),
    (["run", "x", "--workflow", "bad.yaml"], "Error: workflow file"),
    (["run", "x", "--phase", "deploy"], "Error: unknown phase 'deploy'"),
    (["run", "x", "--model", "anthropic:claude-x"], "Error: provider 'anthropic'"),
    (["run", "x", "--workflow", "agent-model.yaml"], "Error: provider 'anthropic'"),
    (["run", "x", "--task", "../escape"], "Error: invalid task id"),
    (["resume", "--from-snapshot", "nowhere.md"], "Error: snapshot"),
]


@pytest.mark.parametrize(("args", "message"), BAD)
def test_bad_input_is_one_line_exit_1_and_memory_untouched(
    args, message, tmp_path, memory_dir, monkeypatch
):
    real = importlib.util.find_spec  # `langchain_anthropic` looks absent, whatever is installed
    monkeypatch.setattr(
        "orchestrator.agents.chat_models.importlib.util.find_spec",
        lambda name, *a, **k: None if name == "langchain_anthropic" else real(name, *a, **k),
    )
    (tmp_path / "bad.yaml").write_text("phases: [a, b\nagents: {")
    (tmp_path / "agent-model.yaml").write_text(
        "agents:\n  researcher:\n    model: anthropic:claude-x\n"
    )
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.output
    assert not memory_dir.exists()


def test_unknown_task_leaves_existing_memory_untouched(finished, memory_dir):
    before = tree(memory_dir)
    result = finished.invoke(cli, ["resume", "--task", "nope"])
    assert result.exit_code == 1
    assert result.output.startswith("Error: unknown task 'nope'")
    assert tree(memory_dir) == before


def test_every_command_has_help_with_examples():
    runner = CliRunner()
    commands = [
        ["run"],
        ["resume"],
        ["handoff"],
        ["status"],
        ["tasks"],
        ["checkpoint", "now"],
        ["checkpoint", "load"],
        ["checkpoint", "report"],
        ["checkpoint", "list"],
        ["snapshot", "write"],
        ["snapshot", "list"],
    ]
    for command in commands:
        out = runner.invoke(cli, [*command, "--help"]).output
        assert "Examples:" in out, command


def test_importing_the_cli_does_not_import_langgraph(cli_env):
    code = "import sys, orchestrator.cli.app; print('langgraph' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", code], env=cli_env, capture_output=True, text=True)
    assert done.stdout.strip() == "False"


@pytest.mark.parametrize("args", [["status"], ["status", "--json"], ["--help"]])
def test_status_and_help_load_neither_langgraph_nor_langchain(finished, cli_env, args):
    """`status` reads tether's own files; loading LangGraph would cost it a second."""
    code = (
        "import sys\n"
        "from orchestrator.cli.app import main\n"
        f"sys.argv = ['orchestrator', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "loaded = sorted({m.split('.')[0] for m in sys.modules})\n"
        "print([m for m in loaded if m.startswith(('langgraph', 'langchain'))])\n"
    )
    done = subprocess.run([sys.executable, "-c", code], env=cli_env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    *output, loaded = done.stdout.strip().splitlines()
    assert loaded == "[]"
    if args[0] == "status":
        # LangGraph's database found without loading LangGraph: `"source"` / `Saved state:`
        assert "done" in output[0] and "langgraph" in "\n".join(output).lower()


def test_live_view_fits_a_60_column_terminal():
    from rich.console import Console

    from orchestrator.cli.view import LiveView

    buffer = io.StringIO()
    view = LiveView(buffer)
    view.console = Console(file=buffer, width=60, force_terminal=True, color_system=None)
    events = [
        {
            "event": "start",
            "task_id": "a-very-long-task-identifier-" * 3,
            "objective": "o",
            "phases": ["p"],
            "model": "m",
        },
        {"event": "phase", "phase": "exploration", "index": 1, "total": 4},
        {
            "event": "agent",
            "key": "exploration/" + "x" * 80,
            "agent": "researcher",
            "state": "running",
            "tokens": 1234,
        },
        {
            "event": "tokens",
            "agent": "lead",
            "context": 130_000,
            "threshold": 150_000,
            "warning_ratio": 0.8,
            "total": 9,
        },
        {
            "event": "checkpoint",
            "trigger": "before_spawning",
            "phase": "p",
            "path": "/very/long/path/" * 10,
        },
    ]
    with view:
        for event in events:
            view(event)
    text = buffer.getvalue()
    assert "130,000/150,000 warn" in text
    plain = [line for line in text.splitlines() if line and "\x1b" not in line]
    assert plain and all(len(line) <= 60 for line in plain)


def test_plain_view_writes_clean_lines():
    from orchestrator.cli.view import PlainView

    buffer = io.StringIO()
    view = PlainView(buffer)
    view({"event": "phase", "phase": "review", "index": 2, "total": 2})
    view({"event": "agent", "key": "review/a", "agent": "r", "state": "running", "tokens": 5})
    view({"event": "agent", "key": "review/a", "agent": "r", "state": "done", "tokens": 9})
    assert buffer.getvalue() == "phase review (2/2)\nagent review/a [r]: done\n"
    assert os.linesep == "\n"
