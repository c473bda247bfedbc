"""People's decisions on a task's approval requests, as lines a person reads.

`orchestrator.approvals` records each request in the task's artifact registry
(`approval:{interrupt id}`: who asked, the actions with their tool and arguments) and then
its decision (`decided`, LangChain's payload: one `approve`, `edit` or `reject` per action,
a rejection with the person's message). This module reads those records back for the
files a person reads: `working/{task}/overview.md`'s Key Decisions (`write_key_decisions`,
called when a decision is recorded and at every overview update) and the snapshot's
Decisions Made and Pending Decisions (`decision_lines`, `waiting_lines`).

A decision's time is its registry record's last update (the decision is the last note a
request gets); a waiting request's is when it was asked.

Invariant: the lines only quote the registry (tool, path, phase, message, time); in the
overview, tether's lines sit between two markers and the rest of the section is left as
a person or an agent wrote it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from memory.store import MemoryStore
from memory.task.working import WorkingMemory
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.registry import Keys, registry_history
from orchestrator.artifacts.render import md_code, md_inline
from orchestrator.artifacts.text import sections

if TYPE_CHECKING:
    from orchestrator.types import JsonObject

PLAN_ACTION = "PhasePlan"
"""The action of a phase plan's request (`orchestrator.graph.nodes.approve`)."""

MESSAGE_CHARS = 300
"""Longest message quoted (a person's reason is rarely longer)."""

_KINDS = {"approve": "approved", "reject": "rejected", "edit": "edited", "respond": "answered"}
_PATH_ARGS = ("path", "file_path", "file", "target", "url")
BEGIN = "<!-- decisions on approval requests, kept by tether from its registry: -->"
END = "<!-- end of the decisions kept by tether -->"
# (not `<!-- tether:...`: that is how a file's metadata line opens, which readers drop)


@dataclass(frozen=True)
class Decision:
    """One action of an approval request and what a person decided on it."""

    id: str
    agent: str
    subtask: str
    tool: str
    args: dict[str, Any]
    kind: str
    """`approved`, `rejected`, `edited`, or `waiting` (no decision yet)."""
    message: str
    at: float
    """When it was decided (or asked, while it waits): seconds since the epoch."""
    edited: dict[str, Any] | None = None
    """An `edit` decision's action (`name`, `args`): what ran instead."""

    @property
    def who(self) -> str:
        """The agent that asked, with its subtask."""
        return f"{self.agent}, {self.subtask}" if self.subtask else self.agent

    @property
    def about(self) -> str:
        """What the request was about: the tool and its path, or the phase plan."""
        return _about(self.tool, self.args, self.subtask)


def _about(tool: str, args: JsonObject, subtask: str = "") -> str:
    if tool == PLAN_ACTION:
        phase = args.get("phase") or subtask.split("/")[0] or "?"
        subtasks = args.get("subtasks") or []
        ids = ", ".join(str(s.get("id")) for s in subtasks if isinstance(s, dict))
        listed = f": {ids}" if ids else ""
        return f"the plan of phase {md_inline(str(phase))} ({len(subtasks)} subtask(s){listed})"
    path = next((args[k] for k in _PATH_ARGS if isinstance(args.get(k), str)), "")
    return f"{md_code(tool)} on {md_code(path)}" if path else md_code(tool)


