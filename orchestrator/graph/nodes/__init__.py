"""The graph's nodes, one module each: plan, spawn, subagent, merge, monitor, advance.

Every node takes `(state, runtime)` and reads its non-serialisable needs from
`runtime.context` (`_runtime.RunContext`). Every node is safe to run again after a crash:
it checks the state and the artifact registry before writing.

Nodes import downward only, never each other: what several of them share lives below them
in `_core` (checkpoints, the research plan, the overview, merged findings), `_lead` (the
lead's context and its size) and `_snapshot` (the lead's context snapshot), and in the
package's leaf modules (`orchestrator.artifacts.registry`, `orchestrator.faults`, ...).
"""
