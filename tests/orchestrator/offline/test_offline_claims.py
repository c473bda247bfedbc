"""What the offline model must not claim (issue 33, on click 8.1.7 and express 4.19.2): a
call quoted in a comment is no call site, a short word is no part of longer words, a
package that ships no tests gets no coverage claims, size is no risk, and a plan's key
question is ticked only when one finding answers it."""

from __future__ import annotations

import re

from orchestrator.offline import OfflineChatModel
from orchestrator.offline.evidence import answered_by
from orchestrator.tools.workdir import workdir_tools
from orchestrator.types import PhasePlan, SubmitFindings
from tests.orchestrator.offline.test_offline import (
    cited_lines_say,
    lead_prompt,
    make_repo,
    run_agent,
    sub_prompt,
)

# express-shaped: JSDoc examples and a line comment quote the calls the code makes once
RESPONSE_JS = """/**
 * Set the location header to `url`.
 *
 * Examples:
 *
 *    res.location('/foo/bar').;
 *    res.location('http://example.com');
 */

res.location = function location(url) {
  return this.set('Location', url);
};

/* res.location('/inline') */
res.redirect = function redirect(url) {
  // res.location(url) would encode it twice
  var address = this.location(url).get('Location');
  return address;
};
"""
SESSION_PY = '''def follow(response):
    """Follow one redirect.

    >>> follow_location(response)
    """
    # follow_location(response) is called below
    return follow_location(response)


def follow_location(response):
    return response
'''


def findings(repo, scope, objective, phase="exploration"):
    sub = PhasePlan.model_validate(
        {
            "strategy": "s",
            "subtasks": [{"id": "x", "title": "Look", "description": "d", "scope": scope}],
        }
    ).subtasks[0]
    prompt = sub_prompt(objective, sub, phase=phase)
    return run_agent(OfflineChatModel(), workdir_tools(repo), SubmitFindings, prompt)


def chain_of(found: SubmitFindings) -> str:
    return next(d for d in found.key_discoveries if d.startswith("Call chain"))


def test_a_call_quoted_in_a_comment_is_no_call_site(tmp_path):
    repo = make_repo(tmp_path / "web", {"lib/response.js": RESPONSE_JS, "lib/s.py": SESSION_PY})
    found, _ = findings(repo, ["lib"], "Where is the location set, and who calls it?")
    chain = chain_of(found)
    # JavaScript: the definition and the one real call, none of the four lines of comment
    assert re.findall(r"lib/response\.js:(\d+)", chain) == ["10", "17"]
    code = r"^(res\.location = function|  var address = this|def follow_loc|    return follow_loc)"
    assert cited_lines_say(repo, chain, code)
    # Python: a docstring's example and a comment are no calls either
    assert re.findall(r"lib/s\.py:(\d+)", chain) == ["10", "7"]


def test_a_short_word_is_searched_as_a_word_of_its_own(tmp_path):
    files = {
        "lib/response.js": (
            "var express = require('express');\n"
            "var res = Object.create(http.ServerResponse.prototype);\n"
            "res.send = function send(body) {\n  return body;\n};\n"
            "// a response is sent once\n"
        ),
        "lib/request.js": "var req = {};\nreq.res = null;\n",
    }
    repo = make_repo(tmp_path / "web", files)
    objective = "What does res.send write, and where is res created?"
    found, transcript = findings(repo, ["lib"], objective)
    greps = [a["pattern"] for n, a, _ in transcript if n == "grep_files"]
    word = next(g for g in greps if "res" in g and "\\w" not in g)
    line = next(d for d in found.key_discoveries if " match '" in d)
    assert "(res as a word)" in line
    # the count is the lines where the pattern really matches, and none is "express" only
    real = [
        text
        for path in files
        for text in (repo / path).read_text().splitlines()
        if re.search(word, text, re.IGNORECASE)
    ]
    assert line.startswith(f"{len(real)} line(s) in 2 file(s) of lib match ")
    assert not any(re.search(r"express|response", t) and "res." not in t for t in real)
    assert "lib/response.js:1" not in " ".join(found.key_discoveries)


NO_TESTS = {
    "index.js": "module.exports = require('./lib/app');\n",
    "lib/app.js": "// The app.\nfunction createApp() {\n  // TODO: options\n  return {};\n}\n",
    "lib/router.js": "// Routing.\nfunction route(path) {\n  return path;\n}\n" * 5,
    "package.json": '{"name": "app"}\n',
}


