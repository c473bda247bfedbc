"""A phase runs in waves: the lead plans a wave, its subagents run, their findings merge, and
the lead plans the next wave of the same phase, seeing what was covered, until it says the
phase is complete; nothing in the task grows faster than its work.

Through the `orchestrator` command and the real `langchain-openai` client against the
scripted server. The scripted lead documents one module per subtask: it reads the
`Covered:` line tether gives it, plans the first `max_subtasks` modules no earlier wave
took, and asks for another wave (`continue_phase`) while modules are left.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from tests.orchestrator.openai_server import ScriptedOpenAI, prompt_tokens
from tests.orchestrator.scripted_agents import WAVE, offered, project, responder, subagent_starts

REPO = Path(__file__).resolve().parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]


def orch(*args: str, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run([*CMD, *args], env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture
def env(cli_env) -> dict:
    return {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1", "OPENAI_API_KEY": "sk-test",
            "PYTHONPATH": str(REPO)}  # fmt: skip


def run_task(root: Path, env: dict, task: str, *extra: str) -> subprocess.CompletedProcess:
    return orch(
        "run", "Document every module", "--task", task, "--workdir", str(root),
        "--workflow", str(root / "wf.yaml"), "--model", "openai:gpt-4o-mini",
        "--memory-dir", str(root / "memory"), *extra, env=env,
    )  # fmt: skip


def covered_modules(memory: Path, task: str) -> Counter:
    """How many findings files of `task` document each module (by their subtask)."""
    seen: Counter = Counter()
    for path in (memory / "findings").glob("writer-*.md"):
        meta = json.loads(path.read_text().rsplit("<!-- tether:findings ", 1)[1][:-5])
        if meta["task_id"] == task:
            module = re.match(r"\w+/(m\d\d)", meta["subtask_id"]).group(1)
            seen[f"mods/{module}.py"] += 1
    return seen


def plan_requests(server: ScriptedOpenAI) -> list[dict]:
    return [b for b in server.requests if "PhasePlan" in offered(b)]


def bytes_under(folder: Path, skip: tuple[str, ...] = ()) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file()
               and not any(s in p.parts for s in skip))  # fmt: skip


def test_forty_modules_are_covered_in_waves_and_nothing_grows_faster_than_the_work(tmp_path, env):
    sizes = {}
    for modules in (20, 40):
        root = project(tmp_path / f"p{modules}", modules)
        with ScriptedOpenAI(responder=responder(modules)) as server:
            env["OPENAI_BASE_URL"] = server.base_url
            done = run_task(root, env, f"w{modules}")
            assert done.returncode == 0, done.stdout + done.stderr
            plans = plan_requests(server)
            starts = subagent_starts(server.requests)
        memory = root / "memory"
        covered = covered_modules(memory, f"w{modules}")
        assert sorted(covered) == [f"mods/m{i:02d}.py" for i in range(modules)]
        assert set(covered.values()) == {1}  # one finding each
        assert set(starts.values()) == {1}  # no subagent ran twice
        waves = modules // WAVE
        assert len(plans) == waves  # the last wave asked for no more
        info = json.loads(orch("status", "--task", f"w{modules}", "--json",
                               "--memory-dir", str(memory), env=env).stdout)  # fmt: skip
        assert info["status"] == "done" and info["answer"]
        assert info["findings"] == modules
        # the lead's prompt does not grow with the waves
        tokens = [prompt_tokens(b) for b in plans]
        assert tokens[-1] <= 1.5 * tokens[1], tokens
        plan_file = (memory / "research_plans" / f"w{modules}.md").read_text()
        assert f"- Waves: documentation: {waves} waves, {modules} subtasks" in plan_file
        sizes[modules] = (
            bytes_under(memory / "checkpoints") / modules,
            bytes_under(memory, skip=(".langgraph",)) / modules,
        )
    assert waves >= 8
    checkpoint_ratio = sizes[40][0] / sizes[20][0]
    memory_ratio = sizes[40][1] / sizes[20][1]
    assert checkpoint_ratio <= 1.3, sizes
    assert memory_ratio <= 1.3, sizes


@pytest.mark.parametrize("fault", ["subagent_after_findings:12", "plan_after_write:4",
                                   "advance_before_wave:3"])  # fmt: skip
def test_a_run_killed_mid_wave_or_mid_plan_resumes_and_covers_every_module_once(
    tmp_path, env, fault
):
    modules = 40
    root = project(tmp_path, modules)
    with ScriptedOpenAI(responder=responder(modules)) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        killed = run_task(root, {**env, "TETHER_FAULT": fault}, "k", "--max-parallel", "2")
        assert killed.returncode == -9, killed.stdout + killed.stderr
        before = subagent_starts(server.requests)
        resumed = orch("resume", "--task", "k", "--memory-dir", str(root / "memory"), env=env)
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        starts = subagent_starts(server.requests)
    covered = covered_modules(root / "memory", "k")
    assert sorted(covered) == [f"mods/m{i:02d}.py" for i in range(modules)]
    assert set(covered.values()) == {1}
    # only the subagents in flight at the kill (at most --max-parallel) ran again
    again = [m for m, n in starts.items() if n > 1]
    assert len(again) <= 2 and all(before[m] == 1 for m in again)


def test_max_waves_ends_the_phase_with_a_line_saying_so(tmp_path, env):
    root = project(tmp_path, 40)
    with ScriptedOpenAI(responder=responder(40)) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        done = run_task(root, env, "capped", "--max-waves", "3")
        assert done.returncode == 0, done.stdout + done.stderr
        assert len(plan_requests(server)) == 3
    assert "max_waves (3) reached" in done.stdout + done.stderr
    assert len(covered_modules(root / "memory", "capped")) == 3 * WAVE


def test_a_budget_stop_between_waves_resumes_into_the_next_wave(tmp_path, env):
    modules = 20
    root = project(tmp_path, modules)
    with ScriptedOpenAI(responder=responder(modules)) as server:
        env["OPENAI_BASE_URL"] = server.base_url
        stopped = run_task(root, env, "b", "--budget-tokens", "8250", "--max-parallel", "1")
        assert stopped.returncode == 6, stopped.stdout + stopped.stderr
        part = covered_modules(root / "memory", "b")
        # wave 1 (five subagents, ~1.4K tokens each, one at a time) spends ~7.9-8.6K:
        # the budget is reached between the waves, before the lead plans wave 2
        assert len(part) == WAVE, stopped.stdout
        assert "before lead's next model call" in stopped.stdout
        resumed = orch("resume", "--task", "b", "--budget-tokens", "10000000",
                       "--memory-dir", str(root / "memory"), env=env)  # fmt: skip
        assert resumed.returncode == 0, resumed.stdout + resumed.stderr
        starts = subagent_starts(server.requests)
    covered = covered_modules(root / "memory", "b")
    assert sorted(covered) == [f"mods/m{i:02d}.py" for i in range(modules)]
    assert set(covered.values()) == {1}
    assert sum(n > 1 for n in starts.values()) <= 1  # the one in flight at the stop
