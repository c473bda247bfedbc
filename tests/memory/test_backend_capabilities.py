"""What code outside `memory/backends/` needs of a memory it asks as a capability
(`memory.contract.capabilities`, `memory.backends.is_shared`), never by the backend's class
or its URL scheme: a new backend that says what it can do works everywhere without other edits.

Read from the source: no `isinstance(x, FilesBackend | PostgresBackend | InMemoryBackend)`
and no string holding `postgresql://` or `postgres://` outside `memory/backends/`, except
docstrings and a click option's `help=` (what a person reads as an example).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from memory.backends import backend_class, is_shared, shared_url_forms
from memory.backends.files import FilesBackend
from memory.backends.inmemory import InMemoryBackend
from memory.contract.capabilities import KnowsIdentity, MemoryDirectory, shared_between_machines
from memory.errors import InvalidInputError

ROOT = Path(__file__).resolve().parents[2]
CONCRETE = {"FilesBackend", "PostgresBackend", "InMemoryBackend"}
SCHEMES = ("postgresql://", "postgres://")


def _sources() -> list[Path]:
    found = []
    for package in ("orchestrator", "memory"):
        for path in (ROOT / package).rglob("*.py"):
            if "backends" not in path.relative_to(ROOT / package).parts[:1]:
                found.append(path)
    return found


def _docstrings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                ids.add(id(body[0].value))
    return ids


def _help_strings(tree: ast.AST) -> set[int]:
    ids = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "help":
            ids.update(id(n) for n in ast.walk(node.value) if isinstance(n, ast.Constant))
    return ids


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text())
    allowed = _docstrings(tree) | _help_strings(tree)
    where = path.name
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "isinstance":
            named = {n.id for n in ast.walk(node.args[1]) if isinstance(n, ast.Name)}
            if named & CONCRETE:
                found.append(f"{where}:{node.lineno}: isinstance on {sorted(named & CONCRETE)}")
        if (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and any(s in node.value for s in SCHEMES)
            and id(node) not in allowed
        ):
            found.append(f"{where}:{node.lineno}: a PostgreSQL URL scheme in code")
    return found


def test_no_backend_class_or_scheme_is_tested_outside_the_backends():
    assert _sources()
    offences = [line for path in _sources() for line in _offences(path)]
    assert offences == []


def test_the_check_finds_what_it_forbids(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        '"""postgresql://... in a docstring is fine."""\n'
        "def f(b, url):\n"
        '    return isinstance(b, FilesBackend) or url.startswith("postgres://")\n'
    )
    assert len(_offences(bad)) == 2


def test_a_url_says_whether_its_memory_is_shared_without_connecting():
    # nothing listens on port 1: no connection is tried
    assert is_shared("postgresql://nobody@127.0.0.1:1/none")
    assert is_shared("postgres://nobody@127.0.0.1:1/none")
    assert not is_shared(None)
    assert not is_shared("memory://")
    assert not is_shared("/some/dir")
    assert not is_shared("redis://host")  # no backend takes it: not shared
    assert shared_url_forms() == "postgresql://..."
    with pytest.raises(InvalidInputError, match="unknown memory URL"):
        backend_class("redis://host")


def test_capabilities_of_the_backends(tmp_path):
    files, mem = FilesBackend(tmp_path / "m"), InMemoryBackend()
    assert isinstance(files, MemoryDirectory) and not isinstance(mem, MemoryDirectory)
    assert not shared_between_machines(files) and not shared_between_machines(mem)
    assert shared_between_machines(backend_class("postgresql://h/db"))
    assert not isinstance(files, KnowsIdentity)
    files.close()
