"""The live view fits the terminal: the gauge and the done/total line never scroll away.

The panel is rendered through rich into consoles of fixed sizes (as tmux panes of 60x15,
80x24 and 120x40 would show it) with 30 agents in every state.
"""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from orchestrator.cli.view import LiveView, PlainView


class _Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def _view(width: int, height: int, clock: _Clock | None = None) -> tuple[LiveView, io.StringIO]:
    buffer = io.StringIO()
    view = LiveView(buffer, clock=clock)
    view.console = Console(
        file=buffer, width=width, height=height, force_terminal=True, color_system=None
    )
    return view, buffer


def _feed(view: LiveView, agents: int = 30) -> None:
    view({"event": "start", "task_id": "t1", "objective": "o", "phases": ["e"], "model": "m"})
    view({"event": "phase", "phase": "exploration", "index": 1, "total": 2})
    states = ["done"] * 18 + ["pending"] * 10 + ["running", "failed"]
    for i, state in enumerate(states[:agents]):
        key = f"exploration/exploration-pkg{i:02d}"
        view({"event": "agent", "key": key, "agent": "researcher", "state": "pending"})
        extra = {"error": "RuntimeError: provider timed out"} if state == "failed" else {}
        view({"event": "agent", "key": key, "agent": "researcher", "state": state, **extra})
    view({"event": "tokens", "agent": "lead", "context": 1968, "threshold": 150_000,
          "warning_ratio": 0.8, "total": 31_200, "calls": 12})  # fmt: skip
    view({"event": "checkpoint", "trigger": "before_spawning", "path": "/m/cp.json"})


def _lines(view: LiveView) -> list[str]:
    with view.console.capture() as captured:
        view.console.print(view.render())
    return captured.get().rstrip("\n").splitlines()


@pytest.mark.parametrize(("width", "height"), [(60, 15), (80, 24), (120, 40)])
def test_the_head_always_shows_and_the_panel_fits(width, height):
    view, _ = _view(width, height)
    _feed(view)
    lines = _lines(view)
    assert len(lines) <= height - 1  # the panel never scrolls its own top off
    assert all(len(line) <= width - 2 for line in lines)  # room for the `^C` echo
    text = "\n".join(lines)
    assert lines[0].startswith("╭─ tether · t1 ")
    assert "phase exploration (1/2)" in lines[1]
    assert "18/30 agents done · 1 running · 1 failed · 10 pending" in lines[2]
    assert re.search(r"lead [█░]{24} 1,968/150,000 ok", lines[3])
    assert "spent 31,200 tokens · 12 model calls" in lines[4]  # the task's spend
    # the running and the failed agent come first, with the failure's error
    assert "▶ exploration-pkg28 0:00" in lines[5]
    assert "✗ exploration-pkg29 failed: Runtime" in lines[6]
    if height == 15:
        assert "│ … +6 pending, +18 done " in text
    if height == 40:  # every agent has its row
        assert sum(1 for line in lines if "exploration-pkg" in line) == 30
        assert " done, +" not in text and "+18 done" not in text


def test_a_tiny_terminal_keeps_the_count_and_the_gauge():
    view, _ = _view(60, 5)
    _feed(view)
    lines = _lines(view)
    assert len(lines) == 4
    assert "18/30 agents done" in lines[1] and "lead " in lines[2]


@pytest.mark.parametrize(
    ("width", "gauge"),
    [
        (50, r"│ lead [█░]{22} 1,968/150,000 ok │"),  # the bar narrows first
        (42, r"│ lead [█░]{14} 1,968/150,000 ok │"),
        (28, r"│ lead 1,968/150,000 ok  │"),  # then it goes
        (22, r"│ lead 2k/150k ok  │"),  # then the numbers shorten
    ],
)
def test_a_narrow_terminal_keeps_the_gauges_label_and_numbers(width, gauge):
    view, _ = _view(width, 12)
    _feed(view)
    lines = _lines(view)
    assert all(len(line) <= width - 2 for line in lines)
    assert any(re.fullmatch(gauge, line) for line in lines), lines


@pytest.mark.parametrize(("width", "shown"), [(40, "106k tok"), (80, "106,439 tok")])
def test_a_narrow_terminal_gives_agent_names_the_room_of_the_tokens_digits(width, shown):
    view, _ = _view(width, 12)
    _feed(view)
    key = "exploration/exploration-pkg28"
    view({"event": "agent", "key": key, "agent": "researcher", "state": "running",
          "tokens": 106_439})  # fmt: skip
    row = next(line for line in _lines(view) if "▶" in line)
    assert row.rstrip("│ ").endswith(shown), row


