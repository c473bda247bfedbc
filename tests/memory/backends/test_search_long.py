"""Everything stored is findable, however long the message or block that holds it.

Through the backend contract and `memory.search.recall.search`, on every backend: a word past the
first 20,000 characters of a message, the last word of a multi-megabyte message, a word
in a non-ASCII message and in a one-line file block of that size are found, cited at the
right line, and shown in the snippet.
"""

from __future__ import annotations

import pytest

from memory.backends import open_backend
from memory.search.recall import search
from tests.pg import private_schema

MESSAGES = "working/T1/messages.jsonl"


@pytest.fixture(params=["files", "memory", "postgres"])
def backend(request, tmp_path):
    if request.param == "postgres":
        with private_schema() as url, open_backend(url) as opened:
            yield opened
    else:
        url = "memory://" if request.param == "memory" else str(tmp_path / "memdir")
        with open_backend(url) as opened:
            yield opened


def _filler(chars: int, words: str = "lorem ipsum dolor sit amet") -> str:
    text = (words + " ") * (chars // (len(words) + 1) + 1)
    return text[:chars].rsplit(" ", 1)[0]


def _log(backend, *texts: str) -> None:
    backend.append_jsonl(MESSAGES, [{"role": "user", "content": "a short hello"}])
    backend.append_jsonl(MESSAGES, [{"role": "tool", "content": t} for t in texts])


def test_a_word_past_the_first_twenty_thousand_characters_of_a_message_is_found(backend):
    _log(backend, _filler(25_000) + " zanzibar, as agreed.")
    (hit,) = search(backend, "zanzibar", limit=5)
    assert hit.citation == f"{MESSAGES}#L2"
    assert "zanzibar, as agreed." in hit.text


def test_the_last_word_of_a_multi_megabyte_message_is_found(backend):
    middle = _filler(1_500_000) + " wombat " + _filler(1_500_000)
    _log(backend, middle + " quokka")
    for word in ("quokka", "wombat"):
        (hit,) = search(backend, word, limit=5)
        assert hit.citation == f"{MESSAGES}#L2"
        assert word in hit.text
    (hit,) = search(backend, "wombat quokka", limit=5)
    assert hit.citation == f"{MESSAGES}#L2"


def test_a_multi_megabyte_message_of_distinct_words_is_stored_and_every_word_found(backend):
    """Distinct words make an index row far larger than repeated ones (PostgreSQL's
    `tsvector` holds at most 1 MB): the message is still stored whole and searchable."""
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = [  # 2.4 MB, every word different from its first five letters on
        "".join(letters[n // 26**k % 26] for k in range(4)) + f"q{n}" for n in range(300_000)
    ]
    _log(backend, " ".join(words) + " quokka")
    assert len(backend.read_text(MESSAGES).splitlines()) == 2
    for word in ("quokka", words[0], words[150_000], words[-1]):
        (hit,) = search(backend, word, limit=5)
        assert hit.citation == f"{MESSAGES}#L2", word
        assert word in hit.text


def test_a_word_deep_in_a_long_message_of_other_scripts_is_found(backend):
    _log(backend, _filler(30_000, "Größe Übersicht naïve café") + " Zanzíbar")
    (hit,) = search(backend, "Zanzíbar", limit=5)
    assert hit.citation == f"{MESSAGES}#L2"
    assert "Zanzíbar" in hit.text


def test_a_word_at_the_end_of_a_one_line_block_of_a_file_is_found(backend):
    body = "# Notes\n\nfirst paragraph\n\n" + _filler(40_000) + " okapi\n"
    backend.put_document("findings/long.md", body.encode())
    (hit,) = search(backend, "okapi", limit=5)
    assert hit.path == "findings/long.md"
    assert hit.line == 5
    assert "okapi" in hit.text


def test_a_rare_word_is_found_among_thousands_of_matches_of_a_common_one(backend):
    _log(backend, _filler(200_000, "lorem") + " narwhal")
    hits = search(backend, "lorem narwhal", limit=5)
    assert hits[0].citation == f"{MESSAGES}#L2"
    assert "narwhal" in search(backend, "narwhal", limit=5)[0].text
