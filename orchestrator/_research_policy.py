"""`ResearchPolicy`: the offline model's default behaviour, speaking tether's protocol.

The policy is a pure function of the conversation and the bound tools (no clock, no
randomness, no network), so a run is reproducible. It never knows answers in advance: all
it says is taken from the prompt and from what the workdir tools returned.

**Input it parses.** Every human message is scanned for `Key: value` lines (keys are
case-insensitive, at the start of a line, first occurrence per message; a later message
overrides an earlier one)::

    Objective: <text>            what the whole task is about (fallback: first line of the
                                 last human message)
    Phase: <name>                exploration | planning | implementation | review | other
    Max subtasks: <N>            lead only; default 4
    Agents: <a>, <b>             lead only; workflow agent names (default 'researcher')
    Subtask: <id>                subagent only
    Title: <text>                subagent only
    Description: <text>          subagent only
    Scope: <path>, <path>        subagent only; paths under the workdir (default '.')
    Max steps: <N>               optional; the policy submits by step N at the latest
    Phase number: <k> of <n>     optional; which window of packages a crowded plan takes

Other text (earlier findings, a snapshot) is ignored on purpose: the plan depends only on
these fields and the listing, so a lead resumed in a fresh context plans the same subtasks.

**What it does**, by the tools bound:

* `PhasePlan` bound (lead): call `list_files(".")` first if that tool is bound and was not
  called yet in this conversation; then group the listed files into areas (top-level
  folders, descending through single-folder wrappers like `src/pkg`, splitting the largest
  area while there is room; loose top-level files form one area), rank areas by the
  objective's content words in their paths (filler like "how", "fit", "each" is ignored),
  then by size in source files (core packages first), then by a phase hint (docs when
  exploring, tests when reviewing), and plan one subtask per area, up to the maximum.
  When more source packages than free slots remain, each phase (by `Phase number`, else
  its place in the default order) takes the next window of them, so that every package is
  covered by some phase.
* `SubmitFindings` bound (subagent): one tool call per step: `list_files(".")` (the whole
  workdir: tests of a package often live in `tests/<pkg>/` or `tests/test_<module>.py`),
  the scope itself only if that listing missed it, `read_file` on the 3 most relevant
  files (the order depends on the phase, see `_rank_files`), `grep_files` for one key word
  of the task and for comment-anchored TODO/FIXME/XXX markers, plus one grep for triple
  quotes when a `.py` hit may sit inside a multi-line string (see `real_todo`); then
  `SubmitFindings` built from those results (real paths, first docstring/heading lines,
  definitions, grep hits, related tests), worded per phase so phases do not repeat each
  other (see `build_findings`). It submits early when `Max steps` is reached, when only
  `SubmitFindings` is offered (`tool_choice`), or when a human message arrives after the
  work started (an orchestrator's "finish now").
* neither (plain chat, e.g. a summary request): an extractive reply to the last human
  message.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from orchestrator.protocol import FINDINGS_TOOL, PLAN_TOOL, PhasePlan, SubmitFindings

_KEYS = {
    "objective": "objective",
    "phase": "phase",
    "max subtasks": "max_subtasks",
    "agents": "agents",
    "subtask": "subtask",
    "subtask id": "subtask",
    "title": "title",
    "description": "description",
    "scope": "scope",
    "max steps": "max_steps",
    "phase number": "phase_number",
}
_FIELD_RE = re.compile(
    r"^[ \t>*_-]*("
    + "|".join(sorted(map(re.escape, _KEYS), key=len, reverse=True))
    + r")[*_]*[ \t]*:[ \t]*(.*?)[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)
_LISTING_RE = re.compile(r"^(.+) \((\d+) bytes\)$")
_NUMBERED_RE = re.compile(r"^(\d+): ?(.*)$")
_GREP_RE = re.compile(r"^(.+?):(\d+): (.*)$")
_DEF_RE = re.compile(
    r"^\s*(?:export\s+)?(?:pub\s+)?(?:async\s+)?(class|def|function|func|fn|interface|struct)\s+"
    r"([A-Za-z_][A-Za-z0-9_]*)"
)
_WORD_RE = re.compile(r"[a-z0-9]+")
_STOPWORDS = frozenset(
    """a an and are as at be by can do does for from has have how in into is it its of on or
    the this that these those to was what when where which who why will with without all any
    each about should could would may might must not no yes our your their them they we you
    survey explore exploration map find check review plan planning implement implementation
    code project repo repository package module modules file files folder folders work task
    look make use using used write read describe explain understand main new add get set
    tether workdir top level
    fit fits fitting together overall whole part parts piece pieces thing things stuff also
    just like well one ones other others more most some such than then there here over
    give tell show identify change changes study""".split()
)
_PRIORITY_STEMS = ("readme", "__init__", "main", "__main__", "index", "cli", "app", "core")
_TEXT_SUFFIXES = tuple(
    ".py .md .rst .txt .toml .yaml .yml .json .js .ts .go .rs .java .c .h .cpp .rb .sh .cfg"
    " .ini".split()
)
_CODE_SUFFIXES = frozenset({".py", ".js", ".ts", ".go", ".rs", ".java", ".c", ".cpp", ".rb"})
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


@dataclass
class Call:
    """One earlier tool call of this conversation and its result (None if unanswered)."""

    name: str
    args: dict[str, Any]
    result: str | None = None


@dataclass
class Area:
    """A group of files the lead can hand to one subagent."""

    name: str
    scope: list[str]
    files: list[str]


def words(text: str) -> list[str]:
    """Lower-case content words of `text` (stop words and short words dropped), in order."""
    seen: dict[str, None] = {}
    for w in _WORD_RE.findall(text.lower()):
        if len(w) >= 3 and w not in _STOPWORDS and not w.isdigit():
            seen.setdefault(w, None)
    return list(seen)


def stem(word: str) -> str:
    """A crude suffix stripper so `invoices`, `invoice` and `taxed`, `tax` meet."""
    for suffix in ("ing", "ed", "es", "s", "e"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def stems(text: str) -> set[str]:
    """Stems of the content words of `text`."""
    return {stem(w) for w in words(text)}


def _int(value: str, default: int | None) -> int | None:
    m = re.search(r"\d+", value)
    return int(m.group()) if m else default


def parse_brief(messages: Sequence[BaseMessage]) -> Brief:
    """Read the `Key: value` lines of every human message (later messages win)."""
    brief = Brief()
    humans = [str(m.text) for m in messages if isinstance(m, HumanMessage)]
    for text in humans:
        found: dict[str, str] = {}
        for m in _FIELD_RE.finditer(text):
            found.setdefault(_KEYS[m.group(1).lower()], m.group(2).strip(" *_`"))
        for key, value in found.items():
            if key == "max_subtasks":
                brief.max_subtasks = max(1, _int(value, 4) or 4)
            elif key in ("max_steps", "phase_number"):
                setattr(brief, key, _int(value, None))
            elif key in ("agents", "scope"):
                items = [v.strip().strip("`'\"") for v in re.split(r"[,\s]+", value)]
                setattr(brief, key, [v for v in items if v])
            elif key == "phase":
                brief.phase = value.split()[0].strip("`'\".").lower() if value else brief.phase
            else:
                setattr(brief, key, value)
    if not brief.objective and humans:
        lines = [ln.strip() for ln in humans[-1].splitlines() if ln.strip()]
        brief.objective = lines[0][:300] if lines else ""
    return brief


def tool_history(messages: Sequence[BaseMessage]) -> list[Call]:
    """The tool calls made in this conversation, in order, with their results."""
    calls: dict[str, Call] = {}
    order: list[Call] = []
    for m in messages:
        if isinstance(m, AIMessage):
            for tc in m.tool_calls:
                call = Call(tc["name"], dict(tc.get("args") or {}))
                calls[str(tc.get("id"))] = call
                order.append(call)
        elif isinstance(m, ToolMessage) and m.tool_call_id in calls:
            calls[m.tool_call_id].result = str(m.text)
    return order


def parse_listing(text: str) -> list[tuple[str, int]]:
    """`(path, size)` pairs from a `list_files` result."""
    out = []
    for line in text.splitlines():
        m = _LISTING_RE.match(line)
        if m and not line.startswith("#"):
            out.append((m.group(1), int(m.group(2))))
    return out


def parse_read(text: str) -> list[str]:
    """The file lines of a `read_file` result, without their numbers."""
    return [m.group(2) for ln in text.splitlines() if (m := _NUMBERED_RE.match(ln))]


def parse_grep(text: str) -> list[tuple[str, int, str]]:
    """`(path, line, text)` hits from a `grep_files` result."""
    return [
        (m.group(1), int(m.group(2)), m.group(3))
        for ln in text.splitlines()
        if not ln.startswith("#") and (m := _GREP_RE.match(ln))
    ]


def _call(name: str, args: dict[str, Any], note: str = "") -> AIMessage:
    return AIMessage(content=note, tool_calls=[{"name": name, "args": args, "id": None}])


def _slug(text: str) -> str:
    return "-".join(_WORD_RE.findall(text.lower()))[:40] or "root"


def _path_words(path: str) -> set[str]:
    """Stems of every word of a path (no stop-word filtering: `core`, `cli` count)."""
    return {stem(w) for w in _WORD_RE.findall(path.lower())}


def _in_scope(path: str, scope: Sequence[str]) -> bool:
    if not scope or "." in scope:
        return True
    return any(path == s.rstrip("/") or path.startswith(s.rstrip("/") + "/") for s in scope)


def _looks_like_file(path: str) -> bool:
    return bool(PurePosixPath(path).suffix) and not path.endswith("/")


# -- areas (lead) ------------------------------------------------------------------------


def _dir_area(name: str, files: list[str]) -> Area:
    return Area(name, [name], files)


def group_areas(paths: Sequence[str], room: int) -> list[Area]:
    """Group listed files into areas; split the biggest area while `room` allows."""
    top: dict[str, list[str]] = {}
    loose: list[str] = []
    for p in paths:
        head, sep, _ = p.partition("/")
        (top.setdefault(head, []) if sep else loose).append(p)
    areas = [_dir_area(*_descend(name, files)) for name, files in sorted(top.items())]
    if loose:
        areas.append(Area("top-level files", _rank_files(loose, [])[:10], loose))
    while len(areas) < room:
        for area in sorted(areas, key=lambda a: (-len(a.files), a.name)):
            parts = _split(area)
            if parts and len(areas) - 1 + len(parts) <= room:
                areas = [a for a in areas if a is not area] + parts
                break
        else:
            break
    return areas


def _descend(name: str, files: list[str]) -> tuple[str, list[str]]:
    """Walk down wrappers like `src/` that hold a single folder and nothing else."""
    while True:
        rest = [f[len(name) + 1 :] for f in files]
        heads = {r.partition("/")[0] for r in rest}
        if len(heads) != 1 or any("/" not in r for r in rest):
            return name, files
        name = f"{name}/{heads.pop()}"


def _split(area: Area) -> list[Area]:
    if area.scope != [area.name]:
        return []
    subdirs: dict[str, list[str]] = {}
    direct: list[str] = []
    for f in area.files:
        rest = f[len(area.name) + 1 :]
        head, sep, _ = rest.partition("/")
        (subdirs.setdefault(f"{area.name}/{head}", []) if sep else direct).append(f)
    parts = [_dir_area(*_descend(n, fs)) for n, fs in sorted(subdirs.items())]
    if direct:
        parts.append(Area(f"{area.name} (top level)", _rank_files(direct, [])[:10], direct))
    return parts if len(parts) >= 2 else []


def _source_count(files: Sequence[str]) -> int:
    """Code files that are not tests: how much of the project an area holds."""
    return sum(1 for f in files if PurePosixPath(f).suffix in _CODE_SUFFIXES and not _is_test(f))


def _goal_score(area: Area, goal: set[str]) -> float:
    """How strongly the objective's content words name an area (0: not at all)."""
    hits = sum(1 for f in area.files if goal & _path_words(f))
    return 3.0 * len(goal & _path_words(area.name)) + min(5, hits)


