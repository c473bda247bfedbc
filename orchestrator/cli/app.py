"""The `orchestrator` command line: run, resume, hand off and inspect tether tasks.

Groups are nouns, subcommands verbs: `run`, `resume`, `approve`, `handoff`, `status`,
`tasks`, `checkpoint now|load|report|list`, `snapshot write|list`. Progress goes to stderr
(a live panel on a terminal, plain lines otherwise); results go to stdout, as text or,
with `--json`, one JSON object per line. Only this package turns exceptions into
`Error: ...` (exit 1; a usage error exit 2); Ctrl-C exits 130 after a checkpoint, with the
resume command. The exit codes are `orchestrator.cli.exits`'s table.
Start-up: LangGraph and LangChain are imported only by the commands that run a graph, and
each command imports what only it needs inside its function (the task list, status,
the live view, checkpoint validation), so `--help` and `status` load no more than they use.
"""

from __future__ import annotations

import functools
import itertools
import json
import shutil
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from memory.cli.common import show_warnings
from orchestrator.artifacts.brief import read_brief
from orchestrator.cli.checkpoint import register as register_checkpoint_groups
from orchestrator.cli.common import (
    PROGRAM,
    Group,
    Invocation,
    json_option,
    make_orchestrator,
    memory_option,
    open_memory,
    path_option,
    run_options,
    shared_url,
    task_option,
)
from orchestrator.cli.exits import (
    EXIT_FAILED,
    EXIT_STOPPED,
    EXIT_UNREACHABLE,
    EXIT_WAITING,
    stop_gracefully_on_sigterm,
)
from orchestrator.cli.process import settle_imports
from orchestrator.cli.report import (
    nothing_to_resume,
    report_text,
    status_text,
    task_lines,
    terminal_width,
    unreachable,
)
from orchestrator.config.settings import memory_location

if TYPE_CHECKING:
    from orchestrator.types import JsonObject


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--memory-dir",
    "group_memory_dir",
    type=click.Path(file_okay=False, path_type=str),
    default=None,
    help="Memory directory for the command that follows (it may also come after it).",
)
@click.option(
    "--memory-url",
    default=None,
    help="postgresql://... to keep the memory and graph state in PostgreSQL, shared by "
    "machines (instead of a memory directory; default $TETHER_MEMORY_URL); before or "
    "after the command.",
)
@click.version_option(
    package_name="tether", prog_name=PROGRAM, message="%(prog)s (tether) %(version)s"
)
@click.pass_context
def cli(ctx: click.Context, group_memory_dir: str | None, memory_url: str | None = None) -> None:
    """tether: phased multi-agent runs that survive context limits, crashes and handoffs.

    \b
    Examples:
      orchestrator run "Survey this repository" --workdir .
      orchestrator status
      orchestrator tasks
      orchestrator resume
      orchestrator handoff
      orchestrator resume --from-snapshot .temp/memory/context_snapshots/snap_X.md
    """
    show_warnings()  # the memory library's (a damaged memory.db rebuilt, a lost entry)
    ctx.obj = Invocation(memory_dir=group_memory_dir, memory_url=memory_url)
    where = memory_location(group_memory_dir, memory_url)
    if where.url:
        # the optional `postgres` extra and the backends (30 ms of start-up): only with a URL
        from memory.backends import is_shared, shared_url_forms

        if not is_shared(where.url):  # what the backend says of itself, never its scheme
            raise click.ClickException(
                f"{where.url_flag} must be {shared_url_forms()} for the orchestrator"
            )


def _with_view(json_mode: bool) -> Any:
    """The view for this output and the event callback feeding it.

    The offline banner and warnings go to stderr as their own lines (above a live
    panel, through its console) so they stay in the scrollback and in logs.
    """
    # run and resume only (start-up: see the module docstring)
    from orchestrator.agents.chat_models import OFFLINE_BANNER
    from orchestrator.cli.view import LiveView, make_view

    view = make_view(json_mode=json_mode)

    def say(text: str) -> None:
        if isinstance(view, LiveView):
            view.console.print(text, markup=False, highlight=False)
        else:
            click.echo(text, err=True)

    def on_event(event: dict) -> None:
        kind = event.get("event")
        if kind == "model" and event.get("offline"):
            say(OFFLINE_BANNER)
        if kind == "warning" and not json_mode:
            say(f"Warning: {event['message']}")
            if not isinstance(view, LiveView):
                return
        view(event)

    return view, on_event


