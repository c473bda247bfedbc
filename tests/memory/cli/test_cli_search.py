"""`memory search` and `memory reindex` on the command line (CliRunner and subprocess).

Output formats (text with citations, `--json`), scopes and limits, exact one-line errors with
exit code 1 that leave the memory untouched, the help text, and a start-up that does not
pull in LangChain.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from click.testing import CliRunner

from memory import MemoryStore, durable
from memory.cli.app import cli


@pytest.fixture
def memory(memory_dir):
    store = MemoryStore(memory_dir)
    durable.atomic_write_text(
        store.layout.detail_dir("T1") / "auth-design.md",
        "# Auth\n\n## Decision\n\nSwitch the login flow to JWT with refresh rotation.\n",
    )
    durable.append_jsonl(
        store.layout.messages("T1"),
        [
            {"role": "user", "content": "run the tests please"},
            {"role": "assistant", "content": "We agreed: the auth flow moves to JWT tokens."},
        ],
        many=True,
    )
    durable.atomic_write_text(store.layout.facts / "tools.md", "# Tools\n\nUse ruff for lint.\n")
    store.close()
    return memory_dir


def run(*args):
    return CliRunner().invoke(cli, list(args), catch_exceptions=False)


def test_search_prints_seed_000_format(memory):
    result = run("search", "when did we switch the login flow to JWT?", "--limit", "2")
    assert result.exit_code == 0
    assert result.output.splitlines() == [
        'Found 2 result(s) for: "when did we switch the login flow to JWT?"',
        "",
        "[1] Source: detail",
        "    File: working/T1/detail/auth-design.md:5",
        "    Content: Switch the login flow to JWT with refresh rotation.",
        "    Citation: working/T1/detail/auth-design.md#L5",
        "",
        "[2] Source: messages",
        "    File: working/T1/messages.jsonl:2",
        "    Content: assistant: We agreed: the auth flow moves to JWT tokens.",
        "    Citation: working/T1/messages.jsonl#L2",
    ]


def test_unquoted_words_form_one_query(memory):
    quoted = run("search", "ruff lint").output
    assert run("search", "ruff", "lint").output == quoted
    assert "Citation: facts/tools.md#L3" in quoted


def test_json_output(memory):
    result = run("search", "JWT", "--json", "--scope", "messages")
    assert result.exit_code == 0
    data = json.loads(result.output)
    assert data == [
        {
            "source": "messages",
            "path": "working/T1/messages.jsonl",
            "line": 2,
            "citation": "working/T1/messages.jsonl#L2",
            "text": "assistant: We agreed: the auth flow moves to JWT tokens.",
            "score": data[0]["score"],
        }
    ]
    assert isinstance(data[0]["score"], float) and data[0]["score"] > 0


def test_scopes_repeat_or_comma(memory):
    both = json.loads(run("search", "JWT ruff", "--json", "-s", "facts", "-s", "detail").output)
    comma = json.loads(run("search", "JWT ruff", "--json", "--scope", "facts,detail").output)
    assert {d["source"] for d in both} == {"facts", "detail"}
    assert both == comma


def test_empty_result(memory):
    result = run("search", "xylophone")
    assert (result.exit_code, result.output) == (0, 'Found 0 result(s) for: "xylophone"\n')
    assert run("search", "xylophone", "--json").output == "[]\n"


@pytest.mark.parametrize(
    ("args", "error"),
    [
        (
            ["search", ""],
            "Error: empty query '': give words to search for, e.g. 'auth flow decision'",
        ),
        (["search"], "Error: empty query '': give words to search for, e.g. 'auth flow decision'"),
        (
            ["search", "jwt", "--scope", "notes"],
            "Error: unknown scope 'notes': use one of all, plans, findings, checkpoints, "
            "snapshots, overview, detail, messages, entries, facts, episodes",
        ),
        (
            ["search", "jwt", "--limit", "0"],
            "Error: invalid limit 0: give a number of results >= 1",
        ),
    ],
)
def test_bad_input_is_one_line_error_and_memory_is_intact(memory, cli_env, args, error):
    before = {
        p: p.read_bytes()
        for p in memory.rglob("*")
        if p.is_file() and not p.name.startswith("memory.db")
    }
    proc = subprocess.run(
        [sys.executable, "-m", "memory", *args],
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert (proc.returncode, proc.stdout, proc.stderr) == (1, "", error + "\n")
    after = {
        p: p.read_bytes()
        for p in memory.rglob("*")
        if p.is_file() and not p.name.startswith("memory.db")
    }
    assert after == before
    assert "Citation: working/T1/detail/auth-design.md#L5" in run("search", "JWT").output


def test_reindex_prints_counts_and_search_still_works(memory):
    result = run("reindex")
    assert result.exit_code == 0
    assert result.output.startswith("Reindexed 4 row(s) from 3 file(s) and 0 entries in ")
    assert result.output.rstrip().endswith(" s")
    assert "working/T1/detail/auth-design.md#L5" in run("search", "JWT").output


def test_entries_are_searchable_from_the_cli(memory):
    store = MemoryStore(memory)
    entry = store.log("E   AssertionError: pangolin count 3 != 4", tags=["pytest"])
    store.close()
    data = json.loads(run("search", "pangolin assertion", "--json").output)
    assert [(d["source"], d["citation"], d["line"]) for d in data] == [("entries", entry.id, None)]


def test_help_has_examples():
    for verb in ("search", "reindex"):
        result = run(verb, "--help")
        assert result.exit_code == 0
        assert "Examples:" in result.output


def test_search_does_not_import_langchain(memory, cli_env):
    code = (
        "import sys\nfrom memory.cli.app import main\nsys.argv = ['memory', 'search', 'JWT']\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "bad = [m for m in sys.modules if m.startswith(('langchain', 'langgraph'))]\n"
        "print('IMPORTED', bad)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], env=cli_env, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[-1] == "IMPORTED []"
    assert "Citation: working/T1/detail/auth-design.md#L5" in proc.stdout
