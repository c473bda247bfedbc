"""Rare words weigh more than common ones in `memory search`, on every backend.

The question holds one rare word and ten common ones. One message holds only the rare
word; 3,000 hold all ten common words. A ranking that weighs the words the same (or
weighs rarity in only one of its two fields, the stem or the word's own form) puts the
common messages first, since they match ten of the question's eleven words; a ranking
that weighs words by rarity, as the README promises ("rare words weigh more"), puts the
message with the rare word first. (The older "common words do not outrank the rare ones"
passes either way: its answer holds the common words too.)
"""

from __future__ import annotations

import pytest

from memory import MemoryStore
from memory.backends import open_backend
from tests.pg import private_schema

NOISE = 3000
COMMON = "build test failed error timeout cache shard worker retry module"


@pytest.fixture(params=["files", "memory", "postgres"])
def store(request, tmp_path):
    if request.param == "postgres":
        with private_schema() as url, open_backend(url) as backend:
            yield MemoryStore(backend=backend)
    elif request.param == "memory":
        with open_backend("memory://") as backend:
            yield MemoryStore(backend=backend)
    else:
        with MemoryStore(tmp_path / "memory") as opened:
            yield opened


def test_the_one_rare_word_outranks_ten_common_ones(store):
    lines = [{"role": "tool", "content": f"{COMMON} in run {n}"} for n in range(NOISE)]
    lines[1000] = {"role": "user", "content": "a quokka was seen near the parking lot"}
    store.backend.append_jsonl("working/T1/messages.jsonl", lines)
    hits = store.search(f"quokka {COMMON}", limit=3)
    assert hits[0].citation == "working/T1/messages.jsonl#L1001", [h.citation for h in hits]
    assert "quokka" in hits[0].text
