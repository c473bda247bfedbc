"""Live progress of a run: a rich panel on a terminal, plain lines or JSON otherwise.

The orchestrator reports progress as event dicts (`{"event": "phase", ...}`, see
`orchestrator.api`); a view turns them into output:

* `LiveView` (stderr is a TTY): a `rich.live.Live` panel with the phase (k/n), one row
  per subagent (pending / running / done / failed, tokens) and the lead's token gauge
  with its warn and save zones, plus the last few notable lines (checkpoints, snapshots,
  warnings). Rows are cut with an ellipsis, never wrapped, so a 60-column terminal
  stays readable.
* `PlainView` (not a TTY): one short line per state change, no ANSI codes, so a pipe or
  a log file stays clean; per-step token updates are not printed.
* `JsonView` (`--json`): one JSON object per line per event on stdout.

Invariant: a view never raises into the run (the context swallows view errors) and
never writes ANSI escape codes unless the stream is a terminal.
"""

from __future__ import annotations

import json
import sys
from typing import Any, TextIO

Event = dict[str, Any]
STATE_MARK = {"pending": "·", "running": "▶", "done": "✓", "failed": "✗"}


def describe(event: Event) -> str | None:
    """The plain one-line text of an event, or None for events not worth a line."""
    kind = event.get("event")
    if kind == "start":
        return (
            f"task {event['task_id']}: {event['objective']} "
            f"(phases: {', '.join(event['phases'])}; model {event['model']})"
        )
    if kind == "resume":
        where = f" from {event['path']}" if event.get("path") else ""
        return f"resuming task {event['task_id']} ({event['source']}{where})"
    if kind == "phase":
        return f"phase {event['phase']} ({event['index']}/{event['total']})"
    if kind == "plan":
        return f"plan: {len(event['subtasks'])} subtask(s) -> {event['path']}"
    if kind == "agent" and event.get("state") != "running":
        extra = f" ({event['error']})" if event.get("error") else ""
        reused = " (findings already written, not rerun)" if event.get("reused") else ""
        return f"agent {event['key']} [{event['agent']}]: {event['state']}{reused}{extra}"
    if kind == "agent":
        return (
            f"agent {event['key']} [{event['agent']}]: running" if not event.get("tokens") else None
        )
    if kind == "merged":
        return f"merged {event['findings']} finding(s) of {event['phase']} -> {event['path']}"
    if kind == "checkpoint":
        return f"checkpoint ({event['trigger']}) -> {event['path']}"
    if kind == "snapshot":
        return f"snapshot ({event['reason']}) -> {event['path']}"
    if kind == "warning":
        return f"warning: {event['message']}"
    if kind == "tokens" and event.get("zone"):
        return (
            f"tokens: lead context {'~' if event.get('estimated', True) else ''}"
            f"{event['context']} / {event['threshold']} "
            f"({event['zone']}), total {event.get('total', 0)}"
        )
    if kind == "done":
        return f"done: {event['findings']} finding(s); summary -> {event['merged']}"
    return None


class PlainView:
    """One line per state change, no ANSI codes."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr

    def __call__(self, event: Event) -> None:
        line = describe(event)
        if line:
            self.stream.write(line + "\n")
            self.stream.flush()

    def __enter__(self) -> PlainView:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class JsonView:
    """One JSON object per event per line."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stdout

    def __call__(self, event: Event) -> None:
        self.stream.write(json.dumps(event, ensure_ascii=False, default=str) + "\n")
        self.stream.flush()

    def __enter__(self) -> JsonView:
        return self

    def __exit__(self, *exc: object) -> None:
        pass


