"""Agents played by rules, for the scripted OpenAI-compatible server (`openai_server.py`).

`agents(plan=..., steps=...)` returns a responder: the lead's requests (the `PhasePlan` tool
is offered) get `plan(phase)`, its final answer (`SubmitAnswer` offered) `answer(body)` (by
default `lead_answer`: the first finding's line it was given); a subagent's requests
(`SubmitFindings` offered) get its agent's next step, `steps[agent][n]` for its n-th reply
(counted from the assistant messages of its conversation; the last step repeats). A step is
a server step (`{"tool": NAME, "args": {...}}`) or a callable `body -> step`, which can read
what the tools answered. Which agent a request belongs to is read from its system prompt
(the agent's own prompt starts with `AGENT=<name>`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

Step = dict[str, Any] | Callable[[dict[str, Any]], dict[str, Any]]


def text_of(message: dict[str, Any]) -> str:
    """A message's text (text parts of a list content joined; other parts as JSON)."""
    content = message.get("content")
    if isinstance(content, list):
        parts = [p.get("text", "") if isinstance(p, dict) else str(p) for p in content]
        if all(isinstance(p, dict) and p.get("type") == "text" for p in content):
            return "".join(parts)
    return content if isinstance(content, str) else json.dumps(content)


def tool_answers(body: dict[str, Any]) -> list[str]:
    """What the tools answered so far in this conversation, in order."""
    return [text_of(m) for m in body["messages"] if m["role"] == "tool"]


def phase_of(body: dict[str, Any]) -> str:
    users = [text_of(m) for m in body["messages"] if m["role"] == "user"]
    found = re.search(r"^Phase: (\S+)", users[-1] if users else "", re.MULTILINE)
    return found.group(1) if found else ""


def agent_of(body: dict[str, Any]) -> str:
    system = " ".join(text_of(m) for m in body["messages"] if m["role"] == "system")
    found = re.search(r"AGENT=(\w+)", system)
    return found.group(1) if found else "?"


def offered(body: dict[str, Any]) -> set[str]:
    return {t["function"]["name"] for t in body.get("tools") or []}


def findings(summary: str, **fields: Any) -> dict[str, Any]:
    return {"tool": "SubmitFindings", "args": {"summary": summary, **fields}}


ANSWER_PREFIX = "The scripted lead's answer, from "


def lead_answer(body: dict[str, Any]) -> dict[str, Any]:
    """`SubmitAnswer` naming the first finding it was given (or none)."""
    users = [text_of(m) for m in body["messages"] if m["role"] == "user"]
    found = re.search(r"^- (findings/\S+\.md) \[", users[-1] if users else "", re.MULTILINE)
    source = found.group(1) if found else "no findings"
    return {
        "tool": "SubmitAnswer",
        "args": {"answer": ANSWER_PREFIX + source + ".", "findings": [source] if found else []},
    }


def agents(
    plan: Callable[[str], dict[str, Any]],
    steps: dict[str, list[Step]],
    answer: Callable[[dict[str, Any]], dict[str, Any]] = lead_answer,
) -> Callable[[dict[str, Any]], dict[str, Any]]:
    def respond(body: dict[str, Any]) -> dict[str, Any]:
        tools = offered(body)
        if "PhasePlan" in tools:
            return {"tool": "PhasePlan", "args": plan(phase_of(body))}
        if "SubmitAnswer" in tools:
            return answer(body)
        if "SubmitFindings" in tools:
            script = steps[agent_of(body)]
            n = sum(1 for m in body["messages"] if m["role"] == "assistant")
            step = script[min(n, len(script) - 1)]
            return step(body) if callable(step) else step
        return {"text": "ok"}

    return respond


def one_subtask(agent: str, *, done: bool = True, **extra: Any) -> Callable[[str], dict]:
    """A lead that plans one subtask for `agent` in every phase (done after the first)."""

    def plan(phase: str) -> dict[str, Any]:
        return {
            "strategy": f"One {agent} subtask.",
            "subtasks": [
                {"id": f"{agent}-1", "title": f"Work of {agent}", "description": "Do it.",
                 "agent": agent}
            ],
            "done": done,
            "reason": "the one subtask answers it" if done else "",
            **extra,
        }  # fmt: skip

    return plan


# -- a lead that documents modules in waves (tests/orchestrator/graph/test_waves.py, bench) --
WAVE = 5
"""Subtasks a wave of the module-documenting lead plans (its workflow's max_subtasks)."""


def width(modules: int) -> int:
    """Digits of a module's number (`m07` of 40, `m0007` of 2,000)."""
    return max(2, len(str(modules - 1)))


MODULES_WORKFLOW = """
phases: [documentation]
thresholds: {max_subtasks: 5}
agents:
  writer:
    description: Documents one module.
    prompt: AGENT=writer
    tools: [read_file]
"""


def project(root: Path, modules: int, wave: int = WAVE) -> Path:
    """A workdir of `modules` one-line modules (`mods/mNN.py`) and its `wf.yaml`."""
    (root / "mods").mkdir(parents=True)
    for i in range(modules):
        module = root / "mods" / f"m{i:0{width(modules)}d}.py"
        module.write_text(f'"""Module {i}."""\n\nVALUE = {i}\n')
    workflow = MODULES_WORKFLOW.replace("max_subtasks: 5", f"max_subtasks: {wave}")
    (root / "wf.yaml").write_text(workflow)
    return root


