"""`memory list` in a terminal fits its rows to the terminal's width, and so does it piped
with `$COLUMNS` exported; piped without it, rows are whole.

The terminal is a real pseudo-terminal of a given size (what `tmux` gives the command), and
`memory` runs as a subprocess on it.
"""

from __future__ import annotations

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import pytest
from click.testing import CliRunner

from memory.cli.app import cli

TAGS = ["tool:read_file", "task:survey-this-repository-what-4cb492", "offload"]


@pytest.fixture
def entries() -> list[str]:
    tags = [arg for tag in TAGS for arg in ("--tag", tag)]
    ids = []
    for n in range(3):
        text = f"tool result {n}: read_file orchestrator/cli/app.py returned 412 lines of source"
        ids.append(CliRunner().invoke(cli, ["log", text, *tags, "-q"]).stdout.strip())
    return ids[::-1]  # newest first, as listed


def _in_terminal(args: list[str], env: dict[str, str], columns: int, rows: int) -> list[str]:
    """The lines `memory ARGS` prints on a terminal of `columns` x `rows`."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {k: v for k, v in env.items() if k not in ("COLUMNS", "LINES")}
    proc = subprocess.Popen(
        [sys.executable, "-m", "memory", *args], stdout=slave, stderr=slave, env=env
    )
    os.close(slave)
    out = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the command ended and closed the terminal
            break
        if not chunk:
            break
        out += chunk
    os.close(master)
    assert proc.wait(timeout=60) == 0, out
    return out.decode().replace("\r\n", "\n").splitlines()


@pytest.mark.parametrize(
    "columns, header",
    [
        (100, ["ID", "TYPE", "TOKENS", "CHUNKS", "TAGS", "SUMMARY"]),
        (60, ["ID", "SUMMARY"]),
    ],
)
def test_rows_fit_the_terminal_or_columns_else_piped_rows_are_whole(
    entries, cli_env, columns, header
):
    lines = _in_terminal(["list"], cli_env, columns, 15)
    assert lines[0].split() == header
    assert [line.split()[0] for line in lines[1:]] == entries  # ids are never cut
    assert max(len(line) for line in lines) <= columns
    assert all(line.endswith("...") for line in lines[1:])  # the summary is cut, marked

    def piped(env: dict[str, str]) -> list[str]:
        return subprocess.run(
            [sys.executable, "-m", "memory", "list"],
            env=env,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.splitlines()

    # for grep and cut: whole rows when nothing says a width
    whole = piped({k: v for k, v in cli_env.items() if k not in ("COLUMNS", "LINES")})
    assert [row.split()[0] for row in whole[1:]] == entries
    assert all(",".join(sorted(TAGS)) in row for row in whole[1:])
    # an exported $COLUMNS (a pager's, a pane's) is the width, piped too
    fitted = piped({**cli_env, "COLUMNS": str(columns)})
    assert fitted[0].split() == header
    assert [row.split()[0] for row in fitted[1:]] == entries
    assert max(len(line) for line in fitted) <= columns
