"""The offline survey on three project shapes (a library, a CLI app, a web service).

Each test builds a small tree, runs `orchestrator run "How are redirects handled?"` through
the CLI with the offline model, and reads the findings files it wrote: what is not source
(`*.egg-info`, a virtualenv, `build/`, what `.gitignore` ignores) is never cited, grep
counts are the real number of matching lines, the definition and call sites of the
function that handles the objective are cited as `file:line`, files are described by an
outline with line numbers (never by an ASCII-art banner), and the plan's key questions
are ticked only when a finding addresses them, citing it.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

OBJECTIVE = "How are redirects handled?"


def build(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


def survey(tmp_path: Path, files: dict[str, str]) -> tuple[Path, str, str]:
    """Run the survey; return the workdir, all findings text and the research plan."""
    work = build(tmp_path / "work", files)
    mem = tmp_path / "mem"
    done = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", OBJECTIVE]
        + ["--workdir", str(work), "--memory-dir", str(mem)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    findings = "\n".join(p.read_text() for p in sorted((mem / "findings").glob("*.md")))
    plan = "\n".join(p.read_text() for p in (mem / "research_plans").glob("*.md"))
    return work, findings, plan


def line_of(work: Path, rel: str, needle: str) -> int:
    lines = (work / rel).read_text().splitlines()
    return next(i for i, ln in enumerate(lines, 1) if needle in ln)


def matching_lines(work: Path, folder: str, word: str) -> int:
    return sum(
        1
        for p in (work / folder).rglob("*.py")
        for ln in p.read_text().splitlines()
        if word in ln.lower()
    )


SESSIONS = '''"""Sessions keep settings across requests and follow redirects."""


class Session:
    """A session."""

    max_redirects = 30

    def send(self, request):
        """Send a request, then follow its redirects."""
        response = self.adapter.send(request)
        return self.resolve_redirects(response, request)

    def resolve_redirects(self, response, request):
        """Follow Location headers up to max_redirects times."""
        return response
'''


def test_library(tmp_path):
    work, findings, plan = survey(
        tmp_path,
        {
            "src/fetchlib/__init__.py": (
                '"""\n  /__)  _  _\n / (  (- (/\n"""\nfrom .sessions import Session\n'
            ),
            "src/fetchlib/sessions.py": SESSIONS,
            "src/fetchlib/models.py": (
                '"""Request and response objects."""\n\n\n'
                "class Response:\n    is_redirect = False\n"
            ),
            "src/fetchlib.egg-info/PKG-INFO": "Summary: follows redirects\n",
            ".gitignore": "generated/\n*.log\n",
            "generated/redirect_cache.py": "def redirect_cache():\n    pass\n",
            "tests/test_sessions.py": "def test_redirects():\n    assert True\n",
            "README.md": "# fetchlib\n\nHTTP for people.\n",
        },
    )
    assert "egg-info" not in findings and "generated/" not in findings
    # the chain: where the handler is defined and where it is called, as file:line
    rel = "src/fetchlib/sessions.py"
    defined = line_of(work, rel, "def resolve_redirects")
    called = line_of(work, rel, "self.resolve_redirects(")
    assert f"{rel}:{defined} Session.resolve_redirects" in findings or (
        f"{rel}:{defined} resolve_redirects" in findings
    )
    assert f"{rel}:{called} self.resolve_redirects" in findings
    # an outline with line numbers and the first docstring line
    assert f"Session.resolve_redirects (line {defined}: Follow Location headers" in findings
    # the count is the real number of matching lines, naming the term searched
    real = matching_lines(work, "src/fetchlib", "redirect")
    assert f"{real} line(s) in 2 file(s) of src/fetchlib match 'redirect'" in findings
    assert "/__)" not in findings  # the banner is no description
    assert "- [x] Which files in src/fetchlib matter for" in plan


def test_cli_app(tmp_path):
    work, findings, _ = survey(
        tmp_path,
        {
            "mycli/__main__.py": "from mycli.main import main\n\nmain()\n",
            "mycli/main.py": '"""Command line entry point."""\n\nimport argparse\n\n'
            "from mycli.net import handle_redirect\n\n\ndef main():\n"
            '    """Parse arguments and fetch."""\n'
            "    parser = argparse.ArgumentParser()\n"
            '    parser.add_argument("--follow", help="follow redirects")\n'
            "    args = parser.parse_args()\n    return handle_redirect(args)\n",
            "mycli/net.py": '"""Network calls."""\n\n\ndef handle_redirect(args):\n'
            '    """Follow one redirect when --follow is set."""\n    return args\n',
            "env/pyvenv.cfg": "home = /usr/bin\n",
            "env/lib/site.py": "def redirect_everything():\n    pass\n",
            "tests/test_net.py": "def test_handle_redirect():\n    assert True\n",
        },
    )
    assert "env/" not in findings
    defined = line_of(work, "mycli/net.py", "def handle_redirect")
    called = line_of(work, "mycli/main.py", "return handle_redirect(")
    assert f"mycli/net.py:{defined} handle_redirect" in findings
    assert f"mycli/main.py:{called} handle_redirect" in findings
    assert f"main (line {line_of(work, 'mycli/main.py', 'def main')}: Parse arguments" in findings


def test_web_service(tmp_path):
    routes = (
        '"""HTTP routes of the shop."""\n\n\ndef redirect_to_login(request):\n'
        '    """Send anonymous users to the login page."""\n    return "/login"\n\n\n'
        "def checkout(request):\n    if not request.user:\n"
        "        return redirect_to_login(request)\n    return 'ok'\n"
    )
    work, findings, _ = survey(
        tmp_path,
        {
            "shop/app.py": '"""The WSGI application."""\n\nfrom shop import routes\n\n\n'
            "def create_app():\n    return routes\n",
            "shop/routes.py": routes,
            "build/lib/shop/routes.py": routes,
            "dist/shop-1.0.txt": "redirect\n",
            "Dockerfile": "FROM python:3.12\n",
        },
    )
    assert "build/lib" not in findings and "dist/" not in findings
    defined = line_of(work, "shop/routes.py", "def redirect_to_login")
    called = line_of(work, "shop/routes.py", "return redirect_to_login(")
    assert f"shop/routes.py:{defined} redirect_to_login" in findings
    assert f"shop/routes.py:{called} redirect_to_login" in findings
    # a read-only survey reports no tool error as an open question
    assert "Tool error" not in findings.split("## Open Questions")[-1]


def test_each_summary_opens_with_what_its_phase_found(tmp_path):
    """Snapshots and merged summaries quote a finding's first sentence: it says what the
    area is (exploration) or the phase's first discovery, not the objective again."""
    survey(
        tmp_path,
        {
            "src/fetchlib/__init__.py": '"""Fetch things over HTTP."""\n',
            "src/fetchlib/sessions.py": SESSIONS,
            "tests/test_sessions.py": "def test_redirects():\n    assert True\n",
        },
    )
    seen = set()
    for path in sorted((tmp_path / "mem" / "findings").glob("researcher-*.md")):
        text = path.read_text()
        phase = re.search(r"\*\*Subtask\*\*: (\w+)/", text).group(1)
        summary = text.split("## Summary\n", 1)[1].split("\n\n", 1)[0]
        first = re.search(r"## Key Discoveries\n1\. (.+)", text)
        area, _, lead = summary.partition(": ")
        assert OBJECTIVE not in summary
        if first is None:  # nothing this phase adds: what the area's files say they are
            said = {"Fetch things over HTTP", "Sessions keep", "no description in the file"}
            assert any(lead.startswith(s) for s in said), (phase, summary)
            seen.add(phase)
            continue
        discovery = first.group(1).rstrip(".")[:60]
        # "area: what was found", or the discovery itself when it names the area already
        opens = [lead.startswith(discovery), summary.startswith(discovery)]
        if phase == "exploration":
            said = {"Fetch things over HTTP", "Sessions keep settings across requests"}
            assert any(lead.startswith(s) for s in said) or any(opens), summary
        else:
            assert any(opens), (phase, summary)
        seen.add(phase)
    assert seen == {"exploration", "planning", "implementation", "review"}


def test_a_question_about_each_folder_is_ticked_by_the_lead(tmp_path):
    handler = '"""{what}."""\n\n\ndef handle_redirects(response):\n    """Follow redirects."""\n'
    _, _, plan = survey(
        tmp_path,
        {
            "webapp/redirects.py": handler.format(what="Redirects of web requests"),
            "webapp/views.py": '"""Views that answer with redirects."""\n',
            "worker/retry.py": handler.format(what="Redirects of queued jobs are handled here"),
            "worker/jobs.py": '"""Jobs that follow redirects when handled."""\n',
        },
    )
    # the lead declares them answered (`PhasePlan.answered`) once findings cite the folder
    ticked = set(re.findall(r"- \[x\] Which files in (\w+) matter for ", plan))
    assert ticked == {"webapp", "worker"}, plan


def test_a_task_says_each_fact_once(tmp_path):
    """Four phases over the same areas: no `file:line` citation, search result or test
    statement is reported by two phases, and every `file:line` cited exists."""
    work, _, _ = survey(
        tmp_path,
        {
            "src/fetchlib/__init__.py": '"""Fetch things over HTTP."""\n',
            "src/fetchlib/sessions.py": SESSIONS + "\n\n# TODO: limit redirects per host\n",
            "src/fetchlib/models.py": '"""Request and response objects."""\n',
            "tests/test_sessions.py": "def test_redirects():\n    assert True\n",
            "README.md": "# fetchlib\n\nFollows redirects.\n",
        },
    )
    said: dict[str, str] = {}
    for path in sorted((tmp_path / "mem" / "findings").glob("researcher-*.md")):
        text = path.read_text()
        phase = re.search(r"\*\*Subtask\*\*: (\w+)/", text).group(1)
        discoveries = text.split("## Key Discoveries\n", 1)[1].split("\n## ", 1)[0]
        for fact in re.findall(r"[\w/]+\.\w+:\d+|match '[^']+'|Tests for [\w/]+", discoveries):
            assert said.setdefault(fact, phase) == phase, (fact, said[fact], phase)
    cited = [f for f in said if re.fullmatch(r"[\w/]+\.\w+:\d+", f)]
    assert cited and all(
        int(f.split(":")[1]) <= len((work / f.split(":")[0]).read_text().splitlines())
        for f in cited
    )
    assert said.get("src/fetchlib/sessions.py:19") == "review"  # the TODO: review's
