"""Command-line helpers shared by the `memory` and `orchestrator` groups (cheap to import).

`hoist(args, options)`: group options such as `--memory-url` may also be written after the
verb (`orchestrator run "..." --memory-url postgresql://...`); the group moves them in
front of the verb before click parses, so the group sees them before its verb runs.

`usage_error(exc, program)`: the one rule both commands follow for a usage error (an
unknown option, a missing or extra argument, no such command, a group called without a
subcommand): one `Error:` line, with click's "Did you mean" when it has one, and exit 2.
A bad value of an option or argument (`--limit abc`) is bad input like any other: exit 1.
"""

from __future__ import annotations

from collections.abc import Iterable

import click

#: Exit code of a usage error (click's, and the shell's for a misused builtin).
EXIT_USAGE = 2
#: A group called without a subcommand lists them in its error line up to this many.
_LISTED_COMMANDS = 6
#: What click (8.2 and later) raises for a group called without a subcommand.
_NO_COMMAND = getattr(click.exceptions, "NoArgsIsHelpError", ())


def hoist(args: list[str], options: Iterable[str]) -> list[str]:
    """`args` with every `--OPTION VALUE` / `--OPTION=VALUE` of `options` moved to the front
    (in order). Nothing after a `--` is touched, and a trailing option without a value stays
    where it is (click then reports it)."""
    names = set(options)
    front: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest.extend(args[i:])
            break
        name = arg.split("=", 1)[0]
        if name in names and "=" in arg:
            front.append(arg)
        elif arg in names and i + 1 < len(args):
            front.extend(args[i : i + 2])
            i += 1
        else:
            rest.append(arg)
        i += 1
    return front + rest


def usage_error(exc: click.UsageError, program: str) -> click.ClickException:
    """`exc` as one `Error:` line: exit 2 for a usage error, 1 for a bad value.

    Args:
        exc: what click raised while parsing (or resolving a subcommand).
        program: the command's name (`memory`), used instead of however it was invoked.
    """
    if isinstance(exc, _NO_COMMAND):
        message = _missing_command(exc.ctx, program)  # click's message is the whole help
    else:
        message = " ".join(exc.format_message().split())
    bad_value = isinstance(exc, click.BadParameter) and not isinstance(exc, click.MissingParameter)
    error = click.ClickException(message)
    error.exit_code = 1 if bad_value else EXIT_USAGE
    return error


def _missing_command(ctx: click.Context, program: str) -> str:
    names: list[str] = []
    at: click.Context | None = ctx
    while at is not None and at.parent is not None:
        names.append(at.info_name or "")
        at = at.parent
    path = " ".join([program, *reversed(names)])
    group = ctx.command
    verbs = group.list_commands(ctx) if isinstance(group, click.Group) else []
    if 0 < len(verbs) <= _LISTED_COMMANDS:
        return f"missing command for `{path}`: one of {', '.join(verbs)}"
    return f"missing command for `{path}`: see `{path} --help`"
