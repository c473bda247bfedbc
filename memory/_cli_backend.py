"""`memory setup`, `memory export DIR` and `memory import DIR`: moving memory between backends.

`export` writes every document of the backend (`--memory-url`, else the memory directory) as
the `.temp/memory` tree people read (plans, findings, checkpoints, snapshots, working memory,
facts), each file written atomically; `import` loads such a tree into the backend and indexes
its text files for `memory search`. Export after import gives back the same bytes. Documents
include `.tether/` (the orchestrator's task list and registry, without `.tether/running/`);
entries (`entries/`, `memory.db`) and the other hidden folders are not copied.
"""

from __future__ import annotations

from pathlib import Path

import click

from memory import durable
from memory.backends.blocks import search_blocks
from memory.backends.files import walk_documents
from memory.cli import url_backend
from memory.errors import InvalidInputError


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
    backend = url_backend(ctx, force=True)
    click.echo(f"Ready: {backend.kind} backend")


@click.command("export")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.pass_context
def memory_export(ctx: click.Context, directory: Path) -> None:
    """Write every document as files under DIRECTORY (the `.temp/memory` layout).

    \b
    Examples:
      memory --memory-url postgresql://tether@db/tether export ./memory-copy
    """
    backend = url_backend(ctx, force=True)
    count = 0
    for path, data in backend.export_documents().items():
        durable.atomic_write_bytes(directory / path, data)
        count += 1
    click.echo(f"Exported {count} document(s) to {str(directory)!r}")


def tree_files(directory: Path) -> list[str]:
    """The document paths of a memory tree (relative POSIX, sorted)."""
    if not directory.is_dir():
        raise InvalidInputError(f"no directory {str(directory)!r} to import; give a memory tree")
    return [rel for rel, _ in walk_documents(directory)]


@click.command("import")
@click.argument("directory", type=click.Path(file_okay=False, path_type=Path))
@click.pass_context
def memory_import(ctx: click.Context, directory: Path) -> None:
    """Load the files of a memory tree DIRECTORY into the backend and index them.

    \b
    Examples:
      memory --memory-url postgresql://tether@db/tether import .temp/memory
    """
    paths = tree_files(directory)  # before opening anything
    backend = url_backend(ctx, force=True)
    for path in paths:
        data = (directory / path).read_bytes()
        old = backend.get_document(path)
        backend.put_document(path, data)
        if old is not None:  # blocks of the replaced version must not be found any more
            backend.index_delete([d.doc_id for d in search_blocks(path, old.data)])
        backend.index_upsert(search_blocks(path, data))
    click.echo(f"Imported {len(paths)} document(s) from {str(directory)!r}")
