"""The live view of a run that continues (`resume`, `approve`) shows where the task stands
from its first frame: the phase and its number, the agents already done and the lead's
gauge against the run's own threshold, not `phase - (0/0)` and the default 150,000.

Each test stops the continued run where its graph would start (`run_graph` replaced), so
the view holds only what the run said before any node ran.
"""

from __future__ import annotations

import io
import subprocess
import sys

import pytest
from rich.console import Console

from orchestrator.api import Orchestrator
from orchestrator.cli.view import LiveView, PlainView

CMD = [sys.executable, "-m", "orchestrator.cli"]


class _GraphStarts(Exception):
    """Raised where the continued run's graph would start."""


def _stop(*_args, **_kwargs):
    raise _GraphStarts


def _view(width: int, height: int) -> LiveView:
    buffer = io.StringIO()
    view = LiveView(buffer)
    view.console = Console(
        file=buffer, width=width, height=height, force_terminal=True, color_system=None
    )
    return view


def _screen(view: LiveView) -> str:
    """What rich's refresh thread would draw now."""
    with view.console.capture() as captured:
        view.console.print(view.frame())
    return captured.get()


def _first_frame(monkeypatch, continue_run, width=100, height=30) -> tuple[str, list[dict]]:
    """The view's first frame of `continue_run(on_event)`, and the events it got."""
    screen, events, _ = _before_the_graph(monkeypatch, continue_run, width, height)
    return screen, events


def _before_the_graph(monkeypatch, continue_run, width=100, height=30):
    """The frame, the events and the view of `continue_run(on_event)` where its graph starts."""
    events: list[dict] = []
    view = _view(width, height)
    monkeypatch.setattr("orchestrator.api.run_graph", _stop)
    with pytest.raises(_GraphStarts):
        continue_run(lambda event: (events.append(event), view(event)))
    return _screen(view), events, view


def test_a_resumed_run_shows_its_phase_agents_and_threshold_at_once(
    fixture_repo, tiny_workflow, memory_dir, cli_env, monkeypatch
):
    run = [*CMD, "run", "Survey the shop", "--task", "t", "--workdir", str(fixture_repo),
           "--workflow", str(tiny_workflow), "--token-threshold", "20000",
           "--max-parallel", "1"]  # fmt: skip
    # killed in the second phase's fan-out (one agent at a time): its first subagent
    # done, the others not started
    killed = subprocess.run(
        run, env={**cli_env, "TETHER_FAULT": "subagent_before_run:5"}, capture_output=True
    )
    assert killed.returncode == -9, killed.stderr
    status = Orchestrator().status("t")
    review = {k: s["state"] for k, s in status["subtasks"].items() if k.startswith("review/")}
    assert list(review.values()).count("done") == 1 and len(review) == 3

    screen, _ = _first_frame(monkeypatch, lambda on: Orchestrator(on_event=on).resume("t"))
    assert "phase review (2/2)" in screen
    assert "1/3 agents done · 2 pending" in screen
    # the task's calls so far, not the resumed run's own (none yet); offline: nothing spent
    calls = status["usage"]["calls"]
    assert f"nothing spent · {calls:,} offline model calls" in screen and calls > 0
    assert "/20,000 ok" in screen and "150,000" not in screen
    for key, state in review.items():
        assert f"{key.split('/', 1)[1]} {state}" in screen


@pytest.mark.parametrize(("width", "height"), [(100, 30), (60, 15)])
def test_an_approved_plan_shows_its_phase_agents_and_threshold_at_once(
    fixture_repo, tmp_path, monkeypatch, width, height
):
    workflow = tmp_path / "gate.yaml"
    workflow.write_text("phases: [exploration, review]\napprove_plan: true\n")
    first = Orchestrator(workdir=fixture_repo, workflow=workflow, token_threshold=30_000)
    assert first.run("Survey the shop", task_id="g").status == "waiting"

    screen, events = _first_frame(
        monkeypatch, lambda on: Orchestrator(on_event=on).approve("g"), width, height
    )
    assert "phase exploration (1/2)" in screen
    assert "30,000" in screen or "30k" in screen  # the task's threshold, not 150,000
    assert "150" not in screen
    gauge = [e for e in events if e["event"] == "tokens" and e.get("agent") == "lead"]
    assert gauge and gauge[0]["threshold"] == 30_000 and gauge[0]["context"] > 0


def test_a_new_runs_gauge_has_the_runs_threshold_before_the_first_plan(
    fixture_repo, tiny_workflow, monkeypatch
):
    screen, _, view = _before_the_graph(
        monkeypatch,
        lambda on: Orchestrator(
            workdir=fixture_repo, workflow=tiny_workflow, token_threshold=40_000, on_event=on
        ).run("Survey the shop", task_id="n"),
    )
    assert screen == ""  # no frame before its first phase: no `phase - (0/0)`
    view({"event": "phase", "phase": "exploration", "index": 1, "total": 2})  # the plan node's
    assert "0/40,000 ok" in _screen(view)


def test_a_real_models_gauge_is_not_marked_estimated_once_the_lead_reported_usage(
    fixture_repo, tiny_workflow
):
    """The opening gauge (no lead call yet) must not leave the `~` of an estimate on the
    figures the provider reported; the threshold is the model's (75% of its window)."""
    from langchain_openai import ChatOpenAI

    from tests.orchestrator.openai_server import ScriptedOpenAI

    view, frames = _view(100, 30), []

    def on_event(event: dict) -> None:
        view(event)
        if event["event"] == "agent" and event["state"] == "running" and not frames:
            frames.append(_screen(view))  # between the lead's plan and the monitor

    with ScriptedOpenAI() as server:  # the offline policy, usage reported
        model = ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="k")
        Orchestrator(
            workdir=fixture_repo, workflow=tiny_workflow, model=model, on_event=on_event
        ).run("Survey the shop", task_id="real")
    [lead] = [ln for ln in frames[0].splitlines() if "│ lead " in ln]
    assert "/96,000 ok" in lead and "~" not in lead


def test_the_plain_view_does_not_repeat_a_phase_or_an_agent_state_told_again():
    out = io.StringIO()
    view = PlainView(out)
    phase = {"event": "phase", "phase": "review", "index": 2, "total": 2}
    pending = {"event": "agent", "key": "review/r-1", "agent": "researcher", "state": "pending"}
    for event in (phase, pending, phase, pending):
        view(event)
    view({**pending, "state": "running"})
    view({**pending, "state": "done"})
    assert out.getvalue().splitlines() == [
        "phase review (2/2)",
        "agent review/r-1 [researcher]: pending",
        "agent review/r-1 [researcher]: running",
        "agent review/r-1 [researcher]: done",
    ]


def test_a_command_refused_before_its_task_started_leaves_no_panel():
    """`run --task` of a task that exists is refused before any event: the live panel is
    erased and no closing panel of `phase - (0/0)` is left above the `Error:` line."""
    view = _view(100, 30)
    buffer = view.console.file
    with pytest.raises(ValueError), view:
        raise ValueError("task 't1' already exists")
    tail = buffer.getvalue().rsplit("\x1b", 1)[-1]  # after the live panel was erased
    assert "╭" not in tail and "phase - (0/0)" not in tail
