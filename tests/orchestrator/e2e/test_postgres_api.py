"""`Orchestrator(memory_url=...)`: a task whose whole memory is in PostgreSQL.

Nothing is written to a memory directory: plans, findings, snapshots, checkpoints, the task
list and the registry are documents of the backend, and graph state is in `PostgresSaver`.
`memory export` turns that memory into the tree people read, and that tree is an ordinary
memory directory: `orchestrator status` on it says what the run on PostgreSQL said.
"""

from __future__ import annotations

import psycopg
from click.testing import CliRunner

from memory.cli.app import cli as memory_cli
from orchestrator.api import Orchestrator
from orchestrator.artifacts.findings import read_findings
from orchestrator.artifacts.usage import usage_path
from orchestrator.recovery.status import task_status
from tests.pg import private_schema


def test_a_run_on_postgres_writes_no_files_and_exports_as_a_memory_directory(
    tmp_path, fixture_repo, tiny_workflow, memory_dir
):
    with private_schema() as url:
        with Orchestrator(workdir=fixture_repo, workflow=tiny_workflow, memory_url=url) as orch:
            result = orch.run("Survey the shop service", task_id="shop")
            on_postgres = orch.status("shop")
        assert result.status == "done" and result.findings
        assert result.memory_dir.startswith("postgresql://")
        assert not memory_dir.exists()  # the memory directory default was never touched

        with psycopg.connect(url) as conn:
            paths = {r[0] for r in conn.execute("SELECT path FROM tether_documents")}
            threads = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
        assert set(result.findings) <= paths and result.plan in paths
        # records are rows; the usage journal is an append-only document, in the database too
        assert not any(p.startswith(".tether/") for p in paths - {usage_path("shop")})
        assert usage_path("shop") in paths
        with psycopg.connect(url) as conn:
            [(status, objective)] = conn.execute(
                "SELECT status, data->>'objective' FROM tether_tasks WHERE task_id = 'shop'"
            ).fetchall()
            keys = {r[0] for r in conn.execute("SELECT agent_id FROM tether_subagents")}
        assert (status, objective) == ("done", "Survey the shop service")
        assert {k for k in keys if k.startswith("findings:")} and len(keys) >= len(result.findings)
        assert set(result.checkpoints) <= paths and set(result.snapshots) <= paths
        assert threads > 0  # graph state went to PostgresSaver

        out = tmp_path / "exported"
        exported = CliRunner().invoke(memory_cli, ["--memory-url", url, "export", str(out)])
        assert exported.exit_code == 0, exported.output

    for rel in result.findings:
        assert read_findings(out / rel)["task_id"] == "shop"
    on_disk = task_status(out, "shop")
    for key in ("task_id", "status", "phase", "phases", "subtasks", "findings", "tokens"):
        assert on_disk[key] == on_postgres[key], key
    assert on_postgres["memory_dir"].startswith("postgresql://")
    assert on_postgres["resume"] is None  # done
    assert on_disk["latest_checkpoint"] == str(out / result.checkpoints[0])
