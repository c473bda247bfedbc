"""Ctrl-C and SIGTERM while `orchestrator run` starts (issue 52 item 15): before the task is
recorded, one line says there is nothing to resume (`orchestrator resume` would pick another
task), exit 130 or 143, never a traceback, whatever the moment of the start-up."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).parents[3]
DELAYS = (0.3, 0.6, 1.0)


@pytest.mark.parametrize("signum,code,how", [
    (signal.SIGTERM, 143, "Terminated (SIGTERM)"),
    (signal.SIGINT, 130, "Interrupted"),
])  # fmt: skip
def test_a_signal_during_start_up_is_one_line_and_its_exit_code(
    tmp_path, cli_env, signum, code, how
):
    (tmp_path / "repo").mkdir()
    (tmp_path / "repo" / "README.md").write_text("# A project\n")
    env = {**cli_env, "PYTHONPATH": str(REPO)}
    for delay in DELAYS:
        memory = tmp_path / f"memory-{delay}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "orchestrator.cli", "run", "Survey it", "--workdir",
             str(tmp_path / "repo"), "--model", "offline", "--memory-dir", str(memory)],
            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        time.sleep(delay)
        proc.send_signal(signum)
        _, err = proc.communicate(timeout=120)
        if proc.returncode == 0:
            continue  # the run ended before the signal: nothing to see at this delay
        assert "Traceback" not in err, err
        records = memory / ".tether" / "records" / "tasks"
        if records.exists() and any(records.iterdir()):
            continue  # recorded already: the resume hint is right (tests/.../test_ctrl_c.py)
        assert (proc.returncode, err) == (
            code,
            f"{how} before the task was recorded; there is nothing to resume: run it again\n",
        )
