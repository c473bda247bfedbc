"""What `orchestrator run` tells a user who gives it something odd: its own `--task`
help, a `--max-parallel` beyond reason (capped, with a warning), a workdir with nothing
to read (a warning, then the run)."""

from __future__ import annotations

import json

from click.testing import CliRunner, Result

from orchestrator.cli.app import cli


def run(*args: str) -> Result:
    return CliRunner().invoke(cli, ["run", *args])


def test_run_help_says_what_its_task_option_does():
    out = run("--help").stdout
    said = " ".join(out.split("--task TEXT", 1)[1].split("--workdir", 1)[0].split())
    assert said.startswith("Id of the new task (default: the objective's first words and a")
    assert "most recent" not in said  # that is resume's default


def test_a_huge_max_parallel_is_capped_with_a_warning(fixture_repo, tiny_workflow, memory_dir):
    done = run("Survey", "--task", "p", "--workdir", str(fixture_repo), "--workflow",
               str(tiny_workflow), "--max-parallel", "1000000")  # fmt: skip
    assert done.exit_code == 0, done.output
    warning = "Warning: --max-parallel 1000000 is more than 64; running at most 64 subagents"
    assert done.stderr.splitlines()[0].startswith(warning)
    record = json.loads((memory_dir / ".tether" / "records" / "tasks" / "p.json").read_text())
    assert record["data"]["max_parallel"] == 64


def test_a_workdir_with_nothing_to_read_is_said_once(tmp_path, tiny_workflow):
    empty = tmp_path / "empty"
    (empty / ".git").mkdir(parents=True)  # hidden and ignored things only
    (empty / ".env").write_text("KEY=1\n")
    done = run("Survey", "--workdir", str(empty), "--workflow", str(tiny_workflow))
    assert done.exit_code == 0, done.output
    said = [ln for ln in done.stderr.splitlines() if "holds no text file" in ln]
    assert said == [
        f"Warning: the workdir {str(empty.resolve())!r} holds no text file the agents can read "
        "(empty, or only hidden, ignored or binary files): nothing to survey there."
    ]
    (empty / "a.py").write_text("x = 1\n")  # one file to read: nothing to warn about
    full = run("Survey", "--workdir", str(empty), "--workflow", str(tiny_workflow))
    assert full.exit_code == 0 and "holds no text file" not in full.stderr
