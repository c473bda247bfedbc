"""What the verbs and groups of the `orchestrator` command share: the group class that turns
errors into one `Error:` line, the shared options, and the memory and `Orchestrator` of one
invocation.

One rule for every verb and group, the `memory` command's too (`memory.cli.options.usage_error`):
a usage error (an unknown option, a missing or extra argument, no such command, a group
called without a subcommand) is one `Error:` line, with click's "Did you mean" when it has
one, and exit 2, wherever click meets it: the group's own options are parsed in
`make_context`, before `invoke`, so both convert it. Every other bad input (a bad value
too) is one line and exit 1.
"""

from __future__ import annotations

import errno
import sqlite3
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import click

from memory.cli.options import hoist, usage_error
from memory.errors import MemoryStoreError
from orchestrator.cli.exits import exit_now, stopped_early
from orchestrator.config.defaults import TOKEN_THRESHOLD
from orchestrator.config.settings import MemoryLocation, memory_location
from orchestrator.errors import Interrupted, OrchestratorError

#: The command's name in error lines, however it was started (`python -m orchestrator.cli`).
PROGRAM = "orchestrator"


class Group(click.Group):
    """Turns tether's errors into one-line `Error:` messages with exit code 1 (usage errors:
    exit 2, see the module docstring), and takes `--memory-url` after the verb as well as
    before it."""

    def make_context(
        self,
        info_name: str | None,
        args: list[str],
        parent: click.Context | None = None,
        **extra: object,
    ) -> click.Context:
        # the group's own options (`orchestrator --memroy-dir x status`) and a group called
        # without its subcommand fail here, before `invoke`
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            raise usage_error(exc, PROGRAM) from None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        return super().parse_args(ctx, hoist(args, ["--memory-url"]))

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except (OrchestratorError, MemoryStoreError) as exc:
            if isinstance(exc, Interrupted):
                click.echo(str(exc), err=True)
                if exc.checkpoint:
                    click.echo(f"Checkpoint: {exc.checkpoint}", err=True)
                exit_now(128 + exc.signum)  # 130 after Ctrl-C, 143 after SIGTERM
            raise click.ClickException(" ".join(str(exc).split())) from None
        except click.UsageError as exc:
            # a verb's options and arguments, no such command: one line, exit 2
            raise usage_error(exc, PROGRAM) from None
        except KeyboardInterrupt as exc:
            # not turned into `Interrupted` by the API: `run` had not recorded its task
            stopped_early(exc, ctx.invoked_subcommand)
        except BrokenPipeError:
            sys.stderr.close()
            ctx.exit(0)
        except (sqlite3.Error, OSError) as exc:
            raise click.ClickException(_storage_problem(exc)) from None


def _storage_problem(exc: Exception) -> str:
    """One line for a failure of the storage under a command (LangGraph's SQLite state, a
    file written outside the memory library), e.g. a full disk; a task stays resumable."""
    if isinstance(exc, sqlite3.Error):
        what = " ".join(str(exc).split()) or type(exc).__name__
        return (
            f"the task's state could not be saved ({what}); free space if the disk is full, "
            "then run `orchestrator resume`"
        )
    where = f" {exc.filename!r}" if getattr(exc, "filename", None) else ""
    if getattr(exc, "errno", None) == errno.ENOSPC:
        return f"disk full while writing{where}: free space, then run `orchestrator resume`"
    return f"{exc.strerror or exc}:{where} (then `orchestrator resume` continues a task)"


def memory_option(func: Callable) -> Callable:
    return click.option(
        "--memory-dir",
        type=click.Path(file_okay=False, path_type=str),
        default=None,
        help="Memory directory (default: $TETHER_MEMORY_DIR, else ./.temp/memory).",
    )(func)


def task_option(func: Callable) -> Callable:
    return click.option(
        "--task", "task_id", default=None, help="Task id (default: the most recent task)."
    )(func)


def path_option(flag: str, help: str, default: str | None = None) -> Callable:
    """A `FLAG PATH` option; the command checks the path and reports it in one line."""
    return click.option(flag, type=click.Path(path_type=str), default=default, help=help)


def json_option(func: Callable) -> Callable:
    return click.option(
        "--json",
        "json_mode",
        is_flag=True,
        help="Machine-readable output: one JSON object per line.",
    )(func)


#: Subagents one process runs at once, at most: each is a thread with its own model calls,
#: and a phase plans a handful of subtasks (4 by default), so more only hides a typo.
MAX_PARALLEL = 64


def _capped_parallel(ctx: click.Context, param: click.Parameter, value: int | None) -> int | None:
    if value is not None and value > MAX_PARALLEL:
        click.echo(
            f"Warning: --max-parallel {value} is more than {MAX_PARALLEL}; "
            f"running at most {MAX_PARALLEL} subagents at once.",
            err=True,
        )
        return MAX_PARALLEL
    return value


