"""The orchestrator refreshes `<workdir>/STATUS.md` after each phase, and never reads it back."""

from __future__ import annotations

from orchestrator import Orchestrator
from orchestrator.workdir import workdir_tools


def test_run_writes_status_md_that_the_survey_ignores(fixture_repo, tiny_workflow, memory_dir):
    (fixture_repo / "STATUS.md").write_text("Team notes: ship on Friday.\n")
    result = Orchestrator(workdir=str(fixture_repo), workflow=str(tiny_workflow)).run(
        "Survey the shop", task_id="shop"
    )
    assert result.status == "done"
    text = (fixture_repo / "STATUS.md").read_text()
    assert text.startswith("Team notes: ship on Friday.\n")
    assert "- Task: `shop`" in text
    newest = max((memory_dir / "checkpoints").glob("cp_*.json"), key=lambda p: p.stem[-22:])
    assert f"- Latest checkpoint: `checkpoints/{newest.name}`" in text
    listing = next(t for t in workdir_tools(fixture_repo) if t.name == "list_files")
    assert "STATUS.md" not in listing.invoke({"path": "."})