def decisions(docs: Docs, task_id: str) -> list[Decision]:
    """Every action of the task's approval requests, decided or waiting, oldest first."""
    out = []
    for rkey, data, updated_at in registry_history(docs, task_id, Keys.APPROVAL):
        payload = data.get("decision") if isinstance(data.get("decision"), dict) else {}
        answers = [d for d in payload.get("decisions") or [] if isinstance(d, dict)]
        for i, action in enumerate(a for a in data.get("actions") or [] if isinstance(a, dict)):
            answer = answers[i] if i < len(answers) else {}
            kind = _KINDS.get(str(answer.get("type")), "decided") if answer else "waiting"
            if kind == "waiting" and data.get("decided"):
                # recorded without its payload (older tether): `approve`, `reject/approve`
                kind = "/".join(_KINDS.get(k, k) for k in str(data["decided"]).split("/"))
            out.append(
                Decision(
                    id=rkey.removeprefix(Keys.APPROVAL),
                    agent=str(data.get("agent") or action.get("agent") or "?"),
                    subtask=str(data.get("subtask") or action.get("key") or ""),
                    tool=str(action.get("tool") or "?"),
                    args=dict(action.get("args") or {}),
                    kind=kind,
                    message=str(answer.get("message") or ""),
                    at=updated_at,
                    edited=answer.get("edited_action")
                    if isinstance(answer.get("edited_action"), dict)
                    else None,
                )
            )
    return sorted(out, key=lambda d: (d.at, d.id))


def _when(at: float) -> str:
    return datetime.fromtimestamp(at, UTC).strftime("%Y-%m-%d %H:%M UTC") if at else "?"


def decision_line(d: Decision) -> str:
    """`2026-12-06 19:10 UTC: rejected `write_file` on `notes.txt` (writer, impl/w-1):
    "keep the old notes"`."""
    said = md_inline(d.message).replace("<!--", "&lt;!--")  # cannot open a comment
    if len(said) > MESSAGE_CHARS:
        said = said[: MESSAGE_CHARS - 4].rstrip() + " ..."
    reason = f': "{said}"' if said else " (no message)" if d.kind == "rejected" else ""
    if d.edited is not None:
        edited = d.edited
        instead = _about(str(edited.get("name") or d.tool), dict(edited.get("args") or {}))
        reason = f"; ran {instead} instead{reason}"
    return f"{_when(d.at)}: {d.kind} {d.about} ({md_inline(d.who)}){reason}"


def decision_lines(docs: Docs, task_id: str) -> list[str]:
    """The decisions made on the task's requests, oldest first, one line each."""
    return [decision_line(d) for d in decisions(docs, task_id) if d.kind != "waiting"]


def waiting_lines(docs: Docs, task_id: str) -> list[str]:
    """The requests of the task that wait for a person, with how to answer them.

    An agent waits on one request at a time, so only each agent's and subtask's newest
    request can wait: an older one left unanswered was dropped with its run (a resume
    from a snapshot asks again).
    """
    newest: dict[tuple[str, str], str] = {}
    found = decisions(docs, task_id)
    for d in found:  # oldest first: the last one of each agent and subtask wins
        newest[(d.agent, d.subtask)] = d.id
    return [
        f"{d.about} ({md_inline(d.who)}) waits for approval since {_when(d.at)}: "
        f"`orchestrator approve --task {task_id} --id {d.id[:12]}` (or `--reject --message REASON`)"
        for d in found
        if d.kind == "waiting" and newest[(d.agent, d.subtask)] == d.id
    ]


def key_decisions(section: str, lines: list[str]) -> str:
    """The body of a Key Decisions section with tether's `lines` between the markers and
    everything else it held (a person's or an agent's notes) kept."""
    pattern = re.compile(rf"\n?{re.escape(BEGIN)}.*?{re.escape(END)}\n?", re.S)
    own = pattern.sub("\n", section).strip("\n")
    if not lines:
        return own
    block = "\n".join([BEGIN, *(f"- {line}" for line in lines), END])
    return f"{own}\n{block}" if own else block


def write_key_decisions(docs: Docs, task_id: str) -> None:
    """Bring the Key Decisions of `working/{task}/overview.md` up to date with the
    registry (creating the overview if it is missing)."""
    lines = decision_lines(docs, task_id)
    if not lines:
        return
    wm = WorkingMemory(MemoryStore(backend=docs.backend), task_id)  # not closed: not ours

    def bodies(text: str) -> dict[str, str]:
        return {"Key Decisions": key_decisions(sections(text).get("Key Decisions", ""), lines)}

    wm.update_overview_sections(bodies)
