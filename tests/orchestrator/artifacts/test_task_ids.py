"""Task ids of new tasks: an allow-list, exactly what the error message says.

`orchestrator run --task ID` (and the served graph's `task_id`) accept 1 to 128 ASCII
letters, digits, '-', '_' and '.', starting with a letter or digit; anything else is one
`Error:` line, exit 1, and nothing is written.
"""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from orchestrator.artifacts.tasks import check_task_id
from orchestrator.cli.app import cli
from orchestrator.errors import OrchestratorUserError

MESSAGE = "use 1 to 128 letters, digits, '-', '_' or '.', starting with a letter or digit"

REFUSED = [
    "x\ny",  # a folder with a newline in its name
    "-rf",  # an option to any shell command it reaches
    "two words",
    "tab\there",
    "bell\x07",
    "del\x7f",
    "nul\x00",
    "../escape",
    "a/b",
    "a\\b",
    ".hidden",
    "..",
    "_under",
    "",
    "é-accent",  # letters means ASCII letters: ids are file names and shell words
    "x" * 129,
]


@pytest.mark.parametrize("task_id", REFUSED)
def test_refused_ids_name_the_rule(task_id):
    with pytest.raises(OrchestratorUserError) as caught:
        check_task_id(task_id)
    message = str(caught.value)
    assert message == f"invalid task id {task_id!r}: {MESSAGE}"
    assert "\n" not in message


@pytest.mark.parametrize("task_id", ["a", "T1", "auth-map", "v1.2_rc", "7", "x" * 128])
def test_accepted_ids(task_id):
    assert check_task_id(task_id) == task_id


@pytest.mark.parametrize("task_id", ["x\ny", "-rf", "two words", "ctl\x1b[31m"])
def test_run_refuses_with_one_line_and_writes_nothing(task_id, memory_dir, tmp_path):
    result = CliRunner().invoke(cli, ["run", "Survey", "--task", task_id, "--workdir", "."])
    assert result.exit_code == 1, result.output
    assert result.output == f"Error: invalid task id {task_id!r}: {MESSAGE}\n"
    assert not memory_dir.exists()
