"""`memory prune` keeps what a user or a live task still needs (issue 42 item 13): the
previous contents of files an agent overwrote, and every entry a task that is not done
cites; and it says what each removed entry was.

An agent's real write (the real `langchain-openai` client against the scripted server)
makes the backup; tasks and their registry records are made through the orchestrator's
task list and artifact registry; `memory prune` runs as a user's shell runs it.
"""

from __future__ import annotations

import subprocess
import sys

from langchain_openai import ChatOpenAI

from memory import MemoryStore
from orchestrator.api import Orchestrator
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.registry import registry_note
from orchestrator.artifacts.tasks import TaskList
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask

WRITER = """
phases: [implementation]
agents:
  writer:
    prompt: AGENT=writer
    tools: [write_file]
"""


def memory(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "memory", *args], env=env, capture_output=True, text=True,
        timeout=60,
    )  # fmt: skip


def test_prune_keeps_backups_and_what_live_tasks_cite(tmp_path, memory_dir, cli_env):
    work = tmp_path / "work"
    work.mkdir()
    (work / "notes.txt").write_text("mine\n")  # a 3-token file: the only copy of it
    (tmp_path / "wf.yaml").write_text(WRITER)
    write = {"tool": "write_file", "args": {"path": "notes.txt", "content": "agent's\n"}}
    steps = {"writer": [write, findings("Rewrote the notes.")]}
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), steps)) as server:
        model = ChatOpenAI(model="m", base_url=server.base_url, api_key="k", max_retries=0)
        done = Orchestrator(workdir=work, workflow=tmp_path / "wf.yaml", model=model).run(
            "Rewrite the notes", task_id="done-task"
        )
    assert done.status == "done"
    with MemoryStore(memory_dir) as store:
        [backup] = store.list_entries(tag="previous-content", limit=None)
        offload = store.log("a long tool result of the live task", tags=["task:live"])
        cited = store.log("a test log the live task's findings cite", type="output")
        plain = store.log("an old scratch note nobody needs\nsecond line", tags=["scratch"])
        docs = Docs.of(store)
        TaskList(docs).note("live", objective="Keep going", status="failed")
        registry_note(docs, "live", "findings:x/y", findings={"summary": f"See {cited.id}."})
    pruned = memory("prune", "--keep-entries", "0", env=cli_env)
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.splitlines() == [
        f"Removed: {plain.id} (output [scratch]: 'an old scratch note nobody needs', "
        f"{plain.tokens} tokens, {plain.created_at})",
        "Removed 1 entry.",
    ]
    with MemoryStore(memory_dir) as store:
        left = {e.id for e in store.list_entries(limit=None)}
        assert store.fetch(backup.id) == "mine\n"
    assert left == {backup.id, offload.id, cited.id}
    # the findings of the done task still cite a backup that exists
    assert backup.id in (memory_dir / done.findings[0]).read_text()
