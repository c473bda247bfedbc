"""A subagent whose agent is remote: its subtask as a run on a server, through the seam
`orchestrator.agents.remote.RemoteAgent` (LangGraph Server its first implementation).

`run_remote` is the remote half of `orchestrator.graph.nodes.subagent.subagent_node`: the
node reuses a finished subtask's findings, checks the budget, and writes the findings this
returns as it writes a local agent's (for `tether_subagent`, tether's own subagent graph,
the server has written them into the shared memory already: the node reads them back).

Durable across crashes, through the `remote:{key}` record of the artifact registry, noted
before each step that creates something on a server:

1. attempt n's server and thread id are noted before its thread exists;
2. the run's id is noted right after the server created it (a kill in between leaves a
   run the thread's run list shows: the list, not the note, is what counts);
3. each visit starts by listing the thread's runs (`RemoteAgent.latest`): a run still
   going is joined (also one a restarted server re-queued by itself), one that finished
   while tether was away is read back, one that failed before this visit (or finished
   without a finding, `NoFinding`) moves the subtask to attempt n + 1 on a new thread, and
   only a thread with no run gets a new run.

The registry record keeps a server's URL as `shown` (no userinfo, no secret query
parameters); the credentials come from the workflow (`url_of`) each time tether connects.
A finding larger than `MAX_FINDING_CHARS` is cut, the whole answer kept as a memory entry
(`bounded`).

So no kill of the lead's process starts a remote subtask twice. A run that fails while
this process joins it fails the subagent with the server's message, as does a server that
stays unreachable past the model timeout; the others go on, the task ends `failed`, and
`resume` visits the subtask again (step 3).

**Interrupts.** A remote run that stops at an interrupt (the server's own
human-in-the-loop) raises tether's: LangGraph's `interrupt` with the remote request (a
`HITLRequest`; any other value is wrapped as one action) plus where it waits, so the task
ends `waiting` (exit 4) and `status` lists it (`orchestrator.approvals`). The decision
that `orchestrator approve` sends back is LangChain's payload; the node, run again, gets it
from `interrupt`, notes the remote interrupt as answered, and resumes the remote thread with
`Command(resume={remote id: payload})`. The record keeps each answer with the LangGraph task
that got it (its checkpoint namespace): a node run again in that task calls `interrupt`
once for each of them first, in order, so LangGraph's next answer goes to the next request
(LangGraph matches a task's answers to its `interrupt` calls by order), and an answer noted
but not yet sent (a kill in between) is sent from the record.

Usage: what the run reports it spent (`RemoteAgent.result`) counts toward the
task's budget and its tokens; when none is reported the record says the usage is unknown,
and `status` says so. Headers never reach a record, an event or a message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from langgraph.config import get_config
from langgraph.types import interrupt

from orchestrator.agents.remote import (
    NoFinding,
    RemoteAgent,
    RemoteRuns,
    RunState,
    connect,
    shown,
    thread_id_for,
    url_of,
)
from orchestrator.artifacts.registry import Keys, registry_note
from orchestrator.artifacts.tasks import TaskList
from orchestrator.config.workflow import TETHER_SUBAGENT_GRAPH, RemoteSpec, Workflow
from orchestrator.errors import RemoteAgentError, WorkflowError
from orchestrator.faults import fault
from orchestrator.graph.context import RunContext
from orchestrator.types import SubagentPayload

PREFIX = Keys.REMOTE
"""Registry keys of remote attempts: `remote:{subtask key}`."""
MAX_VISITS = 50
"""Looks at one subtask's remote thread in one node run, at most (a server that keeps
losing its runs must not keep tether busy forever)."""


@dataclass
class RemoteResult:
    """What a remote agent's run produced for its subtask."""

    findings: dict[str, Any] | None
    """The finding (`SubmitFindings` fields); None: `tether_subagent` wrote it itself."""
    tokens: int = 0
    """Prompt plus completion tokens its messages report (0 when unknown)."""
    usage: dict[str, int] | None = None
    """`{calls, input_tokens}` as reported; None: unknown (no message reported usage)."""
    where: dict[str, Any] = field(default_factory=dict)
    """`server`, `graph`, `thread_id`, `run_id`, `attempt`, `agent`: where it ran, and
    `usage_known` (noted in the finding's registry record)."""


