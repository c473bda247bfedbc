"""A snapshot or checkpoint written after a crash counts every findings file on disk: the
subagents that finished in the step the kill interrupted are in the artifact registry, not
yet in LangGraph's state, and `handoff` and `checkpoint now` must not report them pending."""

from __future__ import annotations

import json
import re
import subprocess
import sys

CMD = [sys.executable, "-m", "orchestrator.cli"]


def test_handoff_and_checkpoint_after_a_kill_count_every_finding(
    fixture_repo, tiny_workflow, cli_env, memory_dir
):
    killed = subprocess.run(
        [*CMD, "run", "Survey the shop", "--task", "k", "--workdir", str(fixture_repo),
         "--workflow", str(tiny_workflow), "--max-parallel", "1"],
        env={**cli_env, "TETHER_FAULT": "subagent_after_findings:2"},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert killed.returncode == -9
    on_disk = sorted(p.name for p in (memory_dir / "findings").glob("researcher-*.md"))
    assert len(on_disk) == 2
    snap = subprocess.run([*CMD, "handoff", "--task", "k"], env=cli_env, capture_output=True,
                          text=True, timeout=60)  # fmt: skip
    assert snap.returncode == 0, snap.stderr
    text = open(snap.stdout.strip()).read()
    found = text.split("## What Was Found", 1)[1].split("\n## ", 1)[0]
    assert re.search(r"\b2 finding\(s\)", found), found
    left = text.split("## What Is Left", 1)[1].split("\n## ", 1)[0]
    done_keys = [json.loads(p.read_text().rsplit("<!-- tether:findings ", 1)[1][:-5])["subtask_id"]
                 for p in (memory_dir / "findings").glob("researcher-*.md")]  # fmt: skip
    assert all(key not in left for key in done_keys), left
    now = subprocess.run([*CMD, "checkpoint", "now", "--task", "k"], env=cli_env,
                         capture_output=True, text=True, timeout=60)  # fmt: skip
    assert now.returncode == 0, now.stderr
    cp = json.loads(open(now.stdout.strip()).read())
    assert set(done_keys) <= set(cp["state"]["completed_subtasks"])
    assert cp["state"]["findings_count"] == 2