def test_a_package_that_ships_no_tests_gets_no_coverage_claims(tmp_path):
    repo = make_repo(tmp_path / "app", NO_TESTS)
    said = []
    for phase in ("exploration", "planning", "implementation", "review"):
        found, _ = findings(repo, ["lib"], "How are routes matched?", phase=phase)
        said += found.key_discoveries + found.recommendations + found.open_questions
    assert not any(re.search(r"test|cover", s, re.IGNORECASE) for s in said), said
    assert not any("biggest" in s.lower() or "hardest" in s.lower() for s in said)
    # the only risk named is the note, at the line that holds it
    risks = [s for s in said if s.startswith("Risk")]
    assert len(risks) == 1 and cited_lines_say(repo, risks[0], "TODO: options")
    # the lead says it once, for the whole workdir
    plan, _ = run_agent(
        OfflineChatModel(), workdir_tools(repo), PhasePlan, lead_prompt("How are routes matched?")
    )
    assert "The workdir ships no test file (4 files listed)" in " ".join(plan.constraints)


def _finding(path, phase, files, discoveries):
    return {
        "path": path,
        "phase": phase,
        "files": [{"path": f, "description": "d"} for f in files],
        "key_discoveries": discoveries,
    }


class TestAnsweredBy:
    QUESTION = "Which files in lib/router matter for the objective (location, header)?"

    def test_a_discovery_citing_a_file_of_the_folder_with_the_words_answers(self):
        found = {
            "a": _finding(
                "findings/a.md",
                "exploration",
                ["lib/router/index.js"],
                ["lib/router/index.js:9 sets the location header"],
            )
        }
        assert answered_by(self.QUESTION, found) == ["findings/a.md"]

    def test_words_spread_over_discoveries_or_another_folder_answer_nothing(self):
        found = {
            # the words are there, in a file of another folder (`lib/`, not `lib/router/`)
            "other": _finding(
                "findings/o.md",
                "exploration",
                ["lib/response.js"],
                ["lib/response.js: location header"],
            ),
            # the folder's file, but each discovery holds one word only
            "spread": _finding(
                "findings/s.md",
                "exploration",
                ["lib/router/index.js"],
                ["lib/router/index.js: location", "lib/router/index.js: header"],
            ),
            # the words only in the search pattern quoted, not in what was found
            "pattern": _finding(
                "findings/p.md",
                "exploration",
                ["lib/router/index.js"],
                ["0 line(s) of lib/router match 'location|header', e.g. lib/router/index.js:1: x"],
            ),
        }
        assert answered_by(self.QUESTION, found) == []

    def test_a_question_with_no_content_word_is_never_answered(self):
        found = {"a": _finding("f.md", "review", ["docs/a.md"], ["docs/a.md: Guide."])}
        assert answered_by("Which files in docs matter for the objective?", found) == []
        assert answered_by("What should the review phase report for the objective?", found) == []

    def test_a_question_naming_a_phase_is_answered_by_that_phase_only(self):
        text = ["lib/router/index.js:9 sets the location header"]
        found = {"a": _finding("a.md", "review", ["lib/router/index.js"], text)}
        question = "What should the exploration phase report for the objective (location, header)?"
        assert answered_by(question, found) == []
        found["b"] = _finding("b.md", "exploration", ["lib/router/index.js"], text)
        assert answered_by(question, found) == ["b.md"]


def test_a_todo_quoted_in_a_docstring_of_a_big_package_is_no_note(tmp_path):
    # a package with more triple quotes than one search shows: the docstring holding the
    # quoted marker opens past what a search of the whole package would show of its file
    # (the bigger modules are read, not this one)
    doc = "".join(f'def f{i}():\n    """Step {i}."""\n' for i in range(60))
    files = {f"pkg/m{i:02d}.py": doc * 2 for i in range(30)}
    files["pkg/notes.py"] = doc + (
        'def real_todo(line):\n    """Is it a note?\n\n    The marker opens a comment (`# TODO`).\n'
        '    """\n    # TODO: a real note\n    return line\n'
    )
    repo = make_repo(tmp_path / "big", files)
    found, transcript = findings(repo, ["pkg"], "Survey this package", phase="review")
    notes = [d for d in found.key_discoveries if "note at" in d]
    lines = files["pkg/notes.py"].splitlines()
    real = next(i for i, ln in enumerate(lines, 1) if ln.strip() == "# TODO: a real note")
    assert notes == [f"Risk: unresolved note at pkg/notes.py:{real}: # TODO: a real note"]
    quotes = [a for n, a, _ in transcript if n == "grep_files" and '"' in a["pattern"]]
    assert [q["path"] for q in quotes] == ["pkg/notes.py"]  # that file's quotes, all shown
