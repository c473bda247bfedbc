"""subagent: one tool-using agent per subtask; runs it (or reuses its recorded finding),
records its finding and writes `findings/{agent}_{ts}.md`.

This module runs and finishes a subagent; the other jobs sit beside it: what it is told in
`orchestrator.graph.subagent_prompt`, the files its tools wrote and its tool log (the
calls it made, the files it read: what its finding rests on) in
`orchestrator.graph.written` (from the tools' typed outcomes), its finding as the one
object that travels in `orchestrator.artifacts.finding` (`FindingRecord`), reading a
recorded finding back and repairing its file after a crash in
`orchestrator.artifacts.recorded`, and a remote agent's run in `orchestrator.graph.remote`
(one call, `run_remote`).

The subagent gets the tools its workflow spec names (default: the read-only workdir tools,
`recall_memory` and the memory tools; always `memory_fetch`, which reads tool results
evicted to memory), tether's protocol text plus its own prompt (`prompt`/`prompt_file`)
and the skills index as its system prompt, and its own bounded context
(`subagent_context_tokens`). Its middleware (`subagent_middleware`): each call of the
user's tools has its idempotency key, its result recorded (`ToolCallKeys`, keyed by the
subtask), tool results over the
limit go to memory entries (`OffloadLargeToolResults`), the user's tools are timed out
(`ToolTimeoutMiddleware`), and the tools in its `interrupt_on` wait for a person's decision
(LangChain's `HumanInTheLoopMiddleware`: a LangGraph `interrupt` that ends the run
`waiting`; the approved agent continues from its own checkpoint). It ends by calling
`SubmitFindings`, which becomes its `FindingRecord`. An agent with a token cap (its
`max_tokens`, else `thresholds.subagent_max_tokens`) that reaches it is asked to submit at
its next call (what its earlier runs spent, in the usage journal, counts: a resumed agent
does not start its cap again); its finding is marked partial (`partial_reason`, in its
registry record), and one that does not submit gets a partial finding built from its tool
calls: the task goes on.

Idempotent (no subagent that has written its findings runs again), through the artifact
registry (`orchestrator.artifacts.registry`):
1. the record's finding and the chosen timestamp are recorded first under
   `Keys.findings(key)` (a durable line);
2. the findings file is written with that timestamp, which fixes its name
   (`artifacts.findings.finding_file_name`); only if that name was taken is its path
   recorded as well. The file is not fsynced: the record is the durable copy, and a resume
   writes again any file a crash of the machine lost or cut short
   (`artifacts.recorded.repair_findings`).
On a replay (any run but the one that started the task, which has nothing on disk to
look up), a recorded result is reused: the file is rewritten from the record if the crash
came before step 2, and the agent itself never runs a second time.

A model or tool exception marks this subagent failed (`failed[key]`, shown as
`blocked_agents` in checkpoints) and leaves the other subagents alone; a failed subtask
has no findings, so the next resume's spawn retries it. When its provider failed, its
conversation so far (every tool call answered) is recorded first
(`Keys.transcript(key)`), and the retry continues from it, as a resume after a kill
continues from the agent's durable steps: its tool calls are not made a second time.

A remote agent (`AgentSpec.remote`) runs the subtask on LangGraph Server instead
(`orchestrator.graph.remote`): it is told the same subtask text, and its result goes
through the same two steps (for `tether_subagent` the server took them, in the shared
memory, and the node reads the record back).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import messages_from_dict, messages_to_dict
from langgraph.errors import GraphBubbleUp, GraphInterrupt
from langgraph.runtime import Runtime

from memory.backends.urls import redact_text
from orchestrator.agents.loop import run_agent
from orchestrator.agents.offload import OffloadLargeToolResults
from orchestrator.agents.protocol_middleware import TokenCapReached
from orchestrator.approvals import note_requests
from orchestrator.artifacts.documents import FINDINGS
from orchestrator.artifacts.finding import FindingRecord
from orchestrator.artifacts.findings import finding_file_name, findings_meta, write_finding
from orchestrator.artifacts.names import iso_timestamp
from orchestrator.artifacts.recorded import recorded_finding
from orchestrator.artifacts.registry import Keys, Status, find_written, registry_lookup
from orchestrator.config.workflow import AgentSpec
from orchestrator.errors import ModelCallError, RemoteAgentError, Stopped
from orchestrator.faults import fault
from orchestrator.graph.context import RunContext
from orchestrator.graph.remote import RemoteResult, run_remote
from orchestrator.graph.subagent_prompt import earlier_on_scope, remote_text, subagent_prompt
from orchestrator.graph.written import files_written, in_workdir, tool_log
from orchestrator.state import DELETE, usage_record
from orchestrator.tools.toolbox import ToolTimeoutMiddleware
from orchestrator.types import SubagentPayload, SubmitFindings


def _write(
    ctx: RunContext, task_id: str, record: FindingRecord, ts: str, *, durable: bool = True
) -> tuple[Path, bool]:
    """Write `record`'s findings file; its path, and whether its name was taken."""
    return write_finding(
        ctx.docs, record, task_id, timestamp=ts, durable=durable, project_dir=ctx.project_dir
    )