def test_the_elapsed_time_moves_with_the_clock():
    clock = _Clock()
    view, _ = _view(60, 15, clock)
    _feed(view, agents=2)
    clock.now += 65
    assert "1:05" in _lines(view)[1]
    clock.now += 3600
    assert "1:01:05" in _lines(view)[1]


def test_the_closing_panel_is_printed_once_after_the_live_one():
    clock = _Clock()
    view, buffer = _view(60, 15, clock)
    with pytest.raises(KeyboardInterrupt), view:  # Ctrl-C inside the run
        _feed(view)
        clock.now += 12
        raise KeyboardInterrupt
    tail = buffer.getvalue().rsplit("\x1b", 1)[-1]  # after the live panel's last redraw
    closing = tail[tail.index("╭") :].splitlines()
    assert closing[0].startswith("╭─ tether · t1 ") and closing[-1].startswith("╰")
    assert "0:12" in closing[1] and "18/30 agents done" in closing[2]
    assert "spent 31,200 tokens" in closing[4]
    assert "✗ exploration-pkg29 failed" in closing[5]
    assert "exploration-pkg28" not in "\n".join(closing)  # only failures are listed again
    assert tail.count("╭─ tether") == 1


def test_a_resumed_task_is_named_in_the_panel_title():
    view, _ = _view(80, 24)
    view({"event": "resume", "task_id": "t7", "source": "langgraph", "path": None})
    view({"event": "phase", "phase": "review", "index": 4, "total": 4})
    lines = _lines(view)
    assert lines[0].startswith("╭─ tether · t7 ")
    assert "resuming task t7 (langgraph)" in "\n".join(lines)


def test_an_offline_runs_token_figures_say_they_are_estimates():
    view, _ = _view(80, 24)
    view({"event": "model", "name": "tether:offline", "offline": True})
    _feed(view, agents=2)
    view({"event": "agent", "key": "exploration/exploration-pkg00", "agent": "researcher",
          "state": "done", "tokens": 5_000})  # fmt: skip
    lines = _lines(view)
    assert lines[0].startswith("╭─ tether · t1 · offline ")
    assert "~ tokens: offline estimates, nothing spent" in lines[2]
    assert not any("spent ~" in line for line in lines)  # no figure that reads like a bill
    assert re.search(r"lead [█░]{24} ~1,968/150,000 ok", lines[3])
    assert any(line.rstrip("│ ").endswith("~5,000 tok") for line in lines), lines
    # a run with a real provider's reported usage shows its figures plain
    real, _ = _view(80, 24)
    real({"event": "model", "name": "openai:gpt-4o-mini", "offline": False})
    _feed(real, agents=2)
    assert "~" not in "\n".join(_lines(real)) and "offline" not in "\n".join(_lines(real))


def test_the_plain_tokens_line_of_an_offline_run_says_nothing_was_spent():
    out = io.StringIO()
    view = PlainView(out)
    tokens = {"event": "tokens", "agent": "lead", "context": 7762, "threshold": 150_000,
              "zone": "ok", "total": 490_641, "estimated": False}  # fmt: skip
    view(tokens)
    view({"event": "model", "name": "tether:offline", "offline": True})
    view(tokens)
    first, second = out.getvalue().splitlines()
    assert first == "tokens: lead context 7762 / 150000 (ok), total 490641"
    assert second == "tokens (offline estimates, nothing spent): lead context ~7762 / 150000 (ok)"


def test_agent_rows_are_labelled_alike_in_every_phase():
    view, _ = _view(80, 24)
    view({"event": "phase", "phase": "exploration", "index": 1, "total": 2})
    for key in ("exploration/exploration-json", "exploration/auth-flow"):
        view({"event": "agent", "key": key, "agent": "researcher", "state": "done"})
    view({"event": "phase", "phase": "planning", "index": 2, "total": 2})
    for key in ("planning/planning-json", "planning/auth-flow"):
        view({"event": "agent", "key": key, "agent": "researcher", "state": "running"})
    rows = [line for line in _lines(view) if "✓" in line or "▶" in line]
    names = sorted(re.search(r"[✓▶] (\S+)", row).group(1) for row in rows)
    # an id naming its phase stands alone; one that does not keeps its phase, in any phase
    assert names == [
        "exploration-json",
        "exploration/auth-flow",
        "planning-json",
        "planning/auth-flow",
    ]