def rank_areas(areas: Sequence[Area], brief: Brief) -> list[Area]:
    """Areas by relevance: objective words, then size in source files, then phase hint.

    Only content words count (filler like "how", "fit", "each" is a stop word). When no
    area matches them, the areas holding the most source files (the core packages) come
    first; the phase hint (docs when exploring, tests when reviewing) orders the rest.
    """
    goal = stems(brief.objective)
    hint = {stem(h) for h in _PHASES.get(brief.phase, _DEFAULT_PHASE)[3]}

    def key(area: Area) -> tuple:
        name_words = _path_words(area.name)
        affinity = 0.5 * bool(hint & name_words)
        # whole names only: README.md and docs/ count for "docs", test_docs.py does not
        affinity += 0.25 * any(
            {stem(part.lower()) for part in PurePosixPath(f).with_suffix("").parts} & hint
            for f in area.files
        )
        src = _source_count(area.files)
        return (
            -_goal_score(area, goal),
            -min(src, 1),
            -src,
            -affinity,
            -len(area.files),
            area.name,
        )

    return sorted(areas, key=key)


def _phase_position(brief: Brief) -> int:
    """0-based position of the phase: `Phase number: k of n`, else the default order."""
    if brief.phase_number:
        return brief.phase_number - 1
    order = list(_PHASES)
    return order.index(brief.phase) if brief.phase in order else 0


