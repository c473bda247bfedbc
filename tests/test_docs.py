"""Docs cannot drift: every CLI command has help text and is documented in README.md."""

from __future__ import annotations

import re
from pathlib import Path

import click
import pytest

from memory.cli.app import cli as memory_cli
from orchestrator.cli.app import cli as orchestrator_cli
from orchestrator.events import events_table

README = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")


def _command_paths(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        found.append((path, command))
        if isinstance(command, click.Group):
            found.extend(_command_paths(command, path))
    return found


ALL_COMMANDS = _command_paths(memory_cli, "memory") + _command_paths(
    orchestrator_cli, "orchestrator"
)


def test_both_clis_have_their_core_verbs():
    paths = {path for path, _ in ALL_COMMANDS}
    expected = {
        "memory log",
        "memory fetch",
        "memory list",
        "memory search",
        "memory refs",
        "memory stats",
        "memory prune",
        "memory reindex",
        "memory summary status",
        "memory facts",
        "memory episodes",
        "orchestrator run",
        "orchestrator resume",
        "orchestrator handoff",
        "orchestrator status",
        "orchestrator checkpoint now",
        "orchestrator checkpoint load",
        "orchestrator checkpoint report",
        "orchestrator checkpoint list",
        "orchestrator snapshot",
    }
    assert expected <= paths, sorted(expected - paths)


@pytest.mark.parametrize("path,command", ALL_COMMANDS, ids=[p for p, _ in ALL_COMMANDS])
def test_every_command_has_help_and_is_in_the_readme(path, command):
    assert (command.help or "").strip(), f"{path} has no help text"
    assert f"`{path}" in README, f"{path} is not documented in README.md"


def _python_imports() -> list[str]:
    """Every `import` line of the README's python examples."""
    blocks = re.findall(r"```python\n(.*?)```", README, flags=re.DOTALL)
    lines = [ln.strip() for block in blocks for ln in block.splitlines()]
    return [ln for ln in lines if re.match(r"(from \S+ )?import \S", ln)]


@pytest.mark.parametrize("line", _python_imports())
def test_every_import_in_the_readme_examples_works(line):
    namespace: dict = {}
    exec(compile(line, "README.md", "exec"), namespace)  # an ImportError fails the test
    code = line.split("#", 1)[0].strip()
    if code.startswith("import "):
        names = [n.strip().split(" as ")[-1].split(".")[0] for n in code[7:].split(",")]
    elif code.endswith(" import *"):
        names = [n for n in namespace if not n.startswith("__")][:1] or ["(nothing imported)"]
    else:
        names = [n.strip().split(" as ")[-1] for n in code.split(" import ", 1)[-1].split(",")]
    assert all(name in namespace for name in names), line


def test_the_readme_lists_every_progress_event_as_its_model_defines_it():
    assert events_table() in README, "regenerate README's table with events_table()"
