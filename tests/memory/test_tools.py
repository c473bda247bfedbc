"""The LangChain memory tools (`memory.facts.tools`) as an agent calls them.

Covers: the eight tool names and their schemas, the path sandbox (`..`, absolute paths,
symlinks leading out, NUL bytes, very long names, internal files) answered with a clear
one-line error and nothing outside the memory directory read or written, write targets
limited to facts, episodes and working notes, reading cited line ranges, and recall, log and
fetch going through the store.
"""

from __future__ import annotations

import pytest

from memory.facts.tools import memory_tools
from memory.store import MemoryStore
from memory.task.working import WorkingMemory

NAMES = [
    "recall_memory",
    "memory_read",
    "memory_write",
    "memory_patch",
    "memory_append",
    "memory_list",
    "memory_log",
    "memory_fetch",
]


@pytest.fixture
def store():
    return MemoryStore()


@pytest.fixture
def tools(store):
    return {t.name: t for t in memory_tools(store, task_id="t1")}


def test_all_eight_tools_with_schemas(tools):
    assert sorted(tools) == sorted(NAMES)
    assert set(tools["memory_patch"].args) == {"path", "patches"}
    assert set(tools["recall_memory"].args) == {"query", "scope", "limit"}
    assert "working/t1/overview.md" in tools["memory_write"].description


@pytest.mark.parametrize(
    "path, error",
    [
        ("../outside.md", "Error: path '../outside.md' leaves the memory directory"),
        ("facts/../../outside.md", "leaves the memory directory ('..' is not allowed)"),
        ("/etc/passwd", "Error: path '/etc/passwd' is absolute"),
        ("~/notes.md", "is absolute"),
        ("facts/a\x00b.md", "contains a NUL byte"),
        ("facts/" + "n" * 300 + ".md", "is too long"),
        ("memory.db", "is internal to tether"),
        (".locks/x", "is internal to tether"),
        ("", "Error: empty path"),
    ],
)
@pytest.mark.parametrize("tool", ["memory_read", "memory_write", "memory_append"])
def test_sandbox_refuses_paths_with_a_clear_error(tools, tmp_path, tool, path, error):
    args = {"path": path}
    if tool == "memory_write":
        args["content"] = "# x\n"
    if tool == "memory_append":
        args["entry"] = "## x\n"
    out = tools[tool].invoke(args)
    assert out.startswith("Error: ") and error in out and "\n" not in out
    assert not (tmp_path / "outside.md").exists()


def test_symlinks_leading_out_are_refused(store, tools, tmp_path):
    outside = tmp_path / "outside"
    outside.mkdir()
    secret = outside / "secret.md"
    secret.write_text("# secret\n")
    (store.root / "facts" / "leak.md").symlink_to(secret)
    (store.root / "facts" / "dir").symlink_to(outside)
    for path in ("facts/leak.md", "facts/dir/secret.md"):
        assert "resolves outside the memory directory" in tools["memory_read"].invoke(
            {"path": path}
        )
    out = tools["memory_write"].invoke({"path": "facts/leak.md", "content": "# pwned\n"})
    assert "resolves outside the memory directory" in out
    out = tools["memory_patch"].invoke(
        {"path": "facts/leak.md", "patches": [{"old_text": "secret", "new_text": "pwned"}]}
    )
    assert out.startswith("Error: ")
    assert secret.read_text() == "# secret\n"
    assert sorted(p.name for p in outside.iterdir()) == ["secret.md"]


@pytest.mark.parametrize(
    "path",
    [
        "working/t1/messages.jsonl",
        "working/t1/detail/summary-L1-000001.md",
        "research_plans/t1.md",
        "checkpoints/cp.json",
        "facts/sub/deep.md",
        "facts/user.txt",
    ],
)
def test_writes_outside_memory_files_are_refused(tools, store, path):
    out = tools["memory_write"].invoke({"path": path, "content": "x\n"})
    assert out.startswith(f"Error: path '{path}' is not writable")
    assert not (store.root / path).exists()


def test_write_read_list_roundtrip(tools):
    out = tools["memory_write"].invoke(
        {"path": "facts/user.md", "content": "# User\n\n- Name: Zhang San\n"}
    )
    assert out == "Wrote facts/user.md (43B). Summary: name"
    assert tools["memory_list"].invoke({}) == "- facts/user.md (43B): name"
    assert tools["memory_read"].invoke({"path": "facts/user.md"}).endswith("- Name: Zhang San\n")
    out = tools["memory_patch"].invoke(
        {"path": "facts/user.md", "patches": [{"old_text": "Zhang San", "new_text": "Li Si"}]}
    )
    assert out == "Applied 1 of 1 patches to facts/user.md."
    out = tools["memory_write"].invoke(
        {"path": "working/t1/detail/auth.md", "content": "# Auth\n\nJWT\n"}
    )
    assert out.startswith("Wrote working/t1/detail/auth.md")
    note = tools["memory_read"].invoke({"path": "working/t1/detail/auth.md"})
    assert note.startswith("# Auth\n\n<!--\nMETA:\n- created: ")  # a detail note's META format
    assert note.endswith("-->\n\nJWT\n")
    assert tools["memory_read"].invoke({"path": "facts/missing.md"}) == (
        "Error: no memory file 'facts/missing.md': use memory_list to see what exists"
    )


def test_read_cited_lines(store, tools):
    wm = WorkingMemory(store, "t1").ensure()
    for i in range(1, 6):
        wm.append_message("user", f"message {i}")
    out = tools["memory_read"].invoke({"path": "working/t1/messages.jsonl#L2-L3"})
    lines = out.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == ["2", "3"]
    assert '"message 2"' in lines[0] and '"message 3"' in lines[1]
    one = tools["memory_read"].invoke({"path": "working/t1/messages.jsonl#L5"})
    assert one.startswith("5: ") and '"message 5"' in one
    # a summary's task-relative citation resolves in the tools' task
    assert tools["memory_read"].invoke({"path": "messages.jsonl#L5"}) == one
    assert tools["memory_read"].invoke({"path": "overview.md"}) == wm.overview_text()


def test_recall_log_and_fetch_go_through_the_store(store, tools):
    big = "\n".join(f"line {i}: compiled module m{i} with warning W{i % 7}" for i in range(400))
    out = tools["memory_log"].invoke({"content": big, "tags": ["build"], "type": "output"})
    assert out.startswith("Logged mem-")
    entry_id = out.split()[1]
    assert tools["memory_fetch"].invoke({"entry_id": entry_id}) == big
    assert tools["memory_fetch"].invoke({"entry_id": "mem-nope"}).startswith("Error: ")
    tools["memory_write"].invoke(
        {"path": "facts/project.md", "content": "# Project\n\n- Database: PostgreSQL 16\n"}
    )
    out = tools["recall_memory"].invoke({"query": "which database", "scope": "facts"})
    assert out.startswith('Found 2 result(s) for: "which database"')
    assert "[1] Source: facts" in out and "Content: - Database: PostgreSQL 16" in out
    assert "Citation: facts/project.md#L5" in out
    bad = tools["recall_memory"].invoke({"query": "x", "scope": "nowhere"})
    assert bad.startswith("Error: ") and "nowhere" in bad
