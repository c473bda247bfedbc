"""What a `ResearchPolicy` subagent found: the tool results of one conversation, parsed.

This is the evidence side of the offline research policy (`orchestrator.offline.policy`
decides which tool to call next; `orchestrator.offline.wording` words the findings; this
module reads what the tools returned):

* `Evidence.from_history` parses the results of one conversation's `list_files`,
  `read_file` and `grep_files` calls (`parse_listing`, `parse_read`, `parse_grep`),
  keeping what lies in the subtask's scope (and the whole workdir listing apart);
* `Evidence.centrality` ranks the files by the objective's words on their grep hits;
  `related_tests` and `untested_modules` read that evidence, `chain` the definitions
  and call sites in the code of its hit lines (a TODO that really is a comment and the
  code of a line without its comment are `orchestrator.offline.comments`; which name a
  line of code defines is `orchestrator.offline.defs`; what a file says about itself,
  `describe`, is `orchestrator.offline.filetext`);
* `answered_by` tells which findings answer a plan's key question;

It also holds the small vocabulary both modules share: the `Brief` parsed from the
prompt, the `Call` records of the tool history, path predicates and the phase table
(content words and stems are `orchestrator.offline.terms`). Dependencies run one way:
`policy` and `wording` import from this module, never the reverse.

Invariant: everything here is a pure function of the brief and the tool results (no
clock, no randomness, no file access), and every finding is taken from that evidence:
real paths, lines and names that the tools returned, nothing known in advance.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from orchestrator.offline.comments import (
    _STRING_GREP,
    _TODO_GREP,
    code_part,
    open_quotes,
    real_todo,
)
from orchestrator.offline.defs import def_name
from orchestrator.offline.terms import _WORD_RE, bare, holds, is_whole, stem, words

_LISTING_RE = re.compile(r"^(.+) \((\d+) bytes\)$")
_NUMBERED_RE = re.compile(r"^(\d+): ?(.*)$")
_TOTAL_RE = re.compile(r"^# (\d+) text files under", re.MULTILINE)
_MORE_LINES_RE = re.compile(r"^# \.\.\. (\d+) more lines", re.MULTILINE)
_GREP_RE = re.compile(r"^(.+?):(\d+): (.*)$")
_CODE_SUFFIXES = frozenset(
    ".py .js .mjs .cjs .jsx .ts .tsx .go .rs .java .kt .kts .scala .swift .c .cc .cpp .cs .m"
    " .php .rb .lua .ex .exs .erl .hs .ml .dart .clj .zig".split()
)
_PHASES = {
    # phase: (title verb, what to do, what to report, files it favours)
    "exploration": (
        "Survey",
        "map the files, entry points and main definitions of",
        "what each main file does and how the parts connect",
        {"readme", "docs", "doc"},
    ),
    "planning": (
        "Plan",
        "propose concrete, ordered steps for",
        "the steps, the files each step touches and the open decisions",
        {"docs", "design", "readme"},
    ),
    "implementation": (
        "Identify changes in",
        "identify the exact changes needed in",
        "the functions to change or add and their call sites",
        {"src", "lib"},
    ),
    "review": (
        "Review",
        "check risks, edge cases and test coverage of",
        "untested code, TODO/FIXME notes and risky spots",
        {"test", "tests", "spec", "ci"},
    ),
}
_DEFAULT_PHASE = ("Study", "study", "what matters for the objective", set())


@dataclass
class Brief:
    """What the prompt asks for, parsed from the human messages."""

    objective: str = ""
    phase: str = "exploration"
    max_subtasks: int = 4
    agents: list[str] = field(default_factory=list)
    subtask: str = ""
    title: str = ""
    description: str = ""
    scope: list[str] = field(default_factory=list)
    max_steps: int | None = None
    phase_number: int | None = None
    wave: int | None = None
    covered: list[str] = field(default_factory=list)


@dataclass
class Call:
    """One earlier tool call of this conversation and its result (None if unanswered)."""

    name: str
    args: dict[str, Any]
    result: str | None = None


# -- words, paths and tool results ------------------------------------------------------


def parse_listing(text: str) -> list[tuple[str, int]]:
    """`(path, size)` pairs from a `list_files` result."""
    out = []
    for line in text.splitlines():
        m = _LISTING_RE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), int(m.group(2))))
    return out


def parse_folders(text: str) -> dict[str, int]:
    """Text files per folder from a capped `list_files` result's folder line (else {})."""
    from orchestrator.tools.workdir import FOLDERS_PREFIX

    line = next((ln for ln in text.splitlines() if ln.startswith(FOLDERS_PREFIX)), "")
    return {
        m.group(1): int(m.group(2))
        for m in re.finditer(r"(?:^|, )([^,]+?)/ (\d+)", line[len(FOLDERS_PREFIX) :])
    }