def _note(ctx: RunContext, task_id: str, key: str, **fields: Any) -> dict[str, Any]:
    registry_note(ctx.docs, task_id, PREFIX + key, **fields)
    ctx.registry_noted(task_id, PREFIX + key, fields)
    return ctx.registry_record(task_id, PREFIX + key) or {}


def _created(ctx: RunContext, task_id: str) -> str:
    """When the task was recorded (part of its thread ids; the same in every process)."""
    return ctx.remote.task_created(
        task_id, lambda: str(TaskList(ctx.docs).record(task_id).get("created") or "")
    )


def _new_attempt(
    ctx: RunContext, payload: SubagentPayload, agent: str, spec: RemoteSpec, attempt: int
) -> dict[str, Any]:
    """Choose attempt `attempt`'s server (held in `ctx.remote`) and note it with its thread
    id, before the thread exists."""
    task_id, key = payload["task_id"], payload["key"]
    if attempt == 1 and ctx.remote.first_remote(task_id):
        TaskList(ctx.docs).note(task_id, remote_agents=True)  # `status` reads where they ran
    url = ctx.remote.pick(spec.urls)
    thread = thread_id_for(task_id, _created(ctx, task_id), key, attempt)
    return _note(
        ctx,
        task_id,
        key,
        agent=agent,
        graph=spec.graph,
        server=shown(url),
        url=shown(url),  # never the credentials: `url_of` finds them in the workflow
        attempt=attempt,
        thread_id=thread,
        run_id=None,
    )


def _task_ns() -> str:
    """The running LangGraph task's checkpoint namespace (unique to one `Send` of the node)."""
    try:
        return str(get_config().get("configurable", {}).get("checkpoint_ns") or "")
    except RuntimeError:  # outside a graph (a direct call): no interrupt can be answered
        return ""


def _input(
    ctx: RunContext, payload: SubagentPayload, spec: RemoteSpec, text: str
) -> dict[str, Any]:
    """The run's input: the subtask as messages, or for `tether_subagent` the payload with
    the task's model and when the task was recorded (the server checks its memory has it)."""
    if spec.runs_tether:
        return {
            **payload,
            "model": ctx.model_name or None,
            "project_dir": ctx.project_dir,
            "task_created": _created(ctx, payload["task_id"]),
        }
    return {"messages": [{"role": "user", "content": text}]}


def _request(intr: dict[str, Any], rec: dict[str, Any]) -> dict[str, Any]:
    """tether's request for a remote interrupt: its `HITLRequest` (any other value as one
    action), with where it waits."""
    value = intr.get("value")
    if not (isinstance(value, dict) and isinstance(value.get("action_requests"), list)):
        text = value if isinstance(value, str) else repr(value)
        value = {
            "action_requests": [
                {"name": "interrupt", "args": {"value": value}, "description": text[:500]}
            ],
            "review_configs": [
                {"action_name": "interrupt", "allowed_decisions": ["approve", "reject"]}
            ],
        }
    where = {"server": rec["server"], "thread_id": rec["thread_id"], "interrupt_id": intr["id"]}
    return {**value, "remote": where}


