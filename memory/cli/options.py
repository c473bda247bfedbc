"""Command-line helpers shared by the `memory` and `orchestrator` groups (cheap to import).

`hoist(args, options)`: group options such as `--memory-url` may also be written after the
verb (`orchestrator run "..." --memory-url postgresql://...`); the group moves them in
front of the verb before click parses, so the group sees them before its verb runs.
"""

from __future__ import annotations

from collections.abc import Iterable


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
