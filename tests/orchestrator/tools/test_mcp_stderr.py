"""A stdio MCP server's stderr never reaches the terminal of a run (it wrote through the live
view): it goes to `working/{task}/mcp_servers.log` in the memory, and a server that fails to
start is one `Error:` line quoting the last line it wrote (and naming the file, once the
task's folder exists: a new task refused leaves nothing in the memory).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).parents[3]
CMD = [sys.executable, "-m", "orchestrator.cli"]

SERVER = '''
import sys
from pathlib import Path
from mcp.server.fastmcp import FastMCP

print("tickets: STDERR-BANNER-7f3a starting", file=sys.stderr, flush=True)
if (Path(__file__).parent / "fail").exists():
    print("KeyError: 'TICKETS_DB' is not set", file=sys.stderr, flush=True)
    sys.exit(1)
server = FastMCP("tickets")


@server.tool()
def lookup_ticket(ticket: str) -> str:
    """Look up a ticket by its id."""
    return f"Ticket {ticket}: open"


server.run()
'''

FAILING = """
import sys
print("Traceback (most recent call last): ...", file=sys.stderr)
print("KeyError: 'TICKETS_DB' is not set", file=sys.stderr, flush=True)
sys.exit(1)
"""


def _workflow(tmp_path: Path, name: str, source: str, extra: str = "") -> Path:
    script = tmp_path / f"{name}_server.py"
    script.write_text(source)
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        f"phases: [exploration]\nmcp_servers:\n  {name}: {{command: {sys.executable!r}, "
        f"args: [{str(script)!r}]}}\nagents:\n  triage:\n    tools: ['mcp:{name}', read_file]\n"
        + extra
    )
    return wf


def _run(tmp_path: Path, wf: Path, env: dict) -> subprocess.CompletedProcess:
    (tmp_path / "work").mkdir(exist_ok=True)
    (tmp_path / "work" / "notes.txt").write_text("T-1 is about logins\n")
    return subprocess.run(
        [*CMD, "run", "Look up ticket T-1", "--task", "t1", "--workdir",
         str(tmp_path / "work"), "--workflow", str(wf)],
        env=env, capture_output=True, text=True, timeout=120, cwd=REPO,
    )  # fmt: skip


def test_a_servers_stderr_goes_to_the_log_in_the_tasks_folder_not_the_terminal(
    tmp_path, cli_env, memory_dir
):
    done = _run(tmp_path, _workflow(tmp_path, "tickets", SERVER), cli_env)
    assert done.returncode == 0, done.stderr
    shown = done.stdout + done.stderr
    assert "STDERR-BANNER-7f3a" not in shown
    assert "ListToolsRequest" not in shown  # FastMCP's INFO line of each request
    log = (memory_dir / "working" / "t1" / "mcp_servers.log").read_text()
    assert "[tickets] tickets: STDERR-BANNER-7f3a starting" in log
    assert "ListToolsRequest" in log


def test_a_server_that_fails_to_start_is_one_error_line_quoting_its_stderr(
    tmp_path, cli_env, memory_dir
):
    done = _run(tmp_path, _workflow(tmp_path, "tickets", FAILING), cli_env)
    assert done.returncode == 1
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: MCP server 'tickets' could not be started (")
    assert """; its stderr ends "KeyError: 'TICKETS_DB' is not set"; check""" in line
    assert not memory_dir.exists()  # no task was recorded: nothing written


def test_a_server_that_fails_when_a_task_continues_names_its_log(tmp_path, cli_env, memory_dir):
    wf = _workflow(tmp_path, "tickets", SERVER, extra="approve_plan: true\n")
    assert _run(tmp_path, wf, cli_env).returncode == 4  # the plan waits for approval
    (tmp_path / "fail").write_text("")
    done = subprocess.run(
        [*CMD, "approve", "--task", "t1"], env=cli_env, capture_output=True, text=True,
        timeout=120, cwd=REPO,
    )  # fmt: skip
    assert done.returncode == 1
    log = memory_dir / "working" / "t1" / "mcp_servers.log"
    [line] = done.stderr.splitlines()
    assert line.startswith("Error: MCP server 'tickets' could not be started (")
    assert f"""its stderr ends "KeyError: 'TICKETS_DB' is not set" (all of it: {log})""" in line
    assert log.read_text().count("STDERR-BANNER-7f3a") == 2  # the run's and approve's