class _Visit:
    """One node run's visit of a subtask's remote thread (see the module docstring)."""

    def __init__(
        self,
        ctx: RunContext,
        payload: SubagentPayload,
        agent: str,
        spec: RemoteSpec,
        text: str,
    ) -> None:
        self.ctx, self.payload, self.agent, self.spec, self.text = ctx, payload, agent, spec, text
        self.task_id, self.key = payload["task_id"], payload["key"]
        self.runs: RemoteRuns = ctx.remote
        self.held: str | None = None
        self.rec: dict[str, Any] = {}
        self.ns = ""

    def tell(self, action: str, run_id: str | None = None) -> None:
        self.ctx.emit(
            "remote",
            key=self.key,
            agent=self.agent,
            action=action,
            server=self.rec["server"],
            thread_id=self.rec["thread_id"],
            run_id=run_id,
            attempt=int(self.rec.get("attempt") or 1),
        )

    def attempt(self, number: int) -> None:
        self.runs.release(self.held)
        self.rec = _new_attempt(self.ctx, self.payload, self.agent, self.spec, number)
        self.held = self.url()

    def url(self) -> str:
        """The attempt's server URL, with the workflow's credentials."""
        return url_of(self.spec, self.rec["url"])

    def server(self) -> RemoteAgent:
        return self.runs.server(self.url(), self.agent, self.spec)

    def metadata(self) -> dict[str, Any]:
        return {
            "tether_task": self.task_id,
            "tether_subtask": self.key,
            "tether_attempt": int(self.rec.get("attempt") or 1),
        }

    def start(self, decisions: dict[str, Any] | None = None) -> str | None:
        """Start the attempt's run (or the one answering its interrupts: `decisions`) on its
        thread; note its id."""
        server, thread = self.server(), self.rec["thread_id"]
        if decisions is None:
            text = _input(self.ctx, self.payload, self.spec, self.text)
            run_id = server.start(thread, self.metadata(), text)
        else:
            run_id = server.resume(thread, self.metadata(), decisions)
        fault("remote_after_create")  # a run exists on the server, its id not noted yet
        if run_id is not None:
            self.rec = _note(self.ctx, self.task_id, self.key, run_id=run_id)
        return run_id

    def run(self) -> RemoteResult:
        ctx = self.ctx
        self.rec = ctx.registry_record(self.task_id, PREFIX + self.key) or {}
        self.ns = _task_ns()
        answered: dict[tuple[str, str], Any] = {}
        for done in list(self.rec.get("answered") or []):
            if done.get("ns") == self.ns:  # this task's answers so far, in their order
                interrupt(done["request"])
            answered[(done["thread_id"], done["id"])] = done["decision"]
        if self.rec.get("thread_id"):
            self.held = self.url()
            self.runs.hold(self.held)
        else:
            self.attempt(1)
        joined = False  # whether this visit saw the thread's latest run going
        try:
            for _ in range(MAX_VISITS):
                server, thread = self.server(), self.rec["thread_id"]
                state = server.latest(thread)
                if state is None:
                    run_id = self.start()
                    if run_id is not None:
                        self.tell("started", run_id)
                        server.join(thread, run_id, ctx.stop)
                        joined = True
                    continue
                if state.running:
                    self.tell("joined", state.run_id)
                    server.join(thread, state.run_id, ctx.stop)
                    joined = True
                    continue
                if state.failed and joined:
                    raise RemoteAgentError(
                        f"remote run {state.run_id} of {self.spec.graph!r} on "
                        f"{self.rec['server']} failed: {state.error}"
                    )
                if state.failed:  # an earlier visit's attempt: a new thread
                    self.attempt(int(self.rec.get("attempt") or 1) + 1)
                    self.tell("retry")
                    continue
                if state.interrupts:
                    if self.answer(state.interrupts, answered):
                        joined = True
                    continue
                try:
                    result = self.result(state)
                except NoFinding as exc:  # a finished run without a finding: failed
                    if joined:
                        raise RemoteAgentError(
                            f"remote run {state.run_id} of {self.spec.graph!r} on "
                            f"{self.rec['server']} gave no finding: {exc}"
                        ) from None
                    self.attempt(int(self.rec.get("attempt") or 1) + 1)
                    self.tell("retry")
                    continue
                if not joined:
                    self.tell("read", state.run_id)
                return result
        finally:
            self.runs.release(self.held)
        raise RemoteAgentError(
            f"remote thread {self.rec.get('thread_id')} on {self.rec.get('server')} "
            f"kept losing its runs ({MAX_VISITS} looks); see the server's log"
        )

    def answer(self, interrupts: list[dict[str, Any]], answered: dict[tuple, Any]) -> bool:
        """Decide every interrupt the remote thread waits on (tether's `interrupt`: the task
        waits until `orchestrator approve`), then resume the thread with the decisions."""
        resume, thread = {}, self.rec["thread_id"]
        for intr in interrupts:
            if (thread, intr["id"]) not in answered:
                request = _request(intr, self.rec)
                decision = interrupt(request)  # raises GraphInterrupt until approved
                answered[(thread, intr["id"])] = decision
                done = {"thread_id": thread, "id": intr["id"], "ns": self.ns}
                done.update(request=request, decision=decision)
                listed = [*(self.rec.get("answered") or []), done]
                self.rec = _note(self.ctx, self.task_id, self.key, answered=listed)
            resume[intr["id"]] = answered[(thread, intr["id"])]
        run_id = self.start(resume)
        if run_id is None:
            return False
        self.tell("resumed", run_id)
        self.server().join(self.rec["thread_id"], run_id, self.ctx.stop)
        return True

    def result(self, state: RunState) -> RemoteResult:
        where = {k: self.rec.get(k) for k in ("server", "graph", "thread_id", "attempt", "agent")}
        where["run_id"] = state.run_id
        outcome = self.server().result(state)
        where["usage_known"] = outcome.usage is not None  # noted with the finding's record
        found = outcome.findings
        if found is not None:
            found = bounded(self.ctx, found, self.key, self.rec["server"])
        return RemoteResult(found, outcome.tokens, outcome.usage, where)


