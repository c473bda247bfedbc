"""How the `orchestrator` command ends: its exit codes, leaving at once when a run stops,
and SIGTERM taken as Ctrl-C (`Terminated`), so that `kill`, `timeout` and `docker stop`
stop a run with its `interrupted` checkpoint and the resume hint.

The exit codes, the same for every verb (the `memory` command shares 0, 1, 2 and 3):

    0    done: the task is done, or the verb did what it was asked (`resume` of a done
         task says there is nothing to resume)
    1    bad input or an error (an unknown task, a bad value, a malformed workflow, a full
         disk): one `Error:` line
    2    a usage error (an unknown option, a missing or extra argument, no such command,
         a group without its subcommand): one `Error:` line (`common.Group`, with
         `memory.cli.options.usage_error`: click's codes, 1 and 2, kept)
    3    the task is not done: it stopped `failed` (an agent failed), or did not finish
    4    the task waits for approval
    5    the provider could not be reached
    6    the task stopped at its token budget
    130  interrupted (Ctrl-C); 143 after SIGTERM
"""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from orchestrator.errors import Terminated

EXIT_FAILED = 3
"""The task finished with failures (a failed agent): `orchestrator resume` reruns them."""
EXIT_WAITING = 4
"""The task waits for approval: `orchestrator approve` (or `--reject`) continues it."""
EXIT_UNREACHABLE = 5
"""The provider could not be reached (every failure is a `ProviderUnreachableError`): the
task stopped resumably; `orchestrator resume` continues once the endpoint answers."""
EXIT_STOPPED = 6
"""The task stopped at its token budget: `orchestrator resume --budget-tokens M` goes on."""
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143


def _terminated(signum: int, frame: Any) -> None:
    raise Terminated


def stop_gracefully_on_sigterm() -> None:
    """SIGTERM raises `Terminated` in the main thread, as Ctrl-C raises KeyboardInterrupt:
    a run stops with its `interrupted` checkpoint and the resume hint (exit 143) instead of
    dying between two writes. Left alone when a parent set SIGTERM to be ignored."""
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)


def stopped_early(exc: KeyboardInterrupt, verb: str | None) -> None:
    """Ctrl-C or SIGTERM before `run` recorded its task (the imports, the model's check, the
    tools' start): one line saying there is nothing to resume (`orchestrator resume` would
    pick another task), exit 130 or 143. Other verbs: the signal's line only."""
    terminated = isinstance(exc, Terminated)
    how = "Terminated (SIGTERM)" if terminated else "Interrupted"
    if verb == "run":
        line = f"{how} before the task was recorded; there is nothing to resume: run it again"
    elif verb in ("resume", "approve"):
        line = f"{how}; resume with `orchestrator resume`"
    else:
        line = how
    print(line, file=sys.stderr)
    exit_now(EXIT_TERMINATED if terminated else EXIT_INTERRUPTED)


def exit_now(code: int) -> None:
    """Exit at once: worker threads may sit in a hung model request, and waiting for them
    at interpreter shutdown would ignore the first Ctrl-C (everything durable is written)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
