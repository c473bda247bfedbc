"""Crash recovery: SIGKILL at many points, resume, and get exactly an uninterrupted run.

Each case starts a child process that runs the task with `TETHER_FAULT=<point>:<n>` (the
child SIGKILLs itself there, see `orchestrator.recovery.resume`), then another child that
resumes. Children come from a `forkserver` with the orchestrator preloaded, so a
kill/resume pair costs about a second; the module fixture runs the pairs a few at a
time. The result is compared with one uninterrupted baseline run: the same subtask ids,
the same findings content (timestamps and file names aside), one findings file per
subtask, and no subagent that had recorded its findings ran again.
"""

from __future__ import annotations

import contextlib
import json
import multiprocessing
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.api import Orchestrator

OBJECTIVE = "Survey the shop service"
TASK = "crash"
RECORDS = Path(".tether") / "records" / "subagents"
_TS = re.compile(r"\d{8}T\d{12}Z|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z")
# `forkserver`: children are forked from a clean, single-threaded server process that has
# the orchestrator imported already, so they start fast and never inherit the threads of
# graphs this test process ran before
_FORK = multiprocessing.get_context("forkserver")
_FORK.set_forkserver_preload(
    [
        "orchestrator.api",
        "orchestrator.graph.build",
        "orchestrator.offline",
        "orchestrator.graph.nodes.plan",
        "orchestrator.graph.nodes.subagent",
        "memory.window.context",
        "tests.orchestrator.e2e.test_recovery",
    ]
)


def _child(kind: str, memory: str, workdir: str, workflow: str, fault: str) -> None:
    os.environ["TETHER_FAULT"] = fault
    os.environ["TETHER_MEMORY_DIR"] = memory
    try:
        orch = Orchestrator(memory_dir=memory, workdir=workdir, workflow=workflow)
        result = orch.run(OBJECTIVE, task_id=TASK) if kind == "run" else orch.resume(TASK)
        os._exit(0 if result.status == "done" else 2)
    except BaseException:  # noqa: BLE001 - the exit code is the test's signal
        import traceback

        traceback.print_exc()
        os._exit(3)


def fork_run(kind: str, memory: Path, workdir: Path, workflow: Path, fault: str = "") -> int:
    proc = _FORK.Process(
        target=_child, args=(kind, str(memory), str(workdir), str(workflow), fault)
    )
    proc.start()
    proc.join(60)
    assert proc.exitcode is not None, "child hung"
    return proc.exitcode


def _meta(path: Path) -> dict:
    match = re.search(r"<!-- tether:\w+ (.*) -->", path.read_text(encoding="utf-8"))
    return json.loads(match.group(1))


def outcome(memory: Path) -> dict:
    """What a finished run left: findings per subtask (normalised) and merged batches."""
    per_subtask: dict[str, list[str]] = {}
    for path in (memory / "findings").glob("*.md"):
        if path.name.startswith("merged_"):
            continue
        meta = _meta(path)
        body = {k: v for k, v in meta.items() if k != "timestamp"}
        per_subtask.setdefault(meta["subtask_id"], []).append(json.dumps(body, sort_keys=True))
    merged = sorted(
        _TS.sub(
            "TS",
            json.dumps({k: v for k, v in _meta(p).items() if k != "timestamp"}, sort_keys=True),
        )
        for p in (memory / "findings").glob("merged_*.md")
    )
    return {"findings": per_subtask, "merged": merged}


def registry(memory: Path) -> dict[str, dict]:
    """The task's artifact registry as the files backend keeps it: a JSON file per key."""
    records = {}
    for path in (memory / RECORDS / TASK).glob("*.json"):
        with contextlib.suppress(ValueError):  # a file that is no record (a hand edit)
            record = json.loads(path.read_text())
            records[record["agent_id"]] = record["data"]
    return records


def agent_runs(memory: Path) -> dict[str, int]:
    """How many times each subagent finished its work (its registry record counts them)."""
    return {
        key: rec["runs"]
        for key, rec in registry(memory).items()
        if key.startswith("findings:") and "runs" in rec  # tether's (not a hand edit's)
    }


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from tests.orchestrator.conftest import build_repo

    base = tmp_path_factory.mktemp("crash")
    repo = build_repo(base / "repo", readme=False)
    workflow = base / "tiny.yaml"
    workflow.write_text("name: tiny\nphases: [exploration, review]\n")
    memory = base / "baseline"
    assert fork_run("run", memory, repo, workflow) == 0
    return base, repo, workflow, outcome(memory)