def _reuse(
    ctx: RunContext, payload: SubagentPayload, rec: dict, *, reused: bool = True
) -> dict[str, Any]:
    """A subagent that already produced findings: rewrite the file if needed, never rerun
    (`reused` False: a remote `tether_subagent` wrote them just now)."""
    sub, key, docs = payload["subtask"], payload["key"], ctx.docs
    record = recorded_finding(key, {**rec, "subtask": sub, "phase": payload["phase"]})
    expected = finding_file_name(record, rec["ts"])
    # a file at the recorded name is whole: `repair_findings` ran before the graph
    recorded = rec.get("path") or expected
    path = docs.path(recorded) if docs.exists(recorded) else None
    if path is None:
        path = find_written(
            docs,
            FINDINGS,
            rec["ts"],
            findings_meta,
            expected=expected,
            task_id=payload["task_id"],
            subtask_id=key,
        )
    if path is None:
        path, _ = _write(ctx, payload["task_id"], record, rec["ts"])
    if docs.rel(path) not in (expected, rec.get("path")):
        ctx.note(payload["task_id"], Keys.findings(key), Status.WRITTEN, path=docs.rel(path))
    ctx.emit(
        "agent",
        key=key,
        agent=sub["agent"],
        state="done",
        reused=reused,
        tokens=rec.get("tokens", 0),
        path=str(path),
    )
    record = record.model_copy(update={"path": docs.rel(path)})
    return {"findings": {key: dict(record.ref())}, "failed": {key: DELETE}}


def subagent_middleware(ctx: RunContext, agent: str, task_id: str, key: str = "") -> list[Any]:
    """The subagent's own middleware: the idempotency keys of its calls of the user's
    tools (first: the key reaches the tool's thread, and the result recorded is the one
    the agent gets), human approval of its `interrupt_on` tools, large tool results to
    memory, timeouts on the user's tools."""
    spec = ctx.agent_spec(agent)
    middleware: list[Any] = ctx.call_keys(agent, task_id, key, lead=False) if key else []
    if spec is not None and spec.interrupt_on:
        middleware.append(
            HumanInTheLoopMiddleware(
                interrupt_on=dict(spec.interrupt_on),
                description_prefix=f"Agent {agent!r} of task {task_id!r} asks to run a tool",
            )
        )
    middleware.append(
        OffloadLargeToolResults(
            ctx.store,
            max_tokens=ctx.tool_result_tokens,
            usage=ctx.usage,
            tags=(f"task:{task_id}", f"agent:{agent}"),
            on_event=lambda event: ctx.emit(event.pop("event"), agent=agent, **event),
        )
    )
    user = [n for n in ctx.tool_names(agent, lead=False) if n in ctx.toolbox.tools]
    if user:
        middleware.append(ToolTimeoutMiddleware(ctx.tool_timeout, user))
    return middleware


def token_cap(ctx: RunContext, agent: str) -> int | None:
    """The agent's token cap: its spec's `max_tokens`, else the workflow's
    `thresholds.subagent_max_tokens` (None: no cap)."""
    spec = ctx.agent_spec(agent)
    if spec is not None and spec.max_tokens is not None:
        return spec.max_tokens
    return ctx.workflow.thresholds.subagent_max_tokens


