"""The `memory` command line: large-output entries, recall, index, summary and long-term views.

Start-up must stay fast (agents pipe tool output into `memory log` many times a minute),
so this module imports only click and the memory core; LangChain and LangGraph are never
imported here. Each group of verbs lives in its own `_cli_*` module:

* `_cli_entries`: log, fetch, list, refs, stats, prune
* `_cli_search`: search, reindex
* `_cli_working`: summary status|on|off|now, facts, episodes
* `_cli_mcp`: mcp (the MCP server over stdio, `memory.mcp_server`)

Only this layer turns exceptions into `Error: ...` lines and exit codes; library code
never prints or exits.
"""

from __future__ import annotations

import importlib
import sys

import click

from memory.errors import MemoryStoreError

_VERB_MODULES = (
    "memory._cli_entries",
    "memory._cli_search",
    "memory._cli_working",
    "memory._cli_mcp",
    "memory._cli_status",
    "memory._cli_backend",
)


class _Group(click.Group):
    """A group that turns memory errors into one-line `Error:` messages (exit 1)."""

    def invoke(self, ctx: click.Context):  # noqa: D102
        try:
            return super().invoke(ctx)
        except MemoryStoreError as exc:
            raise click.ClickException(str(exc)) from None
        except click.UsageError as exc:
            # One line, like every other error (click would add the usage and a hint).
            raise click.ClickException(exc.format_message()) from None
        except BrokenPipeError:
            # `memory search ... | head` closes the pipe early; that is not an error.
            sys.stderr.close()
            ctx.exit(0)
        except OSError as exc:
            raise click.ClickException(f"{exc.strerror or exc}: {exc.filename!r}") from None


@click.group(cls=_Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--memory-dir",
    type=click.Path(file_okay=True, dir_okay=True, path_type=str),
    default=None,
    envvar="TETHER_MEMORY_DIR",
    help="Memory directory (default: $TETHER_MEMORY_DIR, else ./.temp/memory).",
)
@click.option(
    "--memory-url",
    default=None,
    envvar="TETHER_MEMORY_URL",
    help="Storage backend URL, e.g. postgresql://user@host/db (default: the memory directory).",
)
@click.pass_context
def cli(ctx: click.Context, memory_dir: str | None, memory_url: str | None) -> None:
    """tether's external memory: store large outputs, search everything, keep context small.

    \b
    Examples:
      pytest 2>&1 | memory log --stdin --tag pytest
      memory fetch mem-20260123-123456-abcd1234 --summary-only
      memory search "why did the auth tests fail" --limit 5
    """
    ctx.obj = {"memory_dir": memory_dir, "memory_url": memory_url}


#: Verbs that only read: they never create a memory directory where there is none.
READ_ONLY_VERBS = frozenset({"fetch", "list", "refs", "stats", "search", "status", "facts",
                             "episodes"})  # fmt: skip


def get_store(ctx: click.Context):
    """The `MemoryStore` for this invocation (created on first use).

    A verb that only reads fails with one line when the memory directory does not exist,
    instead of creating an empty one (a typo in `--memory-dir`, or the wrong cwd).
    """
    from memory.errors import MemoryDirError
    from memory.paths import ENV_VAR, resolve_root
    from memory.store import MemoryStore

    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    if _url_of(ctx):
        from memory.backends.postgres import redact

        raise MemoryDirError(
            f"`memory {ctx.command.name}` works on a memory directory only; with "
            f"{redact(_url_of(ctx))!r} use log, fetch, list, search, setup, export or import"
        )
    if "store" not in obj:
        where = resolve_root(obj.get("memory_dir"))
        if ctx.command.name in READ_ONLY_VERBS and not where.exists():
            raise MemoryDirError(
                f"no memory directory at {str(where)!r}; pass --memory-dir or set {ENV_VAR} "
                "(nothing was created)"
            )
        store = MemoryStore(where)
        root.call_on_close(store.close)
        if store.read_only:
            if ctx.command.name not in READ_ONLY_VERBS:
                store.check_writable(f"run `memory {ctx.command.name}`")
            click.echo(
                f"Note: {str(where)!r} is read-only; the index was not refreshed, "
                "results may be stale",
                err=True,
            )
        obj["store"] = store
        root.obj = obj
    return obj["store"]


#: Verbs that work on any backend (`--memory-url`); the rest need a memory directory.
BACKEND_VERBS = frozenset({"log", "fetch", "list", "search", "setup", "export", "import"})


def _url_of(ctx: click.Context) -> str | None:
    """The `--memory-url` naming a backend other than a memory directory, if any."""
    root = ctx.find_root()
    url = (root.obj or {}).get("memory_url") if isinstance(root.obj, dict) else None
    return url if url and "://" in url and not url.startswith("file://") else None


def url_backend(ctx: click.Context, *, force: bool = False):
    """The open backend `--memory-url` names, or `None` for the memory directory.

    With `force`, a memory directory is opened as a `FilesBackend` too. Reading verbs open
    a database without setting it up (a database without tether's tables is an error).
    """
    from memory.backends import open_backend

    url = _url_of(ctx)
    if url is None and not force:
        return None
    root = ctx.find_root()
    obj = root.obj if isinstance(root.obj, dict) else {}
    if "backend" not in obj:
        manager = open_backend(
            url,
            memory_dir=obj.get("memory_dir"),
            setup=ctx.command.name not in READ_ONLY_VERBS | {"export"},
        )
        obj["backend"] = manager.__enter__()
        root.obj = obj
        root.call_on_close(lambda: manager.__exit__(None, None, None))
    return obj["backend"]


def _remember_dir(ctx: click.Context, _param: click.Parameter, value: str | None) -> None:
    if value:
        root = ctx.find_root()
        root.obj = {**(root.obj if isinstance(root.obj, dict) else {}), "memory_dir": value}


def _memory_dir_option() -> click.Option:
    """`--memory-dir` for a verb, so it works after the verb as well as before it."""
    return click.Option(
        ["--memory-dir"],
        type=click.Path(path_type=str),
        default=None,
        expose_value=False,
        callback=_remember_dir,
        help="Memory directory (default: $TETHER_MEMORY_DIR, else ./.temp/memory).",
    )


def _add_dir_option(group: click.Group) -> None:
    for command in group.commands.values():
        if isinstance(command, click.Group):
            _add_dir_option(command)
        elif not any(p.name == "memory_dir" for p in command.params):
            command.params.append(_memory_dir_option())


def _register() -> None:
    for name in _VERB_MODULES:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:
                continue
            raise
        module.register(cli)
    _add_dir_option(cli)


_register()


def main() -> None:
    cli(prog_name="memory")


if __name__ == "__main__":
    main()
