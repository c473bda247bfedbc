"""`--memory-url` works after the verb on both CLIs, as `--memory-dir` does.

A user writes `orchestrator run "..." --memory-url postgresql://...` and `memory search q
--memory-url ...`; both reach the shared memory, and the commands tether prints to resume or
hand off name the same URL, so they work on another machine.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import psycopg

from tests.pg import private_schema

BOOT = "import sys; sys.argv[0] = {0!r}; from {0}.cli import main; main()"


def _cli(tool: str, args: list[str], home: Path) -> subprocess.CompletedProcess:
    home.mkdir(exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("TETHER_MEMORY")}
    return subprocess.run(
        [sys.executable, "-c", BOOT.format(tool), *args],
        cwd=home,
        env={**env, "HOME": str(home)},
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_memory_url_after_the_verb_reaches_the_shared_memory(tmp_path, fixture_repo):
    with private_schema() as url:
        run = _cli(
            "orchestrator",
            ["run", "Survey the shop service", "--workdir", str(fixture_repo), "--memory-url", url],
            tmp_path / "a",
        )
        assert run.returncode == 0, run.stderr
        with psycopg.connect(url) as conn:
            findings = conn.execute(
                "SELECT count(*) FROM tether_documents WHERE path LIKE 'findings/researcher-%'"
            ).fetchone()[0]
        assert findings >= 4  # one per subagent of the four phases, in PostgreSQL

        handoff = next(ln for ln in run.stdout.splitlines() if ln.startswith("Hand off:"))
        words = shlex.split(handoff.removeprefix("Hand off:"))
        assert words[words.index("--memory-url") + 1] == url

        found = _cli(
            "memory",
            # words of what the subagents found (the objective's own words find the
            # task's plan, snapshot and checkpoints, which quote it)
            ["search", "which files define the shop", "--json", f"--memory-url={url}"],
            tmp_path / "b",
        )
        assert found.returncode == 0, found.stderr
        hits = json.loads(found.stdout)
        assert any(h["path"].startswith("findings/") for h in hits)
        assert not any(h["path"].startswith(".") for h in hits)  # hidden files are not searched

        status = _cli("orchestrator", ["status", "--memory-url", url], tmp_path / "b")
        assert status.returncode == 0, status.stderr
        assert "Survey the shop service" in status.stdout


def test_an_unreachable_url_after_the_verb_is_one_line_without_the_password(tmp_path):
    bad = "postgresql://postgres:s3cret@127.0.0.1:1/test"
    for tool, args in (("memory", ["search", "x"]), ("orchestrator", ["status"])):
        result = _cli(tool, [*args, "--memory-url", bad], tmp_path / tool)
        assert result.returncode == 1
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error:"), result.stderr
        assert "127.0.0.1:1" in lines[0] and "s3cret" not in lines[0]
