"""How the `orchestrator` command ends: its exit codes, leaving at once when a run stops,
and SIGTERM taken as Ctrl-C (`Terminated`), so that `kill`, `timeout` and `docker stop`
stop a run with its `interrupted` checkpoint and the resume hint."""

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


def exit_now(code: int) -> None:
    """Exit at once: worker threads may sit in a hung model request, and waiting for them
    at interpreter shutdown would ignore the first Ctrl-C (everything durable is written)."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)
