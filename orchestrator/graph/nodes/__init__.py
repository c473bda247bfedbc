"""The graph's nodes, one module each, in the order a phase runs them:

* `plan`: the lead plans the current phase (`PhasePlan`) and writes the research plan.
* `approve`: a phase plan the workflow gates waits for a person's decision.
* `spawn`: one `Send` per subtask to the subagent node (`route_spawn`).
* `subagent`: one subagent runs its subtask (locally, or on a remote server) and records
  its finding.
* `merge`: the phase's findings merged into one file.
* `monitor`: the lead's context measured; a snapshot past the threshold.
* `advance`: the next phase, or the end of the task.
* `answer`: the lead answers the objective of a finished task (`SubmitAnswer`).

Every node takes `(state, runtime)` and reads its non-serialisable needs from
`runtime.context` (`orchestrator.graph.context.RunContext`). Every node is safe to run
again after a crash: it checks the state and the artifact registry before writing.

Nodes import downward only, never each other: what several of them share lives below them
in `orchestrator.graph.writes` (checkpoints, the research plan, the overview, merged
findings), `orchestrator.graph.lead` (the lead's context and its size),
`orchestrator.graph.handoff` (the lead's context snapshot) and `orchestrator.graph.remote`
(a remote agent's subtask), and in the leaf modules (`orchestrator.artifacts.registry`,
`orchestrator.faults`, ...).
"""
