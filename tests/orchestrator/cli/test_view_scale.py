"""The live view's work per event does not grow with the agents done: thousands of agents
draw a panel of the terminal's height with the rest counted, and an event never draws the
panel in the run's own thread (rich's refresh thread does, a few times a second).
"""

from __future__ import annotations

import io
import threading

import pytest
from rich.console import Console
from rich.live import Live

from orchestrator.cli.view import LiveView


def _view(width: int, height: int) -> LiveView:
    buffer = io.StringIO()
    view = LiveView(buffer)
    view.console = Console(
        file=buffer, width=width, height=height, force_terminal=True, color_system=None
    )
    return view


def _lines(view: LiveView) -> list[str]:
    with view.console.capture() as captured:
        view.console.print(view.render())
    return captured.get().rstrip("\n").splitlines()


def _agents(view: LiveView, n: int, *, running: int = 0) -> None:
    view({"event": "start", "task_id": "big", "objective": "o", "phases": ["e"], "model": "m"})
    view({"event": "phase", "phase": "exploration", "index": 1, "total": 1})
    view({"event": "tokens", "agent": "lead", "context": 900, "threshold": 150_000})
    for i in range(n):
        key = f"exploration/exploration-m{i:05d}"
        view({"event": "agent", "key": key, "agent": "researcher", "state": "pending"})
    for i in range(n):
        key = f"exploration/exploration-m{i:05d}"
        view({"event": "agent", "key": key, "agent": "researcher", "state": "running"})
        if i < n - running:
            view({"event": "agent", "key": key, "agent": "researcher", "state": "done",
                  "tokens": 1_000})  # fmt: skip


@pytest.mark.parametrize(("width", "height"), [(100, 30), (60, 15)])
def test_ten_thousand_finished_agents_fit_the_terminal_and_are_counted(width, height):
    view = _view(width, height)
    _agents(view, 10_000, running=3)
    lines = _lines(view)
    text = "\n".join(lines)
    assert len(lines) <= height - 1 and all(len(line) <= width - 2 for line in lines)
    assert "9,997/10,000 agents done · 3 running" in text
    # the running agents first (oldest first), then the newest done, the rest counted
    rows = [line for line in lines if "▶" in line or "✓" in line]
    assert "▶ exploration-m09997 0:00" in rows[0] and "exploration-m09999" in rows[2]
    assert "✓ exploration-m09996 done" in rows[3]
    [more] = [line for line in lines if "│ … +" in line]
    assert f"+{9997 - (len(rows) - 3)} done" in more


def test_an_agent_that_finishes_again_is_listed_once_as_the_newest():
    view = _view(100, 30)
    _agents(view, 5)
    again = "exploration/exploration-m00001"
    view({"event": "agent", "key": again, "agent": "researcher", "state": "done", "reused": True})
    rows = [line for line in _lines(view) if "✓" in line]
    assert len(rows) == 5 and "exploration-m00001 done" in rows[0]


def test_events_never_draw_the_panel_in_the_runs_thread(monkeypatch):
    drawn_by: list[str] = []
    refresh = Live.refresh

    def spy(self: Live) -> None:
        drawn_by.append(threading.current_thread().name)
        refresh(self)

    monkeypatch.setattr(Live, "refresh", spy)
    view = _view(100, 30)
    with view:
        _agents(view, 300)
        during = list(drawn_by)
    assert threading.main_thread().name not in during