def _drive(
    json_mode: bool, memory_dir: str | None, start: Callable[[Any], Any], **options: object
) -> Any:
    """Run or resume a task (`start` gets the `Orchestrator`) under a view; report it."""
    view, on_event = _with_view(json_mode)
    settle_imports()
    orch = make_orchestrator(memory_dir, on_event, **options)  # bad settings: before any panel
    with view:
        result = start(orch)
    newest = None if json_mode else _newest_snapshot(orch.docs, result)
    click.echo(report_text(result, json_mode, shared_url(memory_dir), newest, terminal_width()))
    if result.status == "failed" and unreachable(result.failed):
        click.get_current_context().exit(EXIT_UNREACHABLE)
    if result.status == "failed":
        click.get_current_context().exit(EXIT_FAILED)
    if result.status == "waiting":
        click.get_current_context().exit(EXIT_WAITING)
    if result.status == "stopped":
        click.get_current_context().exit(EXIT_STOPPED)
    if result.status != "done":  # nothing ran to the end: never reported as a success
        click.echo(
            f"Not done: task {result.task_id} is {result.status}; "
            f"continue it with `orchestrator resume --task {result.task_id}`",
            err=True,
        )
        click.get_current_context().exit(EXIT_FAILED)
    return result


def _newest_snapshot(docs: Any, result: Any) -> str | None:
    """The task's newest snapshot, the one `status` names (a handoff's since the run too)."""
    from orchestrator.cli.checkpoint import snapshot_listing

    rows = snapshot_listing(docs, result.task_id, result.snapshots, limit=1)
    return rows[0]["path"] if rows else None


@cli.command("run")
@click.argument("objective", required=False)
@path_option(
    "--objective-file",
    "A long brief (markdown) instead of OBJECTIVE: stored once in memory and referenced.",
)
@click.option(
    "--task",
    "task_id",
    default=None,
    help="Id of the new task (default: the objective's first words and a short hash, "
    "e.g. map-the-auth-flow-3f2a1c).",
)
@path_option(
    "--workdir",
    "Project the agents read (read-only unless an agent lists write tools). "
    "Default: current directory.",
    default=".",
)
@path_option("--workflow", "Workflow YAML: phases, agents, tools, thresholds.")
@click.option("--phase", "start_phase", default=None, help="Start at this workflow phase.")
@run_options
def run_cmd(
    objective: str | None,
    objective_file: str | None,
    task_id: str | None,
    workdir: str,
    workflow: str | None,
    start_phase: str | None,
    memory_dir: str | None,
    json_mode: bool,
    **settings: object,
) -> None:
    """Run OBJECTIVE as a new phased multi-agent task.

    \b
    Examples:
      orchestrator run "Survey this repository and list its risks"
      orchestrator run "Map the auth flow" --workdir ../app --task auth-map
      orchestrator run "Review tests" --workflow workflow.yaml --max-parallel 2
      orchestrator run "Survey" --token-threshold 20000 --json
      orchestrator run --objective-file brief.md --task migration
    """
    if objective is not None and objective_file is not None:
        raise click.UsageError("give OBJECTIVE or --objective-file, not both")
    if objective is None and objective_file is None:
        raise click.UsageError("missing OBJECTIVE (or --objective-file FILE for a long brief)")
    brief = read_brief(objective_file) if objective_file is not None else None
    if task_id is not None:  # a bad id is the only line said (no warning before it)
        from orchestrator.artifacts.tasks import check_task_id

        check_task_id(task_id)
    _warn_if_nothing_to_read(workdir)
    _drive(
        json_mode,
        memory_dir,
        lambda orch: orch.run(objective, task_id=task_id, start_phase=start_phase, brief=brief),
        workdir=workdir,
        workflow=workflow,
        **settings,
    )


def _warn_if_nothing_to_read(workdir: str) -> None:
    """One warning line when the workdir holds no file the agents' tools would show (the
    run still goes on: an objective may not need any, and a bad path is the run's error)."""
    from orchestrator.config.settings import check_workdir
    from orchestrator.errors import WorkdirError
    from orchestrator.tools.workdir import WorkdirFiles, is_binary

    try:
        root = check_workdir(workdir)
    except WorkdirError:
        return
    files = WorkdirFiles(root).iter_files(root)
    if not any(not is_binary(f) for f in itertools.islice(files, 1000)):
        click.echo(
            f"Warning: the workdir {str(root)!r} holds no text file the agents can read "
            "(empty, or only hidden, ignored or binary files): nothing to survey there.",
            err=True,
        )


@cli.command("resume")
@task_option
@path_option("--from-checkpoint", "Rebuild the run from this checkpoint JSON file.")
@path_option("--from-snapshot", "Start a fresh lead from this context snapshot.")
@run_options
def resume_cmd(
    task_id: str | None,
    from_checkpoint: str | None,
    from_snapshot: str | None,
    memory_dir: str | None,
    json_mode: bool,
    **settings: object,
) -> None:
    """Continue a task after a crash, Ctrl-C or handoff.

    Uses LangGraph's saved state, else the latest valid JSON checkpoint (corrupt ones
    are skipped with a warning), else a snapshot. Finished subagents never run again.
    A done task has nothing to resume: one line says so (exit 0) and nothing starts.

    \b
    Examples:
      orchestrator resume
      orchestrator resume --task auth-map
      orchestrator resume --from-checkpoint .temp/memory/checkpoints/cp_review_X.json
      orchestrator resume --from-snapshot .temp/memory/context_snapshots/snap_X.md
    """
    done = None if from_checkpoint or from_snapshot else _done_task(memory_dir, task_id)
    if done is not None:  # before any model is resolved: no provider key needed
        memory = shared_url(memory_dir) or done["memory_dir"]
        click.echo(nothing_to_resume(done["task_id"], memory, json_mode))
        return
    _drive(
        json_mode,
        memory_dir,
        lambda orch: orch.resume(
            task_id, from_checkpoint=from_checkpoint, from_snapshot=from_snapshot
        ),
        workdir=None,
        **settings,
    )


