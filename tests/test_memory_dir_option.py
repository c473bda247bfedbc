"""`--memory-dir` works before or after the verb, for both command lines."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from memory.cli.app import cli as memory_cli
from orchestrator.cli.app import cli as orchestrator_cli


@pytest.mark.parametrize("before", [True, False], ids=["before-verb", "after-verb"])
def test_memory_cli_takes_the_dir_on_either_side(tmp_path, before):
    target = tmp_path / "elsewhere"
    runner = CliRunner()
    opt = ["--memory-dir", str(target)]
    logged = runner.invoke(memory_cli, [*opt, "log", "kept here", "-q"] if before
                           else ["log", "kept here", "-q", *opt])  # fmt: skip
    assert logged.exit_code == 0, logged.output
    listed = runner.invoke(memory_cli, ["list", "--json", *opt] if not before
                           else [*opt, "list", "--json"])  # fmt: skip
    assert [e["id"] for e in json.loads(listed.output)] == [logged.output.strip()]
    assert (target / "memory.db").exists()
    assert not (tmp_path / "memory" / "memory.db").exists()  # $TETHER_MEMORY_DIR untouched


@pytest.mark.parametrize("before", [True, False], ids=["before-verb", "after-verb"])
def test_orchestrator_cli_takes_the_dir_on_either_side(tmp_path, before):
    target = tmp_path / "elsewhere"
    opt = ["--memory-dir", str(target)]
    args = [*opt, "status", "--task", "nope"] if before else ["status", "--task", "nope", *opt]
    result = CliRunner().invoke(orchestrator_cli, args)
    assert result.exit_code == 1
    assert f"unknown task 'nope' in '{target}'" in result.output
