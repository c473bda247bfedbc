"""`memory search` and `memory reindex`: ranked recall and index rebuilds from the shell.

Both verbs go through the store (`memory.search.recall` and the backend's index) on every backend;
errors from them are `MemoryStoreError`s that the group turns into one `Error: ...` line and
exit 1.
"""

from __future__ import annotations

import json

import click

from memory.cli.common import EXIT_PARTIAL, get_store
from memory.search.recall import format_results


def register(cli: click.Group) -> None:
    """Add `search` and `reindex` to the `memory` group."""
    cli.add_command(memory_search)
    cli.add_command(memory_reindex)


@click.command("search")
@click.argument("query", nargs=-1)
@click.option(
    "--scope",
    "-s",
    "scopes",
    multiple=True,
    metavar="SCOPE",
    help="all|plans|findings|checkpoints|snapshots|overview|detail|messages|"
    "entries|facts|episodes (repeat or comma-separate; default all).",
)
@click.option("--limit", "-k", default=5, show_default=True, type=int, help="Most results to show.")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a JSON list of {source, path, line, citation, text, score}.",
)
@click.pass_context
def memory_search(
    ctx: click.Context, query: tuple[str, ...], scopes: tuple[str, ...], limit: int, as_json: bool
) -> None:
    """Search all of memory for QUERY, best matches first, with citations.

    QUERY is natural language: not every word has to match, word forms are folded
    ("decided" finds "decide"), rare words weigh more than common ones.

    \b
    Examples:
      memory search "when did we decide to switch the auth flow to JWT?"
      memory search flaky test timeout --scope messages --limit 10
      memory search "retry policy" --scope detail,facts --json
    """
    text = " ".join(query)
    results = get_store(ctx).search(
        text, scope=list(scopes) or "all", limit=limit, past_echoes=True
    )
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in results], ensure_ascii=False, indent=2))
    else:
        click.echo(format_results(text, results))


@click.command("reindex")
@click.pass_context
def memory_reindex(ctx: click.Context) -> None:
    """Drop the full-text index and rebuild it from the files and entries.

    Files (or a database's documents) are the truth; the index is derived and can always
    be rebuilt. Searches keep it current on their own, so this is only needed after
    deleting memory.db or to compact the index. Entries come back from
    entries/journal.jsonl; a line that cannot be restored is named (file:line) in a
    warning and the exit code is 3.

    \b
    Examples:
      memory reindex
      memory --memory-dir .temp/memory reindex
    """
    store = get_store(ctx)
    report = store.reindex()
    click.echo(
        f"Reindexed {report.rows_added} row(s) from {report.files_indexed} file(s) and "
        f"{report.entries_added} entr{'y' if report.entries_added == 1 else 'ies'} "
        f"in {report.seconds:.2f} s"
    )
    if report.warnings:  # each was printed as a `Warning:` line when it was found
        ctx.exit(EXIT_PARTIAL)
