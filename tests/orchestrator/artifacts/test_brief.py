"""Objectives: the inline length cap and long briefs given with `--objective-file`.

Covers `orchestrator run` through the CLI: a too-long objective is one `Error:` line that
writes nothing; a brief file is stored once, byte for byte, as `working/{task}/brief.md`
and referenced (not copied) by the plan and the checkpoints.
"""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from orchestrator.artifacts.brief import MAX_OBJECTIVE_CHARS
from orchestrator.cli.app import cli


def _run(*args: str):
    return CliRunner().invoke(cli, ["run", *args])


def test_an_objective_over_the_cap_is_one_line_and_writes_nothing(fixture_repo, memory_dir):
    result = _run("x" * (MAX_OBJECTIVE_CHARS + 1), "--workdir", str(fixture_repo))
    assert result.exit_code == 1
    assert result.output == (
        "Error: objective is 4,001 characters, over the 4,000 limit; put a long brief in a "
        "file and pass --objective-file FILE\n"
    )
    assert not memory_dir.exists()


def test_a_brief_is_stored_once_and_referenced(fixture_repo, tiny_workflow, memory_dir, tmp_path):
    brief = "# Map the payment flow\n\n" + "Context the agents need. " * 8000 + "\nünïcode\n"
    path = tmp_path / "brief.md"
    path.write_text(brief, encoding="utf-8")
    result = _run(
        "--objective-file", str(path), "--task", "pay", "--workdir", str(fixture_repo),
        "--workflow", str(tiny_workflow),
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    stored = memory_dir / "working" / "pay" / "brief.md"
    assert stored.read_bytes() == path.read_bytes()
    plan = (memory_dir / "research_plans" / "pay.md").read_text()
    assert "Map the payment flow (the full brief, " in plan
    assert "working/pay/brief.md" in plan
    assert "Context the agents need." not in plan
    for cp in (memory_dir / "checkpoints").glob("cp_*.json"):
        assert cp.stat().st_size < 50_000
        assert "Context the agents need." not in json.loads(cp.read_text())["context_summary"]


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (None, "not found; check the path"),
        (lambda p: p.write_bytes(b"\x00\x01binary"), "is binary, not a text brief"),
        (lambda p: p.write_bytes(b"caf\xe9\n"), "is not UTF-8 text"),
        (lambda p: p.write_text("  \n\n"), "is empty"),
        (lambda p: p.mkdir(), "is a directory, not a file"),
    ],
)
def test_bad_brief_files(make, message, tmp_path, memory_dir):
    path = tmp_path / "brief.md"
    if make is not None:
        make(path)
    result = _run("--objective-file", str(path))
    assert result.exit_code == 1
    assert result.output == f"Error: objective file {str(path)!r} {message}\n"
    assert not memory_dir.exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["Survey", "--objective-file", "b.md"], "give OBJECTIVE or --objective-file, not both"),
        ([], "missing OBJECTIVE (or --objective-file FILE for a long brief)"),
    ],
)
def test_objective_and_file_are_exclusive(args, message, memory_dir):
    result = _run(*args)
    assert result.exit_code == 2  # a usage error (issue 43 item 6)
    assert result.output == f"Error: {message}\n"
