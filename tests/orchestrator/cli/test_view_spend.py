"""The live view shows what a run spends while it runs: the task's tokens against its
budget and its model calls, each running agent's time, steps of its budget, last tool and
tokens, the phase (and wave) with its counts and its plan's titles, a rate and the time
left; and no frame before the run said where it stands.
"""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from orchestrator.cli.view import LiveView, PlainView
from orchestrator.events import build_event


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _view(width: int = 100, height: int = 30, clock: _Clock | None = None) -> LiveView:
    buffer = io.StringIO()
    view = LiveView(buffer, clock=clock)
    view.console = Console(
        file=buffer, width=width, height=height, force_terminal=True, color_system=None
    )
    return view


def _show(view: LiveView, renderable) -> list[str]:
    with view.console.capture() as captured:
        view.console.print(renderable)
    return captured.get().rstrip("\n").splitlines()


def _send(view: LiveView, kind: str, **fields) -> None:
    view(build_event(kind, **fields))  # each event as its model defines it


def _start(view: LiveView, budget: int | None = 500_000) -> None:
    extra = {"budget_tokens": budget} if budget else {}
    _send(view, "model", name="openai:gpt-4o-mini", offline=False)
    _send(view, "start", task_id="t", objective="o", phases=["exploration", "review"],
          memory_dir="m", workdir=".", model="openai:gpt-4o-mini", offline=False,
          token_threshold=96_000, max_parallel=4, **extra)  # fmt: skip
    _send(view, "tokens", agent="lead", context=0, threshold=96_000, warning_ratio=0.8, total=0)


def _plan(view: LiveView, titles: list[str], wave: int | None = None) -> None:
    _send(view, "phase", phase="exploration", index=1, total=2,
          **({"wave": wave} if wave else {}))  # fmt: skip
    subtasks = [
        {"key": f"exploration/exploration-{i}", "agent": "researcher", "title": title}
        for i, title in enumerate(titles)
    ]
    _send(view, "plan", phase="exploration", path="plan.md", subtasks=subtasks)
    _send(view, "tokens", agent="lead", context=4_000, threshold=96_000, tokens=5_000)
    for sub in subtasks:
        _send(view, "agent", key=sub["key"], agent="researcher", state="pending",
              title=sub["title"])  # fmt: skip


def _step(view: LiveView, i: int, steps: int, tokens: int, tool: str) -> None:
    _send(view, "agent", key=f"exploration/exploration-{i}", agent="researcher",
          state="running", tokens=tokens, steps=steps, max_steps=8, tool=tool)  # fmt: skip


def test_nothing_is_drawn_before_the_run_says_where_it_stands():
    view = _view()
    _send(view, "model", name="openai:gpt-4o-mini", offline=False)
    assert _show(view, view.frame()) == []  # not `phase - (0/0)`, not `0/150,000`
    _start(view)
    assert _show(view, view.frame()) == []  # the gauge, but no phase yet
    _plan(view, ["Survey the auth flow"])
    first = "\n".join(_show(view, view.frame()))
    assert "phase exploration (1/2)" in first and "0/1 agents done · 1 pending" in first
    assert "phase -" not in first and "150,000" not in first


def test_the_task_spend_against_its_budget_and_each_running_agent():
    clock = _Clock()
    view = _view(clock=clock)
    _start(view)
    _plan(view, ["Survey the auth flow", "Map the billing module"])
    _send(view, "agent", key="exploration/exploration-0", agent="researcher", state="running",
          tokens=0)  # fmt: skip
    clock.now += 75
    _step(view, 0, 3, 12_400, "read_file")
    lines = _show(view, view.render())
    text = "\n".join(lines)
    # the lead's 5,000 and the agent's 12,400; its three calls (the lead's come with the
    # monitor's figure)
    assert "spent 17,400 / 500,000 tokens (budget) · 3 model calls" in text
    [row] = [line for line in lines if "▶" in line]
    assert "▶ exploration-0 1:15 · step 3/8 · read_file" in row
    assert row.rstrip("│ ").endswith("12,400 tok")
    assert "plan: Survey the auth flow · Map the billing module" in text
    # the monitor's figure of the whole task replaces the running sum
    _send(view, "tokens", agent="lead", context=6_000, threshold=96_000, total=40_000, calls=9)
    assert "spent 40,000 / 500,000 tokens (budget) · 9 model calls" in "\n".join(
        _show(view, view.render())
    )


def test_without_a_budget_the_spend_is_told_alone():
    view = _view()
    _start(view, budget=None)
    _plan(view, ["Survey the auth flow"])
    text = "\n".join(_show(view, view.render()))
    assert "spent 5,000 tokens" in text and "budget" not in text


def test_the_phase_line_names_its_wave_and_the_counts_are_the_phases():
    view = _view()
    _start(view)
    _plan(view, ["A", "B", "C"], wave=3)
    _send(view, "agent", key="exploration/exploration-0", agent="researcher", state="done",
          tokens=900)  # fmt: skip
    lines = _show(view, view.render())
    assert "phase exploration · wave 3 (1/2)" in lines[1]
    assert "1/3 agents done · 2 pending" in lines[2]
    # the next phase counts its own agents, the earlier ones are told apart
    _send(view, "phase", phase="review", index=2, total=2)
    _send(view, "agent", key="review/review-0", agent="researcher", state="pending")
    lines = _show(view, view.render())
    assert "phase review (2/2)" in lines[1]
    assert "0/1 agents done · 1 pending · 3 in earlier phases" in lines[2]
    plain = io.StringIO()
    PlainView(plain)(build_event("phase", phase="exploration", index=1, total=2, wave=3))
    assert plain.getvalue() == "phase exploration · wave 3 (1/2)\n"


def test_a_rate_and_the_time_left_once_agents_finished():
    clock = _Clock()
    view = _view(clock=clock)
    _start(view)
    _plan(view, [f"Part {i}" for i in range(6)])
    for i in range(2):
        _send(view, "agent", key=f"exploration/exploration-{i}", agent="researcher",
              state="running", tokens=0)  # fmt: skip
    clock.now += 60
    for i in range(2):
        _send(view, "agent", key=f"exploration/exploration-{i}", agent="researcher",
              state="done", tokens=1_000)  # fmt: skip
    line = _show(view, view.render())[2]
    # two a minute, four left: about two minutes
    assert "2/6 agents done · 4 pending · 2.0/min · ~2:00 left" in line


@pytest.mark.parametrize(("width", "height"), [(100, 30), (60, 15)])
def test_the_spend_and_a_long_plan_fit_the_terminal(width, height):
    clock = _Clock()
    view = _view(width, height, clock)
    _start(view)
    _plan(view, [f"Survey the module number {i} of the project" for i in range(40)])
    for i in range(6):
        _step(view, i, 7, 123_456, "grep_files_with_a_long_name")
    lines = _show(view, view.render())
    assert len(lines) <= height - 1 and all(len(line) <= width - 2 for line in lines)
    text = "\n".join(lines)
    assert "spent " in text and "plan: Survey the module number 0" in text
    pending = sum(1 for line in lines if line.startswith("│ · "))
    assert sum(1 for line in lines if "▶" in line) == 6  # the running agents first
    assert f"… +{34 - pending} pending" in text  # the rest counted