def choose_areas(areas: Sequence[Area], brief: Brief, limit: int) -> tuple[list, list]:
    """`(chosen, left_out)`: areas named by the objective, then source packages, then rest.

    When more source packages than free slots remain, each phase takes the next window of
    them (by phase position), so that over the phases every package is covered once.
    """
    ranked = rank_areas(areas, brief)
    if len(ranked) <= limit:
        return ranked, []
    goal = stems(brief.objective)
    named = [a for a in ranked if _goal_score(a, goal) > 0][:limit]
    sources = [a for a in ranked if a not in named and _source_count(a.files)]
    free = limit - len(named)
    if free and len(sources) > free:
        shift = (_phase_position(brief) * free) % len(sources)
        sources = sources[shift:] + sources[:shift]
    rest = [a for a in ranked if a not in named and a not in sources]
    picked = (named + sources + rest)[:limit]
    chosen = [a for a in ranked if a in picked]
    return chosen, [a for a in ranked if a not in picked]


# -- files (subagent) ----------------------------------------------------------------------


def _rank_files(
    paths: Sequence[str],
    goal: Sequence[str],
    phase: str = "exploration",
    sizes: dict[str, int] | None = None,
    untested: Sequence[str] = (),
) -> list[str]:
    """Files in reading order for `phase`; near-empty files (< 40 bytes) always last.

    Exploring reads README/`__init__` files first, then files named like the goal;
    planning prefers goal-named docs, then files exploring would not read first;
    implementation goal-named code, then the biggest
    modules; review test files, then modules no test is named after (`untested`), then
    the biggest ones. So the phases read (and report) different files of one area.
    """
    goal_set = {stem(g) for g in goal}
    sizes = sizes or {}
    # planning reads on where exploration (3 reads by default) stopped
    explored = (
        set(_rank_files(paths, goal, "exploration", sizes)[:3]) if phase == "planning" else set()
    )

    def key(path: str) -> tuple:
        p = PurePosixPath(path)
        name = p.stem.lower()
        prio = _PRIORITY_STEMS.index(name) if name in _PRIORITY_STEMS else len(_PRIORITY_STEMS)
        hits = -len(goal_set & _path_words(path))
        tiny = int(bool(sizes) and sizes.get(path, 1000) < 40)
        suffix = p.suffix.lower()
        rest = (int(suffix not in _TEXT_SUFFIXES), len(p.parts), path)
        code = int(suffix not in _CODE_SUFFIXES)
        big = -sizes.get(path, 0)
        if phase == "planning":
            doc = int(suffix not in (".md", ".rst", ".txt"))
            return (tiny, hits, doc, int(path in explored), prio, *rest)
        if phase == "implementation":
            return (tiny, hits, code, int(name.startswith("__")), big, *rest)
        if phase == "review":
            return (
                tiny,
                int(not _is_test(path)),
                hits,
                int(path not in untested),
                code,
                big,
                *rest,
            )
        return (tiny, min(prio, 2), hits, prio, *rest)

    return sorted(paths, key=key)


def _is_test(path: str) -> bool:
    words_ = _WORD_RE.findall(path.lower())
    return "test" in words_ or "tests" in words_ or PurePosixPath(path).name.startswith("test_")


_PROSE_RE = re.compile(r"^(\"\"\"|'\'\'|#+\s|#$|//|/\*|\*|--|;|<!--|[rbu]?\"\"\")")
_MARKER_RE = re.compile(r"^([rbu]?\"\"\"|'\'\'|#+|//+|/\*+|\*+|--|;+|<!--|\{#-?)\s*")


