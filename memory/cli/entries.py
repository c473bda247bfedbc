"""`memory log|fetch|list|refs|stats|prune`: the entry verbs on the command line.

Design: input is read and validated (UTF-8, not empty) *before* the store is opened, so a
rejected `memory log` never creates or touches the memory directory. `fetch` writes the
stored bytes to binary stdout unchanged (no added newline), so
`memory fetch ID > out && cmp out original` holds for any text. Start-up stays light:
only click and the memory core are imported (never LangChain/LangGraph).
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import unicodedata
from pathlib import Path

import click

from memory.backends.files import ORPHAN_GRACE_S
from memory.backends.files.leftovers import remove_temp_files, temp_files
from memory.cli.common import get_store
from memory.contract.capabilities import MemoryDirectory
from memory.contract.entries import ENTRY_TYPES, Entry, check_type
from memory.errors import InvalidInputError

SUMMARY_COLUMN_CHARS = 60


def register(cli: click.Group) -> None:
    """Add the entry verbs to the `memory` group."""
    for command in (memory_log, memory_fetch, memory_list, memory_refs, memory_stats, memory_prune):
        cli.add_command(command)


def _echo_json(obj: object) -> None:
    click.echo(json.dumps(obj, indent=2, ensure_ascii=False))


def _read_source(text: str | None, file: str | None, stdin: bool) -> bytes:
    """The bytes to log from exactly one of TEXT, --file, --stdin."""
    if sum((text is not None, file is not None, bool(stdin))) != 1:
        raise click.ClickException(
            "give exactly one of TEXT, --file F or --stdin (e.g. `pytest 2>&1 | memory log "
            "--stdin`)"
        )
    if text is not None:
        return text.encode("utf-8", errors="surrogateescape")
    if file == "-":
        return sys.stdin.buffer.read()
    if file is not None:
        try:
            return Path(file).read_bytes()
        except OSError as exc:
            raise click.ClickException(
                f"cannot read --file {file!r}: {exc.strerror or exc}; memory unchanged"
            ) from None
    return sys.stdin.buffer.read()


def _check_text(data: bytes, source: str) -> None:
    """Reject invalid UTF-8 and empty input before anything is opened."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInputError(
            f"{source} is not valid UTF-8 (byte {data[exc.start]:#04x} at offset {exc.start});"
            " memory unchanged: store text, or base64-encode binary data first"
        ) from None
    if not text or text.isspace():
        raise InvalidInputError(f"{source} is empty: nothing to store; memory unchanged")


def _describe_size(entry: Entry) -> str:
    if entry.tier == "chunked":
        return f"{entry.tokens} tokens, {entry.chunks} chunks"
    return f"{entry.tokens} tokens, {entry.tier}"


@click.command("log")
@click.argument("text", required=False)
@click.option("--file", "file", metavar="F", help="Read the content from file F ('-': stdin).")
@click.option("--stdin", "stdin", is_flag=True, help="Read the content from standard input.")
@click.option("--tag", "tags", multiple=True, help="Tag the entry (repeatable).")
@click.option(
    "--type",
    "type_",
    default="output",
    show_default=True,
    metavar="TYPE",
    help=f"Kind of content: {', '.join(ENTRY_TYPES)}.",
)
@click.option("--checkpoint", metavar="ID", help="Link the entry to checkpoint ID.")
@click.option("--directory", metavar="DIR", help="Link the entry to directory DIR.")
@click.option("--json", "as_json", is_flag=True, help="Print the stored entry as JSON.")
@click.option("-q", "--quiet", is_flag=True, help="Print only the new id.")
@click.pass_context
def memory_log(ctx, text, file, stdin, tags, type_, checkpoint, directory, as_json, quiet):
    """Store TEXT, a file or stdin as an entry; prints its id, tokens and chunks.

    Content under 500 tokens is kept in memory.db, 500-4000 tokens in one gzip file,
    larger content in gzip chunks of at most 4000 tokens; each gets an extractive summary.

    \b
    Examples:
      memory log "Test results: all 42 tests passed"
      memory log --file build.log --tag build --directory ./pipeline
      pytest tests/ 2>&1 | memory log --stdin --tag pytest --checkpoint ckpt-123
      ID=$(make 2>&1 | memory log --stdin -q)
    """
    check_type(type_)  # before reading or opening anything
    data = _read_source(text, file, stdin)
    source = "TEXT" if text is not None else (f"--file {file!r}" if file else "stdin")
    _check_text(data, source)
    entry = get_store(ctx).log(  # bytes: the store keeps them exactly, no second copy here
        data, tags=tags, type=type_, checkpoint=checkpoint, directory=directory
    )
    if as_json:
        _echo_json(entry.to_dict())
    elif quiet:
        click.echo(entry.id)
    else:
        click.echo(f"Stored: {entry.id} ({_describe_size(entry)})")


