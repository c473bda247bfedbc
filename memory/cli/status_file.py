"""`memory status-file`: write or refresh the tether block of a project's STATUS.md."""

from __future__ import annotations

import click

from memory.cli.common import get_store, latest_task
from memory.task.status_file import FILE_NAME, write_status_file


def register(cli: click.Group) -> None:
    """Add `status-file` to the `memory` group."""
    cli.add_command(memory_status_file)


@click.command("status-file")
@click.argument("path", required=False, type=click.Path(path_type=str))
@click.option("--task", "task_id", default=None, metavar="ID",
              help="Task to describe (default: the most recent task).")  # fmt: skip
@click.pass_context
def memory_status_file(ctx: click.Context, path: str | None, task_id: str | None) -> None:
    """Write where this memory is into STATUS.md (default ./STATUS.md, or PATH).

    Only the block between tether's markers is rewritten; lines you add above or below it
    are kept. Running it again with nothing changed leaves the file as it was.

    \b
    Examples:
      memory status-file                      # ./STATUS.md
      memory status-file ../app --task auth   # ../app/STATUS.md, for task auth
    """
    store = get_store(ctx)
    if task_id is None:  # else the library takes the latest checkpoint's (no task records)
        task_id = latest_task(store)
    target = write_status_file(store, path or FILE_NAME, task_id=task_id)
    click.echo(f"Wrote {target}")
