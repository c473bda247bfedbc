"""`resume --from-snapshot` into a memory directory that lacks some of the snapshot's findings.

The snapshot names every finished subtask and its findings file; a resume where one of
those files is gone names it and runs that subtask again, instead of dropping its work.
(A file whose artifact-registry record is still there is written again from the record
before anything else: `test_recovery.py`.)
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

CMD = [sys.executable, "-m", "orchestrator.cli"]


def test_missing_findings_are_named_and_their_subtasks_run_again(
    fixture_repo, tiny_workflow, memory_dir, cli_env
):
    run = [*CMD, "run", "Survey the shop", "--task", "t", "--workdir", str(fixture_repo),
           "--workflow", str(tiny_workflow)]  # fmt: skip
    killed = subprocess.run(
        run, env={**cli_env, "TETHER_FAULT": "spawn_after_checkpoint:2"}, capture_output=True
    )
    assert killed.returncode == -9, killed.stderr
    handoff = subprocess.run(
        [*CMD, "handoff", "--task", "t"], env=cli_env, capture_output=True, text=True, check=True
    )
    snap = handoff.stdout.strip().splitlines()[-1].split()[-1]
    lost = sorted((memory_dir / "findings").glob("researcher-exploration-*.md"))[0]
    lost.unlink()
    shutil.rmtree(memory_dir / ".tether" / "records" / "subagents" / "t")  # its record too

    resumed = subprocess.run(
        [*CMD, "resume", "--from-snapshot", snap], env=cli_env, capture_output=True, text=True
    )
    assert resumed.returncode == 0, resumed.stderr
    rel = f"findings/{lost.name}"
    assert f"findings {rel!r} of subtask" in resumed.stdout + resumed.stderr
    status = json.loads(
        subprocess.run(
            [*CMD, "status", "--task", "t", "--json"],
            env=cli_env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout  # fmt: skip
    )
    assert status["status"] == "done"
    assert all(s["state"] == "done" for s in status["subtasks"].values())
    assert status["findings"] == len(status["subtasks"]) == 6  # 3 per phase, none dropped
    key = next(k for k, s in status["subtasks"].items() if lost.name.startswith(
        f"researcher-{k.split('/', 1)[1]}_"))  # fmt: skip
    again = sorted((memory_dir / "findings").glob(f"researcher-{key.split('/', 1)[1]}_*.md"))
    assert again  # the subtask ran again
