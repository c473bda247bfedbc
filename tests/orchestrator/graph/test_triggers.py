"""The external-memory skill's triggers do what its front matter says: turning off
`before_spawning`, `agent_completion` or `phase_transition` stops that kind of checkpoint;
the checkpoints of a task's end (and of failures, interruptions, waits) are always written."""

from __future__ import annotations

import json

import pytest

from orchestrator.api import Orchestrator

KINDS = ("before_spawning", "agent_completion", "phase_transition")


def skill(project, off: str) -> None:
    folder = project / "skills" / "external-memory"
    folder.mkdir(parents=True)
    flags = "".join(f"  {k}: {'false' if k == off else 'true'}\n" for k in KINDS)
    (folder / "SKILL.md").write_text(
        "---\nname: external-memory\ndescription: Saves memory.\ntriggers:\n"
        f"  token_threshold: 150000\n{flags}---\n# External memory\n"
    )


@pytest.mark.parametrize("off", KINDS)
def test_a_trigger_turned_off_writes_no_checkpoint_of_its_kind(
    tmp_path, fixture_repo, tiny_workflow, memory_dir, off
):
    project = tmp_path / "project"
    skill(project, off)
    result = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow, project_dir=project).run(
        "Survey the shop", task_id="t"
    )
    assert result.status == "done"
    written = [
        json.loads(p.read_text())["extra"]["trigger"]
        for p in (memory_dir / "checkpoints").glob("cp_*.json")
    ]
    assert off not in written
    assert set(KINDS) - {off} <= set(written)  # the others still fire
    assert "task_complete" in written  # always