def parse_numbered(text: str) -> list[tuple[int, str]]:
    """`(line number, line)` pairs of a `read_file` result."""
    return [
        (int(m.group(1)), m.group(2)) for ln in text.splitlines() if (m := _NUMBERED_RE.match(ln))
    ]


def parse_read(text: str) -> list[str]:
    """The file lines of a `read_file` result, without their numbers."""
    return [line for _, line in parse_numbered(text)]


def listed_total(listing: str) -> int:
    """The text files a `list_files` result says the folder holds (0 when it does not)."""
    match = _TOTAL_RE.search(listing)
    return int(match.group(1)) if match else 0


def grep_counts(text: str) -> dict[str, int]:
    """Matching lines per file of a `grep_files` result: the lines shown, or what a capped
    search counted for its busiest files (`# most matches: a.py (41), ...`), the larger."""
    counts = Counter(path for path, _, _ in parse_grep(text))
    if busiest := _BUSIEST_RE.search(text):
        for path, n in _COUNT_RE.findall(busiest.group(1)):
            counts[path] = max(counts[path], int(n))
    return dict(counts)


def parse_grep(text: str) -> list[tuple[str, int, str]]:
    """`(path, line, text)` hits from a `grep_files` result."""
    return [
        (m.group(1), int(m.group(2)), m.group(3))
        for ln in text.splitlines()
        if not ln.startswith("#") and (m := _GREP_RE.match(ln))
    ]


def _in_scope(path: str, scope: Sequence[str]) -> bool:
    if not scope or "." in scope:
        return True
    return any(path == s.rstrip("/") or path.startswith(s.rstrip("/") + "/") for s in scope)


def _is_test(path: str) -> bool:
    words_ = _WORD_RE.findall(path.lower())
    return "test" in words_ or "tests" in words_ or PurePosixPath(path).name.startswith("test_")


