"""The write tools under attack (issue 42): call ids that repeat, files a read refuses,
parallel writers of one file, what the run itself executes, a folder swapped for a link,
FIFOs, and names with a newline.

Runs go through the real `langchain-openai` client against the scripted server
(`openai_server.py`); the writer tools are also called through `WorkdirWriter`, the
logic of `write_file` and `edit_file`, with the files on disk and the memory checked.
"""

from __future__ import annotations

import multiprocessing
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from langchain_core.messages import AIMessage, ToolMessage
from langchain_openai import ChatOpenAI

from memory import MemoryStore
from orchestrator.api import Orchestrator
from orchestrator.graph.written import files_written
from orchestrator.tools import workdir_write
from orchestrator.tools.workdir_write import BACKUP_TAG, WorkdirWriter
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask, tool_answers

REPO = Path(__file__).parents[3]
WRITER_WF = """
phases: [implementation]
agents:
  writer:
    description: Edits files.
    prompt: AGENT=writer
    tools: [read_file, write_file, edit_file]
"""


def client(server: ScriptedOpenAI) -> ChatOpenAI:
    return ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="k", max_retries=0)


def backups(store: MemoryStore) -> list[tuple[list[str], str]]:
    return [(e.tags, store.fetch(e.id)) for e in store.list_entries(tag=BACKUP_TAG, limit=None)]


class TestRepeatedCallIds:
    """Item 2: a provider that numbers its calls `call_0` in every reply."""

    def run(self, tmp_path: Path, work: Path, steps: list, task: str) -> None:
        wf = tmp_path / "wf.yaml"
        wf.write_text(WRITER_WF)
        responder = agents(one_subtask("writer"), {"writer": steps})
        with ScriptedOpenAI(responder=responder, call_ids="position") as server:
            orch = Orchestrator(workdir=work, workflow=wf, model=client(server))
            assert orch.run("Edit the files", task_id=task).status == "done"

    def test_an_edit_of_another_file_never_passes_for_a_replay(self, tmp_path, memory_dir):
        work = tmp_path / "work"
        work.mkdir()
        (work / "a.txt").write_text("alpha: x\n")
        (work / "b.txt").write_text("beta: x\n")
        # two tasks, one conversation: the same call id `call_0` edits a.txt, then b.txt
        steps_a = [{"tool": "edit_file", "args": {"path": "a.txt", "old": "x", "new": "y"}}]
        steps_b = [{"tool": "edit_file", "args": {"path": "b.txt", "old": "x", "new": "y"}}]
        self.run(tmp_path, work, [*steps_a, findings("Edited a.")], "task-a")
        self.run(tmp_path, work, [*steps_b, findings("Edited b.")], "task-b")
        assert (work / "a.txt").read_text() == "alpha: y\n"
        assert (work / "b.txt").read_text() == "beta: y\n"  # not rebuilt from a.txt's backup
        with MemoryStore(memory_dir) as store:
            saved = {text for _tags, text in backups(store)}
        assert {"alpha: x\n", "beta: x\n"} <= saved  # each file's own previous content

    def test_a_users_change_since_is_backed_up_not_overwritten(self, tmp_path, memory_dir):
        work = tmp_path / "work"
        work.mkdir()
        (work / "notes.txt").write_text("first notes\n")
        write = {"tool": "write_file", "args": {"path": "notes.txt", "content": "agent notes\n"}}
        self.run(tmp_path, work, [write, findings("Wrote.")], "task-1")
        (work / "notes.txt").write_text("agent notes\nthe user's own line\n")
        self.run(tmp_path, work, [write, findings("Wrote.")], "task-2")
        assert (work / "notes.txt").read_text() == "agent notes\n"
        with MemoryStore(memory_dir) as store:
            saved = backups(store)
        mine = [tags for tags, text in saved if text == "agent notes\nthe user's own line\n"]
        assert mine and "task:task-2" in mine[0]  # the user's line is kept, by task 2
        assert {"call:call_0", "file:notes.txt", "agent:writer"} <= set(mine[0])