def _lead_prompt(body: dict) -> str:
    return "\n".join(text_of(m) for m in body["messages"] if m["role"] in ("user", "system"))


def plan_for(modules: int, size: int = WAVE, *, by_wave: bool = False):
    """The scripted lead: the modules the `Covered:` line does not name, a wave at a time
    (`by_wave`: the modules of its `Wave: k` line's window, for runs longer than the
    `Covered:` line's bound)."""

    def plan(body: dict) -> dict:
        prompt = _lead_prompt(body)
        found = re.search(r"^Covered: (.*)$", prompt, re.MULTILINE)
        covered = set(found.group(1).split(", ")) if found else set()
        left = [f"mods/m{i:0{width(modules)}d}.py" for i in range(modules)]
        if by_wave:
            wave_no = int(re.search(r"^Wave: (\d+)", prompt, re.MULTILINE).group(1))
            left = left[(wave_no - 1) * size :]
        left = [m for m in left if m not in covered]
        wave = left[:size]
        subs = [
            {"id": Path(m).stem, "title": f"Document {Path(m).stem}", "description": "Doc.",
             "agent": "writer", "scope": [m]}
            for m in wave
        ]  # fmt: skip
        return {
            "strategy": f"Document the modules, {size} a wave.",
            "subtasks": subs,
            "continue_phase": len(left) > len(wave),
        }

    return plan


def _read_scope(body: dict) -> dict:
    users = [text_of(m) for m in body["messages"] if m["role"] == "user"]
    scope = re.search(r"^Scope: (\S+)", users[0], re.MULTILINE)
    return {"tool": "read_file", "args": {"path": scope.group(1) if scope else "."}}


STEPS = {"writer": [_read_scope, findings("Module {subtask} documented.")]}


def responder(modules: int, size: int = WAVE, *, by_wave: bool = False):
    """The lead of `plan_for` and writers that read their module, then submit."""
    lead = plan_for(modules, size, by_wave=by_wave)
    rest = agents(lambda phase: {}, STEPS)

    def respond(body: dict) -> dict:
        if "PhasePlan" in offered(body):
            return {"tool": "PhasePlan", "args": lead(body)}
        return rest(body)

    return respond


def subagent_starts(requests: list[dict[str, Any]]) -> Counter:
    """The subagent conversations a server saw begin (no assistant turn yet), by scope."""
    starts: Counter = Counter()
    for body in requests:
        if "SubmitFindings" in offered(body) and not any(
            m["role"] == "assistant" for m in body["messages"]
        ):
            users = "\n".join(text_of(m) for m in body["messages"] if m["role"] == "user")
            scope = re.search(r"^Scope: (\S+)", users, re.MULTILINE)
            starts[scope.group(1) if scope else "?"] += 1
    return starts


# -- a weak model (issue 51: Qwen2.5-Coder-1.5B on llama.cpp) --------------------------------
NUDGE_TEXT = "Your reply called no tool"
"""How tether's nudge (a reply without a tool call, steps left) begins."""
ASK_TEXT = "Answer by calling the"
"""How tether's words asking for the final call begin."""
FINAL_TOOLS = ("PhasePlan", "SubmitAnswer", "SubmitFindings")
WEAK_START = "I will start by looking at the code."
WEAK_DONE = "I have what I need."
FROM_NOTHING = {
    "PhasePlan": {"strategy": "Nothing looked at."},
    "SubmitFindings": {"summary": "Nothing looked at."},
    "SubmitAnswer": {"answer": "Nothing looked at."},
}
"""A weak model's final call when it is forced before it did its work (issue 51)."""


def _tethers_words(message: dict[str, Any]) -> bool:
    return message.get("role") == "user" and text_of(message).startswith((NUDGE_TEXT, ASK_TEXT))


def without_prose(body: dict[str, Any]) -> dict[str, Any]:
    """The conversation without tether's nudges and asks and the prose replies they
    answered (what a rule-played agent counts its steps from)."""
    kept: list[dict[str, Any]] = []
    for message in body["messages"]:
        if _tethers_words(message):
            if kept and kept[-1]["role"] == "assistant" and not kept[-1].get("tool_calls"):
                kept.pop()
            continue
        kept.append(message)
    return {**body, "messages": kept}


def weak(respond: Callable[[dict[str, Any]], dict[str, Any]]):
    """`respond`'s agents played as a weak model: its first reply of a turn is prose; its
    ordinary tool calls are `respond`'s; its final answer is prose unless the final tool is
    forced (and the server honours `tool_choice`) or tether asks for it in words, when it
    gives the arguments as JSON text. Forced to its final tool before its work is done, it
    calls it with `FROM_NOTHING`, as a real one does."""

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        from tests.orchestrator.openai_server import _arguments, _subtask_of

        last = body["messages"][-1] if body["messages"] else {}
        if last.get("role") == "user" and not _tethers_words(last):
            return {"text": WEAK_START}
        step = respond(without_prose(body))
        choice = body.get("tool_choice")
        forced = choice.get("function", {}).get("name") if isinstance(choice, dict) else None
        if forced in FINAL_TOOLS and step.get("tool") != forced:
            return {"tool": forced, "args": FROM_NOTHING[forced]}
        if step.get("tool") not in FINAL_TOOLS or forced == step["tool"]:
            return step
        if text_of(last).startswith(ASK_TEXT):
            return {"text": _arguments(step, _subtask_of(body))}
        return {"text": WEAK_DONE}

    return answer
