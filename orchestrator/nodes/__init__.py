"""The graph's nodes, one module each: plan, spawn, subagent, merge, monitor, advance.

Every node takes `(state, runtime)` and reads its non-serialisable needs from
`runtime.context` (`orchestrator.nodes._runtime.RunContext`). Every node is safe to run
again after a crash: it checks the state and the artifact registry before writing.
"""
