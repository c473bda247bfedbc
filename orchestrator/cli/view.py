"""Live progress of a run: a rich panel on a terminal, plain lines or JSON otherwise.

The orchestrator reports progress as event dicts (`{"event": "phase", ...}`, each kind's
fields defined in `orchestrator.events`); a view turns them into output:

* `LiveView` (stderr is a TTY): a `rich.live.Live` panel that always fits the terminal.
  Its head always shows: the phase (k/n) and the elapsed time, the done/total count of
  agents, and the lead's token gauge with its warn and save zones. Below, one row per
  subagent (running, failed, pending, then the newest done) and the last notable lines
  (checkpoints, snapshots, warnings) take the rows left; agents that do not fit are
  counted on one line (`+12 pending, +30 done`). Rows are cut with an ellipsis, never
  wrapped, so a 60-column terminal stays readable. A row is labelled by one rule in
  every phase (`agent_label`). An offline run's token counts are estimates: the title
  and the count line say so and `~` marks each figure. When the run ends (or Ctrl-C stops
  it) the live panel is erased and a short closing panel (head and failed agents) is
  printed once, above the command's report; a command refused before its task started
  or continued leaves no panel, only its `Error:` line.
* `PlainView` (not a TTY): one short line per state change, no ANSI codes, so a pipe or
  a log file stays clean; per-step token updates are not printed, and the tokens line
  of an offline run says its figures are estimates.
* `JsonView` (`--json`): one JSON object per line per event on stdout.

Invariant: a view never raises into the run (the context swallows view errors) and
never writes ANSI escape codes unless the stream is a terminal.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from orchestrator.config.defaults import TOKEN_THRESHOLD, WARNING_RATIO
from orchestrator.events import Event

if TYPE_CHECKING:
    from rich.console import RenderableType

STATE_MARK = {"pending": "·", "running": "▶", "waiting": "?", "done": "✓", "failed": "✗"}
#: The order agents are listed (and counted) in: what needs an eye first.
STATE_ORDER = ("waiting", "running", "failed", "pending", "done")


def describe(event: Event, *, offline: bool = False) -> str | None:
    """The plain one-line text of an event, or None for events not worth a line.

    `offline`: the run uses the offline model, whose token counts are estimates (`~`)
    and cost nothing; the tokens line says so.
    """
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
    if kind == "remote":
        return remote_line(event)
    if kind == "merged":
        return f"merged {event['findings']} finding(s) of {event['phase']} -> {event['path']}"
    if kind == "checkpoint":
        return f"checkpoint ({event['trigger']}) -> {event['path']}"
    if kind == "snapshot":
        return f"snapshot ({event['reason']}) -> {event['path']}"
    if kind == "warning":
        return f"warning: {event['message']}"
    if kind == "tokens" and event.get("zone"):
        approx = "~" if offline or event.get("estimated", True) else ""
        return (
            f"tokens{' (offline estimates, nothing spent)' if offline else ''}: lead context "
            f"{approx}{event['context']} / {event['threshold']} ({event['zone']}), "
            f"total {'~' if offline else ''}{event.get('total', 0)}"
        )
    if kind == "done":
        return f"done: {event['findings']} finding(s); summary -> {event['merged']}"
    return None


REMOTE_ACTIONS = {
    "started": "remote run started",
    "joined": "joined remote run",
    "read": "read back remote run",
    "resumed": "resumed remote run",
    "retry": "earlier attempt failed; new remote thread",
}


def remote_line(event: Event) -> str:
    """A remote agent's run as one line: what happened, where, on which thread."""
    run = f" {event['run_id']}" if event.get("run_id") else ""
    attempt = f", attempt {event['attempt']}" if event.get("attempt", 1) > 1 else ""
    return (
        f"agent {event['key']} [{event['agent']}]: {REMOTE_ACTIONS[event['action']]}{run} "
        f"on {event['server']} (thread {event['thread_id']}{attempt})"
    )