class LiveView:
    """A `rich.live.Live` panel: phase, subagents and the lead's token gauge."""

    LOG_LINES = 4

    def __init__(self, stream: TextIO | None = None):
        from rich.console import Console

        self.console = Console(file=stream or sys.stderr)
        self.phase = "-"
        self.index = (0, 0)
        self.agents: dict[str, dict[str, Any]] = {}
        self.lead = {"context": 0, "threshold": 150_000, "warning_ratio": 0.8, "total": 0}
        self.log: list[str] = []
        self.title = "tether"
        self._live = None

    def __enter__(self) -> LiveView:
        from rich.live import Live

        self._live = Live(
            self._render(), console=self.console, refresh_per_second=8, transient=False
        )
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(None, None, None)
            self._live = None

    def __call__(self, event: Event) -> None:
        kind = event.get("event")
        if kind == "start":
            self.title = f"tether · {event['task_id']}"
        elif kind == "phase":
            self.phase, self.index = event["phase"], (event["index"], event["total"])
        elif kind == "agent":
            row = self.agents.setdefault(event["key"], {"agent": event["agent"], "tokens": 0})
            row["state"] = event["state"]
            row["tokens"] = event.get("tokens", row["tokens"]) or row["tokens"]
        elif kind == "tokens" and event.get("agent") == "lead":
            self.lead.update(
                {
                    k: event[k]
                    for k in ("context", "threshold", "warning_ratio", "total", "estimated")
                    if k in event
                }
            )
        line = (
            describe(event)
            if kind in {"checkpoint", "snapshot", "warning", "merged", "done", "resume"}
            else None
        )
        if line:
            self.log = (self.log + [line])[-self.LOG_LINES :]
        if self._live is not None:
            self._live.update(self._render())

    def _gauge(self) -> Any:
        from rich.text import Text

        threshold = max(1, int(self.lead["threshold"]))
        used = int(self.lead["context"])
        warn_at = int(threshold * float(self.lead["warning_ratio"]))
        width = 24
        filled = min(width, round(width * used / threshold))
        warn_col = round(width * warn_at / threshold)
        bar = Text()
        for i in range(width):
            zone = "red" if i >= warn_col else "green"
            if i < filled:
                bar.append("█", style=zone if used < warn_at or i >= warn_col else "yellow")
            else:
                bar.append("░", style="dim red" if i >= warn_col else "dim")
        label = "save" if used >= threshold else "warn" if used >= warn_at else "ok"
        approx = "~" if self.lead.get("estimated") else ""
        bar.append(f" {approx}{used:,}/{threshold:,} {label}", style="bold")
        return bar

    def _render(self) -> Any:
        from rich.console import Group
        from rich.panel import Panel
        from rich.table import Table
        from rich.text import Text

        k, n = self.index
        head = Text(
            f"phase {self.phase} ({k}/{n})", style="bold", overflow="ellipsis", no_wrap=True
        )
        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column(width=1)
        table.add_column(ratio=1, overflow="ellipsis", no_wrap=True)
        table.add_column(justify="right", no_wrap=True)
        for key, row in list(self.agents.items())[-12:]:
            state = row.get("state", "pending")
            style = {"done": "green", "failed": "red", "running": "cyan"}.get(state, "dim")
            table.add_row(
                Text(STATE_MARK.get(state, "?"), style=style),
                Text(f"{key} [{row['agent']}] {state}", style=style),
                Text(f"{row['tokens']:,} tok", style="dim"),
            )
        gauge = Table.grid(padding=(0, 1))
        gauge.add_column(no_wrap=True)
        gauge.add_column(no_wrap=True, overflow="ellipsis")
        gauge.add_row("lead", self._gauge())
        logs = [Text(line, overflow="ellipsis", no_wrap=True, style="dim") for line in self.log]
        return Panel(Group(head, table, gauge, *logs), title=self.title, title_align="left")


def make_view(
    *, json_mode: bool = False, live: bool | None = None, stream: TextIO | None = None
) -> Any:
    """The right view for the output: JSON, a live panel on a TTY, else plain lines."""
    if json_mode:
        return JsonView()
    target = stream or sys.stderr
    if live is None:
        live = bool(getattr(target, "isatty", lambda: False)())
    return LiveView(target) if live else PlainView(target)