def assert_same_as_baseline(memory: Path, baseline: dict) -> None:
    got = outcome(memory)
    assert sorted(got["findings"]) == sorted(baseline["findings"])
    for subtask, bodies in got["findings"].items():
        assert len(bodies) == 1, f"{subtask} has {len(bodies)} findings files"
        assert bodies == baseline["findings"][subtask], f"{subtask} differs from the baseline"
    assert got["merged"] == baseline["merged"]
    runs = agent_runs(memory)
    assert all(n == 1 for n in runs.values()), f"a subagent ran twice: {runs}"


# 2 phases x 2 subtasks: n counts occurrences across the whole run (4 subagents).
KILL_POINTS = [
    "run_before_graph:1",
    "plan_after_write:1",
    "plan_after_write:2",
    "spawn_after_checkpoint:1",
    "spawn_after_checkpoint:2",
    "subagent_before_run:1",
    "subagent_before_run:3",
    "subagent_before_findings:1",
    "subagent_before_findings:4",
    "subagent_after_findings:1",
    "subagent_after_findings:2",
    "subagent_after_findings:3",
    "subagent_after_findings:4",
    "merge_before_write:1",
    "merge_before_write:2",
    "merge_after_write:1",
    "merge_after_write:3",
    "merge_after_checkpoint:1",
    "merge_after_checkpoint:2",
    "advance_before_checkpoint:1",
    "advance_before_checkpoint:2",
    "advance_after_checkpoint:1",
    "advance_after_checkpoint:2",
    "advance_after_prune:1",  # the first phase's LangGraph checkpoints are pruned
    "finish_before_reflect:1",
]
PARALLEL = 4


def _start(kind: str, memory: Path, repo: Path, workflow: Path, fault: str = "") -> object:
    proc = _FORK.Process(target=_child, args=(kind, str(memory), str(repo), str(workflow), fault))
    proc.start()
    return proc


def _batch(jobs: list[tuple]) -> list[int]:
    """Run `(kind, memory, repo, workflow, fault)` jobs as forked children, a few at once."""
    codes: list[int] = []
    for i in range(0, len(jobs), PARALLEL):
        procs = [_start(*job) for job in jobs[i : i + PARALLEL]]
        for proc in procs:
            proc.join(90)
            assert proc.exitcode is not None, "child hung"
            codes.append(proc.exitcode)
    return codes


@pytest.fixture(scope="module")
def crashed(setup):
    """Every kill point: (exit code of the killed run, of the resume, memory dir)."""
    base, repo, workflow, _baseline = setup
    dirs = [base / f"m-{fault.replace(':', '-')}" for fault in KILL_POINTS]
    killed = _batch([("run", d, repo, workflow, f) for d, f in zip(dirs, KILL_POINTS, strict=True)])
    resumed = _batch([("resume", d, repo, workflow, "") for d in dirs])
    return {f: (k, r, d) for f, k, r, d in zip(KILL_POINTS, killed, resumed, dirs, strict=True)}


@pytest.mark.parametrize("fault", KILL_POINTS)
def test_kill_then_resume_matches_an_uninterrupted_run(setup, crashed, fault):
    killed, resumed, memory = crashed[fault]
    assert killed == -signal.SIGKILL, "the fault point was not reached"
    assert resumed == 0
    assert_same_as_baseline(memory, setup[3])


def test_killed_twice_including_during_resume(setup):
    base, repo, workflow, baseline = setup
    memory = base / "twice"
    assert fork_run("run", memory, repo, workflow, "subagent_after_findings:2") == -9
    assert fork_run("resume", memory, repo, workflow, "merge_after_write:1") == -9
    assert fork_run("resume", memory, repo, workflow) == 0
    assert_same_as_baseline(memory, baseline)


def _db(memory: Path) -> Path:
    return memory / ".langgraph" / "state.sqlite"


def test_resume_without_the_langgraph_database_uses_the_latest_checkpoint(setup):
    base, repo, workflow, baseline = setup
    memory = base / "nodb"
    assert fork_run("run", memory, repo, workflow, "subagent_after_findings:3") == -9
    for path in _db(memory).parent.iterdir():
        path.unlink()
    events: list[dict] = []
    orch = Orchestrator(memory_dir=memory, on_event=events.append)
    result = orch.resume(TASK)
    assert result.status == "done" and result.source == "checkpoint"
    assert_same_as_baseline(memory, baseline)