def _done_task(memory_dir: str | None, task_id: str | None) -> JsonObject | None:
    """The task's `status` if it is done, else None (also when status cannot tell: the
    resume itself then says what is wrong). Read as `status` reads it, without LangGraph."""
    from memory.errors import MemoryStoreError
    from orchestrator.errors import OrchestratorError
    from orchestrator.recovery.status import task_status

    try:
        info = task_status(open_memory(memory_dir), task_id)
    except (OrchestratorError, MemoryStoreError):
        return None
    return info if info["status"] == "done" else None


@cli.command("approve")
@task_option
@click.option("--id", "request_id", default=None, help="Answer only this request (see status).")
@click.option("--reject", is_flag=True, help="Refuse instead of approving.")
@click.option(
    "--message", default=None, help="With --reject: why; the agent gets it as the tool's result."
)
@run_options
def approve_cmd(
    task_id: str | None,
    request_id: str | None,
    reject: bool,
    message: str | None,
    memory_dir: str | None,
    json_mode: bool,
    **settings: object,
) -> None:
    """Approve (or reject) what a waiting task waits for, and continue it.

    Answers every pending request, or the one --id names; exits like `run` (0 done,
    3 failures, 4 when something waits again, 130 interrupted).

    \b
    Examples:
      orchestrator approve
      orchestrator approve --task auth-map --id 3f9a1c2b
      orchestrator approve --reject --message "Do not touch setup.py"
    """
    if message is not None and not reject:
        raise click.UsageError("--message goes with --reject (an approval needs no reason)")
    _drive(
        json_mode,
        memory_dir,
        lambda orch: orch.approve(
            task_id, approve=not reject, message=message, request_id=request_id
        ),
        workdir=None,
        **settings,
    )


@cli.command("handoff")
@task_option
@memory_option
def handoff_cmd(task_id: str | None, memory_dir: str | None) -> None:
    """Write a context snapshot of a task and print its path.

    A fresh agent (or `orchestrator resume --from-snapshot PATH`) continues from it.

    \b
    Examples:
      orchestrator handoff
      orchestrator handoff --task auth-map
    """
    path = make_orchestrator(memory_dir).handoff(task_id)
    click.echo(str(path))


@cli.command("status")
@task_option
@memory_option
@json_option
def status_cmd(task_id: str | None, memory_dir: str | None, json_mode: bool) -> None:
    """Show a task's phase, subtasks, tokens and latest files.

    \b
    Examples:
      orchestrator status
      orchestrator status --task auth-map --json
    """
    from orchestrator.recovery.status import task_status  # start-up: see the module docstring

    info = task_status(open_memory(memory_dir), task_id)
    if json_mode:
        click.echo(json.dumps(info, default=str))
        return
    click.echo(status_text(info, shared_url(memory_dir), terminal_width()))


@cli.command("tasks")
@memory_option
@json_option
def tasks_cmd(memory_dir: str | None, json_mode: bool) -> None:
    """List the memory's tasks, newest first: id, status, phase, updated, objective.

    Status and phase are those `status` shows; times are UTC. On a terminal the objective
    is cut to its width (a narrow one puts it on a line of its own); --json prints one
    JSON object per task and line, with the whole objective. A damaged task record (not
    a JSON task record) is named in one `Warning:` line on stderr.

    \b
    Examples:
      orchestrator tasks
      orchestrator tasks --json
      orchestrator tasks --memory-url postgresql://tether@db.internal/tether
    """
    # start-up: see the module docstring
    from orchestrator.artifacts.tasks import damaged_records, task_rows

    docs = open_memory(memory_dir)
    damaged = damaged_records(docs)
    if damaged:  # never left out in silence; the listing of the others stands
        click.echo(
            f"Warning: {len(damaged)} damaged task record{'s' * (len(damaged) != 1)} not "
            f"listed: {', '.join(damaged)} (not JSON task records: fix or move them)",
            err=True,
        )
    rows = task_rows(docs)
    if json_mode:
        for row in rows:
            click.echo(json.dumps(row))
        return
    for line in task_lines(rows, shutil.get_terminal_size((0, 0)).columns):
        click.echo(line)


register_checkpoint_groups(cli)


@functools.wraps(cli)
def main(*args: Any, **kwargs: Any) -> Any:
    """Console-script entry point."""
    stop_gracefully_on_sigterm()
    return cli(*args, **kwargs)
