"""`memory search` and `memory reindex`: ranked recall and index rebuilds from the shell.

Both verbs go through `memory.recall` / `memory.index` via the store; errors from them are
`MemoryStoreError`s that the group turns into one `Error: ...` line and exit 1.
"""

from __future__ import annotations

import json

import click

from memory.cli import get_store, url_backend


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
    from memory.recall import format_results, search

    text = " ".join(query)
    backend = url_backend(ctx)
    if backend is not None:  # --memory-url: the backend's index (see `memory import`)
        sources = [x for s in scopes for x in s.split(",") if x and x != "all"] or None
        results = [hit_result(h) for h in backend.index_query(text, sources=sources, limit=limit)]
    else:
        results = search(get_store(ctx), text, scope=list(scopes) or "all", limit=limit)
    if as_json:
        click.echo(json.dumps([r.to_dict() for r in results], ensure_ascii=False, indent=2))
    else:
        click.echo(format_results(text, results))


def hit_result(hit):
    """A contract `SearchHit` as the `SearchResult` that `memory search` prints."""
    from memory.recall import SNIPPET_CHARS, SearchResult

    _, _, line = hit.doc_id.partition("#L")
    snippet = " ".join(hit.text.split())
    if len(snippet) > SNIPPET_CHARS:
        snippet = snippet[: SNIPPET_CHARS - 3] + "..."
    return SearchResult(
        source=hit.source,
        path=hit.path or None,
        line=int(line) if line.isdigit() else None,
        citation=hit.doc_id,
        text=snippet,
        score=round(hit.score, 4),
    )


@click.command("reindex")
@click.pass_context
def memory_reindex(ctx: click.Context) -> None:
    """Drop the full-text index and rebuild it from the files and entries.

    Files are the truth; the index in memory.db is derived and can always be rebuilt.
    Searches keep it current on their own, so this is only needed after deleting
    memory.db or to compact the index.

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
