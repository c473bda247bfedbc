"""How the `memory` command answers a mistyped command line, `--help` and `--version`.

One rule for every verb and group: a usage error (unknown option, missing or extra
argument, no such command, a group called without a subcommand), including one in the
top-level group's own options, is one `Error:` line on stderr and exit 2 (with click's "Did
you mean" when it has one); a bad value is one line and exit 1; `--help` prints help, exit 0.
"""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
from click.testing import CliRunner

from memory.cli.app import cli


def invoke(*args: str):
    return CliRunner().invoke(cli, list(args), prog_name="memory")


@pytest.mark.parametrize(
    "args, error",
    [
        (
            ["--memroy-dir", "x", "list"],
            "Error: No such option '--memroy-dir'. "
            "(Did you mean one of: '--memory-dir', '--memory-url'?)",
        ),
        (["--bogus"], "Error: No such option '--bogus'."),
        (["lst"], "Error: No such command 'lst'. Did you mean 'list'?"),
        (["list", "--bogus"], "Error: No such option '--bogus'."),
        (["list", "extra"], "Error: Got unexpected extra argument (extra)"),
        (["fetch"], "Error: Missing argument 'ID'."),
        (["export"], "Error: Missing argument 'DIRECTORY'."),
        (
            ["summary", "status", "--tsk", "x"],
            "Error: No such option '--tsk'. Did you mean '--task'?",
        ),
        (["summary", "bogus"], "Error: No such command 'bogus'."),
        (
            ["summary"],
            "Error: missing command for `memory summary`: one of now, off, on, status",
        ),
        ([], "Error: missing command for `memory`: see `memory --help`"),
    ],
)
def test_a_usage_error_is_one_line_and_exit_2(args, error):
    result = invoke(*args)
    assert (result.exit_code, result.stderr, result.stdout) == (2, error + "\n", "")


def test_a_misspelt_option_exits_2_but_a_bad_value_exits_1(memory_dir):
    memory_dir.mkdir()
    misspelt = invoke("list", "--limt", "3")
    assert (misspelt.exit_code, misspelt.stderr) == (
        2,
        "Error: No such option '--limt'. Did you mean '--limit'?\n",
    )
    bad = invoke("list", "--limit", "abc")
    assert (bad.exit_code, bad.stderr) == (
        1,
        "Error: Invalid value for '--limit': 'abc' is not a valid integer.\n",
    )


def test_a_group_alone_is_an_error_but_its_help_is_help():
    alone = invoke("summary")
    assert alone.exit_code == 2 and alone.stderr.startswith("Error: missing command")
    helped = invoke("summary", "--help")
    assert helped.exit_code == 0
    assert helped.stdout.startswith("Usage: memory summary [OPTIONS] COMMAND [ARGS]...")


def test_version_names_the_command_and_tethers_version():
    result = invoke("--version")
    assert (result.exit_code, result.stdout) == (0, f"memory (tether) {version('tether')}\n")


def test_the_console_script_exits_2_with_one_line(cli_env, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "memory", "--memroy-dir", str(tmp_path), "status-file"],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=60,
    )
    assert done.returncode == 2
    assert done.stderr.splitlines() == [
        "Error: No such option '--memroy-dir'. (Did you mean one of: '--memory-dir', "
        "'--memory-url'?)"
    ]
    assert done.stdout == "" and not (tmp_path / "STATUS.md").exists()