def describe(lines: Sequence[str], path: str = "") -> tuple[str, list[str]]:
    """The first prose line of a file and the names it defines.

    Prose is a docstring, a comment or a heading; in text files (`.md`, `.txt`, ...) any
    line counts. YAML front matter and shebang/encoding lines are skipped. Code before the
    first prose line means the file has no description (an empty string).
    """
    first = ""
    if lines and lines[0].strip() == "---":  # YAML front matter
        end = next((i for i, ln in enumerate(lines[1:], 1) if ln.strip() == "---"), 0)
        lines = lines[end + 1 :]
    prose = PurePosixPath(path).suffix.lower() not in _CODE_SUFFIXES
    for raw in lines:
        s = raw.strip()
        if not s or s.startswith(("#!", "# -*-", "#-*-", "{{", "{%")) or "coding:" in s[:30]:
            continue
        if not prose and not _PROSE_RE.match(s):
            break
        s = _MARKER_RE.sub("", s).strip().rstrip("\"'").strip()
        s = re.sub(r"\s*(-?#\}|\*/|-->)$", "", s)  # comment closers
        if len(s) >= 3:
            first = s[:160]
            break
        prose = prose or raw.strip() in ('"""', "'''", 'r"""')  # docstring text follows
    defs = [m.group(2) for ln in lines if (m := _DEF_RE.match(ln))]
    return first, list(dict.fromkeys(defs))


# -- tests and TODO notes (subagent) -------------------------------------------------------


def _tested_name(path: str) -> str:
    """What a test file is named after: `test_cli_entries.py` -> `cli_entries`."""
    name = PurePosixPath(path).stem.lower()
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
    """Source files (not `__init__`-like) that no test file is named after."""
    return [
        p
        for p in code
        if _module_name(p) and not any(_names_module(t, _module_name(p)) for t in tests)
    ]


_TODO_GREP = r"(#|//|<!--|/\*|^\s*\*|\{#)\s*(TODO|FIXME|XXX)\b"
_STRING_GREP = "\"{3}|'{3}"  # triple quotes, written so this line holds none
_TODO_START_RE = re.compile(r"(#|//|<!--|/\*|\{#)\s*(TODO|FIXME|XXX)\b")
_PROSE_SUFFIXES = (".md", ".rst", ".txt", ".html")


def _scan(line: str, quote: str | None) -> tuple[int | None, str | None]:
    """Where `line`'s comment starts outside string literals, and the open triple quote.

    A small lexer for Python-like code: `quote` is the triple quote open at the start of
    the line (None outside); single-quoted strings end on their line (backslash escapes
    honoured); `#`, `//`, `/*`, `<!--` and `{#` outside strings start a comment.
    """
    i = 0
    while i < len(line):
        if quote:
            j = line.find(quote, i)
            if j < 0:
                return None, quote
            i, quote = j + 3, None
        elif line.startswith(('"""', "'''"), i):
            quote, i = line[i : i + 3], i + 3
        elif line[i] in "\"'":
            j = i + 1
            while j < len(line) and line[j] != line[i]:
                j += 2 if line[j] == "\\" else 1
            i = j + 1
        elif line.startswith(("#", "//", "/*", "<!--", "{#"), i):
            return i, None
        else:
            i += 1
    return None, quote


def real_todo(path: str, text: str, before: Sequence[str] | None) -> bool:
    """Is this grep hit a real TODO/FIXME/XXX comment, not a word in a string or prose?

    The marker must open a comment (`# TODO`, `// FIXME`, `<!-- TODO`, `* TODO` in a
    block comment) outside any string literal; in prose files only `<!-- TODO` counts.
    `before` are the file's earlier lines holding triple quotes (for `.py` files: a hit
    inside a multi-line string is fixture text), or None when unknown.
    """
    suffix = PurePosixPath(path).suffix.lower()
    if suffix in _PROSE_SUFFIXES:
        return bool(re.search(r"<!--\s*(TODO|FIXME|XXX)\b", text))
    if suffix not in (".py", ".pyi") and re.match(r"\*+\s*(TODO|FIXME|XXX)\b", text.strip()):
        return True
    quote = None
    for line in before or () if suffix in (".py", ".pyi") else ():
        quote = _scan(line, quote)[1]
    start, _ = _scan(text.strip(), quote)
    return start is not None and bool(_TODO_START_RE.match(text.strip()[start:]))


