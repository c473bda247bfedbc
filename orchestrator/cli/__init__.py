"""The `orchestrator` command: its verbs and groups, the live view, the report text, exits.

* `app`: the `orchestrator` group and its verbs (`run`, `resume`, `approve`, `handoff`,
  `status`, ...); `main` (here) is the console script's entry point.
* `checkpoint`: the `checkpoint` and `snapshot` groups, registered on `app`'s group.
* `view`: live progress of a run (a rich panel on a terminal, plain lines or JSON otherwise).
* `report`: the text printed for a run's result and a task's status.
* `exits`: exit codes and leaving at once when a run stops; `process`: what the command does
  to its own process before a run.

`main` takes SIGTERM as Ctrl-C before it imports the verbs, so a signal during start-up is
one line and exit 130 or 143, never a traceback (`exits.stopped_early`).

Invariant: only this package prints, reads the terminal or exits; every error reaches the
user as one `Error:` line and an exit code of the one table (`exits`). Importing it loads
neither LangGraph nor LangChain (the verbs import them when they run).
May import: everything in `orchestrator`, and `memory`.
"""

from __future__ import annotations

import sys
from typing import Any

from orchestrator.cli.exits import stop_gracefully_on_sigterm, stopped_early

__all__ = ["cli", "main"]


def main(*args: Any, **kwargs: Any) -> Any:
    """Console-script entry point: the signals first, then the verbs."""
    stop_gracefully_on_sigterm()
    verb = next((a for a in sys.argv[1:] if not a.startswith("-")), None)
    try:
        from orchestrator.cli.app import cli
    except KeyboardInterrupt as exc:
        stopped_early(exc, verb)
    try:
        return cli(*args, **kwargs)
    except KeyboardInterrupt as exc:  # before a verb runs (click's parsing)
        stopped_early(exc, verb)


def __getattr__(name: str) -> Any:
    if name == "cli":
        from orchestrator.cli.app import cli

        return cli
    raise AttributeError(name)
