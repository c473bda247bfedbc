"""Human approval: the requests a task waits on, and the decisions that answer them.

A request is a LangGraph `interrupt` raised by LangChain's `HumanInTheLoopMiddleware` in a
subagent (a tool in its `interrupt_on`) or by the `approve` node (`approve_plan`). Its value
is a `HITLRequest` (`action_requests` + `review_configs`); its id is LangGraph's interrupt
id, the same in every process. When the interrupt passes through a node, `note_requests`
records who asked (agent, subtask) in the task's artifact registry, so `status` can show
the request without LangGraph, and `orchestrator approve` from any process or machine can
answer it.

A remote agent's run that stops at an interrupt raises tether's with the remote request
and where it waits (`orchestrator.graph.remote`); its decision goes back to that thread.

A decision is LangChain's payload, one per action of the request:
`{"decisions": [{"type": "approve"} | {"type": "reject", "message": ...}]}`; a LangGraph
Server client resumes the thread with `Command(resume={interrupt_id: payload})`, and the
CLI builds the same (`decisions_for`). The payload is recorded with the request before the
run continues (`note_decisions`): a process killed after recording it and before LangGraph
saved it leaves a decided request among LangGraph's interrupts, and the next `resume` or
`approve` applies the recorded decision (`recorded_decisions`) instead of asking again or
running nothing.

A request is shown to a person as one line (`request_line`): its id, who asked, the tool,
and its arguments as JSON, those naming what the tool acts on first and whole, the others
cut, so a long argument can never push the target out of sight. A phase plan waiting for
approval is shown as lines instead (`request_lines`): its strategy, then a line per subtask.
"""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from memory.errors import MemoryStoreError
from orchestrator.artifacts.decisions import write_key_decisions
from orchestrator.artifacts.registry import Keys, Status, registry_note, registry_records
from orchestrator.errors import ApprovalError
from orchestrator.types import PLAN_TOOL, PendingApproval

if TYPE_CHECKING:
    from orchestrator.artifacts.documents import Docs
    from orchestrator.artifacts.tasks import TaskList

ARGS_SHOWN = 200
"""Characters of a request's arguments shown on its line when they are not a mapping."""
VALUE_SHOWN = 80
"""Characters of each argument shown in a request's line (those naming its target: all)."""
ITEMS_SHOWN = 12
"""Items of a list argument a request's line shows (the rest counted)."""
STRATEGY_SHOWN = 160
"""Characters of a waiting plan's strategy, and of each subtask's title, shown (cut at a
space)."""

#: Argument names (or endings) that say what a tool acts on, shown first and whole.
TARGET_ARGS = ("path", "file", "filename", "dir", "directory", "url", "uri", "command", "cmd",
               "target", "dest", "destination", "to", "recipient", "table", "repo")  # fmt: skip


def actions_of(value: Any, ident: str, agent: str, key: str) -> list[PendingApproval]:
    """The pending actions of one interrupt value (a `HITLRequest`; a remote agent's names
    where it waits under `remote`, `orchestrator.graph.remote`)."""
    if not isinstance(value, dict):
        return [PendingApproval(id=ident, agent=agent, key=key, tool="?", args={})]
    configs = {c.get("action_name"): c for c in value.get("review_configs") or []}
    where = value.get("remote") if isinstance(value.get("remote"), dict) else {}
    remote = f"{where['server']} thread {where['thread_id']}" if where else ""
    out = []
    for action in value.get("action_requests") or []:
        config = configs.get(action.get("name")) or {}
        out.append(
            PendingApproval(
                id=ident,
                agent=agent,
                key=key,
                tool=str(action.get("name")),
                args=dict(action.get("args") or {}),
                allowed_decisions=list(config.get("allowed_decisions") or ["approve", "reject"]),
                description=str(action.get("description") or ""),
                remote=remote,
            )
        )
    return out


def note_requests(ctx: Any, task_id: str, exc: Any, *, agent: str, key: str) -> None:
    """Record who raised the interrupts of `exc` (a `GraphInterrupt`) in the registry."""
    for intr in (exc.args[0] if exc.args else ()) or ():
        ident = getattr(intr, "id", None)
        if not ident:
            continue
        actions = actions_of(intr.value, ident, agent, key)
        registry_note(
            ctx.docs,
            task_id,
            Keys.approval(ident),
            Status.REQUESTED,
            agent=agent,
            subtask=key,
            actions=[a.model_dump() for a in actions],
        )
        if agent != "lead":
            ctx.emit("agent", key=key, agent=agent, state="waiting")


