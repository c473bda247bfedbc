"""Live progress of a run: a rich panel on a terminal, plain lines or JSON otherwise.

The orchestrator reports progress as event dicts (`{"event": "phase", ...}`, each kind's
fields defined in `orchestrator.events`); a view turns them into output:

* `LiveView` (stderr is a TTY): a `rich.live.Live` panel that always fits the terminal.
  Its head shows: the phase (and wave, k/n) and the elapsed time; the phase's agents
  done/total and per state, the rate and the time left; the lead's token gauge with its
  warn and save zones; the task's spend (tokens against its budget, model calls); the
  plan's titles (a short terminal keeps the count and the gauge first, `HEAD_KEEP`).
  Below, one row per subagent (running ones with their time, steps, last tool; failed,
  pending, then the newest done) and the last notable lines
  (checkpoints, snapshots, warnings) take the rows left; agents that do not fit are
  counted on one line (`+12 pending, +30 done`). Rows are cut with an ellipsis, never
  wrapped, so a 60-column terminal stays readable. A row is labelled by one rule in
  every phase (`agent_label`). An offline run's token counts are estimates: the title
  and the count line say so and `~` marks each figure. When the run ends (or Ctrl-C stops
  it) the live panel is erased and a short closing panel (head and failed agents) is
  printed once, above the command's report; a command refused before its task started
  or continued leaves no panel, only its `Error:` line. Nothing is drawn before the run
  said where it stands (its phase and its gauge: `ready`). An event only updates the tally
  (`orchestrator.cli.progress.RunProgress`, constant work); rich's refresh thread draws
  at most four frames a second, each costing the rows shown, so a run of 10,000 agents
  pays per event what a run of ten does.
* `PlainView` (not a TTY): one short line per state change, no ANSI codes, so a pipe or
  a log file stays clean; per-step token updates are not printed, and the tokens line
  of an offline run says its figures are estimates.
* `JsonView` (`--json`): one JSON object per line per event on stdout.

Invariant: a view never raises into the run (the context swallows view errors) and
never writes ANSI escape codes unless the stream is a terminal.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TextIO

from rich.console import Console, Group
from rich.live import Live
from rich.panel import Panel
from rich.text import Text

from orchestrator.cli.progress import STATE_ORDER, RunProgress
from orchestrator.events import Event

if TYPE_CHECKING:
    from rich.console import RenderableType

STATE_MARK = {"pending": "·", "running": "▶", "waiting": "?", "done": "✓", "failed": "✗"}
STATE_STYLE = {"done": "green", "failed": "red", "running": "cyan", "waiting": "yellow"}


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
        wave = f" · wave {event['wave']}" if (event.get("wave") or 1) > 1 else ""
        return f"phase {event['phase']}{wave} ({event['index']}/{event['total']})"
    if kind == "plan":
        return f"plan: {len(event['subtasks'])} subtask(s) -> {event['path']}"
    if kind == "agent" and event.get("state") != "running":
        extra = f" ({event['error']})" if event.get("error") else ""
        reused = " (findings already written, not rerun)" if event.get("reused") else ""
        return f"agent {event['key']} [{event['agent']}]: {event['state']}{reused}{extra}"
    if kind == "agent":
        return (
            f"agent {event['key']} [{event['agent']}]: running"
            if not event.get("tokens") and not event.get("steps")
            else None
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
        gauge = f"lead context {approx}{event['context']} / {event['threshold']} ({event['zone']})"
        if offline:  # an estimate of what nobody was sent adds up to no bill: no total
            return f"tokens (offline estimates, nothing spent): {gauge}"
        return f"tokens: {gauge}, total {event.get('total', 0)}"
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

    An event only updates the tally (`RunProgress.apply`, constant work, in the run's
    thread); rich's own refresh thread draws the panel `REFRESH` times a second, a frame
    costing the rows it shows, not the agents done. Nothing is drawn before the run has
    said where it stands (`ready`): a continued task's first frame has its counts.

    Args:
        stream: where the panel goes (default stderr).
        clock: seconds as a float, for the elapsed time (tests pass their own).
    """

    LOG_LINES = 4
    FAILED_LINES = 5
    """Failed agents named in the closing summary (the rest counted)."""
    REFRESH = 4
    """Frames a second at most (the elapsed time moves between events too)."""

    def __init__(self, stream: TextIO | None = None, *, clock: Callable[[], float] | None = None):

        self.console = Console(file=stream or sys.stderr)
        self.clock = clock or time.monotonic
        self.started = self.clock()
        self.progress = RunProgress(self.clock)
        self.log: list[str] = []
        self.title = "tether"
        self.task_shown = False
        """A task started or continued (`start`, `resume`): the closing panel is printed."""
        self.offline = False
        """The run uses the offline model: every token count is an estimate (`~`)."""
        self.ready = False
        """The run said where it stands (its phase and the lead's gauge): frames are drawn."""
        self._gauged = False
        self.version = 0
        """Events taken so far: a frame of the same events and elapsed time is not redrawn."""
        self._lock = threading.Lock()
        self._live: Any = None

    # -- lifecycle ---------------------------------------------------------------------------
    def __enter__(self) -> LiveView:

        self.started = self.clock()
        # transient: the live panel is erased at the end and `summary()` printed once, so
        # nothing is drawn twice and the closing report does not push a tall panel away
        self._live = _Frames(
            self,
            console=self.console,
            auto_refresh=True,  # drawn by rich's thread, never the run's
            refresh_per_second=self.REFRESH,
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
            self.version += 1

    def _apply(self, event: Event) -> None:
        kind = event.get("event")
        if kind in ("model", "start") and "offline" in event:
            self.offline = bool(event["offline"])
        if kind in ("start", "resume"):
            self.title = f"tether · {event['task_id']}"
            self.task_shown = True
        self.progress.apply(event)
        # ready once the phase and the gauge are known: a new run's gauge comes first, a
        # continued run's standing events end with it (`recovery.resume.standing`)
        self._gauged = self._gauged or (kind == "tokens" and event.get("agent") == "lead")
        self.ready = self.ready or (self._gauged and self.progress.phase is not None)
        self.ready = self.ready or kind in ("finish", "done", "failed", "stopped")
        if kind in {"checkpoint", "snapshot", "warning", "merged", "done", "resume", "remote"}:
            line = describe(event, offline=self.offline)
            if line:
                self.log = (self.log + [line])[-self.LOG_LINES :]

    # -- rendering -----------------------------------------------------------------------------
    def elapsed(self) -> str:
        """Time since the view started, as `M:SS` (or `H:MM:SS`)."""
        return _clock_text(self.clock() - self.started)

    #: The head's lines by name, most needed first: a short terminal drops from the end.
    HEAD_KEEP = ("count", "gauge", "phase", "spend", "plan")

    def _head(self, room: int | None = None, *, closing: bool = False) -> list[Text]:
        """The head's lines that are known (phase, count, gauge, spend, plan), in that
        order; with `room`, the most needed that fit (`HEAD_KEEP`); `closing`: the
        closing panel's (no plan)."""
        lines = {
            "phase": self._phase_line(),
            "count": self._count_line(),
            "gauge": self._line(Text("lead ") + self._gauge()) if self._gauged else None,
            "spend": self._spend_line(),
            "plan": None if closing else self._plan_line(),
        }
        known = [name for name in self.HEAD_KEEP if lines[name] is not None]
        kept = set(known[: max(room, 1)] if room is not None else known)
        return [line for name, line in lines.items() if name in kept and line is not None]

    def _phase_line(self) -> Text | None:
        """`phase review · wave 2 (2/4)` and the elapsed time."""
        progress = self.progress
        if progress.phase is None:
            return None
        wave = f" · wave {progress.wave}" if (progress.wave or 1) > 1 else ""
        k, n = progress.index
        title = Text(f"phase {progress.phase}{wave} ({k}/{n})", style="bold")
        return self._line(title, self.elapsed(), "")

    def _count_line(self) -> Text:
        """The current phase's agents per state, the rate and the time left, the earlier
        phases' agents."""
        progress = self.progress
        tally = progress.current()
        total = sum(tally.values())
        parts = [f"{tally['done']:,}/{total:,} agents done"]
        parts += [
            f"{tally[s]:,} {s}" for s in ("waiting", "running", "failed", "pending") if tally[s]
        ]
        rate, left = progress.rate(), progress.left()
        if rate is not None:
            parts.append(f"{rate:.1f}/min")
        if left is not None:
            parts.append(f"~{_clock_text(left)} left")
        if len(progress.agents) > total:
            parts.append(f"{len(progress.agents) - total:,} in earlier phases")
        if self.offline:  # last: a narrow terminal cuts it first, `~` still marks each figure
            parts.append("~ tokens: offline estimates, nothing spent")
        return self._line(Text(" · ".join(parts), style="red" if tally["failed"] else ""))

    def _spend_line(self) -> Text | None:
        """`spent 12,345 / 500,000 tokens (budget) · 87 calls`: the whole task's."""
        progress = self.progress
        if not progress.spend_known:
            return None
        if self.offline:  # estimates of what nobody was sent: no figure that reads like a bill
            return self._line(Text(f"nothing spent · {progress.calls:,} offline model calls"))
        approx = "~" if progress.lead.get("estimated") else ""
        spent = f"spent {approx}{progress.spent:,}"
        spent += f" / {progress.budget:,} tokens (budget)" if progress.budget else " tokens"
        calls = f" · {progress.calls:,} model calls" if progress.calls else ""
        return self._line(Text(spent + calls))

    def _plan_line(self) -> Text | None:
        """The current plan's subtask titles, cut to the line."""
        if not self.progress.plan:
            return None
        return self._line(Text("plan: " + " · ".join(self.progress.plan), style="dim"))

    #: The gauge bar's widest; it narrows in a narrow terminal so the numbers still show.
    BAR = 24

    def _gauge(self) -> Text:

        lead = self.progress.lead
        threshold = max(1, int(lead["threshold"]))
        used = int(lead["context"])
        warn_at = int(threshold * float(lead["warning_ratio"]))
        label = "save" if used >= threshold else "warn" if used >= warn_at else "ok"
        approx = "~" if lead.get("estimated") or self.offline else ""
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
        cells = []
        for i in range(width):
            zone = "red" if i >= warn_col else "green"
            if i < filled:
                cells.append(("█", zone if used < warn_at or i >= warn_col else "yellow"))
            else:
                cells.append(("░", "dim red" if i >= warn_col else "dim"))
        bar = Text()
        for style, run in itertools.groupby(cells, key=lambda cell: cell[1]):
            bar.append("".join(char for char, _ in run), style=style)
        bar.append(f" {numbers}", style="bold")
        return bar

    def _line(self, left: Text, right: str = "", right_style: str = "dim") -> Text:
        """One row of the panel: `left` cut with an ellipsis to leave `right` its room,
        `right` flush right (a row never wraps)."""
        width = self._panel_width() - 4  # the borders and their padding
        room = width - (len(right) + 1 if right else 0)
        line = left.copy()
        line.no_wrap, line.overflow = True, "ellipsis"
        line.truncate(max(room, 1), overflow="ellipsis", pad=bool(right))
        if right:
            line.append(" " + right, style=right_style)
        return line

    def _agent_rows(self, keys: list[str], rest: dict[str, int]) -> list[Text]:

        # in a narrow terminal the names need the room more than the tokens' last digits
        count = _short_count if self._panel_width() < 60 else "{:,}".format
        roles = len(self.progress.roles) > 1
        approx = "~" if self.offline else ""
        rows = []
        for key in keys:
            row = self.progress.agents[key]
            state = row.get("state", "pending")
            style = STATE_STYLE.get(state, "dim")
            error = f": {row['error']}" if state == "failed" and row.get("error") else ""
            # a single role says nothing: the row keeps the words that tell agents apart
            name = agent_label(key) + (f" [{row['agent']}]" if roles else "")
            left = Text.assemble((STATE_MARK.get(state, "?"), style), " ")
            if state == "running":  # the mark says it: the room goes to its time, steps, tool
                left.append(name, style=style)
                left.append(self._running(row), style="dim")
            else:
                left.append(f"{name} {state}{error}", style=style)
            tokens = f"{approx}{count(row['tokens'])} tok" if row["tokens"] else ""
            rows.append(self._line(left, tokens))
        if rest:
            more = ", ".join(f"+{rest[s]} {s}" for s in STATE_ORDER if rest.get(s))
            rows.append(self._line(Text(f"… {more}", style="dim")))
        return rows

    def _running(self, row: dict[str, Any]) -> str:
        """A running agent's time so far, steps of its budget and the tool it last called."""
        text = f" {_clock_text(self.clock() - row['since'])}" if "since" in row else ""
        if row.get("steps"):
            of = f"/{row['max_steps']}" if row.get("max_steps") else ""
            text += f" · step {row['steps']}{of}"
        return text + (f" · {row['tool']}" if row.get("tool") else "")

    def _rest(self, shown: list[str]) -> dict[str, int]:
        """Agents per state not among `shown` (from the tally, not by listing them)."""
        rest = dict(self.progress.tally)
        for key in shown:
            rest[self.progress.agents[key]["state"]] -= 1
        return {s: n for s, n in rest.items() if n > 0}

    def frame(self) -> Any:
        """What rich's refresh thread draws: nothing until the run said where it stands."""
        return self.render() if self.ready else Group()

    def frame_key(self) -> tuple[Any, ...]:
        """What a frame shows depends on: the events taken, the clock, the terminal's size."""
        return (self.version, self.ready, self.elapsed(), self.console.size)

    def render(self, height: int | None = None) -> Panel:
        """The live panel, at most `height` lines (default: the terminal's height less one).

        The head (phase, elapsed, done/total, gauge) always shows; agents fill the rest,
        most telling first, the others counted on one `+N done` line; the newest log line
        keeps one row when there is room, older ones take what is left. Its cost is the
        rows it shows, whatever the number of agents.
        """

        with self._lock:
            room = (height or self.console.size.height - 1) - 2  # the panel's border
            head = self._head(room)
            room -= len(head)
            logs = [self._line(Text(line, style="dim")) for line in self.log]
            keep_log = 1 if logs and room > 4 else 0
            total = len(self.progress.agents)
            fits = total <= room - keep_log
            fit = list(self.progress.listed(total if fits else room - keep_log - 1))
            rest = self._rest(fit) if room > 0 else {}
            parts: list[Any] = list(head)
            parts += self._agent_rows(fit, rest)
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
            shown = self.progress.first("failed", self.FAILED_LINES)
            parts = self._head(closing=True)
            if shown:
                left = self.progress.tally["failed"] - len(shown)
                parts += self._agent_rows(shown, {"failed": left} if left else {})
        return self._panel(parts)


class _Frames(Live):
    """rich's `Live` drawing `view`'s frames from its refresh thread, skipping a frame that
    would draw what is already shown (a run waiting on a model call: one frame a second,
    for the clock)."""

    def __init__(self, view: LiveView, **options: Any) -> None:
        super().__init__(get_renderable=view.frame, **options)
        self._view = view
        self._shown: tuple[Any, ...] | None = None

    def refresh(self) -> None:
        key = self._view.frame_key()
        if key != self._shown:
            self._shown = key
            super().refresh()


def _clock_text(seconds: float) -> str:
    """`seconds` as `M:SS` (or `H:MM:SS`)."""
    seconds = max(0, int(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


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