def spent_before(ctx: RunContext, agent: str, key: str) -> int:
    """What subtask `key`'s agent spent in earlier runs of the task (the usage journal's
    calls under its key: a process killed mid-agent loses none of them), so a resumed
    agent's cap counts them too."""
    if ctx.journal is None:
        return 0
    return ctx.journal.spent_by(f"{agent}:{key}")


def _cap_left(cap: int | None, before: int) -> int | None:
    """The agent's cap for this run: what its earlier runs left of it (0: submit now)."""
    return None if cap is None else max(cap - before, 0)


def _cap_reason(tokens: int, cap: int | None) -> str:
    return f"stopped at its token cap of {cap or 0:,} ({tokens:,} tokens spent)"


def _unsubmitted(
    exc: TokenCapReached, sub: Any, key: str, cap: int | None, before: int
) -> FindingRecord:
    """The partial finding of an agent that did not submit at its token cap: what its tool
    calls looked at, and its last words."""
    calls = exc.result.tool_calls
    paths = [str(c["args"]["path"]) for c in calls if isinstance(c["args"].get("path"), str)]
    said = [str(m.text).strip() for m in exc.messages if m.type == "ai" and str(m.text).strip()]
    summary = (
        f"Stopped at its token cap before submitting its findings, after {len(calls)} tool "
        "call(s); nothing it concluded was submitted."
    )
    final = {
        "status": "partial",
        "summary": summary,
        "key_discoveries": said[-1:],
        "files": [{"path": p, "description": "named in a tool call"} for p in dict.fromkeys(paths)],
    }
    record = FindingRecord.submitted(final, sub, key, exc.result.tokens)
    return record.capped(_cap_reason(before + exc.result.tokens, cap))


def _run(ctx: RunContext, payload: SubagentPayload, used: dict[str, int]) -> Any:
    """Run the subagent's tool loop; `used["tokens"]` follows its spend as it goes."""
    sub, key = payload["subtask"], payload["key"]
    spec = ctx.agent_spec(sub["agent"])
    max_steps = spec.max_steps if spec is not None else AgentSpec().max_steps
    budget = ctx.workflow.thresholds.subagent_context_tokens

    def on_step(tokens: int, context: int, tool: str | None) -> None:
        used["tokens"], used["steps"] = tokens, used.get("steps", 0) + 1
        ctx.emit("agent", key=key, agent=sub["agent"], state="running", tokens=tokens,
                 steps=used["steps"], max_steps=max_steps, tool=tool)  # fmt: skip

    tools = ctx.tools_for(sub["agent"], payload["task_id"], payload["workdir"], lead=False, key=key)
    if not any(t.name == "memory_fetch" for t in tools):  # evicted results stay readable
        tools += [t for t in ctx.memory_tools(payload["task_id"]) if t.name == "memory_fetch"]
    return run_agent(
        ctx.model_for(sub["agent"]),
        tools=tools,
        final_tool=SubmitFindings,
        messages=_continued(ctx, payload)
        or subagent_prompt(
            payload,
            ctx.skills_for(sub["agent"]),
            max_steps,
            ctx.prompts.get(sub["agent"], ""),
            earlier_on_scope(ctx, payload),
        ),
        max_steps=max_steps,
        max_context_tokens=budget,
        on_step=on_step,
        middleware=[
            *subagent_middleware(ctx, sub["agent"], payload["task_id"], key),
            *ctx.budget_middleware(key),
            *ctx.trace_middleware(sub["agent"], key),
        ],
        stop=ctx.stop,
        usage=ctx.usage,
        notify=lambda line: ctx.emit("warning", message=f"{key} [{sub['agent']}]: {line}"),
        nudges=spec.nudges if spec is not None else AgentSpec().nudges,
        journal=ctx.calls(sub["agent"], f"{sub['agent']}:{key}", key.split("/", 1)[0]),
        max_tokens=_cap_left(token_cap(ctx, sub["agent"]), used.get("before", 0)),
    )


def _keep_transcript(ctx: RunContext, task_id: str, key: str, exc: Exception) -> None:
    """Record the conversation of a subagent whose provider failed, its tool calls done,
    so that the run that retries it continues from there, as after a kill: a tool with
    effects (`send_email`) is not called again."""
    messages = getattr(exc, "messages", None)
    if not isinstance(exc, ModelCallError) or not messages:
        return
    try:
        ctx.note(task_id, Keys.transcript(key), Status.NOTED, messages=messages_to_dict(messages))
    except (TypeError, ValueError):  # a message that is not JSON: the retry starts afresh
        return


