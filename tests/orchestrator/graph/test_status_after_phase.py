"""`<workdir>/STATUS.md` is written only when asked (`--status-file`, `status_file: true` in
the workflow, `Orchestrator(status_file=True)`): then the orchestrator refreshes it after
each phase and never reads it back; otherwise a run leaves the workdir as it found it."""

from __future__ import annotations

from click.testing import CliRunner

from orchestrator import Orchestrator
from orchestrator.cli.app import cli
from orchestrator.tools.workdir import workdir_tools


def tree(root):
    """Every file under `root` with its bytes."""
    return {p.relative_to(root): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_run_writes_status_md_that_the_survey_ignores(fixture_repo, tiny_workflow, memory_dir):
    (fixture_repo / "STATUS.md").write_text("Team notes: ship on Friday.\n")
    result = Orchestrator(
        workdir=str(fixture_repo), workflow=str(tiny_workflow), status_file=True
    ).run("Survey the shop", task_id="shop")
    assert result.status == "done"
    text = (fixture_repo / "STATUS.md").read_text()
    assert text.startswith("Team notes: ship on Friday.\n")
    assert "- Task: `shop`" in text
    newest = max((memory_dir / "checkpoints").glob("cp_*.json"), key=lambda p: p.stem[-22:])
    assert f"- Latest checkpoint: `checkpoints/{newest.name}`" in text
    listing = next(t for t in workdir_tools(fixture_repo) if t.name == "list_files")
    assert "STATUS.md" not in listing.invoke({"path": "."})


def test_a_run_not_asked_leaves_the_workdir_untouched(fixture_repo, tiny_workflow):
    before = tree(fixture_repo)
    run = ["run", "Survey the shop", "--task", "t", "--workdir", str(fixture_repo)]
    done = CliRunner().invoke(cli, [*run, "--workflow", str(tiny_workflow)])
    assert done.exit_code == 0, done.output
    assert tree(fixture_repo) == before


def test_the_flag_or_the_workflow_asks_for_it(fixture_repo, tmp_path):
    asked = tmp_path / "asked.yaml"
    asked.write_text("phases: [exploration]\nstatus_file: true\n")
    plain = tmp_path / "plain.yaml"
    plain.write_text("phases: [exploration]\n")
    status = fixture_repo / "STATUS.md"
    for task, workflow, flag in (("w", asked, []), ("f", plain, ["--status-file"])):
        status.unlink(missing_ok=True)
        run = ["run", "Survey the shop", "--task", task, "--workdir", str(fixture_repo)]
        done = CliRunner().invoke(cli, [*run, "--workflow", str(workflow), *flag])
        assert done.exit_code == 0, done.output
        assert f"- Task: `{task}`" in status.read_text(), (task, flag)
