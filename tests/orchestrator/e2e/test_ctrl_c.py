"""Ctrl-C during a fan-out stops the subagents at their next model call.

Only the main thread sees the `KeyboardInterrupt`; the subagents run in LangGraph's
worker threads, and LangGraph waits for every task it already scheduled. The run must
not finish the phase first: the agents stop before their next model call, the ones not
started do not start, and a resume finishes the task without running a finished step
again.
"""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import time

import pytest

SCRIPT = textwrap.dedent(
    """
    import os, sys, time
    from pathlib import Path
    from langchain_core.messages import AIMessage
    from orchestrator.api import Orchestrator
    from orchestrator.errors import Interrupted
    from orchestrator.offline import OfflineChatModel

    root = Path(sys.argv[1])
    calls = root / "calls.log"

    def policy(messages, tools):
        names = [t.get("function", t).get("name") for t in tools]
        if "PhasePlan" in names:
            subtasks = [
                {"id": f"s{i}", "title": f"Part {i}", "description": "Look.",
                 "agent": "researcher", "scope": ["."]}
                for i in range(6)
            ]
            args = {"strategy": "Fan out.", "subtasks": subtasks}
            return AIMessage("", tool_calls=[{"name": "PhasePlan", "args": args, "id": "p"}])
        if "SubmitAnswer" in names:
            call = {"name": "SubmitAnswer", "args": {"answer": "Six parts."}, "id": "a"}
            return AIMessage("", tool_calls=[call])
        with open(calls, "a") as fh:
            fh.write("call\\n")
        if sys.argv[2] == "run":
            time.sleep(0.5)  # a slow model (the resume needs no time to interrupt)
        done = sum(1 for m in messages if m.type == "tool")
        if done < 4:
            call = {"name": "list_files", "args": {"path": "."}, "id": f"t{done}"}
        else:
            args = {"summary": "Done.", "key_discoveries": ["x"]}
            call = {"name": "SubmitFindings", "args": args, "id": "f"}
        return AIMessage("", tool_calls=[call])

    (root / "one.yaml").write_text("name: one\\nphases: [exploration]\\n")
    orch = Orchestrator(
        memory_dir=root / "memory", workdir=root, workflow=root / "one.yaml",
        model=OfflineChatModel(policy=policy), max_parallel=1, max_subtasks=6,
    )
    try:
        result = orch.run("x", task_id="cc") if sys.argv[2] == "run" else orch.resume("cc")
    except Interrupted as exc:
        print(exc, flush=True)
        os._exit(130)
    print(result.status, len(result.findings), flush=True)
    """
)
CALLS_PER_SUBAGENT = 5
SUBAGENTS = 6


def _calls(root) -> int:
    path = root / "calls.log"
    return len(path.read_text().splitlines()) if path.exists() else 0


@pytest.mark.parametrize(
    ("signum", "said"), [(signal.SIGINT, "Interrupted"), (signal.SIGTERM, "Terminated (SIGTERM)")]
)
def test_ctrl_c_stops_queued_and_running_subagents_and_resume_loses_nothing(tmp_path, signum, said):
    # through the Python API: SIGTERM (no handler of the program's own) stops the run as
    # Ctrl-C does
    script = tmp_path / "slow_run.py"
    script.write_text(SCRIPT)
    proc = subprocess.Popen(
        [sys.executable, str(script), str(tmp_path), "run"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while _calls(tmp_path) < 2 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.01)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, out + err  # the script's own exit code for `Interrupted`
    assert f"{said}; resume with `" in out and "resume --task cc" in out
    # the first subagent stopped at its next call, the other five never started
    assert _calls(tmp_path) < CALLS_PER_SUBAGENT + 1
    resumed = subprocess.run(
        [sys.executable, str(script), str(tmp_path), "resume"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.stdout.split() == ["done", str(SUBAGENTS)], resumed.stdout + resumed.stderr
    # the stopped subagent went on from its last finished step: no call ran twice
    assert _calls(tmp_path) == CALLS_PER_SUBAGENT * SUBAGENTS