@dataclass
class Evidence:
    """What a subagent's tool calls returned, parsed (`workdir`: every file listed)."""

    listed: dict[str, int] = field(default_factory=dict)
    read: dict[str, list[str]] = field(default_factory=dict)
    greps: dict[str, list[tuple[str, int, str]]] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    workdir: dict[str, int] = field(default_factory=dict)

    @classmethod
    def from_history(cls, history: Sequence[Call], scope: Sequence[str]) -> Evidence:
        ev = cls()
        for call in history:
            res = call.result or ""
            if res.startswith("Error:"):
                ev.errors.append(f"{call.name}({call.args.get('path', '')!s}): {res[7:]}")
            elif call.name == "list_files":
                ev.workdir.update(parse_listing(res))
                ev.listed.update((p, n) for p, n in parse_listing(res) if _in_scope(p, scope))
            elif call.name == "read_file" and call.result is not None:
                ev.read[str(call.args.get("path", ""))] = parse_read(res)
            elif call.name == "grep_files" and call.result is not None:
                hits = [h for h in parse_grep(res) if _in_scope(h[0], scope)]
                ev.greps[str(call.args.get("pattern", ""))] = hits
        return ev

    def _quotes_before(self, path: str, line: int) -> list[str] | None:
        """The file's lines before `line` that may hold triple quotes (None: unknown)."""
        read = self.read.get(path)
        if read is not None and len(read) >= line - 1:
            return read[: line - 1]
        if _STRING_GREP in self.greps:
            return [t for p, n, t in self.greps[_STRING_GREP] if p == path and n < line]
        return None

    def todo_candidates(self) -> list[tuple[str, int, str]]:
        """Comment-anchored TODO grep hits (before the string-literal check)."""
        return self.greps.get(_TODO_GREP, [])

    def needs_string_check(self) -> bool:
        """A `.py` hit could sit inside a multi-line string and nothing tells yet."""
        return any(
            p.endswith(".py") and self._quotes_before(p, n) is None
            for p, n, _ in self.todo_candidates()
        )

    def todos(self) -> list[tuple[str, int, str]]:
        """The real TODO/FIXME/XXX comments (see `real_todo`)."""
        return [
            h for h in self.todo_candidates() if real_todo(h[0], h[2], self._quotes_before(*h[:2]))
        ]

    def code(self) -> list[str]:
        """Listed source files of the scope (tests excluded), in listing order."""
        return [
            p for p in self.listed if PurePosixPath(p).suffix in _CODE_SUFFIXES and not _is_test(p)
        ]

    def is_test_area(self) -> bool:
        """Every code file of the scope is a test."""
        code = [p for p in self.listed if PurePosixPath(p).suffix in _CODE_SUFFIXES]
        return bool(code) and all(_is_test(p) for p in code)


