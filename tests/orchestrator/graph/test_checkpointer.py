"""`Orchestrator(checkpointer=...)`: graph state goes to the injected LangGraph checkpointer.

With LangGraph's `PostgresSaver` (opened by `memory.backends.savers.open_postgres_saver` on a
private schema) a run keeps its super-steps in PostgreSQL and creates no SQLite state file;
the saved state is the finished run's, pruned to its last checkpoint. An unreachable server
is one error naming the URL without its password.
"""

from __future__ import annotations

import pytest

from memory.backends.savers import open_postgres_saver
from memory.contract.base import StorageError
from orchestrator import Orchestrator
from tests.pg import private_schema


def test_a_run_checkpoints_into_postgres_and_not_sqlite(fixture_repo, tiny_workflow, memory_dir):
    with private_schema() as url:
        saver = open_postgres_saver(url)
        try:
            orch = Orchestrator(workdir=fixture_repo, workflow=tiny_workflow, checkpointer=saver)
            result = orch.run("Survey the shop service", task_id="pg-run")
            saved = saver.get_tuple({"configurable": {"thread_id": "pg-run"}})
            steps = list(saver.list({"configurable": {"thread_id": "pg-run"}}))
        finally:
            saver.conn.close()
    assert result.findings
    assert saved is not None and saved.checkpoint["channel_values"]["task_id"] == "pg-run"
    # a checkpoint per super-step (durability "sync"), of which the finished task keeps
    # its last (`PostgresSaver.prune`, `orchestrator.graph.pruning`)
    assert saved.metadata["step"] > 3 and len(steps) == 1
    assert not (memory_dir / ".langgraph" / "state.sqlite").exists()


def test_unreachable_postgres_saver_names_the_url_without_password():
    with pytest.raises(StorageError) as err:
        open_postgres_saver("postgresql://postgres:s3cret@127.0.0.1:1/test")
    assert "postgres:***@127.0.0.1:1" in str(err.value) and "s3cret" not in str(err.value)
