"""`memory summary status|on|off|now`, `memory facts`, `memory episodes`.

The conversation-summary commands over one task's archive, and the listings of
long-term memory. Without `--task` they act on the most recent task, as `orchestrator`
verbs do (`common.latest_task`); in a memory without task records (working memory written
through the Python API only), on the task whose working memory changed last.
Only click and the memory core are imported here (never LangChain): `summary now` uses the
extractive summariser.
"""

from __future__ import annotations

import json

import click

from memory.cli.common import get_store, latest_task
from memory.errors import InvalidInputError
from memory.facts.longterm import episode_index
from memory.facts.memfiles import format_size, list_memory
from memory.task.archive import Archive, SummaryStatus
from memory.task.working import WorkingMemory, list_tasks

_task_option = click.option(
    "--task",
    "task_id",
    default=None,
    metavar="ID",
    help="Task id (default: the most recent task).",
)


def register(cli: click.Group) -> None:
    """Add `summary`, `facts` and `episodes` to the `memory` group."""
    cli.add_command(summary)
    cli.add_command(memory_facts)
    cli.add_command(memory_episodes)


def resolve_task(store, task_id: str | None) -> str:
    """The task to act on: `task_id` if it has working memory, else the most recent task
    (see the module docstring); one clear error otherwise."""
    tasks = list_tasks(store)
    if task_id is not None:
        if task_id not in tasks:
            known = ", ".join(tasks) or "none yet"
            raise InvalidInputError(f"unknown task {task_id!r}; tasks with working memory: {known}")
        return task_id
    if not tasks:
        raise InvalidInputError(
            "no task has working memory yet; run a task first (orchestrator run ...)"
        )
    latest = latest_task(store)
    if latest is None:
        return max(tasks, key=lambda task: _last_change(store, task))
    if latest not in tasks:
        raise InvalidInputError(
            f"the most recent task {latest!r} has no working memory yet; pick one with "
            f"--task ID: {', '.join(tasks)}"
        )
    return latest


def _last_change(store, task_id: str) -> float:
    """When the working memory of `task_id` last changed (its newest document)."""
    return max(i.mtime for i in store.backend.list_documents(f"working/{task_id}/"))


def _archive(ctx: click.Context, task_id: str | None) -> Archive:
    store = get_store(ctx)
    return Archive(WorkingMemory(store, resolve_task(store, task_id)))


def status_lines(s: SummaryStatus) -> list[str]:
    """The lines `memory summary status` prints."""
    levels = " ".join(f"L{level}={n}" for level, n in s.active_per_level.items()) or "none"
    return [
        f"task: {s.task_id}",
        f"enabled: {'yes' if s.enabled else 'no'}",
        f"threshold: every {s.threshold} user turns",
        f"turns since last summary: {s.turns_since_last}",
        f"messages: {s.total_messages} total, {s.archived_messages} archived, "
        f"{s.total_messages - s.archived_messages} active",
        f"active summaries: {levels}",
        f"highest level: {s.highest_level}",
    ]


@click.group()
def summary() -> None:
    """Conversation summaries of a task (never-delete archive): status, on, off, now.

    \b
    Examples:
      memory summary status --task t1
      memory summary on --every 15
      memory summary now
    """


@summary.command("status")
@_task_option
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@click.pass_context
def summary_status(ctx: click.Context, task_id: str | None, as_json: bool) -> None:
    """Show enabled, threshold, turn counter, message counts and summaries per level."""
    s = _archive(ctx, task_id).status()
    if as_json:
        data = dict(s.__dict__)
        data["active_per_level"] = {f"L{k}": v for k, v in s.active_per_level.items()}
        click.echo(json.dumps(data, indent=2))
        return
    for line in status_lines(s):
        click.echo(line)


@summary.command("on")
@_task_option
@click.option(
    "--every", type=int, default=None, metavar="N", help="Summarise every N user turns (1-500)."
)
@click.pass_context
def summary_on(ctx: click.Context, task_id: str | None, every: int | None) -> None:
    """Enable summaries (keeps the saved threshold unless --every is given)."""
    archive = _archive(ctx, task_id)
    cfg = archive.configure(enabled=True, threshold=every)
    click.echo(
        f"summaries enabled for task {archive.wm.task_id} (every {cfg.threshold} user turns)"
    )


@summary.command("off")
@_task_option
@click.pass_context
def summary_off(ctx: click.Context, task_id: str | None) -> None:
    """Disable summaries; messages and summaries are kept."""
    archive = _archive(ctx, task_id)
    archive.configure(enabled=False)
    click.echo(f"summaries disabled for task {archive.wm.task_id} (nothing deleted)")


@summary.command("now")
@_task_option
@click.pass_context
def summary_now(ctx: click.Context, task_id: str | None) -> None:
    """Summarise the active messages now, whatever the threshold."""
    archive = _archive(ctx, task_id)
    result = archive.summarize_now()
    if result.error:
        raise click.ClickException(result.error)
    if not result.written:
        click.echo(result.reason)
        return
    for s in result.written:
        covers = s.covers[0] if s.level == 1 else f"{len(s.covers)} L{s.level - 1} summaries"
        click.echo(f"wrote detail/{s.name}: level {s.level}, covers {covers}")


@click.command("facts")
@click.pass_context
def memory_facts(ctx: click.Context) -> None:
    """List fact files: path, size and summary line."""
    files = [f for f in list_memory(get_store(ctx)) if f.path.startswith("facts/")]
    if not files:
        click.echo("no facts yet")
    for f in files:
        click.echo(f"{f.path}  {format_size(f.size)}  {f.summary}")


@click.command("episodes")
@click.pass_context
def memory_episodes(ctx: click.Context) -> None:
    """List episode entries, oldest first: citation, title and summary."""
    entries = episode_index(get_store(ctx))
    if not entries:
        click.echo("no episodes yet")
    for citation, text in entries:
        click.echo(f"{citation}  {text}")