def pending(docs: Docs, task_id: str, interrupts: Iterable[Any]) -> list[PendingApproval]:
    """The actions of LangGraph's pending `interrupts` of a task that nobody has answered
    yet, with who asked (from the registry; an interrupt nobody noted is shown with agent
    `?`).

    An answered request stays among LangGraph's interrupts until the step it paused
    completes (a process killed while continuing it leaves it there, maybe before LangGraph
    saved the answer); the decision recorded in the registry says it needs no second
    answer: a resume continues it with that decision (`recorded_decisions`). A request
    marked decided without its decision (recorded by an older tether) is asked again.
    """
    records = registry_records(docs, task_id)
    out: list[PendingApproval] = []
    for intr in interrupts:
        rec = records.get(Keys.approval(intr.id)) or {}
        if rec.get("decided") and isinstance(rec.get("decision"), dict):
            continue
        out += actions_of(intr.value, intr.id, rec.get("agent", "?"), rec.get("subtask", ""))
    return out


def note_decisions(docs: Docs, task_id: str, answers: dict[str, dict[str, Any]]) -> None:
    """Record the decisions on requests (before the run continues with them), each with
    its payload, so a run killed before LangGraph saved it can still apply it."""
    for ident, payload in answers.items():
        kinds = sorted({d.get("type", "?") for d in payload.get("decisions") or []})
        decided = "/".join(kinds)
        registry_note(
            docs, task_id, Keys.approval(ident), Status.DECIDED, decided=decided, decision=payload
        )
    try:  # where a person reads them; the registry is the record, this file a view
        write_key_decisions(docs, task_id)
    except (OSError, MemoryStoreError):  # the next overview update writes them
        pass


def recorded_decisions(
    docs: Docs, task_id: str, interrupts: Iterable[Any]
) -> dict[str, dict[str, Any]]:
    """The recorded decisions on LangGraph's pending `interrupts`: `{interrupt id: payload}`
    of the requests answered whose step has not completed (what `Command(resume=...)`
    takes, to continue them)."""
    records = registry_records(docs, task_id)
    out = {}
    for intr in interrupts:
        rec = records.get(Keys.approval(intr.id)) or {}
        if rec.get("decided") and isinstance(rec.get("decision"), dict):
            out[intr.id] = rec["decision"]
    return out


def select(waiting: Sequence[PendingApproval], request_id: str | None) -> list[str]:
    """The interrupt ids a decision answers: all, or the one `request_id` names (a prefix
    of its id is enough when it is unique).

    Raises:
        ApprovalError: nothing waits, or no (or more than one) request matches.
    """
    ids = list(dict.fromkeys(p.id for p in waiting))
    if not ids:
        raise ApprovalError("nothing waits for approval in this task")
    if request_id is None:
        return ids
    if not request_id.strip():  # "" is a prefix of every id: it must not match them all
        raise ApprovalError("empty request id; give one from `orchestrator status` (--id)")
    found = [i for i in ids if i.startswith(request_id.strip())]
    if len(found) != 1:
        what = "no request" if not found else f"{len(found)} requests"
        raise ApprovalError(
            f"{what} matches id {request_id!r}; waiting: {', '.join(i[:12] for i in ids)}"
        )
    return found


def decisions_for(
    waiting: Sequence[PendingApproval], ident: str, *, approve: bool, message: str | None
) -> dict[str, Any]:
    """LangChain's decision payload for every action of request `ident`.

    Raises:
        ApprovalError: the decision is not among an action's `allowed_decisions`.
    """
    kind = "approve" if approve else "reject"
    decisions = []
    for action in (p for p in waiting if p.id == ident):
        if kind not in action.allowed_decisions:
            raise ApprovalError(
                f"request {ident[:12]} ({action.tool}) does not allow {kind!r}; allowed: "
                f"{', '.join(action.allowed_decisions)}"
            )
        decision: dict[str, Any] = {"type": kind}
        if not approve and message:
            decision["message"] = message
        decisions.append(decision)
    return {"decisions": decisions}


def answer(
    docs: Docs,
    task_id: str,
    waiting: Sequence[PendingApproval],
    request_id: str | None,
    *,
    approve: bool,
    message: str | None,
) -> dict[str, dict[str, Any]]:
    """Decide the requests `request_id` names (all when None) and record the decisions:
    `{interrupt id: LangChain's decision payload}`, what `Command(resume=...)` takes.

    Raises:
        ApprovalError: no request matches, or the decision is not allowed.
    """
    ids = select(waiting, request_id)
    answers = {i: decisions_for(waiting, i, approve=approve, message=message) for i in ids}
    note_decisions(docs, task_id, answers)
    return answers


def answerable(docs: Docs, task_id: str, saved: Any) -> bool:
    """Whether LangGraph's saved state (`graph.build.ThreadState`, or None) of the task
    holds requests to answer or recorded decisions to apply."""
    if saved is None:
        return False
    interrupts = saved.interrupts
    return bool(pending(docs, task_id, interrupts) or recorded_decisions(docs, task_id, interrupts))


