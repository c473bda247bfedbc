"""A backend of somebody's with only the storage contract's 14 primitives runs tether: the
task record, the artifact registry, the run lock and approvals' records come built on its
documents (`memory.contract.doc_records`), and its graph state goes to the checkpointer it is given.
It passes the contract's tests, those of the capabilities it lacks skipped by name."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest
from langgraph.checkpoint.memory import InMemorySaver

from memory.contract.base import BaseBackend
from memory.contract.capabilities import HoldsGraphState, ImportsEntries, Reindexable
from orchestrator.api import Orchestrator
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.tasks import task_lock
from orchestrator.errors import OrchestratorUserError
from tests.minimal_backend import MinimalBackend

OBJECTIVE = "Survey the shop service"
ROOT = Path(__file__).resolve().parents[3]


def test_fourteen_primitives_are_the_whole_contract():
    assert len(BaseBackend.__abstractmethods__) == 14
    backend = MinimalBackend()  # instantiable: nothing else is abstract
    assert not isinstance(backend, HoldsGraphState | Reindexable | ImportsEntries)


def test_a_task_runs_on_it_with_its_records_in_its_documents(fixture_repo, tiny_workflow):
    backend, saver = MinimalBackend(), InMemorySaver()
    orch = Orchestrator(
        backend=backend, checkpointer=saver, workdir=fixture_repo, workflow=tiny_workflow
    )
    result = orch.run(OBJECTIVE, task_id="own")
    assert result.status == "done" and result.findings
    documents = {d.path for d in backend.list_documents()}
    assert set(result.findings) <= documents and result.plan in documents
    task = backend.get_task("own")
    assert (task.status, task.data["objective"]) == ("done", OBJECTIVE)
    assert ".tether/records/tasks/own.json" in documents  # the contract's default records
    noted = {a.agent_id: a for a in backend.list_subagents("own")}
    assert {k for k in noted if k.startswith("findings:")} and all(
        a.data["runs"] == 1 for k, a in noted.items() if k.startswith("findings:")
    )

    again = Orchestrator(backend=backend, checkpointer=saver, workdir=fixture_repo)
    assert again.status("own")["status"] == "done"
    with pytest.raises(OrchestratorUserError, match="already exists"):
        again.run("Another objective", task_id="own")
    orch.close()
    assert backend.get_task("own").status == "done"  # a given backend is not closed


def test_its_run_lock_is_held_by_one_holder_at_a_time():
    backend = MinimalBackend()  # the mutex comes from the contract's leases
    held, other = threading.Event(), []
    with task_lock(Docs(backend), "own"):

        def try_it() -> None:
            try:
                with task_lock(Docs(backend), "own"):
                    other.append("got it")
            except OrchestratorUserError as exc:
                other.append(str(exc))
            held.set()

        threading.Thread(target=try_it).start()
        held.wait(10)
    assert other and "already running" in other[0]
    with task_lock(Docs(backend), "own"):  # released: the next holder gets it
        pass


def test_without_graph_state_of_its_own_it_asks_for_a_checkpointer(fixture_repo):
    with pytest.raises(OrchestratorUserError, match="MinimalBackend keeps no LangGraph state"):
        Orchestrator(backend=MinimalBackend(), workdir=fixture_repo)


def test_it_passes_the_contract_tests_and_skips_the_capabilities_it_lacks(tmp_path):
    module = tmp_path / "test_minimal.py"
    module.write_text(
        textwrap.dedent(
            """
            import pytest
            from memory.backends.conformance import *  # noqa: F403
            from tests.minimal_backend import MinimalBackend

            @pytest.fixture
            def backend():
                with MinimalBackend() as opened:
                    yield opened
            """
        )
    )
    ran = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", "-n", "0",
         str(module)],
        capture_output=True, text=True, timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert ran.returncode == 0, ran.stdout + ran.stderr
    passed = int(re.search(r"(\d+) passed", ran.stdout).group(1))
    assert passed >= 24 and "failed" not in ran.stdout
    skipped = set(re.findall(r"MinimalBackend is not (\w+)", ran.stdout))
    assert skipped == {"HoldsGraphState", "ImportsEntries", "Reindexable"}