@click.command("fetch")
@click.argument("entry_id", metavar="ID")
@click.option("--summary-only", is_flag=True, help="Print only the entry's summary.")
@click.option("--chunk", type=int, metavar="N", help="Print only chunk N (from 0).")
@click.pass_context
def memory_fetch(ctx, entry_id, summary_only, chunk):
    """Print entry ID byte-exact (or its summary, or one chunk).

    \b
    Examples:
      memory fetch mem-20260123-123456-abcd1234
      memory fetch mem-20260123-123456-abcd1234 --summary-only
      memory fetch mem-20260123-123456-abcd1234 --chunk 2 > part.txt
    """
    store = get_store(ctx)
    if summary_only:
        click.echo(store.fetch(entry_id, summary_only=True))
        return
    if chunk is not None:
        pieces = iter([store.fetch(entry_id, chunk=chunk).encode("utf-8")])
    elif isinstance(store.backend, MemoryDirectory):
        store.get_entry(entry_id)  # an unknown id (or a damaged memory.db) before any output
        pieces = store.entries.iter_bytes(entry_id)  # the stored bytes, straight from disk
    else:  # one chunk at a time: a huge entry is never all in memory
        entry = store.get_entry(entry_id)
        pieces = (
            store.fetch(entry_id, chunk=n).encode("utf-8") for n in range(entry.pieces)
        ) if entry.chunks else iter([store.fetch(entry_id).encode("utf-8")])  # fmt: skip
    out = sys.stdout.buffer
    for piece in pieces:
        out.write(piece)
    out.flush()


#: The table's columns; at a narrow width they go in `_DROPPED` order (ID and SUMMARY stay).
_HEADER = ("ID", "TYPE", "TOKENS", "CHUNKS", "TAGS", "SUMMARY")
_DROPPED = (3, 2, 4, 1)  # CHUNKS, TOKENS, TAGS, TYPE
_MIN_SUMMARY = 24  # columns the summary keeps before a column is dropped
_MIN_TAGS = 12  # tags are cut down to this before the column is dropped


