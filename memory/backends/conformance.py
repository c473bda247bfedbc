"""The storage contract's conformance tests, for any backend (tether's three and yours).

Every test takes one fixture, `backend`: a fresh, empty store that implements
`memory.contract.base.BaseBackend`, opened for the test and closed after. Run them against a
backend of your own from a test module of yours::

    import pytest
    from memory.backends.conformance import *  # noqa: F403  (pytest collects the imported tests)

    @pytest.fixture
    def backend(tmp_path):
        with MyBackend(tmp_path / "store") as opened:  # fresh and empty for each test
            yield opened

They check through the public contract only: documents with versions and compare-and-set,
appends with permanent line numbers, entries and chunks (byte-exact), the search index,
task records, the subagent registry, the per-task lock, the mutex and bad input. They need
pytest. tether's own run (`tests/memory/backends/test_backend_conformance.py`) adds tests that start
several processes on one store, which need a URL `memory.backends.open_backend` opens.
"""

from __future__ import annotations

import json
import threading
import time

import pytest

from memory.contract.base import (
    ConflictError,
    LockHeldError,
    SearchDoc,
    SubagentRecord,
    TaskRecord,
)
from memory.contract.capabilities import HoldsGraphState, ImportsEntries, Reindexable
from memory.errors import (
    ChunkOutOfRangeError,
    InvalidInputError,
    InvalidQueryError,
    MemoryUserError,
    UnknownEntryError,
)


def needs(backend, capability):
    """Skip a test of an optional capability (`memory.contract.capabilities`) the backend lacks."""
    if not isinstance(backend, capability):
        pytest.skip(f"{type(backend).__name__} is not {capability.__name__}")


# -- documents ---------------------------------------------------------------------------
def test_documents_have_growing_versions_and_list_by_prefix(backend):
    assert backend.get_document("findings/t1/a.md") is None
    first = backend.put_document("findings/t1/a.md", b"one")
    second = backend.put_document("findings/t1/a.md", b"two\r\n\x00\xff")
    backend.put_document("findings/t2/b.md", b"b")
    backend.put_document("plans/p.md", b"p")
    assert (first.version, second.version) == (1, 2)
    doc = backend.get_document("findings/t1/a.md")
    assert (doc.data, doc.version, doc.size) == (b"two\r\n\x00\xff", 2, 7)
    listed = backend.list_documents("findings/")
    assert [(d.path, d.version) for d in listed] == [
        ("findings/t1/a.md", 2),
        ("findings/t2/b.md", 1),
    ]
    assert [d.path for d in backend.list_documents()] == [
        "findings/t1/a.md",
        "findings/t2/b.md",
        "plans/p.md",
    ]


def test_compare_and_set_refuses_a_stale_version_and_keeps_the_data(backend):
    backend.put_document("w/doc.md", b"v1", expected_version=0)
    with pytest.raises(ConflictError, match="w/doc.md"):
        backend.put_document("w/doc.md", b"again", expected_version=0)
    backend.put_document("w/doc.md", b"v2", expected_version=1)
    with pytest.raises(ConflictError):
        backend.put_document("w/doc.md", b"lost update", expected_version=1)
    with pytest.raises(ConflictError):
        backend.delete_document("w/doc.md", expected_version=1)
    assert backend.get_document("w/doc.md").data == b"v2"


def test_delete_removes_and_versions_are_never_reused(backend):
    backend.put_document("a.md", b"1")
    backend.put_document("a.md", b"2")
    assert backend.delete_document("a.md") is True
    assert backend.delete_document("a.md") is False
    assert backend.get_document("a.md") is None
    assert backend.list_documents() == []
    assert backend.put_document("a.md", b"3", expected_version=0).version == 3


@pytest.mark.parametrize("path", ["../escape.md", "/etc/passwd", "", "a//b.md", "a/./b", "x\\y"])
def test_bad_document_paths_are_refused_naming_the_path(backend, path):
    with pytest.raises(MemoryUserError) as err:
        backend.put_document(path, b"x")
    assert repr(path) in str(err.value)
    assert backend.list_documents() == []