def listed_only(
    tasks: TaskList, record: dict[str, Any], waiting: list[PendingApproval], decided: bool
) -> tuple[list[PendingApproval], str]:
    """`(requests, warning)`: the requests an `approve` without `--id` answers, those the
    task's last listing showed (its record's, which `run`, `resume`, `approve` and `status`
    print); newer ones wait on, named in the warning (empty when there are none), and are
    listed from now on.

    Raises:
        ApprovalError: every waiting request is newer than the last listing (and no
            recorded decision is left to apply).
    """
    listed = {p.get("id") for p in record.get("pending_approvals") or [] if isinstance(p, dict)}
    fresh = sorted({p.id for p in waiting if p.id not in listed})
    if not fresh:
        return waiting, ""
    tasks.note(
        record["task_id"], status="waiting", pending_approvals=[p.model_dump() for p in waiting]
    )
    line = (
        f"{len(fresh)} request(s) appeared after the last listing and are not answered: "
        f"{', '.join(i[:12] for i in fresh)}; `orchestrator status` lists them"
    )
    kept = [p for p in waiting if p.id in listed]
    if not kept and not decided:
        raise ApprovalError(f"{line}, then approve again")
    return kept, line


# A request as a person reads it


def request_line(request: PendingApproval) -> str:
    """The request as one status line: id, agent, tool and its arguments (cut), and where a
    remote agent's run waits."""
    args = _short(request.args)
    where = f"  on {request.remote}" if request.remote else ""
    return f"{request.id[:12]}  {request.agent} ({request.key})  {request.tool}({args}){where}"


def request_lines(request: PendingApproval) -> list[str]:
    """The request as a person reads it: a phase plan as its head (id, phase, how many
    subtasks), its strategy and a line per subtask (id, agent, title); any other request
    as its `request_line`."""
    subtasks = request.args.get("subtasks")
    if request.tool != PLAN_TOOL or not isinstance(subtasks, list):
        return [request_line(request)]
    phase = request.args.get("phase") or request.key.split("/", 1)[0]
    lines = [f"{request.id[:12]}  {request.agent} ({request.key})  plan of phase {phase}: "
             f"{len(subtasks)} subtask(s)"]  # fmt: skip
    strategy = " ".join(str(request.args.get("strategy") or "").split())
    if strategy:
        lines.append(
            f"  strategy: {textwrap.shorten(strategy, STRATEGY_SHOWN, placeholder=' ...')}"
        )
    for sub in subtasks:
        sub = sub if isinstance(sub, dict) else {"title": sub}
        title = " ".join(str(sub.get("title") or sub.get("description") or "").split())
        title = textwrap.shorten(title, STRATEGY_SHOWN, placeholder=" ...")
        lines.append(f"  - {sub.get('id') or '?'} [{sub.get('agent') or '?'}]: {title}")
    return lines


def _short(args: object) -> str:
    """A request's arguments as one JSON line: those naming what the tool acts on (`path`,
    `file`, `url`, `command`, ...) first and whole, whatever order the model gave them in;
    each other long value cut on its own, a list's items each on their own (the line stays
    JSON, a long `content` can no longer push the path out of sight, and a plan's subtasks
    are listed, their long titles cut)."""
    if not isinstance(args, dict):
        text = " ".join(json.dumps(args, ensure_ascii=False, default=str).split())
        return text if len(text) <= ARGS_SHOWN else text[: ARGS_SHOWN - 3] + "..."
    order = sorted(args, key=lambda k: 0 if _names_a_target(str(k)) else 1)
    shown: dict[str, object] = {}
    for key in order:
        value = args[key]
        if _names_a_target(str(key)):
            shown[key] = value
        elif isinstance(value, list):  # each item cut on its own (a plan's subtasks)
            items = [_cut_item(item) for item in value[:ITEMS_SHOWN]]
            more = len(value) - ITEMS_SHOWN
            shown[key] = items + ([f"... {more} more"] if more > 0 else [])
        else:
            shown[key] = _cut(value)
    return " ".join(json.dumps(shown, ensure_ascii=False, default=str).split())


def _cut(value: object) -> object:
    """`value`, or its JSON text cut to `VALUE_SHOWN` characters."""
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return value if len(text) <= VALUE_SHOWN else text[: VALUE_SHOWN - 3] + "..."


def _cut_item(item: object) -> object:
    """A list item as a request line shows it: a mapping's values cut one by one."""
    return {k: _cut(v) for k, v in item.items()} if isinstance(item, dict) else _cut(item)


def _names_a_target(key: str) -> bool:
    low = key.lower()
    return low in TARGET_ARGS or low.endswith(("path", "_file", "_dir", "_url"))
