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
  work started (an orchestrator's "finish now"). `real_todo`, `build_findings`, the
  `Evidence` they read and the vocabulary both sides share live in
  `orchestrator.offline.evidence` (this module imports it, never the reverse).
* neither (plain chat, e.g. a summary request): an extractive reply to the last human
  message.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Any

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from memory.names import slugify
from orchestrator.offline.evidence import (
    _CODE_SUFFIXES,
    _DEFAULT_PHASE,
    _PHASES,
    _STRING_GREP,
    _TODO_GREP,
    Brief,
    Call,
    Evidence,
    _in_scope,
    _is_test,
    _path_words,
    describe,
    named_in,
    parse_folders,
    parse_grep,
    parse_listing,
    parse_read,
    real_todo,
    related_tests,
    stem,
    stems,
    untested_modules,
    words,
)
from orchestrator.offline.wording import build_findings
from orchestrator.protocol import FINDINGS_TOOL, PLAN_TOOL, PhasePlan

# The public names of this module before the findings half moved to
# `orchestrator.offline.evidence`; they all stay importable from here.
__all__ = [
    "Area",
    "Brief",
    "Call",
    "Evidence",
    "ResearchPolicy",
    "build_findings",
    "build_plan",
    "choose_areas",
    "describe",
    "extract",
    "group_areas",
    "keywords",
    "parse_brief",
    "parse_grep",
    "parse_listing",
    "parse_read",
    "rank_areas",
    "real_todo",
    "related_tests",
    "stem",
    "stems",
    "tool_history",
    "untested_modules",
    "words",
]

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
_PRIORITY_STEMS = ("readme", "__init__", "main", "__main__", "index", "cli", "app", "core")
_TEXT_SUFFIXES = tuple(
    ".py .md .rst .txt .toml .yaml .yml .json .js .ts .go .rs .java .c .h .cpp .rb .sh .cfg"
    " .ini".split()
)


@dataclass
class Area:
    """A group of files the lead can hand to one subagent."""

    name: str
    scope: list[str]
    files: list[str]
    count: int = 0
    """Its text files when the listing was cut before them (`files` is then empty)."""


def _int(value: str, default: int | None) -> int | None:
    m = re.search(r"\d+", value)
    return int(m.group()) if m else default


def _unwrapped(value: str) -> str:
    """`value` without the markdown emphasis or code marks around it (`**x**`, `_x_`,
    `` `x` ``); marks that do not wrap the whole value stay (`__init__.py, py.typed`), and
    so do a dunder's (`__init__`)."""
    value = value.strip()
    while (
        len(value) > 1
        and value[0] in "*_`"
        and value[-1] == value[0]
        and not value.startswith("__")
    ):
        value = value[1:-1].strip()
    return value


def parse_brief(messages: Sequence[BaseMessage]) -> Brief:
    """Read the `Key: value` lines of every human message (later messages win)."""
    brief = Brief()
    humans = [str(m.text) for m in messages if isinstance(m, HumanMessage)]
    for text in humans:
        found: dict[str, str] = {}
        for m in _FIELD_RE.finditer(text):
            found.setdefault(_KEYS[m.group(1).lower()], _unwrapped(m.group(2)))
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


def _call(name: str, args: dict[str, Any], note: str = "") -> AIMessage:
    return AIMessage(content=note, tool_calls=[{"name": name, "args": args, "id": None}])


def _looks_like_file(path: str) -> bool:
    return bool(PurePosixPath(path).suffix) and not path.endswith("/")


# -- areas (lead) ------------------------------------------------------------------------


def _dir_area(name: str, files: list[str]) -> Area:
    return Area(name, [name], files)


def group_areas(
    paths: Sequence[str], room: int, folders: dict[str, int] | None = None
) -> list[Area]:
    """Group listed files into areas; split the biggest area while `room` allows.

    `folders` (text files per top folder, from a listing cut short) adds an area for each
    folder the listing did not reach, known by its name and file count only.
    """
    top: dict[str, list[str]] = {}
    loose: list[str] = []
    for p in paths:
        head, sep, _ = p.partition("/")
        (top.setdefault(head, []) if sep else loose).append(p)
    areas = [_dir_area(*_descend(name, files)) for name, files in sorted(top.items())]
    unseen = sorted(set(folders or {}) - set(top))
    areas += [Area(name, [name], [], (folders or {})[name]) for name in unseen]
    areas.sort(key=lambda a: a.name)
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
    hits = sum(1 for f in area.files if named_in(goal, _path_words(f)))
    return 3.0 * len(named_in(goal, _path_words(area.name))) + min(5, hits)


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
    central: dict[str, int] | None = None,
) -> list[str]:
    """Files in reading order for `phase`; near-empty files (< 40 bytes) always last.

    Exploring reads README/`__init__` files first, then files named like the goal;
    planning prefers goal-named docs, then files exploring would not read first;
    implementation goal-named code, then the biggest
    modules; review test files, then modules no test is named after (`untested`), then
    the biggest ones. So the phases read (and report) different files of one area.
    Outside review, the files where the objective's word was found most (`central`, grep
    hits per file) come first: they are the ones that answer it.
    """
    central = central or {}
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
        hits = -len(named_in(goal_set, _path_words(path)))
        tiny = int(bool(sizes) and sizes.get(path, 1000) < 40)
        suffix = p.suffix.lower()
        rest = (int(suffix not in _TEXT_SUFFIXES), len(p.parts), path)
        code = int(suffix not in _CODE_SUFFIXES)
        big = -sizes.get(path, 0)
        if central and phase != "review":
            return (tiny, -central.get(path, 0), code, big, *rest)
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


