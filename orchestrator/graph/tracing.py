"""OpenTelemetry traces of a task: one span per verb's run, phase wave, agent and call.

Off by default, and free when off: `tracing_for` returns None and nothing of OpenTelemetry
is imported (it is imported here only when tracing is on). On with `trace=True`
(`--trace`), a `TracerProvider` of the caller's (`Orchestrator(trace=provider)`), or the
standard `$OTEL_EXPORTER_OTLP_ENDPOINT` (or `$OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`) when
`trace` is None; `$OTEL_SDK_DISABLED=true` or `trace=False` (`--no-trace`) keep it off.
Spans go to the process's SDK provider when one is set (`opentelemetry-instrument`), else
to one made here once per process: OTLP over HTTP, configured by the standard `OTEL_*`
variables, `service.name` `tether` unless `$OTEL_SERVICE_NAME` says otherwise.

`Tracing` follows the run's progress events (`orchestrator.events`; `tee` puts it in front
of the `on_event` callback), so no node changes for it:

    tether.task                      `start` / `resume` ... `finish` (one per run, resume, approve)
      phase {phase}                  `phase` ... `merged` (one per wave)
        invoke_agent {agent}         a subagent: `agent` running ... done / failed / waiting
          chat {model}               each model call  (`agents.tracing_middleware`)
          execute_tool {tool}        each tool call
      invoke_agent lead              each lead turn (planning, the answer), its calls below

A task's trace is one trace across its runs: the first traced run records its trace id and
task span (`trace_id`, `trace_span`) in the task's record (`artifacts.tasks`), and every
later `resume` or `approve` starts its task span as a child of that span, in another
process too. Attributes are GenAI semantic conventions' and tether's (`tether.task.id`,
`tether.phase`, `tether.subtask.key`, `tether.finding.path`, ...); no content of messages,
tool arguments or results is recorded.

Invariant: tracing never breaks or changes a run: an event it cannot follow is skipped, and
every span it opened ends, at `finish`, or when the orchestrator closes (a run ended by
Ctrl-C or an error: ended as errors).
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from orchestrator.artifacts.tasks import TaskList
from orchestrator.errors import OrchestratorUserError, UnknownTaskError

if TYPE_CHECKING:
    from orchestrator.agents.tracing_middleware import TracingMiddleware
    from orchestrator.events import Event

#: The standard variables whose value turns tracing on when `trace` is None.
ENDPOINT_VARIABLES = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
INSTALL_HINT = "pip install 'tether[otel]'"
LEAD = "lead"
#: Seconds the end of a run waits for its spans to be exported (`finish`, `close`).
FLUSH_MILLIS = 10_000

_owned: Any = None
_owned_lock = threading.Lock()


def tracing_for(
    trace: Any, tasks: TaskList, environ: Mapping[str, str] = os.environ
) -> Tracing | None:
    """The run's tracing for the `trace` switch (module docstring), or None when off.

    Raises:
        OrchestratorUserError: tracing is on but OpenTelemetry is not installed, or
            `trace` is neither a bool nor a tracer provider.
    """
    if trace is False:
        return None
    if trace is None:
        if environ.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
            return None
        set_ = [name for name in ENDPOINT_VARIABLES if environ.get(name)]
        if not set_:
            return None
        return Tracing(_process_provider(f"${set_[0]} is set"), tasks)
    if trace is True:
        return Tracing(_process_provider("--trace"), tasks)
    if not callable(getattr(trace, "get_tracer", None)):
        raise OrchestratorUserError(
            f"trace must be True, False, None or an OpenTelemetry TracerProvider, not "
            f"{type(trace).__name__!r}"
        )
    return Tracing(trace, tasks, owned=False)


def traced(
    trace: Any, tasks: TaskList, on_event: Callable[[Event], None] | None
) -> tuple[Tracing | None, Callable[[Event], None] | None]:
    """`(tracing, on_event)`: the run's tracing (`tracing_for`) and the callback that
    feeds it each event before `on_event`; `(None, on_event)` when tracing is off."""
    tracing = tracing_for(trace, tasks)
    return (tracing, tracing.tee(on_event)) if tracing is not None else (None, on_event)


def _process_provider(why: str) -> Any:
    """The process's SDK tracer provider, else one exporting over OTLP/HTTP (made once)."""
    global _owned
    try:
        from opentelemetry import trace
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor
    except ImportError as exc:
        raise OrchestratorUserError(
            f"tracing is on ({why}) but OpenTelemetry is not installed (no module "
            f"{exc.name!r}): {INSTALL_HINT}, or pass --no-trace"
        ) from None
    current = trace.get_tracer_provider()
    if isinstance(current, TracerProvider):  # the process's own, e.g. opentelemetry-instrument
        return current
    with _owned_lock:
        if _owned is None:
            named = {} if os.environ.get("OTEL_SERVICE_NAME") else {"service.name": "tether"}
            provider = TracerProvider(resource=Resource.create(named))
            provider.add_span_processor(BatchSpanProcessor(OTLPSpanExporter()))
            _owned = provider  # shut down (its spans exported) by the SDK at exit
        return _owned


