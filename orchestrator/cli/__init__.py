"""The `orchestrator` command: its verbs and groups, the live view, the report text, exits.

* `app`: the `orchestrator` group and its verbs (`run`, `resume`, `approve`, `handoff`,
  `status`, ...); `main` is the console script's entry point.
* `checkpoint`: the `checkpoint` and `snapshot` groups, registered on `app`'s group.
* `view`: live progress of a run (a rich panel on a terminal, plain lines or JSON otherwise).
* `report`: the text printed for a run's result and a task's status.
* `exits`: exit codes and leaving at once when a run stops; `process`: what the command does
  to its own process before a run.

Invariant: only this package prints, reads the terminal or exits; every error reaches the
user as one `Error:` line and an exit code of the one table (`exits`). Importing it loads
neither LangGraph nor LangChain (the verbs import them when they run).
May import: everything in `orchestrator`, and `memory`.
"""

from orchestrator.cli.app import cli, main

__all__ = ["cli", "main"]