_ROOT_RE = re.compile(r"# \d+ text files under '\.' \(workdir '(.+?)'\)")
_CALL_SUFFIX = r"\w*\s*\("
_CALL_NAME_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)\s*\(")
#: A call in Python: no space before the parenthesis (prose in a string that was not read,
#: "an older version of Requests (<2.32.0)", has one).
_PY_CALL_NAME_RE = re.compile(r"([A-Za-z_][A-Za-z0-9_.]*)\(")


def chain(
    pattern: str, hits: Sequence[tuple[str, int, str]], ev: Evidence | None = None
) -> tuple[list[str], list[str]]:
    """Definitions and call sites among the hits of a `call_pattern` grep, as `file:line name`.

    Only the code of a line counts (`code_part`): a name in a comment, a JSDoc example or
    a docstring (as far as `ev`, the evidence the hits came with, tells) is neither. A hit
    is a definition when its code defines the name (`def`, `class`, ...), else a call
    site; the name is the first called name on the line that the pattern matches.
    """
    regex = re.compile(pattern, re.IGNORECASE)
    keys = call_keys(pattern)

    def holds(name: str) -> bool:
        return bool(regex.search(name + "(")) and any(_starts_a_part(name, k) for k in keys)

    defs, calls = [], []
    for p, n, t in hits:
        if PurePosixPath(p).suffix not in _CODE_SUFFIXES:
            continue  # prose mentioning a name is neither a definition nor a call
        code = ev.code_of(p, n, t) if ev is not None else code_part(p, t)
        defined = def_name(code)
        if defined and holds(defined):
            defs.append(f"{p}:{n} {defined}")
            continue
        called = _PY_CALL_NAME_RE if p.endswith((".py", ".pyi")) else _CALL_NAME_RE
        name = next((c for c in called.findall(code) if holds(c)), "")
        if name:
            calls.append(f"{p}:{n} {name}")
    return defs, calls


def call_keys(pattern: str) -> list[str]:
    """The words a `call_pattern` grep looks for in names (`rout` of `\\b\\w*rout\\w*\\s*\\(`,
    `rout`, `redirect` of `\\b\\w*(?:rout|redirect)\\w*\\s*\\(`)."""
    held = pattern[pattern.index("w*") + 2 : -len(_CALL_SUFFIX)]
    if held.startswith("(?:") and held.endswith(")"):
        keys = held[3:-1].split("|")  # neither a stem nor a `whole` word holds a "|"
    else:
        keys = [held]
    return [bare(k) if is_whole(k) else k.replace("\\", "") for k in keys]


def _starts_a_part(name: str, key: str) -> bool:
    """Does `key` start one of the words of `name` (`add_route`, `getRouter`, `XMLRoute`,
    `ROUTES`), not the middle of one (`iscoroutinefunction` holds no route)?"""
    low, key = name.lower(), key.lower()
    at = low.find(key)
    while at != -1:
        before = name[at - 1] if at else ""
        if not before.isalpha():
            return True
        if name[at].isupper() and (before.islower() or name[at + 1 : at + 2].islower()):
            return True
        at = low.find(key, at + 1)
    return False


_QUESTION_WORDS = frozenset("which matter matters phase report should objective".split())


def answered_by(question: str, findings: dict[str, dict]) -> list[str]:
    """The findings (their `path`, else their key) that answer a plan's key question.

    A finding answers it when one of its key discoveries, on its own, answers it: the
    discovery cites a file the finding examined (by its path) and holds at least two
    thirds of the question's content words (stemmed; generic words such as "which", the
    phase and the folder the question names left out; a search pattern it quotes, such as
    `match 'location|header'`, does not count). When the question names a folder of the
    cited files (`Which files in lib/router matter ...`), the file cited lies in it; when
    it names a phase (one of the default four, or any `the P phase`), the finding is of
    that phase. A question left with no content word (`Which files in docs matter for the
    objective?` of a survey) is never answered this way: a file of the folder is no answer
    to why it matters.
    """
    named = [p for p in _PHASES if re.search(rf"\b{p}\b", question.lower())]
    named += re.findall(r"\bthe ([\w-]+) phase\b", question.lower())  # a workflow's own
    cited = {
        key: [str(x.get("path", "")) for x in f.get("files") or [] if isinstance(x, dict)]
        for key, f in findings.items()
    }
    paths = {p for ps in cited.values() for p in ps if p}
    # the folders the question names: path-like words that cited files lie under
    tokens = set(re.findall(r"[\w.-]+(?:/[\w.-]+)*", question))
    folders = {t for t in tokens if any(p.startswith(t.rstrip("/") + "/") for p in paths)}
    wanted = {stem(w) for w in words(question)} - {stem(w) for w in _QUESTION_WORDS}
    wanted -= {stem(p) for p in _PHASES}
    wanted -= {stem(w) for f in folders for w in _WORD_RE.findall(f.lower())}
    if not wanted:
        return []
    out = []
    for key, f in findings.items():
        if named and f.get("phase") not in named:
            continue
        if any(
            _answers(str(d), cited[key], folders, wanted) for d in f.get("key_discoveries") or []
        ):
            out.append(str(f.get("path") or key))
    return out


#: A search pattern quoted in a discovery (`match 'location|header'`): the words searched,
#: not words found.
_QUOTED_SEARCH_RE = re.compile(r"match(?:es|ing)? '[^']*'")


def _answers(discovery: str, files: Sequence[str], folders: set[str], wanted: set[str]) -> bool:
    """Does one key discovery answer a question (see `answered_by`)?"""
    shown = [p for p in files if p and p in discovery]
    if folders:
        shown = [p for p in shown if any(p.startswith(d.rstrip("/") + "/") for d in folders)]
    if not shown:
        return False
    text = _QUOTED_SEARCH_RE.sub(" ", discovery).lower()
    have = {stem(w) for w in _WORD_RE.findall(text)}
    return 3 * len(wanted & have) >= 2 * len(wanted)


# -- tests and TODO notes (subagent) -------------------------------------------------------


_CAMEL_TEST_RE = re.compile(r"^(?:Test([A-Z]\w*)|([A-Z]\w*?)(?:Tests?|Spec|IT))$")


def _tested_name(path: str) -> str:
    """What a test file is named after: `test_cli_entries.py` -> `cli_entries`, and
    Java/Kotlin/C#'s `FieldAttributesTest.java`, `TestParser.kt` -> `fieldattributes`,
    `parser`."""
    stem_ = PurePosixPath(path).stem
    if camel := _CAMEL_TEST_RE.match(stem_):
        return (camel.group(1) or camel.group(2)).lower()
    name = stem_.lower()
    for pre in ("test_", "tests_"):
        name = name[len(pre) :] if name.startswith(pre) else name
    for suf in ("_test", "_tests", ".test", ".spec"):
        name = name[: -len(suf)] if name.endswith(suf) else name
    return name


def _module_name(path: str) -> str:
    """A source module's plain name (`_cli_entries.py` -> `cli_entries`; `""` for dunders)."""
    name = PurePosixPath(path).stem.lower()
    return "" if name.startswith("__") else name.lstrip("_")


def _names_module(test: str, module: str) -> bool:
    name = _tested_name(test)
    return bool(module) and (name == module or name.startswith(module + "_"))


def related_tests(scope: Sequence[str], workdir: Sequence[str]) -> list[str]:
    """Test files of the whole workdir listing that belong to `scope`.

    A test belongs to it when it lies inside the scope (`<area>/tests/`), under a folder
    named like the scope (`tests/<area>/`), or is named after one of its modules
    (`test_<module>.py`, `<module>_test.py`) and does not lie under a folder named like
    another top-level folder (`tests/<other area>/test_cli.py` belongs to that area).
    """
    names = {PurePosixPath(s).name.lower() for s in scope if s not in (".", "")}
    modules = {
        _module_name(p)
        for p in workdir
        if _in_scope(p, scope) and PurePosixPath(p).suffix in _CODE_SUFFIXES and not _is_test(p)
    } - {""}
    tops = {p.split("/")[0].lower() for p in workdir if "/" in p}
    others = tops - {s.split("/")[0].lower() for s in scope} - {"test", "tests", "src"}
    out = []
    for t in (p for p in workdir if _is_test(p)):
        dirs = {d.lower() for d in PurePosixPath(t).parts[:-1]}
        if _in_scope(t, scope) or names & dirs:
            out.append(t)
        elif not dirs & others and any(_names_module(t, m) for m in modules):
            out.append(t)
    return out


def untested_modules(code: Sequence[str], tests: Sequence[str]) -> list[str]:
    """Source files (not `__init__`-like) that no test file is named after.

    Only files named as tests (`test_x.py`, `x_test.py`, ...) count, as in `_Facts.coverage`:
    a helper such as `tests/compat.py` is not a test named after `compat.py`.
    """
    tests = [t for t in tests if _tested_name(t) != PurePosixPath(t).stem.lower()]
    return [
        p
        for p in code
        if _module_name(p) and not any(_names_module(t, _module_name(p)) for t in tests)
    ]


_GREP_TOTAL_RE = re.compile(r"^# (\d+) lines in (\d+) file\(s\) match ")
_BUSIEST_RE = re.compile(r"^# most matches: (.*)$", re.MULTILINE)
_COUNT_RE = re.compile(r"(\S+) \((\d+)\)(?:, |$)")


def _grep_totals(
    text: str,
    all_hits: Sequence[tuple[str, int, str]],
    hits: Sequence[tuple[str, int, str]],
    whole: bool,
) -> tuple[int, int, bool]:
    """`(lines, files, capped)` for the hits kept; `capped` means "at least".

    When the tool showed every hit, the kept hits are counted. When it capped its output,
    its own totals are used if no hit was dropped as out of scope and the search ran
    inside the scope (`whole`); otherwise only the kept hits
    are known, as a lower bound.
    """
    files = len({h[0] for h in hits})
    m = next((m for ln in text.splitlines() if (m := _GREP_TOTAL_RE.match(ln))), None)
    if m is None:
        return len(hits), files, False
    if whole and len(hits) == len(all_hits):
        return int(m.group(1)), int(m.group(2)), False
    return len(hits), files, True


@dataclass
class Evidence:
    """What a subagent's tool calls returned, parsed (`workdir`: every file listed)."""

    listed: dict[str, int] = field(default_factory=dict)
    read: dict[str, list[str]] = field(default_factory=dict)
    greps: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    workdir: dict[str, int] = field(default_factory=dict)
    #: pattern -> (matching lines, files, capped): real totals when the tool said them
    grep_totals: dict[str, tuple[int, int, bool]] = field(default_factory=dict)
    #: pattern -> the hits the tool showed, in scope or not
    grep_shown: dict[str, int] = field(default_factory=dict)
    #: file -> matching lines a capped search counted there (its "# most matches" line)
    matches: dict[str, int] = field(default_factory=dict)
    #: file -> lines actually read (`read` pads a later window's gap with empty lines, so
    #: that its index stays the line number)
    lines_read: dict[str, int] = field(default_factory=dict)
    #: file -> its line count when a read stopped before its end
    length: dict[str, int] = field(default_factory=dict)
    #: file -> `(first, last)` line of each read of it
    spans: dict[str, list[tuple[int, int]]] = field(default_factory=dict)
    #: Python file -> the triple quote open at the start of each line read (`code_of`)
    _quotes: dict[str, list[str | None]] = field(default_factory=dict, repr=False)
    root: str = ""
    """The workdir's own name, from a listing of `.` (`# N text files under '.' (workdir
    'name')`)."""

    @classmethod
    def from_history(cls, history: Sequence[Call], scope: Sequence[str]) -> Evidence:
        ev = cls()
        for call in history:
            res = call.result or ""
            if res.startswith("Error:"):
                ev.errors.append(f"{call.name}({call.args.get('path', '')!s}): {res[7:]}")
            elif call.name == "list_files":
                if root := _ROOT_RE.match(res):
                    ev.root = root.group(1)
                ev.workdir.update(parse_listing(res))
                ev.listed.update((p, n) for p, n in parse_listing(res) if _in_scope(p, scope))
            elif call.name == "read_file" and call.result is not None:
                ev._add_read(str(call.args.get("path", "")), res)
            elif call.name == "grep_files" and call.result is not None:
                all_hits = parse_grep(res)
                hits = [h for h in all_hits if _in_scope(h[0], scope)]
                pattern = str(call.args.get("pattern", ""))
                ev.greps[pattern] = hits
                searched = str(call.args.get("path", ".")).split(",")
                whole = all(_in_scope(p.strip() or ".", scope) for p in searched)
                ev.grep_totals[pattern] = _grep_totals(res, all_hits, hits, whole)
                ev.grep_shown[pattern] = len(all_hits)
                if busiest := _BUSIEST_RE.search(res):  # a capped search's per-file counts
                    for path, n in _COUNT_RE.findall(busiest.group(1)):
                        ev.matches[path] = ev.matches.get(path, 0) + int(n)
        return ev

    def _add_read(self, path: str, result: str) -> None:
        """A `read_file` result, from line 1 or a window further down (`start_line`)."""
        numbered = parse_numbered(result)
        if more := _MORE_LINES_RE.search(result):
            last = numbered[-1][0] if numbered else 0
            self.length[path] = last + int(more.group(1))
        lines = self.read.setdefault(path, [])
        for number, text in numbered:
            if number > len(lines):
                lines.extend([""] * (number - 1 - len(lines)))
                lines.append(text)
        self.lines_read[path] = self.lines_read.get(path, 0) + len(numbered)
        if numbered:
            self.spans.setdefault(path, []).append((numbered[0][0], numbered[-1][0]))

    def read_breaks(self, path: str) -> set[int]:
        """The lines of `path` where a read starts after lines not read (a window)."""
        breaks, covered = set(), 0
        for a, b in sorted(self.spans.get(path, ())):
            if a > covered + 1:
                breaks.add(a)
            covered = max(covered, b)
        return breaks

    def span_start(self, path: str, line: int) -> int:
        """The first line of the read of `path` that holds `line` (1 when unknown)."""
        return next((a for a, b in self.spans.get(path, ()) if a <= line <= b), 1)

    def _quotes_before(self, path: str, line: int) -> list[str] | None:
        """The file's lines before `line` that may hold triple quotes (None: unknown)."""
        read = self.read.get(path)
        if read is not None and len(read) >= line - 1:
            return read[: line - 1]
        if _STRING_GREP in self.greps:
            return [t for p, n, t in self.greps[_STRING_GREP] if p == path and n < line]
        return None

    def code_of(self, path: str, line: int, text: str) -> str:
        """`code_part` of a hit's `text`, at `line` of `path`: in a Python file read up to
        there, or whose triple quotes were searched, a line inside a triple-quoted string
        is no code (the states of a file read are worked out once per file)."""
        if not path.endswith((".py", ".pyi")):
            return code_part(path, text)
        read = self.read.get(path)
        if read is not None and len(read) >= line:
            if path not in self._quotes:
                self._quotes[path] = open_quotes(read)
            return code_part(path, text, inside=self._quotes[path][line - 1] is not None)
        before = self._quotes_before(path, line)
        if before is None:
            return code_part(path, text)
        return code_part(path, text, inside=open_quotes([*before, ""])[-1] is not None)

    def todo_candidates(self) -> list[tuple[str, int, str]]:
        """Comment-anchored TODO grep hits (before the string-literal check)."""
        return self.greps.get(_TODO_GREP, [])

    def string_check_files(self) -> list[str]:
        """The `.py` files holding a TODO hit, or a hit of a search for definitions and
        call sites (`chain`), that may sit inside a multi-line string, where nothing tells
        yet (their triple quotes are searched, file by file): a name in a message's text
        is no call."""
        calls = [h for k, v in self.greps.items() if k.endswith(_CALL_SUFFIX) for h in v]
        return sorted(
            {
                p
                for p, n, _ in [*self.todo_candidates(), *calls]
                if p.endswith(".py") and self._quotes_before(p, n) is None
            }
        )

    def todos(self) -> list[tuple[str, int, str]]:
        """The real TODO/FIXME/XXX comments (see `real_todo`)."""
        return [
            h for h in self.todo_candidates() if real_todo(h[0], h[2], self._quotes_before(*h[:2]))
        ]

    def count(self, pattern: str) -> str:
        """`N line(s) in M file(s)` for a grep, or `at least N line(s) ...` when capped."""
        lines, files, capped = self.grep_totals.get(pattern, (0, 0, False))
        if capped and not lines:  # the shown hits all lay outside the scope
            return f"none of the {self.grep_shown.get(pattern, 0)} line(s) shown (capped)"
        least = "at least " if capped else ""
        cap = " (capped)" if capped else ""
        return f"{least}{lines} line(s) in {least}{files} file(s){cap}"

    def centrality(self, terms: Sequence[str]) -> dict[str, float]:
        """How central each file is to the objective, from the grep hits.

        A file scores for each of `terms` found on its hit lines, the more the fewer files
        hold that term (a word in every file tells little), plus a tie-breaking trifle per
        matching line shown: a file holding both of "gitignor" and "hidden" comes before one
        holding many lines of either. A search cut at its cap showed a few lines of each
        file, which under-tell the file holding most of them: its share of the matching
        lines the search counted is added (click's core.py, 349 of 695, was read after
        termui.py, whose few lines shown held the rarest word).
        """
        hits = [h for k, found in self.greps.items() if k != _TODO_GREP for h in found]
        found_in: dict[str, set[str]] = {}
        for path, _, text in hits:
            low = text.lower()
            found_in.setdefault(path, set()).update(t for t in terms if holds(t, low))
        holders = Counter(t for found in found_in.values() for t in found)
        score: dict[str, float] = {}
        for path, _, _ in hits:
            score[path] = score.get(path, 0.0) + 1e-6
        counted = sum(self.matches.values())
        for path, n in self.matches.items():
            if path in score:  # a capped search's count: its share of the lines it counted
                score[path] = max(score[path], 1e-6 * n) + n / counted
        for path, found in found_in.items():
            score[path] += sum(1 / holders[t] for t in found)
        return score

    def code(self) -> list[str]:
        """Listed source files of the scope (tests excluded), in listing order."""
        return [
            p for p in self.listed if PurePosixPath(p).suffix in _CODE_SUFFIXES and not _is_test(p)
        ]

    def is_test_area(self) -> bool:
        """Every code file of the scope is a test."""
        code = [p for p in self.listed if PurePosixPath(p).suffix in _CODE_SUFFIXES]
        return bool(code) and all(_is_test(p) for p in code)
