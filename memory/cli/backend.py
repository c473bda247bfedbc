"""`memory setup`, `memory export DIR` and `memory import DIR`: moving memory between backends.

`export` writes every document and entry of the backend (`--memory-url`, else the memory
directory) as the `.temp/memory` tree people read (plans, findings, checkpoints, snapshots,
working memory, facts, episodes, and `entries/` as the files backend keeps them), each file
written atomically; `import` loads such a tree (or a memory directory) into the backend,
entries with their ids. Export after import gives back the same bytes. Documents include
`.tether/` (the orchestrator's task list and registry, without `.tether/running/`);
`memory.db` and the other hidden folders are not copied.
"""

from __future__ import annotations

from pathlib import Path

import click

from memory.backends.files.tree import export_tree, import_tree, tree_documents
from memory.cli.common import EXIT_PARTIAL, get_store


def register(cli: click.Group) -> None:
    """Add `setup`, `export` and `import` to the `memory` group."""
    for command in (memory_setup, memory_export, memory_import):
        cli.add_command(command)


@click.command("setup")
@click.pass_context
def memory_setup(ctx: click.Context) -> None:
    """Create or migrate the backend's tables (idempotent).

    \b
    Examples:
      memory --memory-url postgresql://tether@db.internal/tether setup
    """
    store = get_store(ctx)
    store.backend.setup()
    click.echo(f"Ready: {store.backend.kind} backend")


@click.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.pass_context
def memory_export(ctx: click.Context, directory: Path) -> None:
    """Write every document and entry as files under DIRECTORY (the `.temp/memory` layout).

    \b
    Examples:
      memory --memory-url postgresql://tether@db/tether export ./memory-copy
    """
    documents, entries = export_tree(get_store(ctx).backend, directory)
    more = f" and {entries} entr{'y' if entries == 1 else 'ies'}" if entries else ""
    click.echo(f"Exported {documents} document(s){more} to {str(directory)!r}")


@click.command("import")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.pass_context
def memory_import(ctx: click.Context, directory: Path) -> None:
    """Load the files and entries of a memory tree DIRECTORY into the backend.

    Nothing that resolves outside DIRECTORY (a symlink leading out) is read. A journal
    line whose entry cannot be imported is named (file:line) in a warning; the exit code
    is then 3.

    \b
    Examples:
      memory --memory-url postgresql://tether@db/tether import .temp/memory
    """
    tree_documents(directory)  # before opening anything: a missing tree is one error line
    documents, entries, problems = import_tree(directory, get_store(ctx).backend)
    more = f" and {entries} entr{'y' if entries == 1 else 'ies'}" if entries else ""
    click.echo(f"Imported {documents} document(s){more} from {str(directory)!r}")
    if problems:  # each was printed as a `Warning:` line
        ctx.exit(EXIT_PARTIAL)
