"""How the offline subagent words files whose names or texts are easy to mangle: dunder
files, one-line docstrings with a trailing comment, long first lines, empty files, long
scopes, and searches cut short (helpers shared with `test_offline.py`)."""

from __future__ import annotations

import json

import pytest

from orchestrator.offline import OfflineChatModel
from orchestrator.offline.evidence import Call, Evidence
from orchestrator.tools.workdir import workdir_tools
from orchestrator.types import PhasePlan, SubmitFindings
from tests.orchestrator.offline.test_offline import make_repo, run_agent, sub_prompt


class TestResearchPolicyWording:
    """What a subagent writes about files whose names or texts are easy to mangle."""

    LONG = "Parse the gadget registry and " + "resolve every gadget alias " * 8

    @pytest.fixture
    def loose(self, tmp_path):
        files = {
            "__init__.py": '"""Dashboard parts."""  # noqa: E501\n\nx = 1\n',
            "py.typed": "",
            "registry.py": f'"""{self.LONG}"""\n\n\ndef load():\n    return 1\n',
        }
        files.update({f"pkg/m{i}.py": "widget = 1\n" * 20 for i in range(5)})
        repo = make_repo(tmp_path / "w", files)
        return repo, workdir_tools(repo)

    def _findings(self, tools, scope, phase="exploration"):
        sub = PhasePlan.model_validate(
            {
                "strategy": "s",
                "subtasks": [{"id": "x", "title": "Look", "description": "d", "scope": scope}],
            }
        ).subtasks[0]
        prompt = sub_prompt("widget", sub, phase=phase)
        return run_agent(OfflineChatModel(), tools, SubmitFindings, prompt)

    def test_dunder_files_in_scope_are_read_under_their_names(self, loose):
        _, tools = loose
        findings, transcript = self._findings(tools, ["__init__.py", "py.typed", "registry.py"])
        read = {args["path"] for name, args, _ in transcript if name == "read_file"}
        assert read == {"__init__.py", "py.typed", "registry.py"}
        assert "Tool error" not in findings.summary
        assert findings.summary.startswith("__init__.py, py.typed, registry.py: ")
        notes = {f.path: f.description for f in findings.files}
        # a one-line docstring ends at its closing quotes, not at the end of the line
        assert notes["__init__.py"] == "Dashboard parts" and notes["py.typed"] == "an empty file"
        assert "py.typed: an empty file." in findings.key_discoveries
        assert '"""' not in json.dumps(findings.model_dump()) and "noqa" not in findings.summary
        # a long first line is cut at a word, and says so
        first, rest = notes["registry.py"].split("… ", 1)
        first += "…"
        assert rest == "5 lines read; defines load (line 4)" and len(first) <= 160
        assert first[:-1] == self.LONG[: len(first) - 1].rstrip()

    def test_a_cut_description_ends_in_its_ellipsis_alone(self, tmp_path):
        long = "Print a banner telling the user to upgrade, but not in CI and not when " * 3
        repo = make_repo(tmp_path / "n", {"cli/notify.js": f"// {long}\nconst x = 1\n"})
        findings, _ = self._findings(workdir_tools(repo), ["cli"])
        said = next(d for d in findings.key_discoveries if d.startswith("cli/notify.js: "))
        assert said.endswith(" the…") and long.startswith(said[len("cli/notify.js: ") : -1])
        assert "…." not in json.dumps(findings.model_dump(), ensure_ascii=False)

    def test_a_long_scope_is_named_by_its_first_paths(self, tmp_path):
        names = [f"m{i}.py" for i in range(7)]
        repo = make_repo(tmp_path / "many", {n: f'"""Module {n}."""\n' for n in names})
        findings, _ = self._findings(workdir_tools(repo), names)
        assert findings.summary.startswith("m0.py, m1.py, m2.py and 4 more: ")

    def test_an_empty_file_is_called_empty(self, loose):
        _, tools = loose
        findings, _ = self._findings(tools, ["py.typed"])
        assert "py.typed: an empty file." in findings.key_discoveries
        assert {f.path: f.description for f in findings.files} == {"py.typed": "an empty file"}
        # said once per task: planning does not say it again
        planned, _ = self._findings(tools, ["py.typed"], phase="planning")
        assert not any("empty" in d for d in planned.key_discoveries)
        assert planned.summary.startswith("py.typed: no description in the file(s) read.")

    def test_a_scope_of_several_files_is_searched_in_those_files_only(self, loose):
        repo, tools = loose
        (repo / "__init__.py").write_text('"""Dashboard parts."""\nwidget = None\n')
        findings, transcript = self._findings(tools, ["__init__.py", "py.typed"])
        greps = [a for n, a, _ in transcript if n == "grep_files" and a["pattern"] == "widget"]
        # not the whole workdir (its 100 other widget lines): the two files, exactly counted
        assert greps and greps[0]["path"] == "__init__.py, py.typed"
        assert "1 line(s) in 1 file(s) matching 'widget'" in findings.summary
        assert "capped" not in findings.summary

    def test_a_capped_search_with_no_hit_in_scope_says_so(self, loose):
        _, tools = loose
        grep = tools[2].invoke({"pattern": "widget", "path": ".", "max_matches": 50})
        call = Call("grep_files", {"pattern": "widget", "path": "."}, grep)
        ev = Evidence.from_history([call], ["__init__.py", "py.typed"])
        assert ev.count("widget") == "none of the 50 line(s) shown (capped)"

    def test_a_summary_names_its_area_once(self, loose):
        # a folder's map, and a scope of several files none of which speaks for the others
        repo, tools = loose
        (repo / "__init__.py").write_text('"""Dashboard parts."""\nwidget = None\n')
        (repo / "tests").mkdir()  # a workdir with tests: an area without any is asked about
        (repo / "tests" / "test_pkg.py").write_text("def test_m0():\n    pass\n")
        folder, _ = self._findings(tools, ["."])
        assert not folder.summary.startswith(".: .:")
        several, _ = self._findings(tools, ["py.typed", "__init__.py"])
        assert several.summary.startswith("py.typed, __init__.py: __init__.py (Dashboard parts.).")
        assert "Main files" not in several.summary  # the lead sentence named them
        assert "How are py.typed, __init__.py tested?" in " ".join(several.open_questions)

    def test_main_files_name_the_first_files_read_that_say_what_they_are(self, tmp_path):
        # the two files read first have no docstring: "Main files:" names the one that has
        files = {
            "a_big.py": "widget = 1\n" * 50,
            "b_big.py": "widget = 2\n" * 40,
            "c.py": '"""Widget wiring."""\nwidget = 3\n',
        }
        repo = make_repo(tmp_path / "w", files)
        findings, transcript = self._findings(workdir_tools(repo), ["."], phase="implementation")
        read = [args["path"] for name, args, _ in transcript if name == "read_file"]
        assert read[-1] == "c.py" and len(read) == 3
        assert findings.summary.endswith(" Main files: c.py (Widget wiring.).")

    def test_javascript_methods_and_arrow_functions_are_definitions(self, tmp_path):
        # JavaScript defines most functions as class methods and named arrow functions:
        # a file's outline names them (and neither a callback nor an `if` block)
        files = {
            "lib/doctor.js": (
                "class Doctor {\n"
                "  async checkWidget (npm) {\n"
                "    if (npm) {\n"
                "      return widgetFor(npm)\n"
                "    }\n"
                "  }\n"
                "}\n"
            ),
            "lib/utils.js": (
                "const widgetFor = async (spec) => {\n"
                "  setTimeout(function () {\n"
                "  })\n"
                "  return spec\n"
                "}\n"
                "module.exports = { widgetFor }\n"
            ),
        }
        repo = make_repo(tmp_path / "w", files)
        findings, _ = self._findings(workdir_tools(repo), ["lib"])
        assert "lib/doctor.js: no docstring or heading; defines Doctor, checkWidget." in (
            findings.key_discoveries
        )
        notes = {f.path: f.description for f in findings.files}
        assert notes["lib/utils.js"].endswith("6 lines read; defines widgetFor (line 1)")
        doctor = notes["lib/doctor.js"]
        assert doctor.endswith("defines Doctor (line 1); Doctor.checkWidget (line 2)")

    def test_a_call_chain_without_a_definition_says_so(self, tmp_path):
        # the function is defined outside the scope: its calls are cited, and the line
        # does not pretend to know where it is defined
        files = {
            "lib/a.js": "const x = renderWidget(1)\n",
            "lib/b.js": "module.exports = () => renderWidget(2)\n",
        }
        repo = make_repo(tmp_path / "w", files)
        sub = PhasePlan.model_validate(
            {
                "strategy": "s",
                "subtasks": [{"id": "x", "title": "Look", "description": "d", "scope": ["lib"]}],
            }
        ).subtasks[0]
        prompt = sub_prompt("Where is the widget handled?", sub, phase="exploration")
        findings, _ = run_agent(OfflineChatModel(), workdir_tools(repo), SubmitFindings, prompt)
        chain = next(d for d in findings.key_discoveries if d.startswith("Call chain"))
        assert chain.endswith(
            "Called at lib/a.js:1 renderWidget, lib/b.js:1 renderWidget; no definition among them."
        )