class ResearchPolicy:
    """Deterministic lead/subagent behaviour for `OfflineChatModel` (see module docstring).

    Args:
        max_reads: files a subagent reads before submitting.
        read_lines: lines read per file.
        listing_entries: `max_entries` of the lead's and subagents' listings.
    """

    TODO_PATTERN = _TODO_GREP

    def __init__(self, max_reads: int = 3, read_lines: int = 120, listing_entries: int = 400):
        self.max_reads = max_reads
        self.read_lines = read_lines
        self.listing_entries = listing_entries

    def __call__(self, messages: Sequence[BaseMessage], tools: Sequence[dict]) -> AIMessage:
        names = {t.get("function", t).get("name", "") for t in tools}
        brief = parse_brief(messages)
        history = tool_history(messages)
        if PLAN_TOOL in names:
            return self.plan(brief, history, names)
        if FINDINGS_TOOL in names:
            # a human turn after the work started (e.g. "budget exhausted") means: finish now
            nudged = bool(history) and isinstance(messages[-1], HumanMessage)
            return self.investigate(brief, history, set() if nudged else names)
        return self.chat(messages)

    # -- lead ------------------------------------------------------------------------------

    def plan(self, brief: Brief, history: Sequence[Call], names: set[str]) -> AIMessage:
        """List the workdir once, then return the `PhasePlan` tool call."""
        listings = [c for c in history if c.name == "list_files" and c.result is not None]
        if "list_files" in names and not any(c.name == "list_files" for c in history):
            args = {"path": ".", "max_entries": self.listing_entries}
            return _call("list_files", args, "Listing the workdir to plan the subtasks.")
        files = [p for c in listings[-1:] for p, _ in parse_listing(c.result or "")]
        return _call(PLAN_TOOL, build_plan(brief, files).model_dump())

    # -- subagent --------------------------------------------------------------------------

    def investigate(self, brief: Brief, history: Sequence[Call], names: set[str]) -> AIMessage:
        """One file-tool call per step, then the `SubmitFindings` tool call."""
        scope = brief.scope or ["."]
        budget = None if brief.max_steps is None else max(0, brief.max_steps - 1)
        if budget is None or len(history) < budget:
            step = self._next_step(brief, scope, history, names)
            if step is not None:
                return step
        ev = Evidence.from_history(history, scope)
        return _call(FINDINGS_TOOL, build_findings(brief, scope, ev, self).model_dump())

    def _next_step(
        self, brief: Brief, scope: list[str], history: Sequence[Call], names: set[str]
    ) -> AIMessage | None:
        done = {(c.name, str(c.args.get("path", c.args.get("pattern", "")))) for c in history}
        done |= {(c.name, str(c.args.get("pattern", ""))) for c in history}
        if "list_files" in names:
            # the whole workdir first: tests of this scope often live elsewhere (tests/...)
            if ("list_files", ".") not in done:
                return _call("list_files", {"path": ".", "max_entries": self.listing_entries})
            listed = Evidence.from_history(history, scope).listed
            for s in [s for s in scope if not _looks_like_file(s)][:3]:
                if ("list_files", s) not in done and not any(_in_scope(p, [s]) for p in listed):
                    return _call("list_files", {"path": s, "max_entries": 200})
        ev = Evidence.from_history(history, scope)
        # not the description: the lead's description lists example files, which would
        # otherwise always win
        goal = words(f"{brief.title} {brief.objective}")
        if "read_file" in names:
            candidates = list(ev.listed) + [s for s in scope if _looks_like_file(s)]
            untested = untested_modules(ev.code(), related_tests(scope, list(ev.workdir)))
            ranked = _rank_files(dict.fromkeys(candidates), goal, brief.phase, ev.listed, untested)
            for path in ranked[: self.max_reads]:
                if ("read_file", path) not in done:
                    return _call("read_file", {"path": path, "max_lines": self.read_lines})
        if "grep_files" in names:
            where = scope[0] if len(scope) == 1 else "."
            patterns = [*keywords(brief, scope, ev.listed)[:1], self.TODO_PATTERN]
            if ev.needs_string_check():
                patterns.append(_STRING_GREP)
            for pattern in patterns:
                if ("grep_files", pattern) not in done:
                    limit = 1000 if pattern == _STRING_GREP else 50
                    return _call(
                        "grep_files", {"pattern": pattern, "path": where, "max_matches": limit}
                    )
        return None

    # -- chat ------------------------------------------------------------------------------

    def chat(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """An extractive reply: the informative lines of the last human message."""
        last = next((str(m.text) for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        return AIMessage(content=extract(last))


def keywords(brief: Brief, scope: Sequence[str], paths: Sequence[str] = ()) -> list[str]:
    """Stems worth grepping for, best first.

    Objective words come before subtask words; words of the scope paths are skipped (they
    match everywhere), words already visible in file names go last (reads cover those),
    longer words first. Empty when nothing specific is left (e.g. "survey this repo").
    """
    scope_words = set().union(*(_path_words(s) for s in scope)) if scope else set()
    seen = set().union(*(_path_words(p) for p in paths)) if paths else set()
    own = [stem(w) for w in words(brief.objective) if len(w) >= 4]
    more = [stem(w) for w in words(brief.title) if len(w) >= 4]
    key = {}  # stem -> (from the title, already in a file name, shorter, position)
    for i, w in enumerate(own + more):
        if w not in scope_words and w not in key:
            key[w] = (i >= len(own), w in seen, -len(w), i)
    # grep for the stem, so `invoices` also finds `invoice`
    return sorted(key, key=key.__getitem__)


def extract(text: str, max_lines: int = 12, max_chars: int = 1500) -> str:
    """Keep headings, lines with numbers or error words, and the first and last lines."""
    lines = [ln.rstrip() for ln in text.splitlines() if ln.strip()]
    if len(lines) <= max_lines:
        return "\n".join(lines)[:max_chars]
    strong = re.compile(
        r"(^#|\d+ ?(passed|failed|errors?|tokens|files|%)|error|fail|warn|todo|decid|must"
        r"|objective|phase)",
        re.I,
    )
    keep = set(range(3)) | set(range(len(lines) - 2, len(lines)))
    keep |= {i for i, ln in enumerate(lines) if strong.search(ln)}
    picked = [lines[i] for i in sorted(keep)][:max_lines]
    return "\n".join(picked)[:max_chars]


def build_plan(brief: Brief, files: Sequence[str]) -> PhasePlan:
    """The `PhasePlan` for this phase from the objective and the listed files."""
    action = _PHASES.get(brief.phase, _DEFAULT_PHASE)[1]
    limit = max(1, brief.max_subtasks)
    chosen, left_out = choose_areas(group_areas(files, limit), brief, limit)
    objective = (brief.objective or "the task").rstrip(" .?!")
    subtasks = _subtasks(brief, chosen, objective)
    goal = words(objective)
    named = any(_goal_score(a, set(map(stem, goal))) for a in chosen)
    basis = (
        f" ranked by the objective's words ({', '.join(goal[:4])})"
        if named
        else " ranked by size (source files), as the objective names no area"
    )
    names = ", ".join(a.name for a in chosen) or "the workdir"
    constraints = [
        "Read-only access to the workdir (list_files, read_file, grep_files).",
        "Cite real file paths in every finding.",
    ]
    if left_out:
        constraints.append(f"Left out for now: {', '.join(a.name for a in left_out)}.")
    questions = [f"Which files in {a.name} matter for: {objective}?" for a in chosen[:2]]
    questions.append(f"What should the {brief.phase} phase report about {objective}?")
    return PhasePlan.model_validate(
        {
            "strategy": (
                f"{brief.phase.capitalize()} phase: {action} {len(subtasks)} area(s) of "
                f"the workdir{basis}: {names}; one subagent each, then merge the findings."
            ),
            "key_questions": questions,
            "subtasks": subtasks,
            "constraints": constraints,
            "next_actions": [
                f"Run the {len(subtasks)} subtask(s) in parallel.",
                "Merge the findings, write a checkpoint, advance to the next phase.",
            ],
        }
    )


def _subtasks(brief: Brief, areas: Sequence[Area], objective: str) -> list[dict[str, Any]]:
    """One subtask per area (or one over the whole workdir when nothing was listed)."""
    verb, action, report, _ = _PHASES.get(brief.phase, _DEFAULT_PHASE)
    agent = _pick_agent(brief)
    phase = _slug(brief.phase)
    out: list[dict[str, Any]] = []
    ids: set[str] = set()
    for area in areas:
        sid = f"{phase}-{_slug(area.name)}"
        while sid in ids:
            sid += "-2"
        ids.add(sid)
        examples = ", ".join(_rank_files(area.files, words(objective))[:3])
        what = f"{area.name} ({len(area.files)} files, e.g. {examples})"
        out.append(
            {
                "id": sid,
                "title": f"{verb} {area.name}",
                "scope": area.scope,
                "description": f"{action.capitalize()} {what} for the objective: "
                f"{objective}. Report {report}.",
                "agent": agent,
            }
        )
    if not out:
        out.append(
            {
                "id": f"{phase}-workdir",
                "title": f"{verb} the workdir",
                "scope": [],
                "description": f"{action.capitalize()} the workdir for the objective: "
                f"{objective}. Report {report}.",
                "agent": agent,
            }
        )
    return out


def _pick_agent(brief: Brief) -> str:
    """The listed agent whose name starts like the phase (`reviewer`/review), else the first."""
    if not brief.agents:
        return "researcher"
    stem = brief.phase[:4]
    return next((a for a in brief.agents if stem and a.lower().startswith(stem)), brief.agents[0])


def build_findings(brief: Brief, scope: Sequence[str], ev: Evidence, policy: Any) -> SubmitFindings:
    """`SubmitFindings` built only from the evidence the tools returned.

    Each phase reports a different side of the same area, so consecutive phases do not
    repeat each other: exploration maps it (modules, what the files read define, where
    its tests are), planning proposes steps and questions, implementation points at
    change sites (definitions with line numbers, TODOs, modules without a named test),
    review lists risks (TODOs, untested modules, the biggest files, test coverage).
    """
    where = ", ".join(scope)
    objective = (brief.objective or brief.title or "the task").rstrip(" .?!")
    todo = ev.todos()
    word_hits = {k: v for k, v in ev.greps.items() if k not in (_TODO_GREP, _STRING_GREP)}
    # greps ran on stems; speak of the word the task used
    label = {stem(w): w for w in reversed(words(f"{brief.objective} {brief.title}"))}
    tests = related_tests(scope, list(ev.workdir))
    facts = _Facts(brief.phase, where, ev, todo, tests, list(scope))
    discoveries = facts.discoveries()
    questions = []
    for pattern, hits in word_hits.items():
        word = label.get(pattern, pattern)
        if not hits:
            questions.append(f"{word!r} does not appear in {where}: where is it handled?")
        else:
            discoveries.append(facts.word_line(word, hits))
    questions += [f"Tool error: {e}" for e in ev.errors[:3]]
    if not ev.read:
        questions.append(f"No readable text file was found in {where}.")
    questions += facts.questions(objective)
    counts = "".join(f"{len(v)} match(es) for {label.get(k, k)!r}, " for k, v in word_hits.items())
    summary = (
        f"Looked at {where} for {objective!r} ({brief.phase} phase): "
        f"{len(set(ev.listed) | set(ev.read))} files seen, {len(ev.read)} read, "
        f"{counts}{len(todo)} TODO/FIXME comment(s), {len(tests)} related test file(s)."
    )
    firsts = {p: describe(lines, p)[0] for p, lines in ev.read.items()}
    if any(firsts.values()):
        main = "; ".join(f"{p} ({d[:100]})" for p, d in list(firsts.items())[:2] if d)
        summary += f" Main files: {main}."
    return SubmitFindings.model_validate(
        {
            "status": "completed" if ev.read else "partial",
            "summary": summary,
            "key_discoveries": list(dict.fromkeys(discoveries))[:10],
            "files": _file_notes(ev),
            "open_questions": questions[:6],
            "recommendations": _recommendations(brief, scope, objective, ev, facts)[:6],
        }
    )


def _file_notes(ev: Evidence) -> list[dict]:
    """Notes for the files read (then listed ones, up to 10)."""
    notes = []
    for path, lines in ev.read.items():
        first, defs = describe(lines, path)
        note = (first or "no docstring or heading") + (
            f" (defines {', '.join(defs[:6])})" if defs else ""
        )
        notes.append({"path": path, "description": note})
    for path, size in ev.listed.items():
        if len(notes) >= 10:
            break
        if path not in ev.read:
            notes.append({"path": path, "description": f"listed, {size} bytes, not read"})
    return notes


def _short(paths: Sequence[str], n: int = 5) -> str:
    more = f" (+{len(paths) - n} more)" if len(paths) > n else ""
    return ", ".join(paths[:n]) + more


def _defs_with_lines(lines: Sequence[str]) -> list[tuple[str, int]]:
    return list(
        dict.fromkeys((m.group(2), i) for i, ln in enumerate(lines, 1) if (m := _DEF_RE.match(ln)))
    )


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

    def discoveries(self) -> list[str]:
        phase = self.phase if self.phase in _PHASES else "exploration"
        out = getattr(self, f"_{phase}")()
        return [line for line in out if line]

    def _exploration(self) -> list[str]:
        """A map: what the area holds, what the files read define, where its tests are."""
        ev, where, out = self.ev, self.where, []
        if ev.listed:
            kinds = Counter(PurePosixPath(p).suffix or "(none)" for p in ev.listed)
            common = ", ".join(f"{k} ({n})" for k, n in kinds.most_common(4))
            out.append(f"{where} holds {len(ev.listed)} text files; types: {common}.")
        mods = [PurePosixPath(p).stem for p in ev.code() if _module_name(p)]
        if mods:
            out.append(f"Modules of {where}: {_short(list(dict.fromkeys(mods)), 12)}.")
        for path, lines in ev.read.items():
            first, defs = describe(lines, path)
            said = f"{path}: {first[:100].rstrip('.') or 'no docstring or heading'}"
            out.append(said + (f"; defines {', '.join(defs[:8])}." if defs else "."))
        if self.todo:
            spots = ", ".join(f"{p}:{n}" for p, n, _ in self.todo[:4])
            out.append(f"{len(self.todo)} TODO/FIXME comment(s) in {where}: {spots}.")
        out.append(self.test_line() if not ev.is_test_area() else self.coverage()[0])
        return out

    def _planning(self) -> list[str]:
        """Inputs for a plan: the biggest modules and the size of each file's interface."""
        out = []
        if self.biggest():
            out.append(f"Largest modules of {self.where}: {', '.join(self.biggest())}.")
        for path, lines in self.ev.read.items():
            defs = describe(lines, path)[1]
            out.append(
                f"{path} ({len(lines)} lines read) exposes {len(defs)} definition(s), "
                f"starting with {', '.join(defs[:4])}."
                if defs
                else f"{path}: no definition in its first {len(lines)} lines (prose or data)."
            )
        return out

    def _implementation(self) -> list[str]:
        """Change sites: definitions with line numbers, TODOs, modules with no named test."""
        out = []
        for path, lines in self.ev.read.items():
            defs = _defs_with_lines(lines)
            if self.ev.is_test_area():
                cases = [n for n, _ in defs if n.startswith(("test", "Test"))]
                helpers = [n for n, _ in defs if not n.startswith(("test", "Test"))]
                target = _tested_name(path)
                out.append(
                    f"{path} targets {target!r}: {len(cases)} test case(s) in the lines read"
                    + (f"; helpers/fixtures: {', '.join(helpers[:4])}." if helpers else ".")
                )
            elif defs:
                sites = ", ".join(f"{n} (line {i})" for n, i in defs[:6])
                out.append(f"Change sites in {path}: {sites}.")
        out += [f"TODO comment at {p}:{n}: {t[:100]}" for p, n, t in self.todo[:3]]
        if self.untested and not self.ev.is_test_area():
            out.append(
                f"Modules of {self.where} with no test file named after them: "
                f"{_short(self.untested)}."
            )
        return out

    def _review(self) -> list[str]:
        """Risks: open notes, the biggest modules, and gaps in the test coverage."""
        out = [f"Risk: unresolved note at {p}:{n}: {t[:100]}" for p, n, t in self.todo[:3]]
        if self.ev.is_test_area():
            return out + self.coverage()[1:]
        if self.biggest(2):
            out.append(
                "Risk: the biggest modules are the hardest to change safely: "
                f"{', '.join(self.biggest(2))}."
            )
        code = self.ev.code()
        if self.untested:
            out.append(
                f"Coverage gap: {len(self.untested)} of {len(code)} module(s) have no test "
                f"file named after them ({len(self.tests)} related test files listed): "
                f"{_short(self.untested)}."
            )
        elif not self.tests and code:
            out.append(self.test_line())
        return out

    def test_line(self) -> str:
        """Where the scope's tests are, as an observation with its evidence."""
        if self.tests:
            inside = [t for t in self.tests if _in_scope(t, self.scope)]
            named = [t for t in self.tests if _tested_name(t) != PurePosixPath(t).stem.lower()]
            return (
                f"Tests for {self.where}: {len(self.tests)} file(s) in the workdir listing "
                f"({len(inside)} inside it), e.g. {_short(named or self.tests, 3)}."
            )
        if not self.ev.code():
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
            p for p in ev.workdir if PurePosixPath(p).suffix in _CODE_SUFFIXES and not _is_test(p)
        ]
        covered = [s for s in source if any(_names_module(t, _module_name(s)) for t in tests)]
        tops = Counter(s.split("/")[0] for s in covered if "/" in s)
        by = ", ".join(f"{k} {n}" for k, n in sorted(tops.items()))
        lines = [
            f"{len(tests)} test file(s) in {self.where} are named after {len(covered)} of "
            f"{len(source)} source modules" + (f" (by folder: {by})." if by else ".")
        ]
        missing = [s for s in source if s not in covered and _module_name(s)]
        missing.sort(key=lambda p: (-ev.workdir.get(p, 0), p))
        if missing:
            lines.append(
                f"Coverage gap: {len(missing)} source module(s) have no test file named "
                f"after them, biggest first: {_short(missing, 6)}."
            )
        return lines

    def word_line(self, word: str, hits: list[tuple[str, int, str]]) -> str:
        p, n, t = hits[0]
        files = list(dict.fromkeys(h[0] for h in hits))
        if self.phase == "exploration":
            return f"{word!r} occurs {len(hits)} time(s) in {self.where}, e.g. {p}:{n}: {t[:100]}"
        if self.phase == "planning":
            return f"{word!r} appears in {len(files)} file(s): {_short(files, 4)}."
        return f"{word!r} at " + ", ".join(f"{h[0]}:{h[1]}" for h in hits[:5]) + "."

    def questions(self, objective: str) -> list[str]:
        if self.phase == "planning" and self.ev.read:
            read = " or ".join(self.ev.read)
            return [f"Which of {read} should a plan for {objective!r} start from, and why?"]
        if self.phase == "exploration" and not self.tests and self.ev.code():
            return [f"How is {self.where} tested? No related test file was listed."]
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
        (p, m.group(2))
        for k, hits in ev.greps.items()
        if k not in (_TODO_GREP, _STRING_GREP)
        for p, _, t in hits
        if (m := _DEF_RE.match(t))
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
            f"Step {len(top) + 1}: decide how {objective!r} changes {n} in {p}."
            for p, n in matching[:1]
        ]
    elif brief.phase == "implementation":
        recs += [f"Resolve the TODO at {p}:{n}: {t[:100]}" for p, n, t in facts.todo[:2]]
        recs += [f"Likely change point: {n} in {p}." for p, n in matching[:3]]
        if not ev.is_test_area() and facts.untested:
            recs.append(
                f"Before changing {facts.untested[0]}, find the tests that exercise it "
                "(no test file is named after it)."
            )
    elif brief.phase == "review":
        recs += [f"Decide on the note at {p}:{n} before release." for p, n, _ in facts.todo[:2]]
        if ev.is_test_area():
            gaps = [m for m in facts.coverage()[1:] if m.startswith("Coverage gap")]
            recs += [
                f"Check which tests exercise {g.split('biggest first: ')[-1].rstrip('.')}: "
                "no test file is named after them."
                for g in gaps
            ]
        else:
            recs += [
                f"Check that {n} in {p} is covered by a test."
                for p, n in matching[:3]
                if not _is_test(p)
            ]
            if facts.untested:
                recs.append(
                    f"Look for edge cases in {facts.untested[0]}: the biggest module of "
                    f"{where} that no test file is named after."
                )
    if top:
        verb = _PHASES.get(brief.phase, _DEFAULT_PHASE)[0].lower()
        recs.append(f"To {verb} {where} for {objective!r}, start from {' and '.join(top)}.")
    return recs