def test_update_document_loses_no_update_between_threads(backend):
    import threading

    def bump():
        for _ in range(10):
            backend.update_document("counter", lambda old: str(int(old or b"0") + 1).encode())

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert backend.get_document("counter").data == b"40"


# -- entries -----------------------------------------------------------------------------
def test_entries_are_byte_exact_and_chunked_when_large(backend):
    small = "ünïcode\r\nline two\x00 no trailing newline"
    large = "".join(f"line {n}: {'word ' * 12}\n" for n in range(2000))
    s = backend.log_entry(small, tags=["a", "b"], type="output")
    big = backend.log_entry(large.encode(), type="transcript")
    assert backend.fetch_entry(s.id) == small
    assert backend.fetch_entry(big.id) == large
    assert big.chunks > 1 and s.chunks == 0 and (s.tier, big.tier) == ("inline", "chunked")
    pieces = [backend.fetch_entry(big.id, chunk=n) for n in range(big.chunks)]
    assert "".join(pieces) == large
    assert all(p.endswith("\n") for p in pieces)
    assert backend.get_entry(s.id) == s
    assert s.id.startswith("mem-") and s.tags == ["a", "b"] and s.bytes == len(small.encode())
    with pytest.raises(ChunkOutOfRangeError, match=big.id):
        backend.fetch_entry(big.id, chunk=big.chunks)
    with pytest.raises(UnknownEntryError, match="mem-nope"):
        backend.fetch_entry("mem-nope")


def test_entries_list_filters_newest_first(backend, tmp_path):
    a = backend.log_entry("alpha", tags=["x"], directory=str(tmp_path / "proj"))
    b = backend.log_entry("beta", tags=["y"], type="summary")
    c = backend.log_entry("gamma", tags=["x"], directory=str(tmp_path / "proj" / "sub"))
    assert [e.id for e in backend.list_entries()] == [c.id, b.id, a.id]
    assert [e.id for e in backend.list_entries(tag="x")] == [c.id, a.id]
    assert [e.id for e in backend.list_entries(type="summary")] == [b.id]
    assert [e.id for e in backend.list_entries(directory=str(tmp_path / "proj"))] == [c.id, a.id]
    assert [e.id for e in backend.list_entries(limit=1)] == [c.id]


@pytest.mark.parametrize(
    ("content", "kwargs", "needle"),
    [
        ("", {}, "empty"),
        ("   \n", {}, "empty"),
        (b"\xff\xfe bad", {}, "UTF-8"),
        ("fine", {"type": "poem"}, "'poem'"),
    ],
)
def test_bad_entries_are_refused_and_nothing_is_stored(backend, content, kwargs, needle):
    with pytest.raises(InvalidInputError, match=needle):
        backend.log_entry(content, **kwargs)
    assert backend.list_entries() == []


# -- search index ------------------------------------------------------------------------
def test_index_ranks_and_upserts_replace(backend):
    backend.index_upsert(
        [
            SearchDoc("d1", "findings", "Cookies are stored in the session cookie jar.", "f/1.md"),
            SearchDoc("d2", "findings", "Redirects follow the Location header.", "f/2.md"),
            SearchDoc("d3", "plans", "Check how cookies survive redirects.", "p/3.md"),
        ]
    )
    hits = backend.index_query("cookie jar")
    assert [h.doc_id for h in hits][:2] == ["d1", "d3"]
    assert hits[0].path == "f/1.md" and hits[0].score > hits[1].score
    assert [h.doc_id for h in backend.index_query("cookies", sources=["plans"])] == ["d3"]
    backend.index_upsert([SearchDoc("d1", "findings", "Nothing about that any more.")])
    assert [h.doc_id for h in backend.index_query("jar")] == []
    assert len(backend.index_query("the", limit=1)) <= 1


def test_index_deletes_remove(backend):
    needs(backend, Reindexable)
    backend.index_upsert(
        [
            SearchDoc("d2", "findings", "Redirects follow the Location header.", "f/2.md"),
            SearchDoc("d3", "plans", "Check how cookies survive redirects.", "p/3.md"),
        ]
    )
    assert backend.index_delete(["d2", "missing"]) == 1
    assert [h.doc_id for h in backend.index_query("redirects location")] == ["d3"]