#: The longest `--model-timeout`: a year, far below what a wait accepts (`threading.TIMEOUT_MAX`)
#: and a figure `--help` can say (click printed the range as `[0<x<=9223372036.0]`).
MAX_MODEL_TIMEOUT = 365 * 24 * 3600.0


def _timeout_in_range(
    ctx: click.Context, param: click.Parameter, value: float | None
) -> float | None:
    if value is not None and value > MAX_MODEL_TIMEOUT:
        raise click.BadParameter(
            f"{value:g} seconds is more than a year ({MAX_MODEL_TIMEOUT:,.0f})"
        )
    return value


def run_options(func: Callable) -> Callable:
    """Options shared by `run` and `resume`: the model and the limits reach the command as
    keyword arguments it passes on to `Orchestrator` (`**settings`)."""
    for decorator in reversed(
        [
            click.option(
                "--model",
                default=None,
                help="provider:model (e.g. openai:gpt-4o-mini) or 'offline'.",
            ),
            click.option(
                "--token-threshold",
                type=click.IntRange(min=1),
                default=None,
                help=f"Lead-context tokens that trigger a snapshot (default {TOKEN_THRESHOLD}).",
            ),
            click.option(
                "--model-timeout",
                type=click.FloatRange(min=0, min_open=True),
                default=None,
                callback=_timeout_in_range,
                help="Seconds per model request before it is retried "
                "(default: $TETHER_MODEL_TIMEOUT, workflow, 120; at most a year).",
            ),
            click.option(
                "--max-parallel",
                type=click.IntRange(min=1),
                default=None,
                callback=_capped_parallel,
                help=f"Subagents running at once (default: workflow, 4; at most {MAX_PARALLEL}).",
            ),
            click.option(
                "--max-waves",
                type=click.IntRange(min=1),
                default=None,
                help="Waves of one phase at most, while the lead asks for another "
                "(default: workflow, 50).",
            ),
            click.option(
                "--budget-tokens",
                type=click.IntRange(min=1),
                default=None,
                help="The task's token budget (prompt plus completion tokens of all its "
                "agents); at it the task stops, exit 6 (resume: the new total).",
            ),
            click.option(
                "--status-file",
                is_flag=True,
                default=False,
                help="Keep tether's block in the workdir's STATUS.md current after each "
                "phase (default: the workflow's status_file, else nothing is written there).",
            ),
            click.option(
                "--trace/--no-trace",
                default=None,
                help="OpenTelemetry traces of the run over OTLP/HTTP (the OTEL_* variables; "
                "default: on when $OTEL_EXPORTER_OTLP_ENDPOINT is set). Needs tether[otel].",
            ),
            memory_option,
            json_option,
        ]
    ):
        func = decorator(func)
    return func


@dataclass
class Invocation:
    """What the `orchestrator` group was given, for the command it runs (`ctx.obj`)."""

    memory_dir: str | None = None
    """`--memory-dir` before the verb (the verb's own `--memory-dir` wins)."""
    memory_url: str | None = None
    """`--memory-url` (before or after the verb)."""
    docs: Any = None
    """The shared memory's documents, opened once for the command."""

    def location(self, memory_dir: str | None) -> MemoryLocation:
        """Where the command's memory is (`orchestrator.config.settings.memory_location`)."""
        return memory_location(memory_dir or self.memory_dir, self.memory_url)


def invocation() -> Invocation:
    obj = click.get_current_context().find_object(Invocation)
    return obj if obj is not None else Invocation()


def shared_url(memory_dir: str | None = None) -> str | None:
    """The shared memory's URL (`--memory-url`, `$TETHER_MEMORY_URL`), or None."""
    return invocation().location(memory_dir).url


def open_memory(memory_dir: str | None) -> Any:
    """The memory a command reads (`orchestrator.artifacts.documents.Docs`): the directory, or the
    shared backend (opened once, closed when the command ends)."""
    from memory.backends import backend_for
    from memory.backends.files import FilesBackend
    from orchestrator.artifacts.documents import Docs

    current = invocation()
    where = current.location(memory_dir)
    if where.url is None:
        backend = FilesBackend(where.dir, create=False)
    elif current.docs is not None:
        return current.docs
    else:
        backend = backend_for(where.url, setup=False)
    click.get_current_context().call_on_close(backend.close)
    docs = Docs(backend)
    if where.url is not None:
        current.docs = docs
    return docs


def make_orchestrator(memory_dir: str | None, view: Any = None, **kwargs: object) -> Any:
    # LangGraph and LangChain load here, for the commands that run or read a graph
    from orchestrator.api import Orchestrator

    current = invocation()
    orch = Orchestrator(
        memory_dir=memory_dir or current.memory_dir,
        memory_url=current.memory_url,
        on_event=view,
        **kwargs,
    )  # the environment and the workflow fill in the rest (`orchestrator.config.settings`)
    click.get_current_context().call_on_close(orch.close)
    return orch