def test_the_files_read_file_refuses_are_never_written(tmp_path, memory_dir):
    """Item 6: `.env` (and a skipped folder) stay as they are; no secret reaches memory."""
    (tmp_path / ".env").write_text("OPENAI_API_KEY=sk-secret\n")
    (tmp_path / "node_modules").mkdir()
    with MemoryStore(memory_dir) as store:
        writer = WorkdirWriter(tmp_path, store)
        for path in (".env", ".env.local", "node_modules/x.js", "sub/.envrc"):
            with pytest.raises(PermissionError, match="excluded from the file tools|kept from"):
                writer.write_file(path, "X=1\n", call_id="c1")
        with pytest.raises(PermissionError, match="kept from agents"):
            writer.edit_file(".env", "sk-secret", "sk-other", call_id="c2")
        assert store.list_entries(limit=None) == []
        assert store.search("sk-secret") == []
    assert (tmp_path / ".env").read_text() == "OPENAI_API_KEY=sk-secret\n"
    assert not (tmp_path / ".env.local").exists() and not (tmp_path / "sub").exists()


def _writer_process(root: str, memory: str, name: str, rounds: int, barrier) -> None:
    with MemoryStore(memory) as store:
        writer = WorkdirWriter(root, store)
        barrier.wait(60)  # all three write at once, not one after the other's start-up
        for i in range(rounds):
            writer.write_file("shared.txt", f"{name} {i}\n", call_id=f"{name}-{i}")


def test_parallel_writers_of_one_file_each_back_up_what_they_replace(tmp_path, memory_dir):
    """Item 7: three processes write one file at once; every content written is either the
    file's last content or the previous content of exactly one backup."""
    (tmp_path / "shared.txt").write_text("original\n")
    MemoryStore(memory_dir).close()
    ctx = multiprocessing.get_context("spawn")
    names, rounds = ("a", "b", "c"), 40
    barrier = ctx.Barrier(len(names))
    procs = [
        ctx.Process(
            target=_writer_process, args=(str(tmp_path), str(memory_dir), n, rounds, barrier)
        )
        for n in names
    ]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    with MemoryStore(memory_dir) as store:
        saved = sorted(text for _tags, text in backups(store))
    final = (tmp_path / "shared.txt").read_text()
    written = sorted(["original\n"] + [f"{n} {i}\n" for n in names for i in range(rounds)])
    assert sorted([*saved, final]) == written  # nothing lost, nothing backed up twice


def test_the_runs_own_files_in_the_workdir_are_never_written(tmp_path, memory_dir):
    """Item 12: the workflow file, a prompt file, a python_tools module, skills/ and
    templates/ inside the workdir are refused to an agent's write tools."""
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "writer.md").write_text("AGENT=writer\n")
    (tmp_path / "mytools.py").write_text('def ping() -> str:\n    """Ping."""\n    return "pong"\n')
    (tmp_path / "skills").mkdir()
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        "phases: [implementation]\npython_tools: ['mytools:ping']\nagents:\n  writer:\n"
        "    prompt_file: prompts/writer.md\n    tools: [write_file, ping]\n"
    )
    shell = "mcp_servers:\n  evil: {command: sh, args: [-c, 'touch /tmp/pwned']}\n"
    paths = ["wf.yaml", "prompts/writer.md", "mytools.py", "skills/x/SKILL.md", "templates/a.j2"]
    calls = [{"tool": "write_file", "args": {"path": p, "content": shell}} for p in paths]
    steps = {"writer": [{"calls": calls}, findings("Tried.")]}
    with ScriptedOpenAI(responder=agents(one_subtask("writer"), steps)) as server:
        orch = Orchestrator(
            workdir=tmp_path, workflow=wf, model=client(server), project_dir=tmp_path
        )
        assert orch.run("Change things", task_id="own").status == "done"
        answers = {a for body in server.requests for a in tool_answers(body)}
    refused = [a for a in answers if "an agent never changes what the run itself" in a]
    assert len(refused) == len(paths), answers
    assert "mcp_servers" not in wf.read_text()
    assert not (tmp_path / "skills" / "x").exists() and not (tmp_path / "templates").exists()


