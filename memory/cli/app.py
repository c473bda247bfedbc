"""The `memory` command line: large-output entries, recall, index, summary and long-term views.

Start-up must stay fast (agents pipe tool output into `memory log` many times a minute),
so this module imports only click and the memory core; LangChain and LangGraph are never
imported here. Each group of verbs lives in its own module of this package:

* `entries`: log, fetch, list, refs, stats, prune
* `search`: search, reindex
* `working`: summary status|on|off|now, facts, episodes
* `mcp`: mcp (the MCP server over stdio, `memory.mcp.mcp_server`)
* `status_file`: status-file
* `backend`: setup, export, import

Every verb works on every backend (`--memory-url` / `TETHER_MEMORY_URL`, default the memory
directory) through the store `common.get_store` opens.

Only this layer turns exceptions into `Error: ...` lines and exit codes; library code
never prints or exits. A usage error, wherever click meets it (the group's own options,
a verb's, a subgroup called without a subcommand), is one `Error:` line and exit 2
(`options.usage_error`); every other bad input is one line and exit 1.
"""

from __future__ import annotations

import sys

import click

import memory.cli.backend as _cli_backend
import memory.cli.entries as _cli_entries
import memory.cli.mcp as _cli_mcp
import memory.cli.search as _cli_search
import memory.cli.status_file as _cli_status
import memory.cli.working as _cli_working
from memory.cli.common import show_warnings
from memory.cli.options import hoist, usage_error
from memory.errors import MemoryStoreError

PROGRAM = "memory"
_VERB_MODULES = (_cli_entries, _cli_search, _cli_working, _cli_mcp, _cli_status, _cli_backend)


class _Group(click.Group):
    """A group that turns memory errors into one-line `Error:` messages (exit 1) and usage
    errors into one line with exit 2, and takes `--memory-url` after the verb as well as
    before it."""

    def make_context(self, info_name, args, parent=None, **extra):  # noqa: D102
        # The group's own options are parsed here, before `invoke`: `memory --memroy-dir x`.
        try:
            return super().make_context(info_name, args, parent=parent, **extra)
        except click.UsageError as exc:
            raise usage_error(exc, PROGRAM) from None

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:  # noqa: D102
        return super().parse_args(ctx, hoist(args, ["--memory-url"]))

    def invoke(self, ctx: click.Context):  # noqa: D102
        try:
            return super().invoke(ctx)
        except MemoryStoreError as exc:
            raise click.ClickException(str(exc)) from None
        except click.UsageError as exc:
            # One line, like every other error (click would add the usage and a hint).
            raise usage_error(exc, PROGRAM) from None
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
    help="Storage backend URL, e.g. postgresql://user@host/db (default: the memory "
    "directory); before or after the verb.",
)
@click.version_option(
    package_name="tether", prog_name=PROGRAM, message="%(prog)s (tether) %(version)s"
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
    show_warnings()
    ctx.obj = {"memory_dir": memory_dir, "memory_url": memory_url}


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
    for module in _VERB_MODULES:
        module.register(cli)
    _add_dir_option(cli)


_register()


def main() -> None:
    cli(prog_name=PROGRAM)
