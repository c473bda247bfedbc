"""The `memory` entry verbs on the command line: log, fetch, list, refs, stats, prune.

Run in-process with click's `CliRunner` and, where bytes on real pipes matter (byte-exact
stdin/stdout, start-up imports), as a subprocess of `python -m memory`.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys

import pytest
from click.testing import CliRunner

from memory.cli.app import cli

ID = r"mem-\d{8}-\d{6}-[0-9a-f]{8}"


def run(*args: str, input: bytes | str | None = None):
    # piped, with nothing saying a width (pytest-xdist exports COLUMNS): whole rows
    runner = CliRunner(env={"COLUMNS": None})
    return runner.invoke(cli, list(args), input=input, catch_exceptions=False)


def log(*args: str, input=None) -> str:
    result = run("log", *args, "-q", input=input)
    assert result.exit_code == 0, result.output
    return result.stdout.strip()


def subprocess_memory(args, env, input: bytes | None = None):
    return subprocess.run(
        [sys.executable, "-m", "memory", *args],
        input=input,
        capture_output=True,
        env=env,
        timeout=60,
    )


def tree_digest(root) -> dict[str, str]:
    """Hash of every file under the memory dir (SQLite's transient -wal/-shm excluded)."""
    digest = {}
    for dirpath, _, files in os.walk(root):
        for name in files:
            if name.endswith(("-wal", "-shm")):
                continue
            path = os.path.join(dirpath, name)
            digest[os.path.relpath(path, root)] = hashlib.sha256(
                open(path, "rb").read()
            ).hexdigest()
    return digest


def text_of(tokens: int) -> str:
    line = "x" * 79 + "\n"
    return (line * (tokens * 4 // 80 + 1))[: tokens * 4]


class TestLogAndFetch:
    def test_log_text_prints_id_tokens_and_tier(self):
        result = run("log", "Test results: all 42 tests passed")
        assert result.exit_code == 0
        assert re.fullmatch(rf"Stored: {ID} \(9 tokens, inline\)\n", result.stdout)

    @pytest.mark.parametrize(
        ("tokens", "shown"),
        [
            (499, "499 tokens, inline"),
            (500, "500 tokens, file"),
            (4000, "4000 tokens, file"),
            (4001, "4001 tokens, 2 chunks"),
            (8500, "8500 tokens, 3 chunks"),
        ],
    )
    def test_log_file_at_tier_boundaries(self, tmp_path, tokens, shown):
        source = tmp_path / "out.txt"
        source.write_bytes(text_of(tokens).encode())
        result = run("log", "--file", str(source), "--tag", "build")
        assert re.fullmatch(rf"Stored: ({ID}) \({re.escape(shown)}\)\n", result.stdout)
        entry_id = result.stdout.split()[1]
        assert run("fetch", entry_id).stdout_bytes == source.read_bytes()

    def test_log_json(self):
        result = run("log", "hello", "--json", "--tag", "a", "--type", "context")
        data = json.loads(result.stdout)
        assert re.fullmatch(ID, data["id"])
        assert (data["tier"], data["tokens"], data["chunks"], data["type"], data["tags"]) == (
            "inline",
            2,
            0,
            "context",
            ["a"],
        )

    def test_stdin_and_stdout_are_byte_exact_through_real_pipes(self, cli_env):
        payload = (
            b"caf\xc3\xa9 \x00 NUL\r\nCRLF\r\n\x1b[31mred\x1b[0m\ttab \xf0\x9f\x98\x80"
            b" no trailing newline"
        )
        for repeat in (1, 300, 3000):  # inline, file, chunked
            data = payload * repeat
            stored = subprocess_memory(["log", "--stdin", "-q"], cli_env, input=data)
            assert stored.returncode == 0, stored.stderr
            entry_id = stored.stdout.decode().strip()
            fetched = subprocess_memory(["fetch", entry_id], cli_env)
            assert fetched.returncode == 0 and fetched.stdout == data

    def test_fetch_summary_only_and_chunks(self, tmp_path):
        lines = [f"tests/test_{i}.py::test_{i} PASSED" for i in range(1500)]
        lines += [
            "FAILED tests/test_auth.py::test_oauth_flow - AssertionError",
            "=========== 1500 passed, 1 failed in 20.1s ===========",
        ]
        text = "\n".join(lines) + "\n"
        stored = json.loads(run("log", "--stdin", "--json", input=text).stdout)
        entry_id = stored["id"]
        summary = run("fetch", entry_id, "--summary-only").stdout
        assert "1500 passed, 1 failed" in summary and "test_oauth_flow" in summary
        chunks = []
        n = 0
        while (result := run("fetch", entry_id, "--chunk", str(n))).exit_code == 0:
            chunks.append(result.stdout_bytes)
            n += 1
        assert stored["chunks"] == len(text) // 16000 + 1 == len(chunks)
        assert b"".join(chunks) == text.encode()


class TestListRefsStats:
    def test_list_table_filters_and_json(self, tmp_path):
        (tmp_path / "pipeline").mkdir()
        a = log("first output", "--tag", "pytest", "--directory", "./pipeline")
        b = log("a transcript", "--type", "transcript", "--directory", str(tmp_path / "pipeline"))
        c = log("--stdin", "--tag", "pytest", input=text_of(5000))
        table = run("list").stdout.splitlines()
        assert table[0].split() == ["ID", "TYPE", "TOKENS", "CHUNKS", "TAGS", "SUMMARY"]
        assert [row.split()[0] for row in table[1:]] == [c, b, a]
        assert table[1].split()[1:5] == ["output", "5000", "2", "pytest"]
        assert table[3].split()[1:] == ["output", "3", "0", "pytest", "first", "output"]
        ids = lambda *args: [e["id"] for e in json.loads(run("list", "--json", *args).stdout)]  # noqa: E731
        assert ids("--tag", "pytest") == [c, a]
        assert ids("--type", "transcript") == [b]
        assert ids("--directory", "pipeline") == [b, a]
        assert ids("--directory", str(tmp_path / "pipeline")) == [b, a]
        assert ids("--limit", "1") == [c]
        assert run("list", "--type", "summary").stdout == "No entries.\n"

    def test_refs_checkpoint_and_directory(self, tmp_path):
        text = "\n".join(f"t{i} PASSED" for i in range(3000)) + "\n== 3000 passed, 0 failed ==\n"
        entry_id = log(
            "--stdin", "--checkpoint", "ckpt-20260123-123456", "--directory", "srv", input=text
        )
        expected = f"{entry_id}: 3000 passed, 0 failed ({len(text) // 4 + 1} tokens)\n"
        assert run("refs", "--checkpoint", "ckpt-20260123-123456").stdout == expected
        assert run("refs", "--directory", str(tmp_path / "srv")).stdout == expected
        assert (
            run("refs", "--checkpoint", "nope").stdout
            == "No entries linked to checkpoint 'nope'.\n"
        )

    def test_stats_text_and_json(self):
        log("small")
        log("--stdin", "--type", "transcript", input=text_of(1000))
        log("--stdin", input=text_of(9000))
        data = json.loads(run("stats", "--json").stdout)
        assert (data["entries"], data["tokens"], data["chunks"]) == (3, 10002, 3)
        assert data["by_tier"]["file"]["entries"] == 1
        assert data["by_type"]["transcript"]["tokens"] == 1000
        text = run("stats").stdout
        assert text.startswith("Entries: 3 (10002 tokens, 3 chunks; 39.1 KiB, ")
        assert re.search(r"^  chunked +1 +9000 +35.2 KiB ", text, re.M)
        assert max(len(line) for line in text.splitlines()) <= 60  # fits a narrow terminal

    def test_prune_prints_each_removed_id_and_touches_nothing_else(self, memory_dir):
        old = [log("--stdin", input=text_of(n)) for n in (5, 900, 6000)]
        new = log("newest")
        (memory_dir / "findings" / "agent_1.md").write_text("# finding\n")
        dry = run("prune", "--keep-entries", "1", "--dry-run").stdout.splitlines()
        assert [line.split()[2] for line in dry[:-1]] == old
        assert dry[-1] == "Would remove 3 entries."
        assert len(json.loads(run("list", "--json").stdout)) == 4
        done = run("prune", "--keep-days", "7", "--keep-entries", "1").stdout.splitlines()
        assert [line.split()[1] for line in done[:-1]] == old and done[-1] == "Removed 3 entries."
        assert [e["id"] for e in json.loads(run("list", "--json").stdout)] == [new]
        visible = [n for n in os.listdir(memory_dir / "entries") if not n.startswith(".")]
        assert visible == ["journal.jsonl"]  # the append-only journal stays, folders go
        assert (memory_dir / "findings" / "agent_1.md").read_text() == "# finding\n"
        assert run("prune", "--keep-entries", "1").stdout == "Nothing to prune.\n"

    def test_prune_reports_orphan_folders(self, memory_dir):
        log("only entry")
        orphan = memory_dir / "entries" / "mem-20200101-000000-deadbeef"
        orphan.mkdir()
        (orphan / "chunk-0000.gz").write_bytes(b"partial")
        os.utime(orphan, (0, 0))
        assert run("prune", "--keep-entries", "5").stdout == (
            "Removed: entries/mem-20200101-000000-deadbeef (files without an entry, left by "
            "an interrupted log)\nRemoved 0 entries and 1 orphan folder.\n"
        )
        assert not orphan.exists() and len(json.loads(run("list", "--json").stdout)) == 1


class TestBadInput:
    @pytest.fixture
    def existing(self, memory_dir):
        log("keep me", "--tag", "x")
        log("--stdin", input=text_of(6000))
        return tree_digest(memory_dir)

    @pytest.mark.parametrize(
        ("args", "stdin", "error"),
        [
            (
                ["fetch", "mem-20990101-000000-deadbeef"],
                None,
                "Error: no entry 'mem-20990101-000000-deadbeef' in {root!r}: "
                "see `memory list` for ids",
            ),
            (
                ["fetch", "{big}", "--chunk", "2"],
                None,
                "Error: chunk 2 is out of range for '{big}': it has 2 chunks (valid: 0..1)",
            ),
            (
                ["fetch", "{small}", "--chunk", "1"],
                None,
                "Error: chunk 1 is out of range for '{small}': it has 1 chunk (valid: 0)",
            ),
            (
                ["log", "--stdin"],
                b"ok so far \xff\xfe then bad",
                "Error: stdin is not valid UTF-8 (byte 0xff at offset 10); memory unchanged: "
                "store text, or base64-encode binary data first",
            ),
            (["log", "--stdin"], b"", "Error: stdin is empty: nothing to store; memory unchanged"),
            (["log", ""], None, "Error: TEXT is empty: nothing to store; memory unchanged"),
            (
                ["log", "x", "--type", "blob"],
                None,
                "Error: unknown entry type 'blob': use one of transcript, output, summary, "
                "context, chunk",
            ),
            (
                ["list", "--type", "blob"],
                None,
                "Error: unknown entry type 'blob': use one of transcript, output, summary, "
                "context, chunk",
            ),
            (
                ["log"],
                None,
                "Error: give exactly one of TEXT, --file F or --stdin "
                "(e.g. `pytest 2>&1 | memory log --stdin`)",
            ),
            (
                ["log", "--file", "missing.txt"],
                None,
                "Error: cannot read --file 'missing.txt': No such file or directory; "
                "memory unchanged",
            ),
            (["refs"], None, "Error: give --checkpoint ID or --directory DIR"),
            (["prune"], None, "Error: prune needs --keep-days N and/or --keep-entries N"),
            (
                ["prune", "--keep-entries", "-1"],
                None,
                "Error: invalid --keep-entries -1: use 0 or a positive number",
            ),
        ],
    )
    def test_one_line_error_exit_1_memory_intact(
        self, memory_dir, cli_env, existing, args, stdin, error
    ):
        listed = json.loads(run("list", "--json").stdout)
        small, big = listed[1]["id"], listed[0]["id"]
        args = [a.format(small=small, big=big) for a in args]
        result = subprocess_memory(args, cli_env, input=stdin)
        assert result.returncode == 1
        assert (
            result.stderr.decode()
            == error.format(root=str(memory_dir), small=small, big=big) + "\n"
        )
        assert result.stdout == b""
        assert tree_digest(memory_dir) == existing

    def test_memory_dir_that_is_a_file(self, tmp_path, cli_env):
        blocker = tmp_path / "blocker"
        blocker.write_text("precious")
        env = dict(cli_env, TETHER_MEMORY_DIR=str(blocker))
        result = subprocess_memory(["log", "--stdin"], env, input=b"some output")
        assert result.returncode == 1
        assert result.stderr.decode() == (
            f"Error: memory directory {str(blocker)!r} is not a directory; pass --memory-dir "
            "or set TETHER_MEMORY_DIR to a folder\n"
        )
        assert blocker.read_text() == "precious"

    def test_invalid_input_never_creates_the_memory_dir(self, memory_dir, cli_env):
        result = subprocess_memory(["log", "--stdin"], cli_env, input=b"\x80\x81")
        assert result.returncode == 1 and not memory_dir.exists()


class TestHelpAndStartup:
    @pytest.mark.parametrize("verb", ["log", "fetch", "list", "refs", "stats", "prune"])
    def test_every_verb_has_help_with_examples(self, verb):
        result = run(verb, "--help")
        assert result.exit_code == 0
        assert "Examples:" in result.stdout and f"memory {verb}" in result.stdout

    def test_log_does_not_import_langchain_or_langgraph(self, cli_env):
        code = (
            "import sys\nfrom memory.cli.app import cli\n"
            "try:\n    cli(['log', 'startup check', '-q'], standalone_mode=False)\n"
            "finally:\n"
            "    heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('langchain', 'langgraph', 'langchain_core'))\n"
            "    print('HEAVY', heavy)\n"
        )
        result = subprocess.run(
            [sys.executable, "-c", code], capture_output=True, env=cli_env, text=True, timeout=60
        )
        assert result.returncode == 0, result.stderr
        assert result.stdout.strip().endswith("HEAVY []")


@pytest.mark.parametrize(
    "verb", [["list"], ["stats"], ["search", "auth"], ["fetch", "mem-x"], ["facts"],
             ["episodes"], ["summary", "status"], ["refs", "--directory", "."]],
)  # fmt: skip
def test_read_only_verbs_never_create_a_memory_directory(tmp_path, verb):
    missing = tmp_path / "typo"
    result = CliRunner().invoke(cli, ["--memory-dir", str(missing), *verb])
    assert result.exit_code == 1
    assert result.output == (
        f"Error: no memory directory at '{missing}'; pass --memory-dir or set "
        "TETHER_MEMORY_DIR (nothing was created)\n"
    )
    assert not missing.exists()