def test_a_continued_task_refuses_a_workflow_changed_since_it_started(tmp_path, cli_env):
    """Item 12: the workflow file changed between `run` and `resume` is one Error line
    naming it, and nothing starts."""
    wf = tmp_path / "wf.yaml"
    wf.write_text("phases: [exploration, review]\n")
    (tmp_path / "a.md").write_text("# A\nSome text.\n")
    cmd = [sys.executable, "-m", "orchestrator.cli"]
    run = subprocess.run(
        [*cmd, "run", "Survey", "--task", "wfc", "--workdir", str(tmp_path), "--workflow",
         str(wf)], env={**cli_env, "TETHER_FAULT": "merge_after_write"}, capture_output=True,
        text=True, timeout=120, cwd=REPO,
    )  # fmt: skip
    assert run.returncode == -9, run.stderr  # killed mid-run: a task to continue
    before = sorted(p.name for p in (tmp_path / "memory" / "checkpoints").iterdir())
    wf.write_text("phases: [exploration, review]\nmcp_servers:\n  x: {command: 'true'}\n")
    resumed = subprocess.run(
        [*cmd, "resume", "--task", "wfc"], env=cli_env, capture_output=True, text=True,
        timeout=120, cwd=REPO,
    )  # fmt: skip
    assert resumed.returncode == 1
    lines = resumed.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: ") and str(wf) in lines[0]
    assert "changed since the task started" in lines[0]
    assert sorted(p.name for p in (tmp_path / "memory" / "checkpoints").iterdir()) == before


def test_a_folder_swapped_for_a_link_after_the_check_is_refused(tmp_path, memory_dir, monkeypatch):
    """Item 20: the folder is replaced by a symlink out at the worst moment (right after
    the path was confined); nothing is written outside the workdir."""
    work, outside = tmp_path / "work", tmp_path / "outside"
    (work / "sub").mkdir(parents=True)
    outside.mkdir()
    real_confine = workdir_write.confine

    def confine_then_swap(root, raw, **kw):
        found = real_confine(root, raw, **kw)
        (work / "sub").rename(work / "sub-old")
        (work / "sub").symlink_to(outside)
        return found

    monkeypatch.setattr(workdir_write, "confine", confine_then_swap)
    with MemoryStore(memory_dir) as store:
        writer = WorkdirWriter(work, store)
        with pytest.raises(PermissionError, match="changed while it was opened"):
            writer.write_file("sub/new.txt", "escaped?\n", call_id="c1")
    assert list(outside.iterdir()) == []


def _in_thread(fn, *args) -> tuple[bool, object]:
    """`(finished within 10 s, result or exception)`."""
    box: dict = {}

    def target():
        try:
            box["out"] = fn(*args)
        except Exception as exc:  # noqa: BLE001 - the test looks at it
            box["out"] = exc

    t = threading.Thread(target=target, daemon=True)
    t.start()
    t.join(10)
    return not t.is_alive(), box.get("out")


def _release(fifo: Path) -> None:
    """Unblock a reader stuck on `fifo` (the code under test before the fix)."""
    try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
    except OSError:
        pass


def test_a_fifo_is_refused_by_the_write_tools_without_blocking(tmp_path, memory_dir):
    """Item 8: `write_file` and `edit_file` on a FIFO answer at once."""
    fifo = tmp_path / "pipe.txt"
    os.mkfifo(fifo)
    with MemoryStore(memory_dir) as store:
        writer = WorkdirWriter(tmp_path, store)
        for call in (lambda: writer.write_file("pipe.txt", "x"), lambda: writer.edit_file(
                "pipe.txt", "a", "b")):  # fmt: skip
            done, out = _in_thread(call)
            if not done:
                _release(fifo)
            assert done, "the write blocked on the FIFO"
            assert isinstance(out, ValueError) and "not a regular file" in str(out)
    assert fifo.is_fifo()


def test_a_written_name_with_a_newline_is_in_the_files_written(tmp_path, memory_dir):
    """Item 21: a write to `a\\nb.txt` is in `files_written`, from the tools' outcomes."""
    with MemoryStore(memory_dir) as store:
        writer = WorkdirWriter(tmp_path, store)
        created, made = writer.write_file("odd\nname.txt", "one\n", call_id="c1")
        modified, changed = writer.write_file("odd\nname.txt", "two\n", call_id="c2")
    transcript = [
        AIMessage("", tool_calls=[{"name": "write_file", "args": {}, "id": "c1"}]),
        ToolMessage(created, tool_call_id="c1", artifact=made),
        AIMessage("", tool_calls=[{"name": "write_file", "args": {}, "id": "c2"}]),
        ToolMessage(modified, tool_call_id="c2", artifact=changed),
    ]
    assert [w.path for w in files_written(transcript)] == ["odd\nname.txt"]
    assert files_written(transcript)[0].description == "created"
    assert changed is not None and changed["change"] == "modified"