def _continued(ctx: RunContext, payload: SubagentPayload) -> list[Any] | None:
    """The recorded conversation of this subtask's failed attempt, if any (None: start
    from its prompt)."""
    if ctx.new_task:
        return None
    rec = ctx.registry_record(payload["task_id"], Keys.transcript(payload["key"]))
    kept = (rec or {}).get("messages")
    if not isinstance(kept, list) or not kept:
        return None
    try:
        messages = messages_from_dict(kept)
    except (KeyError, TypeError, ValueError):
        return None
    ctx.emit(
        "warning",
        message=f"{payload['key']} [{payload['subtask']['agent']}]: continues its failed "
        f"attempt from its {sum(m.type == 'ai' for m in messages)} earlier step(s); its "
        "tool calls are not made again",
    )
    return messages


def subagent_node(payload: SubagentPayload, runtime: Runtime[RunContext]) -> dict[str, Any]:
    """Run (or reuse) one subagent; returns its keyed findings, or its failure."""
    return run_subagent(runtime.context, payload)


def run_subagent(ctx: RunContext, payload: SubagentPayload) -> dict[str, Any]:
    """`subagent_node`'s work with the run context given (LangGraph Server's
    `tether_subagent` graph runs one subagent so, `orchestrator.server`)."""
    sub, key, task_id = payload["subtask"], payload["key"], payload["task_id"]
    rec = None if ctx.new_task else ctx.registry_record(task_id, Keys.findings(key))
    if rec and rec.get("findings") is not None:
        return _reuse(ctx, payload, rec)
    fault("subagent_before_run")
    if ctx.stop.is_set():
        raise Stopped(f"stopped by Ctrl-C before subagent {key!r} started")
    ctx.budget.check(key)  # a queued subagent does not start past the budget
    ctx.emit("agent", key=key, agent=sub["agent"], state="running", tokens=0)
    ctx.attempted.add(key)
    spec = ctx.agent_spec(sub["agent"])
    if spec is not None and spec.remote is not None:
        return _run_remote(ctx, payload, spec)
    used = {"tokens": 0}
    cap = token_cap(ctx, sub["agent"])
    used["before"] = spent_before(ctx, sub["agent"], key) if cap is not None else 0
    try:
        result = _run(ctx, payload, used)
    except TokenCapReached as exc:  # it did not submit at its cap: what it has, partial
        record = _unsubmitted(exc, sub, key, cap, used["before"])
        record = record.with_tools(tool_log(exc.messages), in_workdir(payload.get("workdir")))
        return _finish(ctx, payload, record, usage_record(exc.result))
    except GraphInterrupt as exc:  # a tool call waits for approval: not a failure
        note_requests(ctx, task_id, exc, agent=sub["agent"], key=key)
        raise
    except GraphBubbleUp:  # LangGraph's own control flow
        raise
    except Exception as exc:  # any model/tool failure blocks this subagent only
        _keep_transcript(ctx, task_id, key, exc)
        return _failed(ctx, payload, exc, used["tokens"])
    written = files_written(result.transcript)
    record = FindingRecord.submitted(result.final, sub, key, result.tokens).with_written(written)
    record = record.with_tools(tool_log(result.transcript), in_workdir(payload.get("workdir")))
    if result.capped:
        record = record.capped(_cap_reason(used["before"] + result.tokens, cap))
    return _finish(ctx, payload, record, usage_record(result))


def _failed(
    ctx: RunContext, payload: SubagentPayload, exc: Exception, tokens: int
) -> dict[str, Any]:
    """The state update of a subagent that failed (the others go on)."""
    sub, key = payload["subtask"], payload["key"]
    error = redact_text(f"{type(exc).__name__}: {exc}")  # no credentials of a URL kept
    ctx.emit("agent", key=key, agent=sub["agent"], state="failed", error=error, tokens=tokens)
    return {
        "failed": {key: {"agent": sub["agent"], "error": error[:500], "kind": type(exc).__name__}},
        "tokens": {f"{sub['agent']}:{key}": tokens},
    }


