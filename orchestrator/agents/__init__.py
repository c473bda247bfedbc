"""One agent's loop on LangChain's `create_agent`, and the middleware tether adds to it.

* `loop`: the lead and the subagents as `create_agent` agents, compiled once per shape
  (`_cache`).
* `protocol_middleware`, `final_answer`: the agent protocol (final answer, Ctrl-C, step
  limit, context budget, provider retries, usage), each middleware one job.
* `chat_models`: the one place a `provider:model` string becomes a chat model.
* `provider`: what a provider's replies and failures mean to an agent loop.
* `gauge`: the token gauge (per agent and total, the warning zone, the threshold).
* `budget`: the task's token budget, shared by its agents.
* `memory_middleware`: `TetherMemoryMiddleware`, tether's external memory for any
  `create_agent` agent, and `offload` (large tool results go to memory).
* `remote`: the seam for remote agents (`RemoteAgent`), and `langgraph_server`, its
  LangGraph Server implementation.

Invariant: an agent's every assistant tool call is answered by a tool message; a model
reply never ends an agent without its final protocol tool.
May import: `orchestrator.offline`, `orchestrator.tools`, `orchestrator.config`,
`orchestrator.artifacts`, `orchestrator.types`, `orchestrator.events`,
`orchestrator.errors`, `memory`.
"""

from __future__ import annotations

import importlib

_EXPORTS = {
    "compiled_agent": "orchestrator.agents._cache",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_EXPORTS})
