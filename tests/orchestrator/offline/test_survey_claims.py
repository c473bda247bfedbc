"""What the offline survey's files claim, checked against the workdir it surveyed.

A flow question with two subjects ("how does a request flow ... to the transport, and where
are redirects handled?") finds the functions named after either, even when the module that
holds them is too long to be read whole (its read is offloaded to memory and the agent sees
its head). A plan that leaves areas out of its phase says which of them earlier phases
surveyed: the plan of a task that is done shows its last phase's constraints.
"""

from __future__ import annotations

import re
from pathlib import Path

from click.testing import CliRunner

from orchestrator.cli.app import cli

FLOW = (
    "Survey this repository: how does a request flow from the API to the transport, and "
    "where are redirects handled?"
)
SURVEY = "Survey this repository: what each package does and how they fit"


def _survey(tmp_path: Path, objective: str, files: dict[str, str]) -> tuple[Path, Path]:
    work = tmp_path / "work"
    for rel, text in files.items():
        (work / rel).parent.mkdir(parents=True, exist_ok=True)
        (work / rel).write_text(text)
    mem = tmp_path / "mem"
    ran = CliRunner().invoke(
        cli, ["run", objective, "--workdir", str(work), "--memory-dir", str(mem)]
    )
    assert ran.exit_code == 0, ran.output
    return work, mem


def _line(work: Path, rel: str, needle: str) -> int:
    lines = (work / rel).read_text().splitlines()
    return next(i for i, text in enumerate(lines, 1) if needle in text)


# ~40 KB before `resolve_redirects`: a read of the module is offloaded, its head is seen
_HELPERS = "".join(
    f'\n\ndef merge_setting_{i}(request_setting, session_setting):\n    """Merge setting {i} '
    f'of a request with the session\'s, the request\'s own winning."""\n'
    + "    value = request_setting\n" * 40
    + "    return value or session_setting\n"
    for i in range(20)
)
SESSIONS = (
    '"""Sessions: settings kept across requests."""\n'
    + _HELPERS
    + '''

class Session:
    """A session sends requests through an adapter."""

    def resolve_redirects(self, response, request):
        """Follow the Location header of each redirect response."""
        return response

    def send(self, request):
        """Send a prepared request and follow its redirects."""
        response = self.adapter.send(request)
        return self.resolve_redirects(response, request)
'''
)
FETCHLIB = {
    "fetchlib/__init__.py": '"""fetchlib: HTTP for scripts."""\n',
    "fetchlib/api.py": '"""The API: one function per method."""\n\n\n'
    "def request(method, url):\n    return Session().send(url)\n\n\n"
    'def get(url):\n    return request("GET", url)\n',
    "fetchlib/adapters.py": '"""Transport adapters: how a request reaches the transport."""\n\n\n'
    'class HTTPAdapter:\n    """The transport of HTTP requests."""\n\n'
    "    def send(self, request):\n        return request\n",
    "fetchlib/sessions.py": SESSIONS,
}


def test_a_flow_question_finds_the_functions_of_each_of_its_subjects(tmp_path):
    work, mem = _survey(tmp_path, FLOW, FETCHLIB)
    findings = "\n".join(p.read_text() for p in (mem / "findings").glob("researcher-*.md"))
    defined = _line(work, "fetchlib/sessions.py", "def resolve_redirects")
    called = _line(work, "fetchlib/sessions.py", "return self.resolve_redirects(")
    assert f"fetchlib/sessions.py:{defined} resolve_redirects" in findings
    assert f"fetchlib/sessions.py:{called} self.resolve_redirects" in findings


def test_a_name_in_a_string_of_a_file_not_read_is_no_call(tmp_path):
    """`setup.py`'s message "pin to an older version of Requests (<2.32.0)" holds a word of
    the question before a parenthesis: prose, not a call site."""
    files = dict(FETCHLIB)
    for name in ("README.md", "HISTORY.md", "setup.cfg"):  # read before setup.py
        files[name] = f"# {name}\n\n" + "A request is sent; a request follows redirects.\n" * 5
    files["setup.py"] = (
        'import sys\n\nMESSAGE = """\nThis version needs a newer Python;\n'
        'pin to an older version of Requests (<2.32.0).\n"""\n'
    )
    _, mem = _survey(tmp_path, "Where is each request handled?", files)
    findings = "\n".join(p.read_text() for p in (mem / "findings").glob("researcher-*.md"))
    assert "Call chain" in findings
    assert not re.search(r"Call chain:.*setup\.py", findings), findings


def test_the_plan_s_constraints_say_which_areas_the_task_left_out(tmp_path):
    """Six packages, four subagents a phase: each phase takes the next ones, so an area a
    later phase leaves out was surveyed before, and the last plan says so."""
    files = {
        f"{name}/{module}.py": f'"""The {module} of {name}."""\n'
        for name in ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot")
        for module in ("core", "util", f"{name}_io")
    }
    files["README.md"] = "# six\n\nSix packages.\n"
    _, mem = _survey(tmp_path, SURVEY, files)
    plan = next((mem / "research_plans").glob("*.md")).read_text()
    left = re.search(r"^- Left out of the (\w+) phase: (.+)\.$", plan, re.M)
    assert left is not None, plan
    surveyed: dict[str, set[str]] = {}
    for path in (mem / "findings").glob("researcher-*.md"):
        phase, area = re.match(r"researcher-(\w+?)-(.+)_\d{8}T", path.name).groups()
        surveyed.setdefault(area, set()).add(phase)
    assert left.group(1) == "review"
    named = re.findall(r"([\w -]+?)(?: \(surveyed in ([\w, ]+)\))?(?:, |$)", left.group(2))
    assert named
    for area, phases in named:
        slug = area.strip().replace(" ", "-")
        assert surveyed.get(slug, set()) == set(filter(None, phases.split(", "))), (area, plan)
    assert any(phases for _, phases in named)  # an area an earlier phase surveyed
