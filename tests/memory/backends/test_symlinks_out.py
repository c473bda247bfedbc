"""Nothing that resolves outside the memory root is indexed, searched, read or imported.

A symlink placed in a memory (a fact, a folder, a task's message log, an entry's folder, the
entry journal) that leads out of it must not bring the outside text to `memory search`,
the agents' `recall_memory`, MCP `recall`, `memory fetch`, `memory list` or `memory export`;
a symlink that stays inside still works. A tree imported into any backend (`memory://`,
PostgreSQL, a memory directory) is read under the same rule, and an export never writes
through a folder that leads out of its target.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import os

import pytest

from memory import MemoryStore
from memory.backends import open_backend
from memory.backends.files.tree import import_tree
from memory.facts.tools import memory_tools
from tests.clis import memory_cli
from tests.pg import private_schema

SECRET = "BEGIN PRIVATE quokka KEY"


@pytest.fixture
def outside(tmp_path):
    """A folder outside the memory holding secrets (think `~/.ssh`)."""
    folder = tmp_path / "outside"
    (folder / "notes").mkdir(parents=True)
    (folder / "id_rsa").write_text(f"{SECRET} one\n")
    (folder / "notes" / "x.md").write_text(f"{SECRET} two\n")
    (folder / "messages.jsonl").write_text(json.dumps({"role": "user", "content": SECRET}) + "\n")
    return folder


def _memory(args, cli_env, cwd):
    return memory_cli(args, cli_env, cwd)


@pytest.fixture
def leaky(memory_dir, outside):
    """A memory directory with symlinks leading out, and one that stays inside."""
    with MemoryStore(memory_dir) as store:
        store.log("an ordinary entry")
    (memory_dir / "facts" / "leak.md").symlink_to(outside / "id_rsa")
    (memory_dir / "facts" / "linkdir").symlink_to(outside / "notes")
    (memory_dir / "working" / "T1").mkdir()
    (memory_dir / "working" / "T1" / "messages.jsonl").symlink_to(outside / "messages.jsonl")
    (memory_dir / "working" / "T2").symlink_to(outside)
    (memory_dir / "findings" / "inside.md").write_text("the quokka lives inside\n")
    (memory_dir / "facts" / "alias.md").symlink_to(memory_dir / "findings" / "inside.md")
    return memory_dir


def test_search_never_returns_text_from_outside(leaky, cli_env, tmp_path):
    done = _memory(["search", "quokka", "--json", "--limit", "20"], cli_env, tmp_path)
    assert done.returncode == 0, done.stderr
    hits = json.loads(done.stdout)
    assert all(SECRET not in hit["text"] for hit in hits), hits
    # a symlink that stays inside the memory is still searched
    assert {hit["path"] for hit in hits} == {"findings/inside.md", "facts/alias.md"}


def test_a_file_indexed_before_it_became_a_symlink_out_leaves_the_index(memory_dir, outside):
    fact = memory_dir / "facts" / "doc.md"
    with MemoryStore(memory_dir) as store:
        fact.write_text("harmless quokka note\n")
        assert [r.path for r in store.search("quokka")] == ["facts/doc.md"]
        fact.unlink()
        fact.symlink_to(outside / "id_rsa")
        assert store.search("quokka") == []
        assert store.reindex().rows_added == 0 and store.search("quokka") == []


def test_recall_tools_of_agents_and_mcp_never_return_outside_text(leaky):
    from memory.mcp.mcp_server import build_server

    with MemoryStore(leaky) as store:
        recall = {t.name: t for t in memory_tools(store, task_id="T1")}["recall_memory"]
        answer = recall.invoke({"query": "quokka private key", "limit": 20})
        assert SECRET not in answer and "findings/inside.md" in answer
        server = build_server(store, providers=())
        content, _ = asyncio.run(server.call_tool("recall", {"query": "quokka key", "limit": 20}))
        text = "\n".join(c.text for c in content)
        assert SECRET not in text and "findings/inside.md" in text
        listed = "\n".join(c.text for c in asyncio.run(server.call_tool("memory_list", {}))[0])
        assert "leak.md" not in listed


def test_fetch_refuses_an_entry_folder_that_leads_out(memory_dir, outside, cli_env, tmp_path):
    with MemoryStore(memory_dir) as store:
        entry = store.log("word " * 3000)  # a file-tier entry: entries/{id}/content.gz
    assert entry.tier == "file"
    decoy = outside / "decoy"
    decoy.mkdir()
    (decoy / "content.gz").write_bytes(gzip.compress(SECRET.encode()))
    folder = memory_dir / "entries" / entry.id
    os.rename(folder, tmp_path / "moved-away")
    folder.symlink_to(decoy)
    done = _memory(["fetch", entry.id], cli_env, tmp_path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr == (
        f"Error: entry file 'entries/{entry.id}/content.gz' resolves outside the memory "
        "directory (a symlink); it is not read: restore the entry's folder or prune the entry\n"
    )
    found = _memory(["search", "quokka", "--scope", "entries"], cli_env, tmp_path)
    assert SECRET not in found.stdout


def test_export_leaves_out_what_leads_out(leaky, cli_env, tmp_path):
    target = tmp_path / "copy"
    done = _memory(["export", str(target)], cli_env, tmp_path)
    assert done.returncode == 0, done.stderr
    texts = [p.read_bytes() for p in target.rglob("*") if p.is_file()]
    assert all(SECRET.encode() not in t for t in texts)
    assert (target / "facts" / "alias.md").read_text() == "the quokka lives inside\n"
    assert not (target / "facts" / "leak.md").exists()


def test_export_never_writes_through_a_folder_that_leads_out(memory_dir, cli_env, tmp_path):
    with MemoryStore(memory_dir) as store:
        store.backend.put_document("facts/user.md", b"# User\n")
    target, elsewhere = tmp_path / "copy", tmp_path / "elsewhere"
    target.mkdir()
    elsewhere.mkdir()
    (target / "facts").symlink_to(elsewhere)
    done = _memory(["export", str(target)], cli_env, tmp_path)
    assert done.returncode == 1
    assert done.stderr.startswith(f"Error: cannot export into {str(target / 'facts')!r}: ")
    assert list(elsewhere.iterdir()) == []


# -- a tree imported into any backend ------------------------------------------------------
@pytest.fixture
def tree(tmp_path, outside):
    """An exported memory tree with symlinks leading out (documents, an entry, the journal)."""
    source = tmp_path / "source"
    with MemoryStore(source) as store:
        store.backend.put_document("facts/ok.md", b"an honest quokka fact\n")
        kept = store.log("kept inline entry about a quokka")
        big = store.log("word " * 3000)
    folder = tmp_path / "tree"
    with open_backend(str(source)) as backend:
        from memory.backends.files.tree import export_tree

        export_tree(backend, folder)
    (folder / "facts" / "leak.md").symlink_to(outside / "id_rsa")
    (folder / "findings").mkdir()
    (folder / "findings" / "notes").symlink_to(outside / "notes")
    decoy = outside / "decoy"
    decoy.mkdir()
    (decoy / "content.gz").write_bytes(gzip.compress(SECRET.encode()))
    os.rename(folder / "entries" / big.id, tmp_path / "gone")
    (folder / "entries" / big.id).symlink_to(decoy)
    return folder, kept, big


@pytest.fixture(params=["files", "memory", "postgres"])
def target_url(request, tmp_path):
    if request.param == "postgres":
        with private_schema() as url:
            yield url
    elif request.param == "memory":
        yield "memory://"
    else:
        yield str(tmp_path / "imported")


def test_import_reads_nothing_outside_the_tree(tree, target_url, caplog):
    folder, kept, big = tree
    with open_backend(target_url) as backend:
        documents, entries, *rest = import_tree(folder, backend)
        problems = rest[0] if rest else []
        store = MemoryStore(backend=backend)
        assert [d.path for d in backend.list_documents("facts/")] == ["facts/ok.md"]
        assert [e.id for e in backend.list_entries()] == [kept.id]
        texts = [r.text for r in store.search("quokka", limit=20)]
        assert texts and all(SECRET not in t for t in texts)
    assert (documents, entries) == (1, 1)
    assert problems == [
        f"entries/journal.jsonl:2: entry {big.id!r} is not imported: its files under "
        f"'entries/{big.id}/content.gz' are missing or outside the memory"
    ]
    assert problems[0] in caplog.text


def test_import_refuses_a_journal_that_leads_out(tmp_path, outside, cli_env):
    folder = tmp_path / "tree"
    (folder / "entries").mkdir(parents=True)
    forged = outside / "journal.jsonl"
    forged.write_text("")
    (folder / "entries" / "journal.jsonl").symlink_to(forged)
    done = _memory(["--memory-dir", str(tmp_path / "m"), "import", str(folder)], cli_env, tmp_path)
    assert done.returncode == 3
    assert done.stdout == f"Imported 0 document(s) from {str(folder)!r}\n"
    assert done.stderr == (
        "Warning: entries/journal.jsonl resolves outside the memory directory "
        f"(a symlink to {str(forged)!r}); it is not read\n"
    )
