"""The post-task reflector: what is worth remembering across tasks, recorded as memory.

`reflect()` runs, with a chat model, a tool-use loop with the read/write/patch/append tools
(`memory.facts.tools.longterm_tools`), pre-loaded with every fact file and the episode index; with
no model (offline), or when the model records no episode, it appends the episode
(objective, outcome, files touched) deterministically.
"""

from dataclasses import dataclass, field
from datetime import date
from typing import Any

from langchain_core.messages import HumanMessage, SystemMessage, ToolMessage

from memory.clock import today_utc
from memory.facts.longterm import episode_index, episode_path, facts_text, record_episode
from memory.facts.tools import longterm_tools


@dataclass
class ReflectionReport:
    """What the reflector recorded."""

    episode: str | None = None
    """Citation of the episode entry (`episodes/2026-11.md#L12`)."""
    tool_calls: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


# -- the reflector -----------------------------------------------------------------------
REFLECTOR_PROMPT = """You are tether's post-task reflector. Decide what is worth remembering \
across tasks, and record it with the memory tools:
- persistent facts (about the user, the project, preferences, conventions): memory_write a \
new facts/NAME.md as `# Title` plus `- Key: value` bullets, or memory_patch an existing fact \
with exact old/new text;
- the episode: memory_append to {episode_path} one block `## Title` with `- Summary:` (under \
10 words), `- Date:`, `- Objective:`, `- Outcome:`, `- Files:`, `- Lesson:`.
Skip what has no lasting value. Stop (answer without tool calls) when done.

Existing facts:
{facts}

Episode index:
{episodes}"""


def reflect(
    store: Any,
    *,
    task_id: str,
    objective: str,
    outcome: str,
    files_touched: list[str] | tuple[str, ...] = (),
    model: Any = None,
    transcript: str = "",
    max_steps: int = 8,
    when: date | None = None,
) -> ReflectionReport:
    """Record what a finished task taught: facts (with a model) and at least the episode.

    Args:
        model: a LangChain chat model supporting `bind_tools`; None runs offline.
        transcript: optional digest of the task (e.g. the overview) shown to the model.
    """
    when = when or today_utc()
    report = ReflectionReport()
    if model is not None:
        _reflect_with_model(
            store,
            model,
            report,
            task_id=task_id,
            objective=objective,
            outcome=outcome,
            files_touched=files_touched,
            transcript=transcript,
            max_steps=max_steps,
            when=when,
        )
    if report.episode is None:
        report.episode = record_episode(
            store,
            objective=objective,
            outcome=outcome,
            files_touched=files_touched,
            task_id=task_id,
            when=when,
        )
    return report


def _reflect_with_model(
    store: Any,
    model: Any,
    report: ReflectionReport,
    *,
    task_id: str,
    objective: str,
    outcome: str,
    files_touched: Any,
    transcript: str,
    max_steps: int,
    when: date,
) -> None:
    tools = {t.name: t for t in longterm_tools(store)}
    episodes = "\n".join(f"- {c}: {s}" for c, s in episode_index(store)) or "(no episodes yet)"
    messages: list[Any] = [
        SystemMessage(
            REFLECTOR_PROMPT.format(
                episode_path=episode_path(when), facts=facts_text(store), episodes=episodes
            )
        ),
        HumanMessage(
            f"Task {task_id} finished.\nObjective: {objective}\nOutcome: {outcome}\n"
            f"Files touched: {', '.join(map(str, files_touched)) or '(none)'}\n\n{transcript}"
        ),
    ]
    bound = model.bind_tools(list(tools.values()))
    for _ in range(max_steps):
        try:
            reply = bound.invoke(messages)
        except Exception as exc:  # noqa: BLE001 - a model failure must not lose the episode
            report.errors.append(f"reflector model failed: {type(exc).__name__}: {exc}")
            return
        messages.append(reply)
        calls = getattr(reply, "tool_calls", None) or []
        if not calls:
            return
        for call in calls:
            output = _run_tool(tools, call)
            report.tool_calls.append(call["name"])
            if (
                call["name"] == "memory_append"
                and str(output).startswith("Appended")
                and str(call["args"].get("path", "")).startswith("episodes/")
            ):
                report.episode = str(call["args"]["path"])
            messages.append(ToolMessage(str(output), tool_call_id=call.get("id") or call["name"]))


def _run_tool(tools: dict[str, Any], call: dict[str, Any]) -> str:
    """One tool call's result; bad arguments become an error the model can read."""
    tool = tools.get(call["name"])
    if tool is None:
        return f"Error: unknown tool {call['name']!r}; use one of {', '.join(sorted(tools))}"
    try:
        return str(tool.invoke(call.get("args") or {}))
    except Exception as exc:  # noqa: BLE001 - e.g. pydantic validation of the arguments
        first = str(exc).splitlines()[0] if str(exc) else ""
        return f"Error: {call['name']} arguments rejected ({type(exc).__name__}: {first})"