MAX_FINDING_CHARS = 40_000
"""Characters of a remote agent's answer kept in its finding (the summary and the lists,
as JSON): more is stored whole as a memory entry, and the finding keeps its head and a
pointer (as large tool results are, `orchestrator.agents.offload`)."""
ITEM_CHARS = 2_000
"""Characters of one list item of a cut finding."""


def bounded(ctx: RunContext, found: dict[str, Any], key: str, server: str) -> dict[str, Any]:
    """`found`, or when larger than `MAX_FINDING_CHARS`, its head with a pointer to the
    memory entry that holds it whole."""
    text = json.dumps(found, ensure_ascii=False)
    if len(text) <= MAX_FINDING_CHARS:
        return found
    entry = ctx.docs.backend.log_entry(
        text, type="output", tags=["remote-result", f"subtask:{key}"]
    )
    budget = MAX_FINDING_CHARS // 4  # for the summary, and for each list
    cut = dict(found)
    for name, value in found.items():
        if isinstance(value, list):
            kept, used = [], 0
            for item in value:
                item = item[:ITEM_CHARS] if isinstance(item, str) else item
                used += len(json.dumps(item, ensure_ascii=False))
                if used > budget:
                    break
                kept.append(item)
            cut[name] = kept
    summary = str(found.get("summary") or "")
    cut["summary"] = (
        f"{summary[:budget]}\n[... the remote agent on {server} answered {len(text):,} "
        f"characters, over the {MAX_FINDING_CHARS:,}-character limit of one finding: the "
        f"whole answer is memory entry {entry.id} (`memory fetch {entry.id}`) ...]"
    )
    return cut


def run_remote(
    ctx: RunContext, payload: SubagentPayload, agent: str, spec: RemoteSpec, text: str
) -> RemoteResult:
    """Run (or re-attach to) subtask `payload`'s remote run and read its result.

    Args:
        text: the subtask as the agent is told it (objective, scope, earlier findings).

    Raises:
        GraphInterrupt: the remote run waits for a decision (through `interrupt`).
        RemoteAgentError: the run failed, or its server stayed unreachable.
        WorkflowError: a header's `${VAR}` is not set.
        Stopped: Ctrl-C while joining (the remote run goes on).
    """
    return _Visit(ctx, payload, agent, spec, text).run()


#: Seconds a probe of a `tether_subagent` server may take before the task starts anyway.
PROBE_S = 15.0


def check_served_memory(workflow: Workflow, identity: Any, timeout: float) -> None:
    """Before a task starts or continues, ask each server that runs `tether_subagent` for one
    of its agents which memory it writes into, and refuse one whose memory is not the
    task's: its subagents would be refused one by one after the lead planned. A server that
    cannot answer now is not refused here (it checks each payload's task itself).

    Args:
        identity: the task's memory's `identity()` (a PostgreSQL memory), or None: no check.

    Raises:
        WorkflowError: one line naming the agent and the server.
    """
    if identity is None:
        return
    ours: str | None = None
    for name, spec in sorted(workflow.agents.items()):
        if spec.remote is None or not spec.remote.runs_tether:
            continue
        for url in spec.remote.urls:
            server = connect(url, name, spec.remote, min(timeout, PROBE_S))
            try:
                theirs = server.memory()
            finally:
                server.close()
            ours = ours or identity()
            if theirs is not None and theirs != ours:
                raise WorkflowError(
                    f"agent {name!r} runs {TETHER_SUBAGENT_GRAPH!r} on {shown(url)}, whose "
                    "memory is not this task's: start that server with TETHER_MEMORY_URL "
                    "naming the task's PostgreSQL memory (--memory-url)"
                )
