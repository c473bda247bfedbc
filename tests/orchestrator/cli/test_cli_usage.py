"""One rule for every verb and group of `orchestrator` (issue 43 item 6), and `--version`.

A usage error (an unknown option, a missing or extra argument, no such command, a group
called without its subcommand) is one `Error:` line, with click's "Did you mean" when it
has one, and exit 2, also for the group's own options, parsed before any verb runs (any other
bad input, a bad value too, stays one line and exit 1). `--help` is still help, exit 0.
"""

from __future__ import annotations

import importlib.metadata
import subprocess
import sys

import pytest
from click.testing import CliRunner

from orchestrator.cli.app import cli

USAGE = [
    (
        ["--memroy-dir", "x", "status"],
        "Error: No such option '--memroy-dir'. (Did you mean one of: '--memory-dir', "
        "'--memory-url'?)",
    ),
    (["status", "--bogus"], "Error: No such option '--bogus'."),
    (["stauts"], "Error: No such command 'stauts'. Did you mean 'status'?"),
    (["checkpoint", "lst"], "Error: No such command 'lst'. Did you mean 'list'?"),
    (["checkpoint", "list", "extra"], "Error: Got unexpected extra argument (extra)"),
    (["handoff", "extra"], "Error: Got unexpected extra argument (extra)"),
    (["run"], "Error: missing OBJECTIVE (or --objective-file FILE for a long brief)"),
    (["run", "x", "--workdir"], "Error: Option '--workdir' requires an argument."),
    (
        ["approve", "--message", "no"],
        "Error: --message goes with --reject (an approval needs no reason)",
    ),
]


@pytest.mark.parametrize(("args", "line"), USAGE, ids=[" ".join(a) or "-" for a, _ in USAGE])
def test_a_usage_error_is_one_line_and_exit_2(args, line, memory_dir):
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert result.output.splitlines() == [line]
    assert not memory_dir.exists()


@pytest.mark.parametrize(
    ("args", "named"),
    [
        (["checkpoint"], ["list", "load", "now", "report"]),
        (["snapshot"], ["list", "write"]),
        ([], ["--help"]),
    ],
)
def test_a_group_without_its_subcommand_is_one_line_and_exit_2(args, named):
    """Not its whole help prefixed `Error: Usage:` (the wording is `memory`'s too)."""
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2
    (line,) = result.output.splitlines()
    assert line.startswith(f"Error: missing command for `{' '.join(['orchestrator', *args])}`")
    assert all(name in line for name in named), line


def test_help_is_still_help_for_the_command_its_groups_and_verbs():
    """(A bad value is one line and exit 1: `tests/orchestrator/config/test_settings.py`.)"""
    for args in (["--help"], ["checkpoint", "--help"], ["snapshot", "-h"], ["tasks", "-h"]):
        result = CliRunner().invoke(cli, args)
        assert result.exit_code == 0, args
        assert result.output.startswith("Usage: ") and "Examples:" in result.output, args


def test_the_groups_own_options_in_a_real_process(cli_env):
    """Parsed by click before any verb: the process itself exits 2 with one line."""
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "--memroy-dir", "x", "status"],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [
        "Error: No such option '--memroy-dir'. (Did you mean one of: '--memory-dir', "
        "'--memory-url'?)"
    ]


def test_version_names_the_command_and_the_installed_package():
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"orchestrator (tether) {importlib.metadata.version('tether')}\n"
