"""`Docs.rel`: the document path of a file, however the path to it was spelt."""

from __future__ import annotations

import os

import pytest

from memory.store import MemoryStore
from orchestrator.artifacts.documents import Docs


@pytest.fixture
def docs(tmp_path):
    with MemoryStore(tmp_path / "mem") as store:
        yield Docs(store.backend)


def test_rel_of_the_paths_docs_hands_out(docs):
    for rel in ("findings/a.md", "research_plans/t.md", ".tether/registry/t.jsonl"):
        assert docs.rel(docs.path(rel)) == rel
        assert docs.rel(str(docs.path(rel))) == rel
    assert docs.rel("findings/a.md") == "findings/a.md"  # a document path stays as it is


@pytest.mark.parametrize(
    ("spelt", "rel"),
    [
        ("mem/./findings/a.md", "findings/a.md"),
        ("mem//findings/a.md", "findings/a.md"),
        ("mem/findings/../checkpoints/c.json", "checkpoints/c.json"),
        ("mem/findings/", "findings"),
        ("mem", "."),
        ("mem-other/x.md", "../mem-other/x.md"),
    ],
)
def test_rel_normalises_like_relpath(docs, tmp_path, spelt, rel):
    path = f"{tmp_path}{os.sep}{spelt}"
    assert docs.rel(path) == rel == os.path.relpath(path, tmp_path / "mem")
