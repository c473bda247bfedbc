"""`--memory-url` / `TETHER_MEMORY_URL` on the `memory` CLI, and `memory export` / `import`.

Through the console script: a memory tree imported into PostgreSQL (or a memory directory)
and exported again is byte-identical; `log`, `fetch`, `list` and `search` work on Postgres;
bad URLs (unreachable server, unknown user, a database without tether's tables, an older
schema) give one `Error:` line naming the URL without its password, and exit 1.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.pg import private_schema


def memory(*args: str, env_url: str | None = None, cwd: Path | None = None):
    env = dict(os.environ)
    if env_url:
        env["TETHER_MEMORY_URL"] = env_url
    return subprocess.run(
        [sys.executable, "-m", "memory", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        timeout=60,
    )


def _tree(root: Path) -> dict[str, bytes]:
    files = {
        "research_plans/t1.md": b"# Plan\n\n- [ ] find where cookies are kept\n",
        "findings/t1/overview.md": "Cookies live in the session jar ü\r\nno newline".encode(),
        "checkpoints/t1/ckpt-1.json": b'{"phase": 1}',
        "context_snapshots/t1-1.md": b"# Snapshot\n",
        "working/t1/messages.jsonl": b'{"role": "user", "content": "hi"}\n',
        "facts/facts.jsonl": b"",
        "findings/t1/blob.bin": b"\x00\xff\xfe binary",
    }
    for rel, data in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(data)
    return files


def _read_tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


@pytest.fixture
def pg_url():
    with private_schema() as url:
        yield url


def test_reimport_replaces_what_search_finds(pg_url, tmp_path):
    tree = tmp_path / "tree"
    _tree(tree)
    assert memory("--memory-url", pg_url, "import", str(tree)).returncode == 0
    (tree / "findings/t1/overview.md").write_text("Nothing left about that.\n")
    assert memory("--memory-url", pg_url, "import", str(tree)).returncode == 0
    found = memory("--memory-url", pg_url, "search", "jar", "--json")
    assert json.loads(found.stdout) == []


def test_postgres_import_then_export_is_byte_identical(pg_url, tmp_path):
    files = _tree(tmp_path / "tree")
    done = memory("--memory-url", pg_url, "import", str(tmp_path / "tree"))
    assert done.returncode == 0, done.stderr
    assert "Imported 7 document(s)" in done.stdout
    out = memory("--memory-url", pg_url, "export", str(tmp_path / "out"))
    assert out.returncode == 0, out.stderr
    assert _read_tree(tmp_path / "out") == files


def test_files_backend_round_trip_through_a_memory_directory(tmp_path):
    files = _tree(tmp_path / "tree")
    memdir = str(tmp_path / "memdir")
    assert memory("--memory-dir", memdir, "import", str(tmp_path / "tree")).returncode == 0
    assert memory("--memory-dir", memdir, "export", str(tmp_path / "out")).returncode == 0
    assert _read_tree(tmp_path / "out") == files


def test_log_fetch_list_search_on_postgres_via_the_environment(pg_url, tmp_path):
    _tree(tmp_path / "tree")
    assert memory("import", str(tmp_path / "tree"), env_url=pg_url).returncode == 0
    logged = memory("log", "-q", "--tag", "probe", "the retry budget is 3", env_url=pg_url)
    assert logged.returncode == 0, logged.stderr
    entry_id = logged.stdout.strip()
    fetched = memory("fetch", entry_id, env_url=pg_url)
    assert fetched.stdout == "the retry budget is 3"
    assert entry_id in memory("list", "--tag", "probe", env_url=pg_url).stdout
    found = memory("search", "cookies", env_url=pg_url)
    assert found.returncode == 0 and "Citation: findings/t1/overview.md#L1" in found.stdout
    scoped = memory("search", "cookies", "--scope", "plans", "--json", env_url=pg_url)
    assert [r["citation"] for r in json.loads(scoped.stdout)] == [
        "research_plans/t1.md#L3"
    ]  # the line that holds the word, inside the heading's block (as on a memory directory)
    assert entry_id in memory("search", "retry", "--json", env_url=pg_url).stdout


def _one_error_line(result, url_shown: str) -> str:
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), result.stderr
    assert url_shown in lines[0] and "s3cret" not in lines[0]
    return lines[0]


def test_unreachable_server_and_unknown_user_are_one_line(pg_url, tmp_path):
    down = memory("--memory-url", "postgresql://postgres:s3cret@127.0.0.1:1/test", "list")
    _one_error_line(down, "postgresql://postgres:***@127.0.0.1:1/test")
    nobody = memory("--memory-url", "postgresql://nobody:s3cret@127.0.0.1:5432/test", "search", "x")
    assert "nobody" in _one_error_line(nobody, "postgresql://nobody:***@127.0.0.1:5432/test")


def test_database_without_tables_or_with_an_older_schema_is_refused(pg_url):
    import psycopg

    line = _one_error_line(memory("--memory-url", pg_url, "list"), "tether_test_")
    assert "no tether tables" in line
    assert memory("--memory-url", pg_url, "setup").returncode == 0
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("DELETE FROM tether_migrations")
    line = _one_error_line(memory("--memory-url", pg_url, "search", "x"), "tether_test_")
    assert "older tether schema" in line


def test_setup_upgrades_a_database_whose_logs_were_written_before_appends_had_rows(pg_url):
    """A document written under the second schema (no size, no parts) is read, appended to
    and searched after `memory setup` adds the third."""
    import psycopg

    from memory.backends.postgres import MIGRATIONS, PostgresBackend

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE tether_migrations (name TEXT PRIMARY KEY, applied_at TEXT)")
        for name, script in MIGRATIONS[:2]:
            conn.execute(script)
            conn.execute("INSERT INTO tether_migrations(name) VALUES (%s)", (name,))
        conn.execute(
            "INSERT INTO tether_documents(path, data, version, mtime, deleted, lines) "
            "VALUES ('working/t/messages.jsonl', %s, 3, 0, FALSE, 2)",
            (b'{"content": "old one"}\n{"content": "old two"}\n',),
        )
    assert "older tether schema" in _one_error_line(memory("--memory-url", pg_url, "list"), "")
    assert memory("--memory-url", pg_url, "setup").returncode == 0
    with PostgresBackend.open(pg_url) as backend:
        assert backend.stat_document("working/t/messages.jsonl").size == 46
        assert backend.append_lines("working/t/messages.jsonl", ['{"content": "new zebra"}']) == 3
        doc = backend.get_document("working/t/messages.jsonl", offset=23)
        assert doc.data == b'{"content": "old two"}\n{"content": "new zebra"}\n'
        assert doc.version == 4 and doc.size == 71
        hits = backend.index_query("zebra")
        assert [h.doc_id for h in hits] == ["working/t/messages.jsonl#L3"]


def test_every_verb_works_on_postgres(pg_url, tmp_path):
    tree = tmp_path / "tree"
    _tree(tree)
    messages = "".join(
        json.dumps({"role": "user", "content": f"turn {n} about the walrus"}) + "\n"
        for n in range(12)
    )
    (tree / "working/t1/messages.jsonl").write_text(messages)
    (tree / "facts").mkdir(exist_ok=True)
    (tree / "facts/user.md").write_text("# User Facts\n\n> Summary: editor\n\n- Editor: vim\n")
    assert memory("--memory-url", pg_url, "import", str(tree)).returncode == 0
    logged = memory("--memory-url", pg_url, "log", "-q", "--checkpoint", "cp-1", "x y z")
    entry_id = logged.stdout.strip()

    def ok(*args: str) -> str:
        done = memory("--memory-url", pg_url, *args)
        assert done.returncode == 0, (args, done.stderr)
        return done.stdout

    assert entry_id in ok("refs", "--checkpoint", "cp-1")
    assert json.loads(ok("stats", "--json"))["entries"] == 1
    assert "facts/user.md" in ok("facts")
    assert "turns since last summary: 12" in ok("summary", "status", "--task", "t1")
    assert "wrote detail/summary-L1-000001.md" in ok("summary", "now", "--task", "t1")
    assert "Citation: working/t1/detail/summary-L1-000001.md#L" in ok(
        "search", "walrus", "--scope", "detail"
    )
    assert "Reindexed" in ok("reindex")
    assert "Removed 1 entry." in ok("prune", "--keep-entries", "0")
    status = tmp_path / "STATUS.md"
    ok("status-file", str(status))
    assert "tether_test_" in status.read_text() and "s3cret" not in status.read_text()


def test_an_orchestrator_memory_round_trips_through_postgres(pg_url, tmp_path, memory_dir):
    work = tmp_path / "proj"
    work.mkdir()
    (work / "app.py").write_text("def handle():\n    return 1\n")
    boot = "import sys; sys.argv[0] = 'orchestrator'; from orchestrator.cli.app import main; main()"
    ran = subprocess.run(
        [sys.executable, "-c", boot, "run", "Survey the app", "--workdir", str(work)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ran.returncode == 0, ran.stderr
    assert memory("--memory-url", pg_url, "import", str(memory_dir)).returncode == 0
    assert memory("--memory-url", pg_url, "export", str(tmp_path / "out")).returncode == 0
    exported = _read_tree(tmp_path / "out")
    assert any(p.startswith(".tether/records/tasks/") for p in exported)
    assert any(p.startswith(".tether/records/subagents/") for p in exported)
    assert any(p.startswith("findings/") for p in exported)
    assert not any(
        p.startswith((".locks", ".langgraph", "entries/", ".tether/running")) for p in exported
    )
    original = _read_tree(memory_dir)
    records = {p for p in exported if p.startswith(".tether/records/")}
    assert {p: original[p] for p in exported if p not in records} == {
        p: data for p, data in exported.items() if p not in records
    }
    for path in records:  # the same records, stamped when they were imported
        before, after = json.loads(original[path]), json.loads(exported[path])
        assert before.pop("updated_at") <= after.pop("updated_at") and before == after


def test_files_to_postgres_to_a_tree_keeps_documents_and_entries(pg_url, tmp_path):
    memdir = tmp_path / "memdir"
    files = _tree(memdir)
    contents = [
        "small note ü\r\nno newline".encode(),
        "".join(f"build step {n}: ok\n" for n in range(600)).encode(),  # one gzip file
        "".join(f"row {n}: {'données ' * 9}\n" for n in range(2500)).encode(),  # chunks
    ]
    ids = []
    for n, data in enumerate(contents):
        (tmp_path / f"c{n}").write_bytes(data)
        args = ["--memory-dir", str(memdir), "log", "-q", "--checkpoint", "cp-1"]
        ids.append(memory(*args, "--file", str(tmp_path / f"c{n}")).stdout.strip())
    imported = memory("--memory-url", pg_url, "import", str(memdir))
    assert imported.returncode == 0, imported.stderr
    assert "and 3 entries" in imported.stdout
    out = tmp_path / "out"
    exported = memory("--memory-url", pg_url, "export", str(out))
    assert exported.returncode == 0 and "and 3 entries" in exported.stdout, exported.stderr
    tree = _read_tree(out)
    assert {p: d for p, d in tree.items() if not p.startswith("entries/")} == files
    assert "entries/journal.jsonl" in tree and "memory.db" not in tree
    for entry_id, data in zip(ids, contents, strict=True):
        fetched = subprocess.run(
            [sys.executable, "-m", "memory", "--memory-dir", str(out), "fetch", entry_id],
            capture_output=True,
            timeout=60,
        )
        assert fetched.stdout == data
    refs = memory("--memory-dir", str(out), "refs", "--checkpoint", "cp-1").stdout
    assert [line.split(":")[0] for line in refs.splitlines()] == ids


def test_mcp_server_serves_a_postgres_memory(pg_url):
    import anyio
    from mcp.shared.memory import create_connected_server_and_client_session

    from memory.mcp.mcp_server import build_server
    from memory.store import MemoryStore

    with MemoryStore.from_url(pg_url) as store:
        store.backend.write_text("facts/user.md", "# User Facts\n\n- Editor: vim\n")
        server = build_server(store)

        async def run() -> tuple[list[str], str, Any]:
            async with create_connected_server_and_client_session(server._mcp_server) as s:
                names = sorted(t.name for t in (await s.list_tools()).tools)
                found = await s.call_tool("recall", {"query": "editor vim"})
                status = await s.call_tool("task_status", {})
                return names, found.content[0].text, status

        names, found, status = anyio.run(run)
    assert {"recall", "memory_read", "task_status", "checkpoint_report"} <= set(names)
    assert "Citation: facts/user.md#L3" in found
    # the task tools read the same backend: no task there yet, said as a tool error
    assert status.isError and "no task in memory 'postgresql://" in status.content[0].text
