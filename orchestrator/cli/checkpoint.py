"""`orchestrator checkpoint now|load|report|list` and `orchestrator snapshot write|list`.

`register` adds both groups to the `orchestrator` group (`orchestrator.cli.app`).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import click

from memory.store import MemoryStore
from orchestrator.cli.common import (
    Group,
    json_option,
    make_orchestrator,
    memory_option,
    open_memory,
    shared_url,
    task_option,
)


@click.group("checkpoint", cls=Group)
def checkpoint_group() -> None:
    """Write, read and list JSON checkpoints (recovery points of a task).

    \b
    Examples:
      orchestrator checkpoint now --notes "before refactor"
      orchestrator checkpoint list
      orchestrator checkpoint load
      orchestrator checkpoint report
    """


def _checkpoint_file(memory_dir: str | None, task_id: str | None, path: str | None) -> Any:
    # validating a checkpoint loads pydantic and Jinja: not on every command
    from orchestrator.artifacts.checkpoint import latest_valid_checkpoint, load_checkpoint
    from orchestrator.artifacts.tasks import TaskList

    docs = open_memory(memory_dir)
    if path:
        return load_checkpoint(Path(path), docs), Path(path), []
    if task_id is None:
        task_id = TaskList(docs).record(None)["task_id"]
    return latest_valid_checkpoint(docs, task_id)


@checkpoint_group.command("now")
@task_option
@click.option("--notes", default="", help="Why this checkpoint was taken.")
@memory_option
def checkpoint_now(task_id: str | None, notes: str, memory_dir: str | None) -> None:
    """Write a manual checkpoint of a task's current state; print its path.

    \b
    Examples:
      orchestrator checkpoint now --notes "tests pass, starting the refactor"
    """
    click.echo(str(make_orchestrator(memory_dir).checkpoint_now(task_id, notes=notes)))


@checkpoint_group.command("load")
@click.argument("file", required=False)
@task_option
@memory_option
@json_option
def checkpoint_load(
    file: str | None, task_id: str | None, memory_dir: str | None, json_mode: bool
) -> None:
    """Print the latest valid checkpoint (or FILE): where to resume from.

    \b
    Examples:
      orchestrator checkpoint load
      orchestrator checkpoint load .temp/memory/checkpoints/cp_review_X.json --json
    """
    from orchestrator.artifacts.checkpoint import checkpoint_summary

    cp, path, warnings = _checkpoint_file(memory_dir, task_id, file)
    for warning in warnings:
        click.echo(f"Warning: {warning}", err=True)
    summary = checkpoint_summary(cp, path)
    if json_mode:
        click.echo(json.dumps(summary, default=str))
        return
    click.echo("\n".join(f"{k}: {v}" for k, v in summary.items()))


@checkpoint_group.command("report")
@click.argument("file", required=False)
@task_option
@memory_option
def checkpoint_report(file: str | None, task_id: str | None, memory_dir: str | None) -> None:
    """Print a checkpoint's report, including [MEMORY REFERENCES].

    \b
    Examples:
      orchestrator checkpoint report
      orchestrator checkpoint report .temp/memory/checkpoints/cp_review_X.json
    """
    from orchestrator.artifacts.checkpoint import report

    cp, _path, warnings = _checkpoint_file(memory_dir, task_id, file)
    for warning in warnings:
        click.echo(f"Warning: {warning}", err=True)
    if shared_url(memory_dir) is not None:
        click.echo(report(cp, MemoryStore(backend=open_memory(memory_dir).backend)))
        return
    with MemoryStore(memory_dir) as store:
        click.echo(report(cp, store))


@checkpoint_group.command("list")
@task_option
@memory_option
@json_option
def checkpoint_list(task_id: str | None, memory_dir: str | None, json_mode: bool) -> None:
    """List a task's checkpoints, newest first: task, phase, trigger, time, path.

    The path is the last column, whole (`awk '{print $NF}'` cuts it); --json prints one
    JSON object per line with the same fields.

    \b
    Examples:
      orchestrator checkpoint list
      orchestrator checkpoint list --task auth-map --json
    """
    from orchestrator.artifacts.checkpoint import checkpoint_listing
    from orchestrator.artifacts.tasks import TaskList

    docs = open_memory(memory_dir)
    task = TaskList(docs).record(task_id)["task_id"]
    rows = checkpoint_listing(docs, task)
    _echo_rows(rows, ("task_id", "phase", "trigger", "timestamp", "path"), json_mode)
    if not rows and not json_mode:
        click.echo(f"No checkpoint of task {task!r} yet.", err=True)


@click.group("snapshot", cls=Group)
def snapshot_group() -> None:
    """Write or list context snapshots (handoff documents).

    \b
    Examples:
      orchestrator snapshot write
      orchestrator snapshot list
    """


@snapshot_group.command("write")
@task_option
@memory_option
def snapshot_write(task_id: str | None, memory_dir: str | None) -> None:
    """Write a snapshot of a task's current state (same as `handoff`); print its path.

    \b
    Examples:
      orchestrator snapshot write --task auth-map
    """
    click.echo(str(make_orchestrator(memory_dir).handoff(task_id)))


@snapshot_group.command("list")
@task_option
@memory_option
@json_option
def snapshot_list(task_id: str | None, memory_dir: str | None, json_mode: bool) -> None:
    """List a task's context snapshots, newest first: task, phase, reason, time, path.

    The path is the last column, whole (`awk '{print $NF}'` cuts it); --json prints one
    JSON object per line with the same fields.

    \b
    Examples:
      orchestrator snapshot list
      orchestrator snapshot list --task auth-map --json
    """
    from orchestrator.artifacts.tasks import TaskList

    docs = open_memory(memory_dir)
    task = TaskList(docs).record(task_id)["task_id"]
    rows = snapshot_listing(docs, task)
    _echo_rows(rows, ("task_id", "phase", "reason", "timestamp", "path"), json_mode)
    if not rows and not json_mode:
        click.echo(f"No snapshot of task {task!r} yet.", err=True)


def snapshot_listing(
    docs: Any, task_id: str, written: Iterable[str] = (), limit: int | None = None
) -> list[dict]:
    """The snapshots of `task_id`, newest first, each a dict of `path`, `task_id`, `phase`,
    `reason` and `timestamp` read from the file (a snapshot that cannot be read is listed
    only when the run recorded it in `written`, its document paths); at most `limit`
    (files are read only until then).

    The newest is the one `orchestrator status` names as the task's latest snapshot.
    """
    from orchestrator.artifacts.snapshot import list_snapshots, read_snapshot
    from orchestrator.errors import ArtifactError

    written = set(written)
    rows = []
    for path in list_snapshots(docs):
        try:
            meta = read_snapshot(path, docs)
        except (ArtifactError, OSError):
            meta = {}
        if meta.get("task_id") != task_id and docs.rel(path) not in written:
            continue
        row = {k: meta.get(k) or None for k in ("phase", "reason", "timestamp")}
        rows.append({"path": str(path), "task_id": task_id, **row})
        if limit is not None and len(rows) >= limit:
            break
    return rows


def _echo_rows(rows: list[dict], columns: tuple[str, ...], json_mode: bool) -> None:
    """One line per row: one JSON object, or the columns padded to line up (a missing
    value is `-`; times to the second)."""
    if json_mode:
        for row in rows:
            click.echo(json.dumps(row, default=str))
        return
    cells = [[_cell(row.get(c), c) for c in columns] for row in rows]
    widths = [max((len(line[i]) for line in cells), default=0) for i in range(len(columns))]
    for line in cells:
        padded = [cell.ljust(width) for cell, width in zip(line[:-1], widths, strict=False)]
        click.echo("  ".join([*padded, line[-1]]))


def _cell(value: Any, column: str) -> str:
    if value is None or value == "":
        return "-"
    text = " ".join(str(value).split()) or "-"
    if column == "timestamp":
        return _short_time(text)
    return text


def _short_time(iso: str) -> str:
    """An ISO time to the second (`2026-12-06T19:05:46.280810Z` -> `2026-12-06T19:05:46Z`)."""
    head, dot, rest = iso.partition(".")
    if dot and rest.endswith("Z") and rest[:-1].isdigit():
        return head + "Z"
    return iso


def register(group: click.Group) -> None:
    """Add the `checkpoint` and `snapshot` groups to the `orchestrator` group."""
    group.add_command(checkpoint_group)
    group.add_command(snapshot_group)