class PlainView:
    """One line per state change, no ANSI codes: a phase or an agent state that is told
    again (a resumed run says where it stands, then its graph enters that phase) is not
    printed twice."""

    def __init__(self, stream: TextIO | None = None):
        self.stream = stream or sys.stderr
        self.offline = False
        self._told: dict[str, str] = {}
        """The last line printed per phase and per agent key."""

    def __call__(self, event: Event) -> None:
        kind = event.get("event")
        if kind in ("model", "start") and "offline" in event:
            self.offline = bool(event["offline"])
        line = describe(event, offline=self.offline)
        if not line:
            return
        subject = "phase" if kind == "phase" else f"agent {event['key']}" if kind == "agent" else ""
        if subject and self._told.get(subject) == line:
            return
        if subject:
            self._told[subject] = line
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


def agent_label(key: str) -> str:
    """An agent's row label, the same rule for every row whatever the current phase: its
    subtask id when that names its phase already (`exploration-json` of
    `exploration/exploration-json`), else the whole key (`review/auth-flow`)."""
    phase, _, sid = key.partition("/")
    return sid if sid and sid.startswith(phase) else key


def _short_count(n: int) -> str:
    """`n` in at most five characters: `950`, `12.4k`, `150k`, `1.2M`."""
    for unit, size in (("M", 1_000_000), ("k", 1_000)):
        if n >= size:
            value = f"{n / size:.1f}" if n < 100 * size else f"{n // size}"
            return value.removesuffix(".0") + unit
    return str(n)


