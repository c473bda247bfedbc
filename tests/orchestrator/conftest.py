"""Fixtures for the orchestrator's run, recovery, monitor and CLI tests.

`fixture_repo` builds a small project for the offline model to survey: a package with a
few modules (docstrings, definitions, a TODO), docs and a README, i.e. three areas, so
the offline lead plans three subtasks per phase. `tiny_workflow` has two phases, which
keeps a whole run (and each crash/resume pair) well under a second of graph work.
"""

from __future__ import annotations

from pathlib import Path

import pytest

MODULE = '''"""{doc}"""


def {name}(value):
    # TODO: handle {name} errors
    return value
'''


def build_repo(root: Path, modules: int = 3, docs: int = 1, readme: bool = True) -> Path:
    """Write a small project under `root` and return it (two areas without `readme`)."""
    pkg = root / "src" / "shop"
    pkg.mkdir(parents=True)
    (pkg / "__init__.py").write_text('"""Shop: carts, orders and payments."""\n')
    for i in range(modules):
        name = f"handle_{i}"
        (pkg / f"mod{i}.py").write_text(MODULE.format(doc=f"Module {i} of the shop.", name=name))
    (root / "docs").mkdir()
    for i in range(docs):
        (root / "docs" / f"guide{i}.md").write_text(f"# Guide {i}\nHow to run the shop.\n")
    if readme:
        (root / "README.md").write_text("# Shop\nA tiny shop service used as a test fixture.\n")
    return root


@pytest.fixture
def fixture_repo(tmp_path) -> Path:
    return build_repo(tmp_path / "repo")


@pytest.fixture
def tiny_workflow(tmp_path) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text("name: tiny\nphases: [exploration, review]\n")
    return path
