"""The LangGraph run: the graph, its context, the lead, the nodes, what they write, pruning.

* `build`: assembling, compiling and running the graph (`build_graph`, `run_graph`), and
  reading a thread's state back.
* `context`: `RunContext`, what the nodes need that is not state (memory, model, workflow,
  tools, callbacks); the subagent's `Send` payload is `orchestrator.types.SubagentPayload`.
* `lead`: the lead's context, what its next call is sent and how big that is.
* `writes`: what several nodes write (checkpoints, the research plan, the overview, merged
  findings).
* `handoff`: the lead's context snapshot, the handoff document a fresh lead continues from.
* `pruning`: pruning a task's LangGraph checkpoints at phase transitions and at the end.
* `remote`: a remote agent's subtask (attempts recorded in the artifact registry before
  anything is created on a server, re-attached on every visit).
* `nodes/`: one module per node: plan, approve, spawn, subagent, merge, monitor, advance,
  answer.

Invariant: every super-step is durable (durability `sync`) and every node is idempotent
when replayed: files are written through the artifact registry, state merges through keyed
reducers (`orchestrator.state`).
May import: `orchestrator.agents` and everything below it, `memory`.
"""