class ResearchPolicy:
    """Deterministic lead/subagent behaviour for `OfflineChatModel` (see module docstring).

    Args:
        max_reads: files a subagent reads before submitting.
        read_lines: lines read per file.
        listing_entries: `max_entries` of the lead's and subagents' listings.
    """

    TODO_PATTERN = _TODO_GREP

    def __init__(self, max_reads: int = 3, read_lines: int = 800, listing_entries: int = 400):
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
        folders = {k: v for c in listings[-1:] for k, v in parse_folders(c.result or "").items()}
        return _call(PLAN_TOOL, build_plan(brief, files, folders).model_dump())

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
        # several scope paths are searched together, not the whole workdir for them
        where = ", ".join(scope)
        key = keywords(brief, scope, ev.listed)[:1]
        if "grep_files" in names:
            # the objective's word first: the files it occurs in are the ones to read
            greps = [(k, 50) for k in key]
            if key and brief.phase in ("exploration", "implementation") and asks_flow(brief):
                greps.append((call_pattern(key[0]), 200))
            for pattern, limit in greps:
                if ("grep_files", pattern) not in done:
                    args = {"pattern": pattern, "path": where, "max_matches": limit}
                    return _call("grep_files", args)
        # not the description: the lead's description lists example files, which would
        # otherwise always win
        goal = words(f"{brief.title} {brief.objective}")
        if "read_file" in names:
            candidates = list(ev.listed) + [s for s in scope if _looks_like_file(s)]
            untested = untested_modules(ev.code(), related_tests(scope, list(ev.workdir)))
            central = Counter(h[0] for hits in ev.greps.values() for h in hits)
            ranked = _rank_files(
                dict.fromkeys(candidates), goal, brief.phase, ev.listed, untested, central
            )
            for path in ranked[: self.max_reads]:
                if ("read_file", path) not in done:
                    return _call("read_file", {"path": path, "max_lines": self.read_lines})
        if "grep_files" in names:
            patterns = [self.TODO_PATTERN]
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


_FLOW_RE = re.compile(r"\b(how|where|flow|flows|handled?|called|calls|path|chain)\b")


def asks_flow(brief: Brief) -> bool:
    """Does the objective ask how something flows or where it is handled?"""
    return bool(_FLOW_RE.search(brief.objective.lower()))


def call_pattern(key: str) -> str:
    """A grep for definitions and call sites of names holding `key` (`resolve_key(`)."""
    return rf"\b\w*{re.escape(key)}\w*\s*\("  # \b: linear on long lines


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


def build_plan(
    brief: Brief, files: Sequence[str], folders: dict[str, int] | None = None
) -> PhasePlan:
    """The `PhasePlan` for this phase from the objective and the listed files (and, when
    the listing was cut, the file count of every top folder)."""
    action = _PHASES.get(brief.phase, _DEFAULT_PHASE)[1]
    limit = max(1, brief.max_subtasks)
    chosen, left_out = choose_areas(group_areas(files, limit, folders), brief, limit)
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
    phase = slugify(brief.phase, 40, fallback="root")
    out: list[dict[str, Any]] = []
    ids: set[str] = set()
    for area in areas:
        sid = f"{phase}-{slugify(area.name, 40, fallback='root')}"
        while sid in ids:
            sid += "-2"
        ids.add(sid)
        examples = ", ".join(_rank_files(area.files, words(objective))[:3])
        count = len(area.files) or area.count
        what = f"{area.name} ({count} file(s){f', e.g. {examples}' if examples else ''})"
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