def test_findings_files_alone_prevent_reruns_when_database_and_registry_are_gone(setup):
    base, repo, workflow, baseline = setup
    memory = base / "bare-files"
    assert fork_run("run", memory, repo, workflow, "subagent_after_findings:3") == -9
    shutil.rmtree(_db(memory).parent)
    shutil.rmtree(memory / RECORDS)
    result = Orchestrator(memory_dir=memory).resume(TASK)
    assert result.status == "done" and result.source == "checkpoint"
    assert_same_as_baseline(memory, baseline)


@pytest.mark.parametrize("database", ["kept", "gone"])
@pytest.mark.parametrize("damage", ["cut", "missing"])
def test_a_findings_file_a_machine_crash_lost_is_written_again(setup, damage, database):
    # a subagent's findings file is not fsynced (its registry record is): a crash of the
    # machine may lose it or leave it cut short; the resume writes it again from the record
    base, repo, workflow, baseline = setup
    memory = base / f"torn-{damage}-{database}"
    assert fork_run("run", memory, repo, workflow, "subagent_after_findings:2") == -9
    written = sorted((memory / "findings").glob("researcher-*.md"))
    assert len(written) == 2
    torn = written[0]
    cut = torn.read_bytes()[: len(torn.read_bytes()) // 2]
    if damage == "cut":
        torn.write_bytes(cut)
    else:
        torn.unlink()
    if database == "gone":
        shutil.rmtree(_db(memory).parent)
    events: list[dict] = []
    result = Orchestrator(memory_dir=memory, on_event=events.append).resume(TASK)
    assert result.status == "done"
    warnings = [e["message"] for e in events if e["event"] == "warning"]
    assert any(torn.name in w and "cut short" in w for w in warnings), warnings
    assert torn.exists() and torn.read_bytes() != cut  # whole again, under its own name
    assert_same_as_baseline(memory, baseline)


def test_a_findings_file_under_a_suffixed_name_is_found_not_written_again(setup):
    # its name was taken when it was written, and the kill came before the registry noted
    # where it went: the resume finds it by its time and metadata, and notes it
    base, repo, workflow, baseline = setup
    memory = base / "suffixed"
    assert fork_run("run", memory, repo, workflow, "subagent_after_findings:2") == -9
    written = (memory / "findings").glob("researcher-*.md")
    last = max(written, key=lambda p: p.stem.rsplit("_", 1)[1])  # the killed subagent's
    moved = last.with_name(f"{last.stem}_a1b2c3.md")
    last.rename(moved)
    events: list[dict] = []
    result = Orchestrator(memory_dir=memory, on_event=events.append).resume(TASK)
    assert result.status == "done"
    assert not last.exists()
    assert not [e for e in events if e["event"] == "warning" and "cut short" in e["message"]]
    [noted] = [r for r in registry(memory).values() if r.get("path")]
    assert noted["path"] == f"findings/{moved.name}"
    assert f"findings/{moved.name}" in result.findings
    got = outcome(memory)
    assert got["findings"] == baseline["findings"]  # one file per subtask, same content
    assert agent_runs(memory) == dict.fromkeys(agent_runs(memory), 1)


def test_foreign_registry_lines_do_not_stop_the_repair(setup):
    base, repo, workflow, baseline = setup
    memory = base / "foreign"
    assert fork_run("run", memory, repo, workflow, "subagent_after_findings:2") == -9
    folder = memory / RECORDS / TASK  # records tether never writes (a hand edit, a tool)
    foreign = [
        ("findings%3Ax%2Fy", {"findings": "not a record"}),
        ("findings%3Ax%2Fz", {"findings": {}, "subtask": {"agent": "r"}, "ts": "?"}),
    ]
    for name, data in foreign:
        record = {"task_id": TASK, "agent_id": name.replace("%3A", ":").replace("%2F", "/"),
                  "status": "noted", "data": data, "updated_at": 0}  # fmt: skip
        (folder / f"{name}.json").write_text(json.dumps(record))
    (folder / "findings%3Ax%2Fw.json").write_text("not json at all")
    result = Orchestrator(memory_dir=memory).resume(TASK)
    assert result.status == "done"
    assert_same_as_baseline(memory, baseline)


def test_the_resume_names_every_finished_subagent_of_the_interrupted_phase(setup):
    # one whose result LangGraph had saved does not run again: the resume still reports
    # it done, so a live view counts the whole fan-out
    base, repo, workflow, baseline = setup
    memory = base / "view"
    assert fork_run("run", memory, repo, workflow, "subagent_after_findings:2") == -9
    events: list[dict] = []
    result = Orchestrator(memory_dir=memory, on_event=events.append).resume(TASK)
    assert result.status == "done"
    done = {e["key"] for e in events if e["event"] == "agent" and e["state"] == "done"}
    assert done == set(baseline["findings"])
    assert_same_as_baseline(memory, baseline)


def test_a_truncated_newest_checkpoint_falls_back_to_the_one_before(setup):
    base, repo, workflow, baseline = setup
    memory = base / "truncated"
    assert fork_run("run", memory, repo, workflow, "merge_after_checkpoint:2") == -9
    shutil.rmtree(_db(memory).parent)
    newest = max((memory / "checkpoints").glob("cp_*.json"), key=lambda p: p.name)
    newest.write_bytes(newest.read_bytes()[: len(newest.read_bytes()) // 2])
    events: list[dict] = []
    result = Orchestrator(memory_dir=memory, on_event=events.append).resume(TASK)
    warnings = [e["message"] for e in events if e["event"] == "warning"]
    assert any(newest.name in w for w in warnings), warnings
    resumed_from = next(e["path"] for e in events if e["event"] == "resume")
    assert Path(resumed_from).name != newest.name
    assert result.status == "done"
    assert_same_as_baseline(memory, baseline)


@pytest.mark.parametrize(
    ("pattern", "count"),
    [
        ("checkpoints/cp_*.json", 1),
        ("findings/researcher-*.md", 2),
        ("findings/merged_*.md", 1),
    ],
)
def test_cli_process_killed_externally_then_resumed(setup, cli_env, tmp_path, pattern, count):
    """Realism: an `orchestrator run` process is SIGKILLed from outside mid-run, as soon as
    `count` files matching `pattern` exist."""
    base, repo, workflow, baseline = setup
    memory = tmp_path / "ext"
    env = {**cli_env, "TETHER_MEMORY_DIR": str(memory)}
    cmd = [sys.executable, "-m", "orchestrator.cli"]
    proc = subprocess.Popen(
        [
            *cmd,
            "run",
            OBJECTIVE,
            "--task",
            TASK,
            "--workdir",
            str(repo),
            "--workflow",
            str(workflow),
        ],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 120  # a loaded machine starts the CLI slowly
    while time.monotonic() < deadline and proc.poll() is None:
        if len(list(memory.glob(pattern))) >= count:
            break
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(10) == -signal.SIGKILL, "the run ended before it could be killed"
    done = subprocess.run([*cmd, "resume"], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert f"Task {TASK}: done" in done.stdout
    assert_same_as_baseline(memory, baseline)


FIXED_TS = "2030-01-02T03:04:05.000006Z"


def _child_at_a_fixed_time(*args: str) -> None:
    """`_child` whose subagents all finish at `FIXED_TS`, so their findings names are known."""
    import orchestrator.graph.nodes.subagent as subagent

    subagent.iso_timestamp = lambda now=None: FIXED_TS
    _child(*args)


def test_findings_names_already_taken_by_other_files(setup):
    # a findings file's name comes from its recorded timestamp, so the registry holds no
    # path for it; when that name is taken, the file gets a suffix and the path is
    # recorded: a resume must reuse that file and never mistake the other one for it
    base, repo, workflow, baseline = setup
    memory = base / "taken"
    foreign: dict[Path, str] = {}
    for path in (base / "baseline" / "findings").glob("researcher-*.md"):
        name = _TS.sub("20300102T030405000006Z", path.name)
        text = path.read_text().replace(f'"task_id":"{TASK}"', '"task_id":"another-task"')
        assert text != path.read_text()
        foreign[memory / "findings" / name] = text
    (memory / "findings").mkdir(parents=True)
    for path, text in foreign.items():
        path.write_text(text)

    def start(kind: str, fault: str = "") -> int:
        proc = _FORK.Process(
            target=_child_at_a_fixed_time, args=(kind, str(memory), str(repo), str(workflow), fault)
        )
        proc.start()
        proc.join(60)
        return proc.exitcode

    assert start("run", "subagent_after_findings:3") == -signal.SIGKILL
    assert start("resume") == 0
    assert {p: p.read_text() for p in foreign} == foreign  # untouched
    ours = [p for p in (memory / "findings").glob("researcher-*.md") if p not in foreign]
    assert len(ours) == len(foreign)
    assert all(_meta(p)["task_id"] == TASK for p in ours)
    assert sorted(_meta(p)["subtask_id"] for p in ours) == sorted(baseline["findings"])
    assert all(n == 1 for n in agent_runs(memory).values())
    paths = [rec.get("path") for rec in registry(memory).values()]
    assert {memory / p for p in paths if p and p.startswith("findings/researcher-")} == set(ours)