def _cells(text: str) -> int:
    """Terminal columns of `text` (East Asian wide and full-width characters take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _cut(text: str, width: int) -> str:
    """`text` in at most `width` columns, ending in `...` when it was cut."""
    if _cells(text) <= width:
        return text
    out, used, room = [], 0, max(width - 3, 0)
    for char in text:
        used += _cells(char)
        if used > room:
            break
        out.append(char)
    return "".join(out) + "..."[: max(width, 0)]


def _pad(text: str, width: int, right: bool = False) -> str:
    fill = " " * (width - _cells(text))
    return fill + text if right else text + fill


def _table(entries: list[Entry], width: int | None = None) -> str:
    """The rows of `memory list`: whole (summary cut at `SUMMARY_COLUMN_CHARS`) without a
    `width`, else fitted into `width` columns (tags cut, then columns dropped; an id is
    never cut)."""
    rows = [_HEADER] + [
        (e.id, e.type, str(e.tokens), str(e.chunks), ",".join(e.tags) or "-",
         " ".join(e.summary_line.split()))
        for e in entries
    ]  # fmt: skip
    widths = [max(_cells(r[i]) for r in rows) for i in range(5)]
    shown = [0, 1, 2, 3, 4]
    summary_width = SUMMARY_COLUMN_CHARS
    if width is not None:

        def room() -> int:  # what the summary gets beside the shown columns
            return width - sum(widths[i] + 2 for i in shown)

        if room() < _MIN_SUMMARY:  # cut the tags first, down to `_MIN_TAGS`
            widths[4] = max(_MIN_TAGS, widths[4] - (_MIN_SUMMARY - room()), _cells("TAGS"))
        for column in _DROPPED:
            if room() >= _MIN_SUMMARY:
                break
            shown.remove(column)
        summary_width = max(room(), 3)
    lines = []
    for r in rows:
        cells = [_pad(_cut(r[i], widths[i]), widths[i], right=i in (2, 3)) for i in shown]
        lines.append("  ".join([*cells, _cut(r[5], summary_width)]).rstrip())
    return "\n".join(lines)


def _terminal_width() -> int | None:
    """The width rows are fitted to: `$COLUMNS` when it is set (piped too: a pager or a
    pane that exports it gets rows that fit), else the terminal's when stdout is one; None
    for a pipe or a file without `$COLUMNS`, so `grep` and `cut` get whole rows."""
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isdigit() and int(columns) > 0:
        return int(columns)
    return shutil.get_terminal_size().columns if sys.stdout.isatty() else None


@click.command("list")
@click.option("--type", "type_", metavar="TYPE", help=f"Only this type ({', '.join(ENTRY_TYPES)}).")
@click.option("--directory", metavar="DIR", help="Only entries linked to DIR (or below it).")
@click.option("--tag", help="Only entries with this tag.")
@click.option("--checkpoint", metavar="ID", help="Only entries linked to checkpoint ID.")
@click.option("--limit", type=int, default=20, show_default=True, help="At most N entries.")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.pass_context
def memory_list(ctx, type_, directory, tag, checkpoint, limit, as_json):
    """List entries, newest first: id, type, tokens, chunks, tags, summary.

    In a terminal, or with `$COLUMNS` set, rows fit its width: tags and the summary are
    cut, and on a narrow one the CHUNKS, TOKENS, TAGS and TYPE columns go, in that order
    (an id is never cut). Piped or redirected without `$COLUMNS`, rows are whole (the
    summary cut at 60 characters); `--json` has everything.

    \b
    Examples:
      memory list --limit 10
      memory list --type output --limit 20
      memory list --directory ./tests --tag pytest --json
    """
    if type_ is not None:
        check_type(type_)
    found = get_store(ctx).list_entries(
        type=type_, directory=directory, tag=tag, checkpoint=checkpoint, limit=limit
    )
    if as_json:
        _echo_json([e.to_dict() for e in found])
    elif not found:
        click.echo("No entries.")
    else:
        click.echo(_table(found, _terminal_width()))


@click.command("refs")
@click.option("--checkpoint", metavar="ID", help="Entries linked to checkpoint ID.")
@click.option("--directory", metavar="DIR", help="Entries linked to DIR (or below it).")
@click.option("--json", "as_json", is_flag=True, help="Print a JSON list.")
@click.pass_context
def memory_refs(ctx, checkpoint, directory, as_json):
    """Show the entries linked to a checkpoint or a directory, one line each.

    \b
    Examples:
      memory refs --checkpoint ckpt-20260123-123456
      memory refs --directory ./pipeline
    Output:
      mem-20260123-123456-abcd1234: 156 passed, 2 failed in 12.3s (12000 tokens)
    """
    if checkpoint is None and directory is None:
        raise click.ClickException("give --checkpoint ID or --directory DIR")
    found = get_store(ctx).refs(checkpoint=checkpoint, directory=directory)
    if as_json:
        _echo_json([e.to_dict() for e in found])
        return
    if not found:
        what = f"checkpoint {checkpoint!r}" if checkpoint is not None else f"{directory!r}"
        click.echo(f"No entries linked to {what}.")
    for e in found:
        click.echo(e.reference)


def _size(n: int) -> str:
    """Bytes for people: `99 B`, `19.3 KiB`, `1.2 GiB`."""
    value = float(n)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if value < 1024 or unit == "GiB":
            return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    return f"{n} B"


def _stats_text(stats: dict) -> str:
    """A table that fits a 60-column terminal."""

    def table(title: str, rows: dict) -> list[str]:
        out = [f"{title:<11}{'entries':>9}{'tokens':>11}{'bytes':>11}{'stored':>11}"]
        for name, b in rows.items():
            out.append(
                f"  {name:<10}{b['entries']:>8}{b['tokens']:>11}"
                f"{_size(b['bytes']):>11}{_size(b['stored_bytes']):>11}"
            )
        return out

    out = [
        f"Entries: {stats['entries']} ({stats['tokens']} tokens, {stats['chunks']} chunks; "
        f"{_size(stats['bytes'])}, {_size(stats['stored_bytes'])} stored)",
        *table("By tier", stats["by_tier"]),
        *table("By type", stats["by_type"]),
    ]
    if stats["oldest"]:
        out.append(f"Oldest: {stats['oldest']}")
        out.append(f"Newest: {stats['newest']}")
    out.append(f"Tags: {stats['tags']}  Pruned so far: {stats['pruned']}")
    left = stats.get("leftovers") or {}
    found = [*left.get("orphan_folders", []), *left.get("temp_files", [])]
    if found:
        shown = ", ".join(found[:5]) + (f", ... ({len(found) - 5} more)" if len(found) > 5 else "")
        out.append(
            f"Left by interrupted writes: {len(found)} ({shown}); `memory prune` removes "
            "them once they are an hour old"
        )
    return "\n".join(out)


@click.command("stats")
@click.option("--json", "as_json", is_flag=True, help="Print the numbers as JSON.")
@click.pass_context
def memory_stats(ctx, as_json):
    """Show entry counts, tokens and bytes, by tier and by type.

    \b
    Examples:
      memory stats
      memory stats --json
    """
    store = get_store(ctx)
    stats = store.stats()
    if isinstance(store.backend, MemoryDirectory):  # only a memory directory keeps such files
        stats["leftovers"] = {
            "orphan_folders": store.entries.sweep_orphans(older_than_s=0, dry_run=True),
            "temp_files": temp_files(store.layout),
        }
    if as_json:
        _echo_json(stats)
    else:
        click.echo(_stats_text(stats))


def _what(entry) -> str:
    """What an entry was, in a few words: its type, tags and first line."""
    tags = f" [{', '.join(entry.tags)}]" if entry.tags else ""
    line = " ".join((entry.summary_line or "").split())
    shown = f": {line[:60]!r}" if line else ""
    return f"{entry.type}{tags}{shown}"


@click.command("prune")
@click.option("--keep-days", type=int, metavar="N", help="Remove entries older than N days.")
@click.option("--keep-entries", type=int, metavar="N", help="Keep only the newest N entries.")
@click.option("--dry-run", is_flag=True, help="Only show what would be removed.")
@click.option("--json", "as_json", is_flag=True, help="Print the removed entries as JSON.")
@click.pass_context
def memory_prune(ctx, keep_days, keep_entries, dry_run, as_json):
    """Remove old entries (only entries: never messages, plans, findings or facts).

    An entry goes if it is older than --keep-days or not among the newest --keep-entries,
    except the previous contents of files an agent changed (tag previous-content) and the
    entries a task that is not done cites. Each removed entry is named with its type, tags
    and first line.
    What interrupted writes left goes too, once it is an hour old: folders under entries/
    that no entry points to (a `memory log` killed mid-way) and hidden `.NAME.tmp-*` files
    (a write killed before its rename). `memory stats` names them.

    \b
    Examples:
      memory prune --keep-days 7 --keep-entries 500
      memory prune --keep-days 30 --dry-run
    """
    store = get_store(ctx)
    removed = store.prune(keep_days=keep_days, keep_entries=keep_entries, dry_run=dry_run)
    orphans, temps = [], []  # what interrupted writes leave exists on the files backend only
    if isinstance(store.backend, MemoryDirectory):
        orphans = store.entries.sweep_orphans(dry_run=dry_run)
        temps = temp_files(store.layout, older_than_s=ORPHAN_GRACE_S)
        temps = temps if dry_run else remove_temp_files(store.layout, temps)
    if as_json:
        _echo_json(
            {"entries": [e.to_dict() for e in removed], "orphans": orphans, "temp_files": temps}
        )
        return
    verb = "Would remove" if dry_run else "Removed"
    for e in removed:
        click.echo(f"{verb}: {e.id} ({_what(e)}, {e.tokens} tokens, {e.created_at})")
    for path in orphans:
        click.echo(f"{verb}: {path} (files without an entry, left by an interrupted log)")
    for path in temps:
        click.echo(f"{verb}: {path} (a temp file left by an interrupted write)")
    parts = [f"{len(removed)} {'entry' if len(removed) == 1 else 'entries'}"]
    if orphans:
        parts.append(f"{len(orphans)} orphan folder{'s' if len(orphans) != 1 else ''}")
    if temps:
        parts.append(f"{len(temps)} temp file{'s' if len(temps) != 1 else ''}")
    anything = removed or orphans or temps
    click.echo(f"{verb} {' and '.join(parts)}." if anything else "Nothing to prune.")
