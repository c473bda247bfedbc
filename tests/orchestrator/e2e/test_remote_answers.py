"""What a remote agent on a real LangGraph Server (`langgraph dev`) answers, taken as it is:
a run that ended `success` without a finding is a failed attempt (`resume` starts the next
one on a new thread), malformed usage is unknown and never throws the answer away, a huge
answer is cut with the whole of it kept as a memory entry, and credentials in a server's URL
reach no record, no `status` and no file of the memory.

The graphs are `tests/orchestrator/e2e/remote_graphs.py`'s (`hollow`, `echo`); what the
server did is read from the server itself (`DevServer.runs_of`).
"""

from __future__ import annotations

import json

import pytest

from memory.store import MemoryStore
from orchestrator import Orchestrator
from tests.orchestrator.dev_servers import REPO, DevServer
from tests.orchestrator.e2e.test_remote import cli, run_args, six_folders, workflow


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    one = DevServer(tmp_path_factory.mktemp("answers-server") / "a", "A")
    try:
        one.start()
        one.wait_ready()
        yield one
    finally:
        one.stop()


@pytest.fixture
def env(cli_env):
    return {**cli_env, "PYTHONPATH": str(REPO)}


def test_a_finished_run_without_a_finding_is_a_failed_attempt_and_resume_starts_the_next(
    server, tmp_path, env
):
    repo = six_folders(tmp_path / "repo")
    wf = workflow(tmp_path / "wf.yaml", [server.url], graph="hollow")
    failed = cli(*run_args(repo, wf, "hollow", "Survey the parts"), env=env)
    assert failed.returncode == 3, failed.stdout + failed.stderr
    status = Orchestrator().status("hollow")
    assert len(status["failed"]) == 6
    assert all("gave no finding" in e for e in status["errors"].values()), status["errors"]

    result = Orchestrator().resume("hollow")
    assert result.status == "done"
    runs = server.runs_of("hollow")
    assert {k: [r["status"] for r in rs] for k, rs in runs.items()} == {
        k: ["success", "success"] for k in status["subtasks"]
    }  # attempt 1's run without a finding, attempt 2's on a thread of its own
    status = Orchestrator().status("hollow")
    assert status["status"] == "done"
    assert {v["ran_on"]["attempt"] for v in status["subtasks"].values()} == {2}
    # `input_tokens: "abc"` is unknown usage, never a failure nor a negative spend
    assert sorted(status["usage_unknown"]) == sorted(status["subtasks"])
    assert status["budget"]["by_agent"].get("researcher", 0) >= 0
    shown = cli("status", "--task", "hollow", env=env).stdout
    assert "Usage unknown: 6 remote subtask(s)" in shown
    assert "-" not in "".join(line for line in shown.splitlines() if "tokens" in line.lower())


def test_a_huge_remote_answer_is_cut_and_kept_whole_as_an_entry(server, tmp_path, env, memory_dir):
    repo = tmp_path / "repo"
    (repo / "alpha").mkdir(parents=True)
    (repo / "alpha" / "alpha.py").write_text('"""The alpha part."""\n')
    wf = workflow(tmp_path / "wf.yaml", [server.url])
    done = cli(*run_args(repo, wf, "huge", "Survey big=300000"), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    findings = list(memory_dir.glob("findings/researcher-*.md"))
    assert findings and all(p.stat().st_size < 60_000 for p in findings)
    text = findings[0].read_text()
    assert "over the 40,000-character limit of one finding" in text
    entry = text.split("memory entry ")[1].split()[0]
    with MemoryStore(memory_dir) as store:
        whole = json.loads(store.fetch(entry))
    assert len(whole["summary"]) > 300_000 and whole["summary"].endswith("x" * 100)


def test_credentials_in_a_server_url_reach_no_record_status_or_file(
    server, tmp_path, env, memory_dir
):
    repo = tmp_path / "repo"
    (repo / "alpha").mkdir(parents=True)
    (repo / "alpha" / "alpha.py").write_text('"""The alpha part."""\n')
    secret_url = server.url.replace("http://", "http://scott:tiger-pw-77@")
    wf = workflow(tmp_path / "wf.yaml", [secret_url])
    done = cli(*run_args(repo, wf, "creds", "Survey the parts"), env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "tiger-pw-77" not in done.stdout + done.stderr
    shown = cli("status", "--task", "creds", env=env)
    as_json = cli("status", "--task", "creds", "--json", env=env)
    for out in (shown, as_json):
        assert out.returncode == 0, out.stderr
        assert "tiger-pw-77" not in out.stdout and "scott" not in out.stdout
    ran = {v["ran_on"]["server"] for v in json.loads(as_json.stdout)["subtasks"].values()}
    assert ran == {server.url}
    leaked = [p for p in memory_dir.rglob("*") if p.is_file() and b"tiger-pw-77" in p.read_bytes()]
    assert leaked == []
