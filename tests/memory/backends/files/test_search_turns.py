"""Messages searched as turns of conversations (files backend, `MemoryStore.search`).

An answer that shares no word with the question is found beside the turn that asked it;
a message by a speaker the question names ranks above one that only mentions the name;
context never crosses from one log into another, never lengthens a list of results, and
an isolated match keeps its rank.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from memory import MemoryStore, durable


def _turn(name: str, text: str) -> dict:
    return {"role": "user", "name": name, "content": text}


def _zephyr_notes(n: int) -> list[dict]:
    """Turns that mention the zephyr project in passing: more rows match a question about
    it than a search returns, as in any long conversation."""
    return [_turn("Ana", f"Zephyr note {i}: nothing new today.") for i in range(n)]


def _log(store: MemoryStore, task: str, turns: list[dict]) -> None:
    durable.append_jsonl(store.layout.messages(task), turns, many=True)


def _lines(store: MemoryStore, question: str, limit: int = 5, task: str = "T1") -> list[int]:
    hits = store.search(question, scope="messages", limit=limit)
    return [h.line for h in hits if h.path == f"working/{task}/messages.jsonl"]


@pytest.fixture
def store(memory_dir):
    return MemoryStore(memory_dir)


def test_an_answer_sharing_no_word_with_the_question_is_found_beside_the_question(store):
    _log(
        store,
        "T1",
        [
            *_zephyr_notes(8),
            _turn("Ana", "Which port should the zephyr service listen on?"),
            _turn("Bo", "31337, we settled it after the load test."),
            *_zephyr_notes(8),
        ],
    )
    assert _lines(store, "Which port does the zephyr service listen on?")[:2] == [9, 10]


def test_a_message_by_the_named_speaker_ranks_above_one_that_mentions_the_name(store):
    turns = [
        _turn("Caroline", "Melanie, remember the lake at sunset? Melanie, that was the best."),
        _turn("Melanie", "The lake at sunset was the best part of the trip."),
    ]
    _log(store, "T1", [turns[0], *_zephyr_notes(8), turns[1], *_zephyr_notes(8)])
    question = "What did Melanie say about the lake at sunset?"
    assert _lines(store, question)[:2] == [10, 1]
    store.reindex()  # speakers are indexed from each line's `name`, again
    assert _lines(store, question)[:2] == [10, 1]


def test_a_speaker_name_of_several_words_and_accents_is_matched_folded(store):
    _log(
        store,
        "T1",
        [
            _turn("Ana", "José Ortiz: the harbour survey finished on schedule, José Ortiz says."),
            *_zephyr_notes(8),
            _turn("José Ortiz", "The harbour survey finished on schedule."),
            *_zephyr_notes(8),
        ],
    )
    assert _lines(store, "what did jose ortiz say about the harbour survey")[:2] == [10, 1]


def test_a_name_that_is_no_string_names_no_speaker(store):
    text = "Nadia booked the ferry tickets."
    _log(
        store,
        "T1",
        [
            {"role": "user", "name": "Nadia", "content": text},
            *_zephyr_notes(8),
            {"role": "user", "name": ["Nadia"], "content": text},  # the same words, newer
        ],
    )
    assert _lines(store, "what did Nadia book")[:2] == [1, 10]


def test_context_stays_inside_one_log_even_when_appends_interleave(store):
    _log(store, "A", [_turn("Ana", "Which port should the zephyr service listen on?")])
    store.search("warm up", limit=1)  # each sync indexes what was appended since the last
    _log(store, "B", [_turn("Cy", "Unrelated: the cafeteria has soup today.")])
    store.search("warm up", limit=1)
    _log(store, "A", [_turn("Bo", "31337, we settled it after the load test."), *_zephyr_notes(8)])
    question = "Which port does the zephyr service listen on?"
    hits = store.search(question, scope="messages", limit=3)
    cites = [h.citation for h in hits]
    assert cites[:2] == ["working/A/messages.jsonl#L1", "working/A/messages.jsonl#L2"]
    assert "working/B/messages.jsonl#L1" not in cites


def test_turns_beside_a_match_never_lengthen_the_results(store):
    _log(
        store,
        "T1",
        [_turn("Ana", "hello"), _turn("Bo", "The quokka port is 31337."), _turn("Ana", "ok")],
    )
    assert [h.line for h in store.search("quokka", scope="messages", limit=10)] == [2]


def test_an_isolated_full_match_outranks_a_turn_between_partial_matches(store):
    _log(
        store,
        "T1",
        [
            _turn("Ana", "The zephyr gateway timeout hit again."),
            _turn("Bo", "Lunch at noon?"),
            _turn("Ana", "The zephyr gateway retries helped a bit."),
            *_zephyr_notes(8),
            _turn("Bo", "Zephyr gateway timeout retries are fixed by the new backoff."),
            *_zephyr_notes(8),
        ],
    )
    lines = _lines(store, "zephyr gateway timeout retries")
    assert lines[0] == 12
    assert lines.index(2) > lines.index(1)  # "Lunch at noon?" only sits between matches


def test_a_past_form_of_an_irregular_verb_answers_a_question_in_the_present(store):
    _log(
        store,
        "T1",
        [
            _turn("Ana", "We met the auditors on Tuesday, all fine."),
            _turn("Bo", "The auditors called."),
        ],
    )
    assert _lines(store, "When did we meet the auditors?")[0] == 1
    assert _lines(store, "Where did the auditors go?") == [2, 1]  # "go" is no form of "met"


def test_an_index_from_before_speakers_is_searched_read_only(store, memory_dir, cli_env):
    """A read-only memory is not migrated: its index lacks the speaker column."""
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file modes cannot be enforced")
    _log(store, "T1", [_turn("Ana", "Which port should the zephyr service listen on?")])
    _log(store, "T1", [_turn("Bo", "31337, we settled it."), *_zephyr_notes(8)])
    store.search("warm up", limit=1)
    conn = store.backend.connect()
    conn.execute("DROP INDEX idx_docs_speaker")
    conn.execute("ALTER TABLE idx_docs DROP COLUMN speaker")
    conn.execute("DELETE FROM _migrations WHERE name = 'm104_message_speakers'")
    conn.commit()
    store.close()
    subprocess.run(["chmod", "-R", "a-w", str(memory_dir)], check=True)
    try:
        drop = ["setpriv", "--bounding-set=-dac_override,-dac_read_search,-fowner", "--"]
        boot = "import sys; sys.argv[0] = 'memory'; from memory.cli.app import main; main()"
        found = subprocess.run(
            [*(drop if os.geteuid() == 0 else []), sys.executable, "-c", boot]
            + ["search", "which port does Ana's zephyr service use", "--limit", "2", "--json"],
            capture_output=True,
            text=True,
            env=cli_env,
            timeout=120,
        )
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(memory_dir)], check=True)
    assert found.returncode == 0, found.stderr
    assert [hit["line"] for hit in json.loads(found.stdout)] == [1, 2]