@pytest.mark.parametrize("query", ["", "   "])
def test_empty_queries_are_refused(backend, query):
    with pytest.raises(InvalidQueryError, match="empty query"):
        backend.index_query(query)


# -- tasks, registry, lock ---------------------------------------------------------------
def test_task_records_round_trip_newest_first(backend):
    backend.put_task(TaskRecord("t1", "running", {"phase": 1, "objective": "survey ü"}))
    time.sleep(0.01)
    backend.put_task(TaskRecord("t2", "pending"))
    assert backend.get_task("t1").data == {"phase": 1, "objective": "survey ü"}
    assert backend.get_task("nope") is None
    assert [t.task_id for t in backend.list_tasks()] == ["t2", "t1"]
    with pytest.raises(InvalidInputError, match="JSON"):
        backend.put_task(TaskRecord("t3", "x", {"bad": object()}))
    assert backend.get_task("t3") is None


def test_task_merges_keep_every_writer_s_fields(backend):
    backend.merge_task("t1", {"objective": "survey", "phase": 1}, status="running")
    merged = backend.merge_task("t1", {"phase": 2, "error": None})
    assert (merged.status, merged.data) == (
        "running",
        {"objective": "survey", "phase": 2, "error": None},
    )
    assert backend.get_task("t1").data == merged.data

    def note(n):
        backend.merge_task("t2", {f"field{n}": n})

    threads = [threading.Thread(target=note, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert backend.get_task("t2").data == {f"field{n}": n for n in range(8)}
    assert backend.get_task("t2").status == ""
    with pytest.raises(InvalidInputError, match="JSON"):
        backend.merge_task("t1", {"bad": object()})
    assert backend.get_task("t1").data == merged.data


def test_one_subagent_record_reads_alone(backend):
    long_id = "findings:" + "é" * 190  # quoted, longer than a file name may be
    assert backend.get_subagent("t", "s1") is None
    backend.put_subagent(SubagentRecord("t", "s1", "pending", {"n": 1}))
    backend.put_subagent(SubagentRecord("t", long_id, "pending", {"n": 2}))
    backend.put_subagent(SubagentRecord("u", "s1", "done", {"n": 3}))
    got = backend.get_subagent("t", "s1")
    assert (got.task_id, got.agent_id, got.status, got.data) == ("t", "s1", "pending", {"n": 1})
    assert backend.get_subagent("t", long_id).data == {"n": 2}
    assert [a.agent_id for a in backend.list_subagents("t")] == sorted(["s1", long_id])


def test_registry_claims_each_subagent_once(backend):
    backend.put_subagent(SubagentRecord("t", "s2", "pending", {"subtask": "b"}))
    assert backend.claim_subagent("t", "s1", "proc-a") is True  # unregistered counts as pending
    assert backend.claim_subagent("t", "s1", "proc-b") is False
    assert backend.claim_subagent("t", "s2", "proc-b") is True
    done = backend.transition_subagent(
        "t", "s2", from_status=["running"], to_status="done", data={"entry": "mem-1"}
    )
    assert done is True
    agents = backend.list_subagents("t")
    assert [(a.agent_id, a.status) for a in agents] == [("s1", "running"), ("s2", "done")]
    assert agents[1].data == {"subtask": "b", "owner": "proc-b", "entry": "mem-1"}
    assert backend.list_subagents("other") == []


def test_task_lock_is_exclusive_renewable_and_expires(backend):
    assert backend.acquire_lock("t", "a", ttl=30) is True
    assert backend.acquire_lock("t", "b", ttl=30) is False
    assert backend.acquire_lock("t", "a", ttl=30) is True
    assert backend.get_lock("t").owner == "a"
    with pytest.raises(LockHeldError, match="'a'"), backend.task_lock("t", "b"):
        pass
    assert backend.release_lock("t", "b") is False
    assert backend.release_lock("t", "a") is True
    assert backend.get_lock("t") is None
    assert backend.acquire_lock("t", "b", ttl=0.2) is True
    time.sleep(0.3)
    assert backend.get_lock("t") is None
    with backend.task_lock("t", "c"):
        assert backend.get_lock("t").owner == "c"
    assert backend.get_lock("t") is None


# -- documents: reads from an offset, appends, exclusive create, cheap listings ------------
def test_append_lines_numbers_lines_for_good_and_closes_a_torn_line(backend):
    assert backend.append_lines("working/t/messages.jsonl", [b'{"n": 1}', b'{"n": 2}']) == 1
    assert backend.append_jsonl("working/t/messages.jsonl", [{"n": 3}]) == 3
    info = backend.stat_document("working/t/messages.jsonl")
    doc = backend.get_document("working/t/messages.jsonl", offset=9)
    assert doc.data == b'{"n": 2}\n{"n":3}\n' and doc.size == info.size == 26
    backend.put_document("log.jsonl", b'{"a": 1}\n{"torn')
    assert backend.append_lines("log.jsonl", ['{"b": 2}']) == 3  # the torn line keeps line 2
    assert backend.get_document("log.jsonl").data == b'{"a": 1}\n{"torn\n{"b": 2}\n'
    with pytest.raises(InvalidInputError, match="newline"):
        backend.append_lines("log.jsonl", [b"two\nlines"])
    assert backend.get_document("log.jsonl").data.count(b"\n") == 3
    assert backend.stat_document("nothing.md") is None


def test_a_log_grown_by_many_appends_reads_back_whole_from_any_offset(backend):
    path = "working/t/messages.jsonl"
    backend.put_document(path, b'{"n": 0}\n{"torn')
    whole = b'{"n": 0}\n{"torn\n'
    for n in range(1, 40):
        lines = [json.dumps({"n": n, "k": k}) for k in range(n % 3 + 1)]
        first = backend.append_lines(path, lines)
        assert first == whole.count(b"\n") + 1  # permanent line numbers
        whole += "".join(line + "\n" for line in lines).encode()
    info = backend.stat_document(path)
    assert info.size == len(whole) and info.version > 1  # the files backend: one above the put
    assert [d.size for d in backend.list_documents("working/")] == [len(whole)]
    for offset in (0, 5, 9, 15, 16, 100, len(whole) - 1, len(whole), len(whole) + 7):
        doc = backend.get_document(path, offset=offset)
        assert doc.data == whole[offset:] and doc.size == len(whole), offset
        assert backend.read_document_bytes(path, offset=offset) == whole[offset:], offset
    for size in (0, 1, 9, len(whole), len(whole) + 7):  # a reader of first lines only
        assert backend.read_document_head(path, size) == whole[:size], size
    assert backend.read_document_head("working/t/no.jsonl", 10) is None
    backend.put_document(path, b"replaced\n")  # a rewrite drops what was appended
    assert backend.get_document(path).data == b"replaced\n"
    assert backend.append_lines(path, ["again"]) == 2
    assert backend.get_document(path, offset=3).data == b"laced\nagain\n"
    assert backend.read_document_bytes(path, offset=3) == b"laced\nagain\n"
    assert backend.document_exists(path) and not backend.document_exists("working/t/no.jsonl")
    assert backend.delete_document(path) and backend.get_document(path) is None
    assert backend.read_document_bytes(path) is None and not backend.document_exists(path)
    assert backend.append_lines(path, ["fresh"]) == 1  # a deleted log starts at line 1
    assert backend.get_document(path).data == b"fresh\n"


def test_rows_where_common_words_meet_outrank_rows_with_one_of_them(backend):
    """With words in thousands of rows, the row holding them together still comes first
    (backends may rank only candidate rows on large tables; these must be among them)."""
    noise = [SearchDoc(f"c{i}", "messages", f"the cache warmed shard {i}") for i in range(5300)]
    noise += [SearchDoc(f"e{i}", "messages", f"an error in shard {i}") for i in range(5200)]
    noise += [SearchDoc(f"t{i}", "messages", f"a timeout on shard {i}") for i in range(5200)]
    for i in range(0, len(noise), 1000):
        backend.index_upsert(noise[i : i + 1000])
    backend.index_upsert([
        SearchDoc("all", "messages", "cache error after the timeout"),
        SearchDoc("two", "messages", "the timeout emptied the cache"),  # no "error"
        SearchDoc("rare", "messages", "the zeppelin cache"),
    ])  # fmt: skip
    assert [h.doc_id for h in backend.index_query("error timeout cache")][:2] == ["all", "two"]
    assert backend.index_query("zeppelin cache")[0].doc_id == "rare"


def test_distilled_records_outrank_raw_output_for_the_same_words(backend):
    """A finding, a plan or a note comes before the tool output and the log lines it was
    distilled from (`memory.search.recall.SOURCE_WEIGHTS`), though they repeat the words more; a
    raw output holding the question's words that no record holds still comes first."""
    out = "graph.py: the graph compiles once; graph nodes spawn subagents, subagents report"
    log = "tool: graph/ holds the graph and the nodes of the subagents, subagents run"
    backend.index_upsert([
        SearchDoc("out", "entries", out),
        SearchDoc("log", "messages", log),
        SearchDoc("found", "findings", "The graph runs a lead agent and its subagents in phases."),
        SearchDoc("note", "detail", "Open question: how the graph hands work to subagents."),
        *(SearchDoc(f"n{i}", "findings", f"The cache of shard {i} warms") for i in range(6)),
    ])  # fmt: skip
    ranked = [h.doc_id for h in backend.index_query("graph subagents", limit=4)]
    assert {*ranked[:2]} == {"found", "note"}
    assert {*ranked[2:]} == {"log", "out"}
    raw = backend.index_query("graph subagents", sources=["messages", "entries"])
    assert {h.doc_id for h in raw} == {"log", "out"}  # still found, and ranked on their own
    backend.index_upsert([SearchDoc("trace", "messages", "tool: zeppelin hangar graph trace")])
    assert backend.index_query("zeppelin hangar graph", limit=1)[0].doc_id == "trace"


def test_appended_lines_are_searched_only_in_searched_logs(backend):
    line = json.dumps({"role": "user", "content": "the zeppelin hangar opens at dawn"})
    backend.append_lines("working/t/messages.jsonl", [line])
    backend.append_lines(".tether/registry/t.jsonl", [line])  # hidden: never searched
    backend.append_lines("notes/log.jsonl", [line])  # not a searched folder
    backend.sync_index()  # the files backend indexes its files when asked (memory search)
    hits = backend.index_query("zeppelin hangar")
    assert [h.path for h in hits] == ["working/t/messages.jsonl"]


def test_create_document_never_overwrites(backend):
    assert backend.create_document("working/t/overview.md", b"first") is True
    assert backend.create_document("working/t/overview.md", b"second") is False
    assert backend.read_text("working/t/overview.md") == "first"


def test_list_changes_says_when_nothing_moved(backend):
    backend.put_document("working/t/detail/a.md", b"a")
    listing, token = backend.list_changes("working/t/detail/")
    assert [i.path for i in listing] == ["working/t/detail/a.md"]
    time.sleep(0.06)  # past the files backend's mtime granularity guard
    listing, token = backend.list_changes("working/t/detail/", token)
    listing, token = backend.list_changes("working/t/detail/", token)
    assert listing is None
    backend.put_document("working/t/detail/b.md", b"b")
    listing, _ = backend.list_changes("working/t/detail/", token)
    assert [i.path for i in listing] == ["working/t/detail/a.md", "working/t/detail/b.md"]


def test_mutex_excludes_other_holders(backend):
    import threading

    inside, overlaps = [], []

    def work():
        for _ in range(5):
            with backend.mutex("working/t/summaries"):
                inside.append(1)
                overlaps.append(len(inside))
                time.sleep(0.002)
                inside.pop()

    threads = [threading.Thread(target=work) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert overlaps == [1] * 15


# -- entries: links, imports, pruning, stats -----------------------------------------------
def test_entries_link_to_checkpoints_and_prune_for_good(backend):
    a = backend.log_entry("alpha output", checkpoint="cp-1", tags=["t"])
    b = backend.log_entry("beta output", checkpoint="cp-1")
    c = backend.log_entry("gamma output")
    assert [e.id for e in backend.refs(checkpoint="cp-1")] == [a.id, b.id]
    assert [e.id for e in backend.list_entries(checkpoint="cp-1")] == [b.id, a.id]
    assert [e.id for e in backend.prune_entries(keep_entries=1, dry_run=True)] == [a.id, b.id]
    assert len(backend.list_entries(limit=None)) == 3
    assert [e.id for e in backend.prune_entries(keep_entries=1)] == [a.id, b.id]
    assert [e.id for e in backend.list_entries(limit=None)] == [c.id]
    assert backend.delete_entries([a.id, "mem-nope"]) == []
    stats = backend.entry_stats()
    assert (stats["entries"], stats["pruned"], stats["by_tier"]["inline"]["entries"]) == (1, 2, 1)
    if isinstance(backend, ImportsEntries):
        assert backend.put_entry(a, b"alpha output") is False  # pruned ids never come back
    with pytest.raises(UnknownEntryError):
        backend.fetch_entry(a.id)


def test_put_entry_keeps_id_metadata_and_chunks(backend):
    needs(backend, ImportsEntries)
    from memory.backends.inmemory import InMemoryBackend

    source = InMemoryBackend()
    text = "".join(f"row {n}: {'value ' * 10}\n" for n in range(1500))
    logged = source.log_entry(text, tags=["imported"], checkpoint="cp-9", type="transcript")
    assert backend.put_entry(logged, text.encode()) is True
    assert backend.put_entry(logged, text.encode()) is False
    got = backend.get_entry(logged.id)
    assert (got.tags, got.checkpoint, got.created_at, got.chunks, got.tier) == (
        ["imported"],
        "cp-9",
        logged.created_at,
        logged.chunks,
        "chunked",
    )
    assert backend.fetch_entry(logged.id) == text
    assert backend.fetch_entry(logged.id, chunk=1) == source.fetch_entry(logged.id, chunk=1)


# -- the index holds the backend's own documents and entries -------------------------------
def test_documents_and_entries_are_searchable_with_citations(backend):
    from memory.search.recall import search

    backend.put_document("findings/scout_1.md", b"# Scout\n\nThe walrus cache lives in redis.\n")
    backend.append_jsonl("working/t/messages.jsonl", [{"role": "user", "content": "hello"}])
    backend.append_jsonl("working/t/messages.jsonl", [{"role": "user", "content": "walrus?"}])
    entry = backend.log_entry("walrus build log line\n" * 400)
    backend.put_document(".tether/tasks.jsonl", b'{"walrus": 1}\n')  # not searched
    cites = {r.citation for r in search(backend, "walrus", limit=10)}
    assert "findings/scout_1.md#L3" in cites
    assert "working/t/messages.jsonl#L2" in cites
    assert any(c.startswith(entry.id) for c in cites)
    assert not any(".tether" in c for c in cites)
    backend.put_document("findings/scout_1.md", b"Nothing about that.\n")
    backend.delete_entries([entry.id])
    assert {r.citation for r in search(backend, "walrus", limit=10)} == {
        "working/t/messages.jsonl#L2"
    }
    if not isinstance(backend, Reindexable):
        return
    report = backend.reindex()
    assert report.rows_total >= 2
    assert [r.citation for r in search(backend, "walrus", limit=10)] == [
        "working/t/messages.jsonl#L2"
    ]


def test_checkpointer_keeps_graph_state_beside_the_memory(backend):
    needs(backend, HoldsGraphState)
    saver = backend.checkpointer()
    assert saver is backend.checkpointer()
    config = {"configurable": {"thread_id": "t1", "checkpoint_ns": ""}}
    from langgraph.checkpoint.base import empty_checkpoint

    assert not backend.holds_thread("t1")  # asked without LangGraph: nothing saved yet
    saved = saver.put(config, empty_checkpoint(), {"source": "input", "step": -1}, {})
    assert saver.get_tuple(saved).checkpoint["id"] == saved["configurable"]["checkpoint_id"]
    assert backend.holds_thread("t1") and not backend.holds_thread("t2")