class Tracing:
    """The spans of the runs of one `Orchestrator` (module docstring).

    Args:
        provider: an OpenTelemetry `TracerProvider`.
        tasks: the task records, where a task's trace id is kept.
        owned: flush the provider at the end of each run (a provider the caller gave is
            the caller's to flush).
    """

    def __init__(self, provider: Any, tasks: TaskList, *, owned: bool = True) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("tether")
        self.tasks = tasks
        self.owned = owned
        self._lock = threading.RLock()
        self._task: Any = None
        self._task_id = ""
        self._model = ""
        self._wave: Any = None
        self._wave_key: tuple[str, int] | None = None
        self._agents: dict[str, Any] = {}
        self._titles: dict[str, str] = {}

    # -- events ----------------------------------------------------------------------
    def tee(self, on_event: Callable[[Event], None] | None) -> Callable[[Event], None]:
        """A callback that follows each event, then hands it to `on_event`."""

        def follow(event: Event) -> None:
            self.event(event)
            if on_event is not None:
                on_event(event)

        return follow

    def event(self, event: Event) -> None:
        """Open, annotate or end spans for one progress event; never raises."""
        handler = getattr(self, f"_on_{event.get('event')}", None)
        if handler is None:
            return
        try:
            with self._lock:
                handler(event)
        except Exception:  # a trace is never worth a run
            pass

    def _on_model(self, event: Event) -> None:
        self._model = str(event.get("name") or "")

    def _on_start(self, event: Event) -> None:
        self._open_task(event, "run")

    def _on_resume(self, event: Event) -> None:
        self._open_task(event, str(event.get("source") or "resume"))

    def _open_task(self, event: Event, how: str) -> None:
        from opentelemetry import trace

        self.end_all("a new run started before the last one finished")
        task_id = str(event["task_id"])
        try:
            record = self.tasks.record(task_id)
        except UnknownTaskError:
            record = {"task_id": task_id}
        parent = _recorded_parent(record)
        attributes = {"tether.task.id": task_id, "tether.run": how}
        if self._model:
            attributes["tether.model"] = self._model  # not a call: no `gen_ai.*` here
        if event.get("objective"):
            attributes["tether.task.objective"] = str(event["objective"])[:200]
        span = self.tracer.start_span("tether.task", context=parent, attributes=attributes)
        self._task, self._task_id = span, task_id
        if parent is None:  # the task's first traced run: later ones continue its trace
            context = span.get_span_context()
            self.tasks.note(
                task_id,
                trace_id=trace.format_trace_id(context.trace_id),
                trace_span=trace.format_span_id(context.span_id),
            )

    def _on_phase(self, event: Event) -> None:
        if self._task is None:
            return
        key = (str(event["phase"]), int(event.get("wave") or 1))
        if key == self._wave_key:  # the same wave, planned again or resumed
            return
        self._end_wave()
        self._wave_key = key
        self._wave = self._start(
            f"phase {key[0]}",
            self._task,
            {
                "tether.phase": key[0],
                "tether.phase.index": int(event["index"]),
                "tether.phase.wave": key[1],
            },
        )

    def _on_plan(self, event: Event) -> None:
        for sub in event.get("subtasks") or []:
            self._titles[str(sub["key"])] = str(sub["title"])
        if self._wave is not None:
            self._wave.set_attributes(
                {
                    "tether.plan.path": str(event["path"]),
                    "tether.plan.subtasks": len(event.get("subtasks") or []),
                    "tether.plan.continue_phase": bool(event.get("continue_phase")),
                }
            )

    def _on_merged(self, event: Event) -> None:
        if self._wave is not None:
            self._wave.set_attributes(
                {
                    "tether.merged.path": str(event["path"]),
                    "tether.merged.findings": int(event["findings"]),
                    "tether.merged.failed": [str(k) for k in event.get("failed") or []],
                }
            )
        self._end_wave()

    def _on_agent(self, event: Event) -> None:
        key, state = str(event["key"]), event["state"]
        if event.get("title"):
            self._titles[key] = str(event["title"])
        if state == "running":
            self.agent_span(key, str(event["agent"]))
            return
        span = self._agents.get(key)
        if span is None or state == "pending":
            return
        if event.get("path"):
            span.set_attribute("tether.finding.path", str(event["path"]))
        if event.get("tokens") is not None:
            span.set_attribute("tether.agent.tokens", int(event["tokens"]))
        if state in ("done", "failed", "waiting"):
            span.set_attribute("tether.agent.state", state)
            self._end_agent(key, str(event.get("error") or "failed") if state == "failed" else None)

    def _on_done(self, event: Event) -> None:
        if self._task is not None:
            findings, merged = int(event["findings"]), str(event["merged"])
            self._task.set_attributes(
                {"tether.task.findings": findings, "tether.merged.path": merged}
            )

    def _on_failed(self, event: Event) -> None:
        if self._task is not None:
            from opentelemetry.trace import Status, StatusCode

            self._task.set_status(Status(StatusCode.ERROR, str(event["error"])[:500]))
            self._task.set_attribute("tether.task.failed", [str(k) for k in event["failed"]])

    def _on_finish(self, event: Event) -> None:
        if self._task is not None:
            self._task.set_attribute("tether.task.status", str(event.get("status")))
            for name, value in (event.get("usage") or {}).items():  # the task's, all runs
                self._task.set_attribute(f"tether.task.usage.{name}", int(value))
        self.end_all(None)

    # -- agents ----------------------------------------------------------------------
    def agent_span(self, who: str, agent: str) -> Any:
        """The span of agent `who` (a subtask key, or `lead`), opened under the current
        wave (else the task) on first use; None when no task span is open."""
        with self._lock:
            span = self._agents.get(who)
            if span is None and self._task is not None:
                attributes = {
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.agent.name": agent,
                    "tether.task.id": self._task_id,
                }
                if who != LEAD:
                    attributes["tether.subtask.key"] = who
                    if who in self._titles:
                        attributes["tether.subtask.title"] = self._titles[who]
                parent = self._wave if self._wave is not None else self._task
                span = self._agents[who] = self._start(f"invoke_agent {agent}", parent, attributes)
            return span

    def agent_ended(self, who: str, exc: BaseException | None) -> None:
        """Agent `who`'s loop ended (`exc`: what ended it): the lead's span ends now, a
        subagent's with the event that says what became of it (done with its finding,
        failed, waiting)."""
        if who != LEAD:
            return
        with self._lock:
            self._end_agent(who, f"{type(exc).__name__}: {exc}" if exc is not None else None)

    def middleware(self, agent: str, key: str | None = None) -> TracingMiddleware:
        """The middleware tracing the calls of `agent` (a subagent: of subtask `key`)."""
        from orchestrator.agents.tracing_middleware import TracingMiddleware

        who = key or LEAD
        attributes = {"tether.task.id": self._task_id, "tether.agent": agent}
        if key:
            attributes["tether.subtask.key"] = key
        return TracingMiddleware(
            self.tracer,
            lambda: self.agent_span(who, agent),
            lambda exc: self.agent_ended(who, exc),
            attributes,
        )

    # -- ending ----------------------------------------------------------------------
    def end_all(self, error: str | None) -> None:
        """End every open span (`error`: why they end unfinished), then flush."""
        with self._lock:
            opened = self._task is not None
            for who in list(self._agents):
                self._end_agent(who, error)
            self._end_wave(error)
            if self._task is not None:
                _end(self._task, error)
                self._task = None
        if opened and self.owned:
            self.provider.force_flush(FLUSH_MILLIS)

    def close(self) -> None:
        """End what a run left open (stopped by Ctrl-C or an error)."""
        self.end_all("the run ended without finishing (Ctrl-C, SIGTERM or an error)")

    def _start(self, name: str, parent: Any, attributes: dict[str, Any]) -> Any:
        from opentelemetry import trace

        context = trace.set_span_in_context(parent)
        return self.tracer.start_span(name, context=context, attributes=attributes)

    def _end_agent(self, who: str, error: str | None) -> None:
        span = self._agents.pop(who, None)
        if span is not None:
            _end(span, error)

    def _end_wave(self, error: str | None = None) -> None:
        if self._wave is not None:
            _end(self._wave, error)
        self._wave, self._wave_key = None, None


def _end(span: Any, error: str | None) -> None:
    if error is not None:
        from opentelemetry.trace import Status, StatusCode

        span.set_status(Status(StatusCode.ERROR, error[:500]))
    span.end()


def _recorded_parent(record: Mapping[str, Any]) -> Any:
    """The context of the task span its record names (a remote parent), or None."""
    trace_id, span_id = record.get("trace_id"), record.get("trace_span")
    if not trace_id or not span_id:
        return None
    from opentelemetry import trace

    try:
        context = trace.SpanContext(
            int(str(trace_id), 16),
            int(str(span_id), 16),
            is_remote=True,
            trace_flags=trace.TraceFlags(trace.TraceFlags.SAMPLED),
        )
    except ValueError:
        return None
    if not context.is_valid:
        return None
    return trace.set_span_in_context(trace.NonRecordingSpan(context))
