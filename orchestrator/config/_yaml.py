"""Bounded YAML parsing for the files a project supplies: skill front matter, workflow files.

Those files come from whatever repository tether runs in, so they are untrusted input.
PyYAML's `safe_load` builds an alias as a shared reference, which makes a 1 KB alias bomb
cheap to load but exponential for whatever walks the result afterwards (validation, a
`repr` in an error message, `deepcopy`), and its composer recurses once per nesting level,
so a few thousand nested `[` end in a `RecursionError`.

`load` parses with limits checked while the node graph is composed, before any Python
object is built:

* at most `MAX_CHARS` characters of text;
* at most `MAX_DEPTH` levels of nesting;
* at most `MAX_NODES` nodes and `MAX_CHARS` characters of scalars once every alias is
  expanded (what a reader walking the result would see); a recursive alias is refused.

Breaking a limit raises `LimitError`, a `yaml.YAMLError` whose message names the limit and
the line, never the value, so callers word it like any other YAML error.
"""

from __future__ import annotations

import functools
from typing import Any

import yaml

MAX_CHARS = 1 << 20
MAX_DEPTH = 64
MAX_NODES = 10_000


class LimitError(yaml.MarkedYAMLError):
    """A YAML text breaks one of the limits of `load`."""


def load(text: str, loader: type[yaml.SafeLoader] = yaml.SafeLoader) -> Any:
    """The single YAML document in `text`, parsed by `loader` within the limits above.

    Args:
        loader: a `yaml.SafeLoader` subclass (e.g. one that refuses duplicate keys).

    Raises:
        yaml.YAMLError: malformed YAML, or `LimitError` for a text over the limits.
    """
    if len(text) > MAX_CHARS:
        raise LimitError(problem=f"the text is {len(text):,} characters; at most {MAX_CHARS:,}")
    bounded = _bounded(loader)(text)
    try:
        node = bounded.get_single_node()
        if node is None:
            return None
        _check_expansion(node)
        return bounded.construct_document(node)
    finally:
        bounded.dispose()


@functools.cache
def _bounded(loader: type[yaml.SafeLoader]) -> type[yaml.SafeLoader]:
    """`loader` with a composer that refuses nesting deeper than `MAX_DEPTH`."""

    def compose_node(self: Any, parent: Any, index: Any) -> Any:
        self._depth = getattr(self, "_depth", 0) + 1
        try:
            if self._depth > MAX_DEPTH:
                raise LimitError(
                    problem=f"nested deeper than {MAX_DEPTH} levels",
                    problem_mark=self.peek_event().start_mark,
                )
            return base_compose(self, parent, index)
        finally:
            self._depth -= 1

    base_compose = loader.compose_node
    return type(f"Bounded{loader.__name__}", (loader,), {"compose_node": compose_node})


def _check_expansion(root: yaml.Node) -> None:
    """Refuse a node graph whose aliases expand past `MAX_NODES` nodes or `MAX_CHARS`
    characters of scalars, or that refers to itself (sizes are memoised per node, so this
    costs one pass over the graph as composed, not over its expansion)."""
    sizes: dict[int, tuple[int, int]] = {}
    open_nodes: set[int] = set()

    def size(node: yaml.Node) -> tuple[int, int]:
        key = id(node)
        if key in sizes:
            return sizes[key]
        if key in open_nodes:
            raise LimitError(
                problem="an alias refers to a node that contains it", problem_mark=node.start_mark
            )
        if isinstance(node, yaml.ScalarNode):
            sizes[key] = (1, len(node.value))
            return sizes[key]
        open_nodes.add(key)
        children = node.value if isinstance(node, yaml.SequenceNode) else _flat(node.value)
        nodes, chars = 1, 0
        for child in children:
            more_nodes, more_chars = size(child)
            nodes, chars = nodes + more_nodes, chars + more_chars
            limit = _over(nodes, chars)
            if limit:
                raise LimitError(
                    problem=f"aliases expand past {limit}", problem_mark=child.start_mark
                )
        open_nodes.discard(key)
        sizes[key] = (nodes, chars)
        return sizes[key]

    size(root)


def _over(nodes: int, chars: int) -> str:
    """The limit `nodes` and `chars` break, or ''."""
    if nodes > MAX_NODES:
        return f"{MAX_NODES:,} nodes"
    return f"{MAX_CHARS:,} characters" if chars > MAX_CHARS else ""


def _flat(pairs: list[tuple[yaml.Node, yaml.Node]]) -> list[yaml.Node]:
    return [node for pair in pairs for node in pair]
