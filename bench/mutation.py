"""Mutation testing of the modules where deliberate bugs once left every test green.

Not part of the test suite: a long measurement, like the rest of `bench/`. Run (needs the
`bench` extra, which brings `mutmut`)::

    python -m bench.mutation                       # every target, 8 minutes each
    python -m bench.mutation --only durable,lock --minutes 3 --children 2

Each target is one module (or the functions of the run lock) mutated by mutmut and checked
against its own test files only, so a mutant that survives is a change no test of that
module notices. A target runs in a copy of the repository under a temporary directory
(mutmut writes `mutants/` beside the code it mutates, and its settings go in a
`[tool.mutmut]` table of the copy's `pyproject.toml`), with pytest on one worker. Tests
that start processes with the repository on `PYTHONPATH` run the mutants there too; tests
that start the installed `memory` or `orchestrator` commands run the original code, so a
mutant only they could notice counts as survived. A target stops after `--minutes`; the
mutants it did not reach are counted as "not checked".

Prints one table (mutants, killed, survived, no tests, timeout, not run, minutes) and then
each surviving mutant with its diff, for the issue's report.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


@dataclass(frozen=True)
class Target:
    """One module and its own tests."""

    name: str
    modules: tuple[str, ...]
    tests: tuple[str, ...]
    functions: tuple[str, ...] = ()
    """Report only mutants of these functions (the rest of the modules is not the target)."""


TARGETS = (
    Target(
        "durable",
        ("memory/durable.py",),
        ("tests/memory/test_durable.py", "tests/memory/test_line_numbers.py"),
    ),
    Target(
        "recall",
        ("memory/search/recall.py",),
        (
            "tests/memory/test_search.py",
            "tests/memory/cli/test_cli_search.py",
            "tests/memory/backends/test_rarity.py",
        ),
    ),
    Target(
        "recovery",
        ("orchestrator/recovery/resume.py",),
        # `test_recovery.py` and `test_recovery_order.py` start `forkserver` children,
        # which run mutmut's own entry script again and stop there (it finds no settings
        # in a test's working directory); these resume in the test process
        ("tests/orchestrator/recovery/test_resume_edges.py",),
    ),
    Target(
        "lock",
        ("orchestrator/artifacts/tasks.py", "orchestrator/artifacts/documents.py"),
        (
            "tests/orchestrator/artifacts/test_task_lock.py",
            "tests/orchestrator/artifacts/test_running_lock.py",
        ),
        functions=("task_lock", "task_running", "run_lock", "running", "_run_lock_name"),
    ),
)

#: Processes a test starts with the mutated code on their path (`PYTHONPATH=<repo copy>`)
#: run mutants too; but while mutmut maps which tests reach which function ("stats"), the
#: trampolines of such a process look for mutmut's settings in its working directory (a
#: test's temporary one) and fail, so there they run the original functions.
CHILD_SITECUSTOMIZE = """import os

if os.environ.get("MUTANT_UNDER_TEST") == "stats":
    del os.environ["MUTANT_UNDER_TEST"]
"""

MUTMUT_TABLE = """
[tool.mutmut]
source_paths = ["memory", "orchestrator"]
only_mutate = {modules}
pytest_add_cli_args_test_selection = {tests}
also_copy = ["templates", "skills", "langgraph.json"]
use_git_change_detection = false
"""


@dataclass
class Outcome:
    target: Target
    counts: dict[str, int] = field(default_factory=dict)
    survivors: list[tuple[str, str]] = field(default_factory=list)
    minutes: float = 0.0
    note: str = ""


def _toml_list(items: tuple[str, ...]) -> str:
    return "[" + ", ".join(f'"{item}"' for item in items) + "]"


def _copy_repo(into: Path, target: Target) -> None:
    """The repository's files (tracked and new, not ignored) under `into`, set up for mutmut."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "-z"],
        cwd=REPO,
        capture_output=True,
        check=True,
    ).stdout.decode()
    for rel in filter(None, listed.split("\0")):
        source = REPO / rel
        if source.is_file():
            (into / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, into / rel)
    pyproject = into / "pyproject.toml"
    text = re.sub(r'addopts = "[^"]*"', 'addopts = "-q -p no:cacheprovider"', pyproject.read_text())
    table = MUTMUT_TABLE.format(modules=_toml_list(target.modules), tests=_toml_list(target.tests))
    pyproject.write_text(text + table)