def _finish(
    ctx: RunContext,
    payload: SubagentPayload,
    record: FindingRecord,
    usage: dict[str, int] | None,
    **noted: Any,
) -> dict[str, Any]:
    """Record a subagent's findings, write their file, and return the state update
    (`noted`: more fields of its registry record, e.g. where a remote agent ran)."""
    sub, key, task_id = payload["subtask"], payload["key"], payload["task_id"]
    ts = iso_timestamp()
    # the stored record, not the run's lookup: its agent's finished runs (1 unless a bug)
    stored = registry_lookup(ctx.docs, task_id, Keys.findings(key))
    runs = (stored.get("runs") or 0) + 1 if stored is not None else 1
    ctx.note(
        task_id,
        Keys.findings(key),
        Status.STARTED,
        ts=ts,
        findings=record.finding(),
        tokens=record.tokens,
        phase=payload["phase"],
        subtask=sub,
        runs=runs,
        **({"partial_reason": record.partial_reason} if record.partial_reason else {}),
        **noted,
    )
    fault("subagent_before_findings")
    # not fsynced: the record just noted holds the findings durably, and a resume writes
    # the file again from it if a crash of the machine lost the file (`repair_findings`)
    path, renamed = _write(ctx, task_id, record, ts, durable=False)
    if renamed:
        # the name was taken: the record must say where the file is (by default the
        # timestamp recorded above names it, and the registry needs no second line)
        ctx.note(task_id, Keys.findings(key), Status.WRITTEN, path=ctx.docs.rel(path))
    fault("subagent_after_findings")
    tokens = record.tokens
    ctx.emit("agent", key=key, agent=sub["agent"], state="done", tokens=tokens, path=str(path))
    record = record.model_copy(update={"path": ctx.docs.rel(path)})
    out = {
        "findings": {key: dict(record.ref())},
        "failed": {key: DELETE},
        "tokens": {f"{sub['agent']}:{key}": tokens},
    }
    if usage is not None:
        out["usage"] = {f"{sub['agent']}:{key}": usage}
    return out


def _run_remote(ctx: RunContext, payload: SubagentPayload, spec: AgentSpec) -> dict[str, Any]:
    """A remote agent's subtask (`orchestrator.graph.remote`), recorded as a local one's."""
    sub, key, task_id = payload["subtask"], payload["key"], payload["task_id"]
    assert spec.remote is not None
    try:
        result: RemoteResult = run_remote(
            ctx, payload, sub["agent"], spec.remote, remote_text(ctx, payload)
        )
    except GraphInterrupt as exc:  # the remote run waits for a decision
        note_requests(ctx, task_id, exc, agent=sub["agent"], key=key)
        raise
    except GraphBubbleUp:
        raise
    except Exception as exc:  # a failed or unreachable remote run blocks this subagent only
        return _failed(ctx, payload, exc, 0)
    if ctx.journal is not None:  # the remote run's reported spend, one record
        ctx.journal.remote(sub["agent"], f"{sub['agent']}:{key}", key.split("/", 1)[0],
                           result.tokens, result.usage or {})  # fmt: skip
    ctx.budget.add(result.tokens)
    if result.findings is not None:
        record = FindingRecord.submitted(result.findings, sub, key, result.tokens)
        return _finish(ctx, payload, record, result.usage, remote=result.where)
    # `tether_subagent` wrote the finding into the shared memory: read its record back
    stored = registry_lookup(ctx.docs, task_id, Keys.findings(key))
    if stored is None or stored.get("findings") is None:
        error = RemoteAgentError(f"{result.where.get('server')} wrote no finding for {key!r}")
        return _failed(ctx, payload, error, result.tokens)
    stored.pop("key")
    ctx.registry_noted(task_id, Keys.findings(key), stored)  # this run's lookups
    ctx.note(task_id, Keys.findings(key), Status.NOTED, remote=result.where)
    out = _reuse(ctx, payload, {**stored, "key": Keys.findings(key)}, reused=False)
    out["tokens"] = {f"{sub['agent']}:{key}": result.tokens}
    if result.usage is not None:
        out["usage"] = {f"{sub['agent']}:{key}": result.usage}
    return out
