"""Where a task stands and how it continues: resume, rebuild, status.

* `resume`: where a resumed run continues from (`RecoveryPlan`: LangGraph's own state, the
  latest valid JSON checkpoint, or a snapshot, in that order), and preparing the resume.
* `rebuild`: a run's state rebuilt from tether's own files, without LangGraph's database.
* `status`: where a task stands, read from tether's own files (`orchestrator status`),
  cheap to import (no LangGraph or LangChain).

Invariant: recovery reads; it never deletes or rewrites what a run wrote (a damaged
database is moved aside, never removed), and a finished subagent is never run again.
May import: `orchestrator.graph` and everything below it, `memory`.
"""