def _mutmut(args: list[str], cwd: Path, env: dict, timeout: float | None = None) -> str:
    """`mutmut ARGS` in `cwd`; its output (stopped, with its children, after `timeout`)."""
    # the console script, not `python -m mutmut`: run as `__main__`, mutmut's state would
    # be a second copy of the one its workers fill
    proc = subprocess.Popen(
        [str(Path(sys.executable).with_name("mutmut")), *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,  # its workers form one process group: stopped together
    )
    try:
        out, _ = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            out, _ = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            out, _ = proc.communicate()
        out += "\n[stopped: time box reached]"
    return out


def _wanted(target: Target, mutant: str) -> bool:
    if not target.functions:
        return True
    # mutmut names a mutant `module.x_function__mutmut_N` or `module.xǁClassǁmethod__mutmut_N`
    name = re.split(r"[.ǁ]", mutant.rsplit("__mutmut_", 1)[0])[-1].removeprefix("x_")
    return name in target.functions


def run_target(target: Target, minutes: float, children: int, keep: bool) -> Outcome:
    outcome = Outcome(target)
    work = Path(tempfile.mkdtemp(prefix=f"tether-mutation-{target.name}-"))
    began = time.monotonic()
    try:
        _copy_repo(work, target)
        # `mutants/` exists before mutmut starts, so the import system finds the mutated
        # copies in it (a folder missing at start-up is remembered as missing).
        (work / "mutants").mkdir()
        (work / "mutants" / "sitecustomize.py").write_text(CHILD_SITECUSTOMIZE)
        env = {**os.environ, "CI": ""}  # a missing PostgreSQL skips its tests here
        env.pop("PYTHONPATH", None)
        log = _mutmut(["run", "--max-children", str(children)], work, env, minutes * 60)
        (work / "mutmut-run.log").write_text(log)
        results = _mutmut(["results", "--all", "true"], work, env)
        for line in results.splitlines():
            match = re.match(r"\s+(\S+): (.+)$", line)
            if not match or not _wanted(target, match.group(1)):
                continue
            status = match.group(2).strip()
            outcome.counts[status] = outcome.counts.get(status, 0) + 1
            if status == "survived":
                outcome.survivors.append((match.group(1), ""))
        outcome.survivors = [
            (name, _mutmut(["show", name], work, env)) for name, _ in outcome.survivors
        ]
        if not outcome.counts:
            outcome.note = "no mutants reported; see " + str(work / "mutmut-run.log")
            keep = True
    finally:
        outcome.minutes = (time.monotonic() - began) / 60
        if keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)
    return outcome


COLUMNS = ("killed", "survived", "no tests", "timeout", "not checked")


def table(outcomes: list[Outcome]) -> str:
    head = f"{'target':<10}{'mutants':>8}" + "".join(f"{c:>13}" for c in COLUMNS)
    lines = [head + f"{'minutes':>9}", "-" * (len(head) + 9)]
    for o in outcomes:
        total = sum(o.counts.values())
        cells = "".join(f"{o.counts.get(c, 0):>13}" for c in COLUMNS)
        other = total - sum(o.counts.get(c, 0) for c in COLUMNS)
        lines.append(
            f"{o.target.name:<10}{total:>8}{cells}{o.minutes:>9.1f}"
            + (f"  (+{other} other)" if other else "")
            + (f"  {o.note}" if o.note else "")
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default="", help="comma-separated targets (default: all)")
    parser.add_argument("--minutes", type=float, default=8.0, help="time box per target")
    parser.add_argument("--children", type=int, default=2, help="mutants tested at once")
    parser.add_argument("--keep", action="store_true", help="keep each target's copy")
    args = parser.parse_args(argv)
    if shutil.which("git") is None:
        print("bench.mutation needs git (it copies the repository's files)", file=sys.stderr)
        return 2
    try:
        import mutmut  # noqa: F401
    except ModuleNotFoundError:
        print("bench.mutation needs mutmut: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    wanted = [t for t in args.only.split(",") if t]
    targets = [t for t in TARGETS if not wanted or t.name in wanted]
    outcomes = []
    for target in targets:
        print(f"{target.name}: {', '.join(target.modules)} ...", file=sys.stderr, flush=True)
        outcomes.append(run_target(target, args.minutes, args.children, args.keep))
    print(table(outcomes))
    for o in outcomes:
        for name, diff in o.survivors:
            print(f"\n## {o.target.name}: {name} survived\n{diff.strip()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
