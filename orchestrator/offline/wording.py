"""How the offline research policy words what a subagent found: `SubmitFindings` per phase.

`build_findings` turns the `Evidence` of one conversation (`orchestrator.offline.evidence`)
into findings, differently per phase (`_Facts`, `_recommendations`, `_file_notes`), so
consecutive phases report different sides of the same area.

Invariant: every sentence is taken from that evidence (real paths, lines, names and counts
the tools returned), nothing known in advance, no clock and no randomness.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from orchestrator.offline.defs import def_name, test_calls
from orchestrator.offline.evidence import (
    _CALL_SUFFIX,
    _CODE_SUFFIXES,
    _DEFAULT_PHASE,
    _PHASES,
    _STRING_GREP,
    _TODO_GREP,
    Brief,
    Evidence,
    _in_scope,
    _is_test,
    _module_name,
    _names_module,
    _tested_name,
    call_keys,
    chain,
    related_tests,
    untested_modules,
)
from orchestrator.offline.filetext import (
    clip,
    describe,
    is_prose,
    outline,
    qualified_defs,
)
from orchestrator.offline.terms import (
    _WORD_RE,
    _path_words,
    holds,
    pattern_terms,
    shown,
    stem,
    stems,
)
from orchestrator.types import SubmitFindings

#: A line that only brings a name in: `import x`, `from x import y`, `use a::b;`,
#: `pub(crate) mod colors;`, `#include <x>`, `const x = require('x')`, `import x from 'x'`.
_IMPORT_RE = re.compile(
    r"^\s*(import\b|from\s+\S+\s+import\b|(pub(\([^)]*\))?\s+)?(use\s.*;|mod\s+\w+\s*;)"
    r"|extern crate\b"
    r"|#include\b|(const|let|var)\s.*=\s*require\()"
)


def build_findings(brief: Brief, scope: Sequence[str], ev: Evidence, policy: Any) -> SubmitFindings:
    """`SubmitFindings` built only from the evidence the tools returned.

    Each phase reports its own side of an area and nothing an earlier phase of the default
    order reports, so that a task says each fact once: exploration maps it (modules, what
    the files read define, where its tests are, where the objective's words and the
    functions named like them are), planning proposes steps (with the sizes of the
    modules), implementation points at change sites (definitions with line numbers),
    review lists open TODO/FIXME notes and the modules no test file is named after (only
    when the workdir has tests: a package that ships none gets no coverage claims). A
    phase of another name reports as exploration.
    """
    # a long scope (the loose files of a folder) is named by its first paths
    where = _scope_name(scope)
    objective = (brief.objective or brief.title or "the task").rstrip(" .?!")
    todo = ev.todos()
    word_hits = {
        k: v
        for k, v in ev.greps.items()
        if k not in (_TODO_GREP, _STRING_GREP) and not k.endswith(_CALL_SUFFIX)
    }
    tests = related_tests(scope, list(ev.workdir))
    facts = _Facts(brief.phase, where, ev, todo, tests, list(scope))
    discoveries = facts.discoveries()
    questions = []
    if facts.phase_name == "exploration":  # where the objective's words are: said once
        discoveries += [
            facts.chain_line(k, v) for k, v in ev.greps.items() if k.endswith(_CALL_SUFFIX)
        ]
        for pattern, hits in word_hits.items():
            if not hits:
                questions.append(
                    f"No line of {where} matches {shown(pattern)}: where is it handled?"
                )
            else:
                discoveries.append(facts.word_line(pattern, hits))
    if not ev.read:
        questions.append(_sentence(f"No readable text file was found in {where}"))
    questions += facts.questions(objective)
    counts = "".join(f"{ev.count(k)} matching {shown(k)}, " for k in word_hits)
    searched = _TODO_GREP in ev.greps
    todo_count = f"{len(todo)} TODO/FIXME comment(s), " if searched else "TODO/FIXME not searched, "
    firsts = {p: describe(lines, p)[0] for p, lines in ev.read.items()}
    # the first sentence says what this phase found (snapshots and merged summaries quote it):
    # what the area is for exploration, the phase's first discovery for the others
    described = [(p, d) for p, d in firsts.items() if d]
    main = "; ".join(f"{p} ({clip(d, 100)})" for p, d in described[:2])
    # one folder: its first description says what it is; several paths (a folder's loose
    # files): no file speaks for the others, so the files read are named with theirs
    several = len(scope) > 1
    said = main if several else next((d for _, d in described), "")
    first = discoveries[0] if discoveries else ""
    lead = said if facts.phase_name == "exploration" and said else first or said
    lead = lead.rstrip(".")
    if len(lead) > 240:  # whole list items only
        lead = lead[:240].rsplit(", ", 1)[0] + " and more"
    nothing = "no description in the file(s) read" if ev.read else "no file was read"
    # a discovery that names the area already ("X: 8 text files; ...") is not named twice
    summary = _sentence(lead if lead.startswith(f"{where}:") else f"{where}: {lead or nothing}")
    summary += (
        f" {len(set(ev.listed) | set(ev.read))} file(s) seen, {len(ev.read)} read, "
        f"{counts}{todo_count}{len(tests)} related test file(s) ({brief.phase} phase)."
    )
    if ev.errors:
        summary += f" Tool error(s): {'; '.join(ev.errors[:3])}."
    if main and not (several and lead == main):  # the first two files that say what they are
        summary += f" Main files: {main}."
    return SubmitFindings.model_validate(
        {
            "status": "completed" if ev.read else "partial",
            "summary": summary,
            "key_discoveries": [d for d in dict.fromkeys(discoveries) if d][:10],
            "files": _file_notes(ev),
            "open_questions": questions[:6],
            "recommendations": _recommendations(brief, scope, objective, ev, facts)[:6],
        }
    )


def _sentence(text: str) -> str:
    """`text` ending as a sentence: a full stop unless it ends in one, or in `…`, `?`, `!`."""
    return text if text.endswith((".", "…", "?", "!")) else text + "."


def _undescribed(lines: Sequence[str]) -> str:
    """What a file read without a description is: empty, or without docstring or heading."""
    return "no docstring or heading" if any(ln.strip() for ln in lines) else "an empty file"


def _file_notes(ev: Evidence) -> list[dict]:
    """Notes for the files read: a file only listed was not examined."""
    notes = []
    for path, lines in ev.read.items():
        first = describe(lines, path)[0]
        defs = outline(lines, path, ev.read_breaks(path))
        shown = [f"{n} (line {i}{': ' + d if d else ''})" for n, i, d in defs[:8]]
        more = f" and {len(defs) - 8} more" if len(defs) > 8 else ""
        note = (first or _undescribed(lines)).rstrip(".") + (
            f"{'' if first.endswith('…') else '.'} {ev.lines_read.get(path, len(lines))} lines "
            "read; "
            f"defines {'; '.join(shown)}{more}"
            if defs
            else ""
        )
        notes.append({"path": path, "description": note})
    return notes


def _short(paths: Sequence[str], n: int = 5) -> str:
    more = f" (+{len(paths) - n} more)" if len(paths) > n else ""
    return ", ".join(paths[:n]) + more


@dataclass
class _Facts:
    """The evidence of one subagent, worded for its phase (one method per phase)."""

    phase: str
    where: str
    ev: Evidence
    todo: list[tuple[str, int, str]]
    tests: list[str]
    scope: list[str]

    @property
    def untested(self) -> list[str]:
        """Source modules of the scope no related test file is named after, biggest first."""
        found = untested_modules(self.ev.code(), self.tests)
        return sorted(found, key=lambda p: (-self.ev.listed.get(p, 0), p))

    def biggest(self, n: int = 3) -> list[str]:
        code = sorted(self.ev.code(), key=lambda p: (-self.ev.listed.get(p, 0), p))
        return [f"{p} ({self.ev.listed[p]} bytes)" for p in code[:n]]

    @property
    def phase_name(self) -> str:
        """The phase whose report this is (an unknown phase reports as exploration)."""
        return self.phase if self.phase in _PHASES else "exploration"

    def discoveries(self) -> list[str]:
        out = getattr(self, f"_{self.phase_name}")()
        return [line for line in out if line]

    def _exploration(self) -> list[str]:
        """A map: what the area holds, what the files read define, where its tests are."""
        ev, where, out = self.ev, self.where, []
        if ev.listed:
            kinds = Counter(PurePosixPath(p).suffix or "(none)" for p in ev.listed)
            common = ", ".join(f"{k} ({n})" for k, n in kinds.most_common(4))
            out.append(f"{where}: {len(ev.listed)} text files; types: {common}.")
        mods = [PurePosixPath(p).stem for p in ev.code() if _module_name(p)]
        if mods:
            out.append(f"Modules of {where}: {_short(list(dict.fromkeys(mods)), 12)}.")
        for path, lines in ev.read.items():
            first, defs = describe(lines, path)
            said = f"{path}: {clip(first, 100).rstrip('.') or _undescribed(lines)}"
            out.append(f"{said}; defines {', '.join(defs[:8])}." if defs else _sentence(said))
        out.append(self.test_line() if not ev.is_test_area() else self.coverage()[0])
        return out

    def _planning(self) -> list[str]:
        """Inputs for a plan that exploring did not give: the sizes of the biggest modules
        (what each file defines is exploration's; the steps are recommendations)."""
        if self.biggest():
            return [f"Largest modules of {self.where}: {', '.join(self.biggest())}."]
        return []

    def _implementation(self) -> list[str]:
        """Change sites: definitions with line numbers (in a test area, what each test
        file targets). TODO notes and untested modules are review's."""
        out = []
        for path, lines in self.ev.read.items():
            defs = qualified_defs(lines, path, self.ev.read_breaks(path))
            if self.ev.is_test_area():
                named = [(n, n.rpartition(".")[2].startswith(("test", "Test"))) for n, _ in defs]
                cases = [n for n, case in named if case]
                cases += [n for n, _ in test_calls(lines)]
                helpers = list(dict.fromkeys(n for n, case in named if not case))
                target = _tested_name(path)
                out.append(
                    f"{path} targets {target!r}: {len(cases)} test case(s) in the lines read"
                    + (f"; helpers/fixtures: {', '.join(helpers[:4])}." if helpers else ".")
                )
            elif held := self._holding(path, defs, lines):
                sites = ", ".join(
                    f"{n} (line {i}: {k} matching line{'s' if k > 1 else ''})"
                    for (n, i), k in held[:6]
                )
                out.append(f"Change sites in {path}, where the objective's words are: {sites}.")
            elif defs:
                sites = ", ".join(f"{n} (line {i})" for n, i in defs[:6])
                out.append(f"Change sites in {path}: {sites}.")
        return out

    def _holding(
        self, path: str, defs: list[tuple[str, int]], lines: list[str]
    ) -> list[tuple[tuple[str, int], int]]:
        """The definitions of `path` whose bodies hold the objective's words (the last
        definition above each line read that a word search matches), most lines first.
        The lines read are searched again: the search's own hits stop at its cap."""
        searches = [
            re.compile(k, re.IGNORECASE)
            for k in self.ev.greps
            if k not in (_TODO_GREP, _STRING_GREP) and not k.endswith(_CALL_SUFFIX)
        ]
        held: Counter[tuple[str, int]] = Counter()
        for n, text in enumerate(lines, 1):
            if any(s.search(text) for s in searches):
                start = self.ev.span_start(path, n)  # a definition of the same read
                above = [d for d in defs if start <= d[1] <= n]
                if above:
                    held[above[-1]] += 1
        return sorted(held.items(), key=lambda item: (-item[1], item[0][1]))

    def _review(self) -> list[str]:
        """Open notes, and the modules no test file is named after when the workdir has
        tests and some of them belong to this area (exploration said where they are, or
        that none does); no claim about code no test is near."""
        out = [f"Risk: unresolved note at {p}:{n}: {clip(t, 100)}" for p, n, t in self.todo[:3]]
        if self.ev.is_test_area():
            return out + self.coverage()[1:]
        # the same count as `coverage`: named modules only (`__init__`-like files excluded)
        code = [p for p in self.ev.code() if _module_name(p)]
        if self.tests and self.untested:
            out.append(
                f"No test file is named after {len(self.untested)} of the {len(code)} "
                f"module(s) of {self.where} ({len(self.tests)} related test file(s) listed): "
                f"{_short(self.untested)}."
            )
        return out

    @property
    def workdir_tested(self) -> bool:
        """Does the workdir listing hold a test file at all?"""
        return any(_is_test(p) for p in self.ev.workdir)

    def test_line(self) -> str:
        """Where the scope's tests are, as an observation with its evidence ("" when the
        workdir lists no test at all: that is one fact of the workdir, not of each area)."""
        if self.tests:
            inside = [t for t in self.tests if _in_scope(t, self.scope)]
            named = [t for t in self.tests if _tested_name(t) != PurePosixPath(t).stem.lower()]
            return (
                f"Tests for {self.where}: {len(self.tests)} file(s) in the workdir listing "
                f"({len(inside)} inside it), e.g. {_short(named or self.tests, 3)}."
            )
        if not self.ev.code() or not self.workdir_tested:
            return ""
        return (
            f"No test file among the {len(self.ev.workdir)} listed workdir files lies in "
            f"{self.where}, in a folder named like it, or is named after one of its "
            f"{len(self.ev.code())} module(s)."
        )

    def coverage(self) -> list[str]:
        """For a test area: what its files are named after, then the modules none is."""
        ev = self.ev
        tests = [
            p
            for p in ev.listed
            if PurePosixPath(p).suffix in _CODE_SUFFIXES
            and _tested_name(p) != PurePosixPath(p).stem.lower()
        ]
        source = [
            p
            for p in ev.workdir
            if PurePosixPath(p).suffix in _CODE_SUFFIXES and not _is_test(p) and _module_name(p)
        ]
        covered = [s for s in source if any(_names_module(t, _module_name(s)) for t in tests)]
        tops = Counter(s.split("/")[0] for s in covered if "/" in s)
        by = ", ".join(f"{k} {n}" for k, n in sorted(tops.items()))
        lines = [
            f"{len(tests)} test file(s) in {self.where} are named after {len(covered)} of "
            f"{len(source)} source modules of the workdir" + (f" (by folder: {by})." if by else ".")
        ]
        missing = [s for s in source if s not in covered and _module_name(s)]
        missing.sort(key=lambda p: (-ev.workdir.get(p, 0), p))
        if missing:
            lines.append(
                f"No test file is named after {len(missing)} source module(s) of the "
                f"workdir, biggest first: {_short(missing, 6)}."
            )
        return lines

    def chain_line(self, pattern: str, hits: list[tuple[str, int, str]]) -> str:
        """Where the functions named like the objective's word are defined and called."""
        defs, calls = chain(pattern, hits, self.ev)
        if not defs and not calls:
            return ""
        keys = [repr(k) for k in call_keys(pattern)]
        key = " or ".join([", ".join(keys[:-1]), keys[-1]] if len(keys) > 1 else keys)
        shown = f"{self.ev.count(pattern)} of {self.where} name a function holding {key}"
        if not defs:
            return f"Call chain: {shown}. Called at {_short(calls, 8)}; no definition among them."
        if not calls:
            return f"Call chain: {shown}. Defined at {_short(defs, 8)}; no call among them."
        return f"Call chain: {shown}. Defined at {_short(defs, 8)}; called at {_short(calls, 8)}."

    def word_line(self, pattern: str, hits: list[tuple[str, int, str]]) -> str:
        """What a grep for `pattern` (the terms actually searched) found, with real totals,
        and the line that says most: one of the file holding most and rarest of the terms
        (`Evidence.centrality`), holding most of them."""
        p, n, t = self._best_hits(pattern, hits)[0]
        counted = f"{self.ev.count(pattern)} of {self.where} match {shown(pattern)}"
        return f"{counted}, e.g. {p}:{n}: {clip(t, 100)}"

    def _best_hits(
        self, pattern: str, hits: list[tuple[str, int, str]]
    ) -> list[tuple[str, int, str]]:
        terms = pattern_terms(pattern)
        central = self.ev.centrality(terms)
        # a rare word (a name from the code) says more than a common one
        holders = Counter(t for t in terms for p in {h[0] for h in hits if holds(t, h[2].lower())})

        def key(hit: tuple[str, int, str]) -> tuple:
            low = hit[2].lower()
            held = -sum(1 / holders[t] for t in terms if holds(t, low))
            imports = bool(_IMPORT_RE.match(low))  # `from x import BadRequest` says little
            tests = _is_test(hit[0])  # a test repeats the words of the code it tests
            return (tests, -central.get(hit[0], 0.0), imports, held, hit[0], hit[1])

        return sorted(hits, key=key)

    def questions(self, objective: str) -> list[str]:
        if self.phase == "planning" and self.ev.read:
            read = " or ".join(self.ev.read)
            return [f"Which of {read} should the plan start from, and why?"]
        if (
            self.phase == "exploration"
            and not self.tests
            and self.ev.code()
            and self.workdir_tested
        ):
            verb = "are" if len(self.scope) > 1 else "is"  # several files, or one folder
            return [f"How {verb} {self.where} tested? No related test file was listed."]
        return []


def _recommendations(
    brief: Brief, scope: Sequence[str], objective: str, ev: Evidence, facts: _Facts
) -> list[str]:
    """Phase-specific next steps from the evidence; never "test the tests"."""
    where = facts.where
    scope_words = set().union(*(_path_words(s) for s in scope)) if scope else set()
    goal = stems(f"{brief.objective} {brief.title}") - scope_words
    # definitions named like the objective (in files read, or grep hits): places to act
    found = [(p, n) for p, lines in ev.read.items() for n in describe(lines, p)[1]]
    found += [
        (p, name)
        for k, hits in ev.greps.items()
        if k not in (_TODO_GREP, _STRING_GREP)
        for p, _, t in hits
        if not is_prose(p) and (name := def_name(t))
    ]
    matching = [
        (p, n)
        for p, n in dict.fromkeys(found)
        if goal & {stem(w) for w in _WORD_RE.findall(n.lower().replace("_", " "))}
    ]
    top = list(ev.read)[:2]
    recs: list[str] = []
    if brief.phase == "planning" and top:
        recs += [f"Step {i}: understand {p} before changing it." for i, p in enumerate(top, 1)]
        recs += [
            f"Step {len(top) + 1}: decide how the objective changes {n} in {p}."
            for p, n in matching[:1]
        ]
    elif brief.phase == "implementation":
        recs += [f"Likely change point: {n} in {p}." for p, n in matching[:3]]
    elif brief.phase == "review":
        recs += [f"Decide on the note at {p}:{n} before release." for p, n, _ in facts.todo[:2]]
        if ev.is_test_area():
            gaps = [m for m in facts.coverage()[1:] if m.startswith("No test file is named")]
            recs += [
                f"Check which tests exercise {g.split('biggest first: ')[-1].rstrip('.')}: "
                "no test file is named after them."
                for g in gaps
            ]
        elif facts.workdir_tested:  # a package that ships no tests: nothing to check against
            recs += [
                f"Check that {n} in {p} is covered by a test."
                for p, n in matching[:3]
                if not _is_test(p)
            ]
            if facts.tests and facts.untested:
                recs.append(
                    f"Look for edge cases in {facts.untested[0]}: the biggest module of "
                    f"{where} that no test file is named after."
                )
    if top:
        verb = _PHASES.get(brief.phase, _DEFAULT_PHASE)[0].lower()
        # the objective is not quoted again: each finding's file says it, and a search
        # for its words should find what was found, not the question repeated
        recs.append(f"To {verb} {where}, start from {' and '.join(top)}.")
    return recs


def _scope_name(scope: Sequence[str]) -> str:
    """How the findings name a scope: its paths, a long one by its first three
    (`gson/src/main/java/com/google/gson/{FieldAttributes.java, Gson.java, GsonBuilder.java
    and 7 more}` when the files share a folder)."""
    if len(scope) <= 4:
        return ", ".join(scope)
    folders = {str(PurePosixPath(p).parent) for p in scope}
    if len(folders) == 1 and (folder := folders.pop()) != ".":
        names = ", ".join(PurePosixPath(p).name for p in scope[:3])
        return f"{folder}/{{{names} and {len(scope) - 3} more}}"
    return f"{', '.join(scope[:3])} and {len(scope) - 3} more"
