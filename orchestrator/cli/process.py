"""What the `orchestrator` command does to its own process before a run.

`settle_imports()` imports what a run needs (LangGraph, LangChain's agents, pydantic
models, Jinja: about 130,000 objects the garbage collector tracks) and then moves every object
made so far out of the collector's sight (`gc.freeze()`). Without it, the first full
collection of a run walks all of them: about 0.1 s inside a resume of 200 subagents,
every time. Those objects live as long as the process anyway; reference counting still
frees them. Only the command does this: a program that imports tether as a library owns
its interpreter and may call `gc.freeze()` itself.
"""

from __future__ import annotations

import gc


def settle_imports() -> None:
    """Import the graph, its agents and Jinja, then `gc.freeze()` what exists."""
    import jinja2.sandbox  # noqa: F401  (every plan, findings file and checkpoint is rendered)

    import orchestrator.graph.build  # noqa: F401  (LangGraph, LangChain's create_agent, the nodes)

    gc.freeze()