class LiveView:
    """A `rich.live.Live` panel that always fits the terminal (see the module docstring).

    Args:
        stream: where the panel goes (default stderr).
        clock: seconds as a float, for the elapsed time (tests pass their own).
    """

    LOG_LINES = 4
    FAILED_LINES = 5
    """Failed agents named in the closing summary (the rest counted)."""

    def __init__(self, stream: TextIO | None = None, *, clock: Callable[[], float] | None = None):

        self.console = Console(file=stream or sys.stderr)
        self.clock = clock or time.monotonic
        self.started = self.clock()
        self.phase = "-"
        self.index = (0, 0)
        self.agents: dict[str, dict[str, Any]] = {}
        self.finished: list[str] = []
        """Agent keys in the order they finished (newest last)."""
        self.lead = {
            "context": 0,
            "threshold": TOKEN_THRESHOLD,
            "warning_ratio": WARNING_RATIO,
            "total": 0,
        }
        self.log: list[str] = []
        self.title = "tether"
        self.task_shown = False
        """A task started or continued (`start`, `resume`): the closing panel is printed."""
        self.offline = False
        """The run uses the offline model: every token count is an estimate (`~`)."""
        self._lock = threading.Lock()
        self._live: Any = None

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> LiveView:

        self.started = self.clock()
        # transient: the live panel is erased at the end and `summary()` printed once, so
        # nothing is drawn twice and the closing report does not push a tall panel away
        self._live = Live(
            get_renderable=self.render,
            console=self.console,
            refresh_per_second=4,  # the elapsed time moves between events too
            transient=True,
            vertical_overflow="crop",
        )
        self._live.__enter__()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._live is not None:
            live, self._live = self._live, None
            live.__exit__(None, None, None)
            if self.task_shown:  # a command refused before its task started shows no panel
                self.console.print(self.summary())

    # -- events ------------------------------------------------------------------------------
    def __call__(self, event: Event) -> None:
        with self._lock:
            self._apply(event)
        if self._live is not None:
            self._live.refresh()

    def _apply(self, event: Event) -> None:
        kind = event.get("event")
        if kind in ("model", "start") and "offline" in event:
            self.offline = bool(event["offline"])
        if kind in ("start", "resume"):
            self.title = f"tether · {event['task_id']}"
            self.task_shown = True
        elif kind == "phase":
            self.phase, self.index = event["phase"], (event["index"], event["total"])
        elif kind == "agent":
            row = self.agents.setdefault(event["key"], {"agent": event["agent"], "tokens": 0})
            row["state"] = event["state"]
            row["tokens"] = event.get("tokens", row["tokens"]) or row["tokens"]
            row["error"] = event.get("error") or ""
            if event["state"] in ("done", "failed"):
                self.finished = [k for k in self.finished if k != event["key"]] + [event["key"]]
        elif kind == "tokens" and event.get("agent") == "lead":
            keys = ("context", "threshold", "warning_ratio", "total", "estimated")
            self.lead.update({k: event[k] for k in keys if k in event})
        if kind in {"checkpoint", "snapshot", "warning", "merged", "done", "resume", "remote"}:
            line = describe(event, offline=self.offline)
            if line:
                self.log = (self.log + [line])[-self.LOG_LINES :]

    # -- rendering -----------------------------------------------------------------------------
    def elapsed(self) -> str:
        """Time since the view started, as `M:SS` (or `H:MM:SS`)."""
        seconds = max(0, int(self.clock() - self.started))
        hours, rest = divmod(seconds, 3600)
        minutes, secs = divmod(rest, 60)
        return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"

    def counts(self) -> dict[str, int]:
        """Agents per state (`pending`, `running`, `done`, `failed`)."""
        tally = dict.fromkeys(STATE_MARK, 0)
        for row in self.agents.values():
            state = row.get("state", "pending")
            tally[state] = tally.get(state, 0) + 1
        return tally

    def _head(self) -> list[RenderableType]:
        """Phase and elapsed time, the done/total line and the lead's gauge."""

        k, n = self.index
        phase = Table.grid(expand=True)
        phase.add_column(ratio=1, overflow="ellipsis", no_wrap=True)
        phase.add_column(justify="right", no_wrap=True)
        phase.add_row(Text(f"phase {self.phase} ({k}/{n})", style="bold"), f" {self.elapsed()}")
        tally = self.counts()
        parts = [f"{tally['done']}/{len(self.agents)} agents done"]
        parts += [
            f"{tally[s]} {s}" for s in ("waiting", "running", "failed", "pending") if tally[s]
        ]
        if self.offline:  # last: a narrow terminal cuts it first, `~` still marks each figure
            parts.append("~ tokens: offline estimates, nothing spent")
        line = Text(" · ".join(parts), overflow="ellipsis", no_wrap=True)
        if tally["failed"]:
            line.stylize("red")
        gauge = Table.grid(padding=(0, 1))
        gauge.add_column(no_wrap=True, min_width=4)
        gauge.add_column(no_wrap=True, overflow="ellipsis")
        gauge.add_row("lead", self._gauge())
        return [phase, line, gauge]

    #: The gauge bar's widest; it narrows in a narrow terminal so the numbers still show.
    BAR = 24

    def _gauge(self) -> Text:

        threshold = max(1, int(self.lead["threshold"]))
        used = int(self.lead["context"])
        warn_at = int(threshold * float(self.lead["warning_ratio"]))
        label = "save" if used >= threshold else "warn" if used >= warn_at else "ok"
        approx = "~" if self.lead.get("estimated") or self.offline else ""
        numbers = f"{approx}{used:,}/{threshold:,} {label}"
        # the panel's borders and padding, "lead ", and a space before the numbers
        room = self._panel_width() - 4 - 5 - 1 - len(numbers)
        if room + 1 < 0:  # not even the numbers fit: shorter ones
            numbers = f"{approx}{_short_count(used)}/{_short_count(threshold)} {label}"
        width = min(self.BAR, room) if room >= 6 else 0
        if not width:
            return Text(numbers, style="bold")
        filled = min(width, round(width * used / threshold))
        warn_col = round(width * warn_at / threshold)
        bar = Text()
        for i in range(width):
            zone = "red" if i >= warn_col else "green"
            if i < filled:
                bar.append("█", style=zone if used < warn_at or i >= warn_col else "yellow")
            else:
                bar.append("░", style="dim red" if i >= warn_col else "dim")
        bar.append(f" {numbers}", style="bold")
        return bar

    def _ordered(self) -> list[str]:
        """Agent keys, most telling first: running, failed, pending, then newest done."""
        by_state: dict[str, list[str]] = {s: [] for s in STATE_MARK}
        for key, row in self.agents.items():
            by_state.setdefault(row.get("state", "pending"), []).append(key)
        done = [k for k in reversed(self.finished) if self.agents[k].get("state") == "done"]
        done += [k for k in by_state["done"] if k not in done]
        first = by_state["waiting"] + by_state["running"] + by_state["failed"]
        return first + by_state["pending"] + done

    def _agent_table(self, keys: list[str], rest: list[str]) -> Table:

        table = Table.grid(padding=(0, 1), expand=True)
        table.add_column(width=1)
        table.add_column(ratio=1, overflow="ellipsis", no_wrap=True)
        table.add_column(justify="right", no_wrap=True)
        roles = len({row["agent"] for row in self.agents.values()}) > 1
        # in a narrow terminal the names need the room more than the tokens' last digits
        count = _short_count if self._panel_width() < 60 else "{:,}".format
        for key in keys:
            row = self.agents[key]
            state = row.get("state", "pending")
            style = {"done": "green", "failed": "red", "running": "cyan", "waiting": "yellow"}.get(
                state, "dim"
            )
            error = f": {row['error']}" if state == "failed" and row.get("error") else ""
            # a single role says nothing: the row keeps the words that tell agents apart
            name = agent_label(key) + (f" [{row['agent']}]" if roles else "")
            approx = "~" if self.offline else ""
            table.add_row(
                Text(STATE_MARK.get(state, "?"), style=style),
                Text(f"{name} {state}{error}", style=style),
                Text(f"{approx}{count(row['tokens'])} tok", style="dim"),
            )
        if rest:
            tally: dict[str, int] = {}
            for key in rest:
                state = self.agents[key].get("state", "pending")
                tally[state] = tally.get(state, 0) + 1
            more = ", ".join(f"+{tally[s]} {s}" for s in STATE_ORDER if s in tally)
            table.add_row(Text("…", style="dim"), Text(more, style="dim"), Text(""))
        return table

    def render(self, height: int | None = None) -> Panel:
        """The live panel, at most `height` lines (default: the terminal's height less one).

        The head (phase, elapsed, done/total, gauge) always shows; agents fill the rest,
        most telling first, the others counted on one `+N done` line; the newest log line
        keeps one row when there is room, older ones take what is left.
        """

        with self._lock:
            room = (height or self.console.size.height - 1) - 2  # the panel's border
            head = self._head()
            if room < len(head):  # a tiny terminal: the gauge and the count first
                head = head[::-1][: max(room, 1)][::-1]
            room -= len(head)
            logs = [Text(line, overflow="ellipsis", no_wrap=True, style="dim") for line in self.log]
            keep_log = 1 if logs and room > 4 else 0
            keys = self._ordered()
            fit = keys if len(keys) <= room - keep_log else keys[: max(room - keep_log - 1, 0)]
            rest = keys[len(fit) :] if room > 0 else []
            parts = list(head)
            if fit or rest:
                parts.append(self._agent_table(fit, rest))
            used = len(fit) + (1 if rest else 0)
            parts += logs[len(logs) - max(0, min(len(logs), room - used)) :]
        return self._panel(parts)

    def _panel_width(self) -> int:
        # two columns stay free: the terminal echoes Ctrl-C as `^C` after the last line,
        # and a full-width line would wrap, scroll, and leave a stale copy of the top border
        return max(20, self.console.size.width - 2)

    def _panel(self, parts: list[RenderableType]) -> Panel:
        title = f"{self.title} · offline" if self.offline else self.title
        return Panel(Group(*parts), title=title, title_align="left", width=self._panel_width())

    def summary(self) -> Panel:
        """The closing panel: head and failed agents, printed once when the view ends."""

        with self._lock:
            failed = [k for k in self._ordered() if self.agents[k].get("state") == "failed"]
            shown = failed[: self.FAILED_LINES]
            parts = self._head()
            if failed:
                parts.append(self._agent_table(shown, failed[len(shown) :]))
        return self._panel(parts)


def make_view(
    *, json_mode: bool = False, live: bool | None = None, stream: TextIO | None = None
) -> JsonView | LiveView | PlainView:
    """The right view for the output: JSON, a live panel on a TTY, else plain lines."""
    if json_mode:
        return JsonView()
    target = stream or sys.stderr
    if live is None:
        live = bool(getattr(target, "isatty", lambda: False)())
    return LiveView(target) if live else PlainView(target)
