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
    Wave: <k>                    lead only; the wave of the phase (default 1)
    Covered: <path>, <path>      lead only; scopes finished subtasks looked at

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
  covered by some phase (`orchestrator.offline.planning`); the plan's constraints name
  the areas this phase leaves out, with the earlier phases that surveyed any of them (the
  completed subtasks its context names: `completed_subtasks`). A phase runs in waves: the
  plan asks for another wave (`continue_phase`) while areas that no finished subtask
  covered (`Covered:`) are left beyond this wave's, and a later wave plans only those, so
  the task's waves cover every area it found.
* `SubmitFindings` bound (subagent): one tool call per step: `list_files(".")` (the whole
  workdir: tests of a package often live in `tests/<pkg>/` or `tests/test_<module>.py`),
  the scope itself only if that listing missed it, `read_file` on the 3 most relevant
  files (the order depends on the phase, see `_rank_files`; outside review the files where
  the most and rarest of the objective's words were found come first), one `grep_files`
  for any of the objective's three best words (`gitignor|overrid|hidden`; a word of three
  letters as said, `res`, as a word of its own), one for definitions and calls of
  functions named like any of them when the objective asks how or where, one for
  comment-anchored TODO/FIXME/XXX markers, plus one grep for triple quotes when a `.py`
  hit of those may sit inside a multi-line string (see `real_todo`, `chain`); then
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
from collections.abc import Callable, Sequence
from pathlib import PurePosixPath
from typing import TYPE_CHECKING

from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage

from orchestrator.offline.evidence import (
    _STRING_GREP,
    _TODO_GREP,
    Brief,
    Call,
    Evidence,
    _in_scope,
    grep_counts,
    listed_total,
    parse_folders,
    parse_grep,
    parse_listing,
    parse_read,
    real_todo,
    related_tests,
    untested_modules,
)
from orchestrator.offline.filetext import describe
from orchestrator.offline.planning import (
    Area,
    _rank_files,
    build_plan,
    choose_areas,
    group_areas,
    rank_areas,
)
from orchestrator.offline.terms import (
    _WORD_RE,
    _path_words,
    bare,
    is_whole,
    stem,
    stems,
    terms_pattern,
    whole,
    words,
)
from orchestrator.offline.ticks import answered_questions
from orchestrator.offline.wording import build_findings
from orchestrator.types import ANSWER_TOOL, FINDINGS_TOOL, PLAN_TOOL

if TYPE_CHECKING:
    from orchestrator.types import JsonObject

# The public names of this module before the findings half moved to
# `orchestrator.offline.evidence` and the lead's plan to `orchestrator.offline.planning`;
# they all stay importable from here.
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
    "wave": "wave",
    "covered": "covered",
}
_FIELD_RE = re.compile(
    r"^[ \t>*_-]*("
    + "|".join(sorted(map(re.escape, _KEYS), key=len, reverse=True))
    + r")[*_]*[ \t]*:[ \t]*(.*?)[ \t]*$",
    re.IGNORECASE | re.MULTILINE,
)


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
            elif key in ("max_steps", "phase_number", "wave"):
                setattr(brief, key, _int(value, None))
            elif key == "covered":
                value = re.sub(r"\s*\(and \d+ more\)\s*$", "", value)
                brief.covered = [v.strip() for v in value.split(",") if v.strip()]
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


#: A completed subtask as the lead's context names it: in the research plan's progress
#: (`- Completed: exploration/exploration-docs: Survey docs, ...`) or in a phase's digest
#: of findings (`- exploration/exploration-docs [completed]: ...`).
_PROGRESS_RE = re.compile(r"^- Completed: (.*)$", re.MULTILINE)
_DONE_ID_RE = re.compile(r"(?:^|, )([\w.-]+)/([\w.-]+): ")
_DIGEST_DONE_RE = re.compile(r"^- ([\w.-]+)/([\w.-]+) \[completed\]", re.MULTILINE)


def completed_subtasks(messages: Sequence[BaseMessage]) -> list[tuple[str, str]]:
    """`(phase, subtask id)` of the subtasks the lead's context says are completed."""
    found: dict[tuple[str, str], None] = {}
    for m in messages:
        if isinstance(m, AIMessage | ToolMessage):
            continue
        text = str(m.text)
        for line in _PROGRESS_RE.findall(text):
            found.update(dict.fromkeys(_DONE_ID_RE.findall(line)))
        found.update(dict.fromkeys(_DIGEST_DONE_RE.findall(text)))
    return list(found)


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


def _first_sentence(text: str, limit: int = 240) -> str:
    """The first sentence of `text` (a summary's claim, without its counts), cut at `limit`."""
    text = " ".join(text.split())
    end = re.search(r"[.!?](\s|$)", text)
    first = text[: end.end()].strip() if end else text
    return first if len(first) <= limit else first[: limit - 3] + "..."


#: A finding's line in the answer call's digests: `- findings/x.md [status]: summary`.
_DIGEST_RE = re.compile(r"^- (?P<path>findings/\S+\.md) \[[\w-]+\]: (?P<summary>.*)$")


def _call(name: str, args: JsonObject, note: str = "") -> AIMessage:
    return AIMessage(content=note, tool_calls=[{"name": name, "args": args, "id": None}])


def _looks_like_file(path: str) -> bool:
    return bool(PurePosixPath(path).suffix) and not path.endswith("/")


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
            reply = self.plan(brief, history, names, completed_subtasks(messages))
            for call in reply.tool_calls:
                if call["name"] == PLAN_TOOL:  # the key questions the findings answer
                    call["args"]["answered"] = answered_questions(
                        messages, call["args"].get("key_questions") or []
                    )
            return reply
        if FINDINGS_TOOL in names:
            # a human turn after the work started (e.g. "budget exhausted") means: finish now
            nudged = bool(history) and isinstance(messages[-1], HumanMessage)
            return self.investigate(brief, history, set() if nudged else names)
        if ANSWER_TOOL in names:
            return self.answer(messages)
        return self.chat(messages)

    def answer(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """`SubmitAnswer` quoting the findings' digests the answer call was given (an
        extractive answer: their summaries and first discoveries, with their files)."""
        last = next((str(m.text) for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        quoted, sources, files = [], [], []
        for line in last.splitlines():
            found = _DIGEST_RE.match(line)
            if found:
                sources.append(found["path"])
                quoted.append(f"- {_first_sentence(found['summary'])} (`{found['path']}`)")
            elif line.startswith("  * ") and quoted and quoted[-1].count("\n") < 2:
                quoted[-1] += "\n  - " + line[4:].strip()
            elif line.startswith("  files: "):
                files += [f.strip() for f in line[9:].split(",") if f.strip()]
        head = (
            "Extractive answer by tether's offline model (not an LLM): what the findings "
            "say, in their own words."
        )
        text = head + ("\n\n" + "\n".join(quoted) if quoted else "\n\nNo findings to quote.")
        args = {
            "answer": text,
            "findings": sources,
            "files": list(dict.fromkeys(files))[:20],
            "open_questions": [],
        }
        return _call(ANSWER_TOOL, args)

    # -- lead ------------------------------------------------------------------------------

    def plan(
        self,
        brief: Brief,
        history: Sequence[Call],
        names: set[str],
        done: Sequence[tuple[str, str]] = (),
    ) -> AIMessage:
        """List the workdir once, then return the `PhasePlan` tool call (`done`: the
        subtasks completed so far, `completed_subtasks`)."""
        listings = [c for c in history if c.name == "list_files" and c.result is not None]
        if "list_files" in names and not any(c.name == "list_files" for c in history):
            args = {"path": ".", "recursive": True, "max_entries": self.listing_entries}
            return _call("list_files", args, "Listing the workdir to plan the subtasks.")
        # a name from the code in the objective: where it occurs decides the areas
        root = Evidence.from_history(listings[-1:], ["."]).root
        code_names = identifiers(brief.objective, root)[:MAX_TERMS]
        greps = [c for c in history if c.name == "grep_files" and c.result is not None]
        total = listed_total(listings[-1].result or "") if listings else 0
        if (
            code_names
            and total <= LEAD_SEARCH_FILES  # every phase's plan searches again
            and "grep_files" in names
            and not any(c.name == "grep_files" for c in history)
        ):
            pattern = terms_pattern([_as_searched(n) for n in code_names])
            args = {"pattern": pattern, "path": ".", "max_matches": 200}
            return _call("grep_files", args, f"Finding where {', '.join(code_names)} occur.")
        found = grep_counts(greps[-1].result or "") if greps else {}
        files = [p for c in listings[-1:] for p, _ in parse_listing(c.result or "")]
        folders = {k: v for c in listings[-1:] for k, v in parse_folders(c.result or "").items()}
        plan = build_plan(brief, files, folders, found, root=root, earlier=done)
        return _call(PLAN_TOOL, plan.model_dump())

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
                args = {"path": ".", "recursive": True, "max_entries": self.listing_entries}
                return _call("list_files", args)
            listed = Evidence.from_history(history, scope).listed
            for s in [s for s in scope if not _looks_like_file(s)][:3]:
                if ("list_files", s) not in done and not any(_in_scope(p, [s]) for p in listed):
                    return _call("list_files", {"path": s, "recursive": True, "max_entries": 200})
        ev = Evidence.from_history(history, scope)
        # several scope paths are searched together, not the whole workdir for them
        where = ", ".join(scope)
        terms = keywords(brief, scope, ev.listed, root=ev.root)[:MAX_TERMS]
        # names from the code are searched alone: common words beside them would fill a
        # capped search's lines; the words come back when the names are not in this scope
        named = [t for t in terms if bare(t) in identifiers(brief.objective, ev.root)]
        if named:
            alone = terms_pattern(named)
            if ("grep_files", alone) not in done or ev.greps.get(alone):
                terms = named
            else:
                terms = [t for t in terms if t not in named]
        if "grep_files" in names:
            # the objective's words first: the files they occur in are the ones to read
            greps = [(terms_pattern(terms), 100)] if terms else []
            if terms and brief.phase in ("exploration", "implementation") and asks_flow(brief):
                # every word searched: "how does X flow ..., and where is Y handled?" asks
                # about the functions of both (the longest word alone missed requests'
                # `resolve_redirects`)
                greps.append((call_pattern(terms), 200))
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
            central = ev.centrality(terms)
            ranked = _rank_files(
                dict.fromkeys(candidates), goal, brief.phase, ev.listed, untested, central
            )
            for i, path in enumerate(ranked[: self.max_reads]):
                if ("read_file", path) not in done:
                    return _call("read_file", {"path": path, "max_lines": self.read_lines})
                # the most central file's words further down come before a third file
                if i == 0 and (window := self._window(ev, path, history)) is not None:
                    return window
        if "grep_files" in names:
            # the triple quotes of the files holding a TODO only: a search of a whole
            # package stops at its cap before it has shown every file's
            patterns = [(self.TODO_PATTERN, where, 50)]
            if unsure := ev.string_check_files():
                patterns.append((_STRING_GREP, ", ".join(unsure), 1000))
            for pattern, path, limit in patterns:
                if ("grep_files", pattern) not in done:
                    args = {"pattern": pattern, "path": path, "max_matches": limit}
                    return _call("grep_files", args)
        return None

    def _window(self, ev: Evidence, path: str, history: Sequence[Call]) -> AIMessage | None:
        """One more read of `path` when the objective's words were found mostly past the
        lines read (sinatra's `base.rb` defines `process_route` at line 1,098 of 2,000): from a
        little above the search hits, as many lines as a read takes, so that definitions
        and change sites come from where the words are. One per subagent."""
        if any(c.name == "read_file" and c.args.get("start_line", 1) != 1 for c in history):
            return None
        seen = ev.lines_read.get(path, 0)
        if path not in ev.length or not seen:
            return None  # read to its end, or not read
        found = {
            n for key, shown in ev.greps.items() if key != self.TODO_PATTERN
            for p, n, _ in shown if p == path
        }  # fmt: skip
        hits = sorted(n for n in found if n > seen)
        if len(hits) <= len(found) - len(hits):
            return None  # most of them were in the lines read
        # the start from which one read covers the most hits
        best = max(hits, key=lambda h: sum(h <= n < h + self.read_lines for n in hits))
        start = max(seen + 1, best - WINDOW_CONTEXT)
        return _call("read_file", {"path": path, "start_line": start, "max_lines": self.read_lines})

    # -- chat ------------------------------------------------------------------------------

    def chat(self, messages: Sequence[BaseMessage]) -> AIMessage:
        """An extractive reply: the informative lines of the last human message."""
        last = next((str(m.text) for m in reversed(messages) if isinstance(m, HumanMessage)), "")
        return AIMessage(content=extract(last))


#: Words of the objective grepped for together (one step of the subagent's budget).
MAX_TERMS = 3
#: The lead searches the workdir for the objective's names from the code when it has at
#: most this many text files (Python's own library, 19K files, took 8 s a search).
LEAD_SEARCH_FILES = 5_000


#: Lines read above the first search hit of a window further down a file (its definition).
WINDOW_CONTEXT = 40


def keywords(
    brief: Brief, scope: Sequence[str], paths: Sequence[str] = (), *, root: str = ""
) -> list[str]:
    """Stems worth grepping for, best first.

    Objective words come before subtask words; words of the scope's folders and of the
    workdir's own name (`root`: "how does filelock ..." asked in `filelock/`) are skipped
    (they match everywhere); a word the objective says twice ("how does ky retry ... trigger
    a retry?") is its subject and comes first; words already visible in file names go
    last (reads cover those), longer words first. A word of three letters or fewer as said
    (an acronym, a word said twice: `res`) is searched whole (`terms.whole`), a stem as
    the start of any word. Empty when nothing specific is left (e.g. "survey this repo").
    """
    # a scope of files (`web/routing.py`, ...) is searched for its files' own words
    folders = [s.rpartition("/")[0] if _looks_like_file(s) else s for s in [*scope, root]]
    scope_words = set().union(*(_path_words(f) for f in folders if f))
    seen = set().union(*(_path_words(p) for p in paths)) if paths else set()
    objective = _FRAME_RE.sub(" ", brief.objective)  # "how can a user ..." asks about ...
    said_stems = [stem(w) for w in _WORD_RE.findall(objective.lower())]
    one = _one_form(said_stems)
    said = Counter(one(s) for s in said_stems)
    # three letters are too short a word, unless an acronym (URL, API, NaN) or said twice
    acronyms = {w.lower() for w in re.findall(r"\b[A-Z][A-Za-z0-9][A-Z0-9]\b", objective)}
    own = [
        one(stem(w))
        for w in words(objective)
        if len(w) >= 4 or w in acronyms or said[one(stem(w))] >= 2
    ]
    more = [stem(w) for w in words(brief.title) if len(w) >= 4]
    # a name from the code (`Session.merge_environment_settings`, `handleRequest`) is
    # searched as it is, before anything else; its parts are not searched on their own
    names = identifiers(objective, root)
    parts = {stem(w) for name in names for w in _WORD_RE.findall(_split_name(name))}
    key = {}  # stem -> (from the title, said once, already in a file name, shorter, position)
    for i, w in enumerate(own + more):
        if w not in scope_words and w not in key and w not in parts:
            key[w] = (i >= len(own), said[w] < 2, w in seen, -len(w), i)
    # grep for the stem, so `invoices` also finds `invoice`; a short word alone
    said_words = words(objective)
    short = {w for w in said_words if len(w) <= 3} - {stem(w) for w in said_words if len(w) > 3}
    found = [*names, *sorted(key, key=key.__getitem__)]
    return [whole(t) if t in short or t in names and len(t) <= 3 else t for t in found]


def _as_searched(name: str) -> str:
    """A name from the code as the lead searches it: a short one (`res`) whole."""
    return whole(name) if len(name) <= 3 else name


def _one_form(stems: Sequence[str]) -> Callable[[str], str]:
    """A word said both as `entry` and `entries` (stems `entry`, `entri`) is one word,
    searched as `entr`, which finds both; any other stem stays as it is."""
    both = {s[:-1] for s in stems if s.endswith("y")} & {s[:-1] for s in stems if s.endswith("i")}
    return lambda s: s[:-1] if s[-1:] in ("y", "i") and s[:-1] in both and len(s) > 4 else s


_IDENTIFIER_RE = re.compile(r"`?\b([A-Za-z_][A-Za-z0-9_]*(?:(?:\.|::)[A-Za-z_][A-Za-z0-9_]*)*)\b`?")


def identifiers(text: str, root: str = "") -> list[str]:
    """Names from code in `text`, lower-cased, the last part of a dotted one: a snake_case
    or camelCase word, or one in backticks (`Session.merge_environment_settings` ->
    `merge_environment_settings`). The workdir's own name (`root`: "how does serde_json
    ..." asked in `serde_json/`) is not one: every file names it."""
    project = root.lower().replace("-", "_")
    found: dict[str, None] = {}
    for match in _IDENTIFIER_RE.finditer(text):
        whole = match.group(0)
        name = re.split(r"\.|::", match.group(1))[-1]
        quoted = whole.startswith("`") and whole.endswith("`")
        snake = "_" in name.strip("_")
        camel = bool(re.search(r"[a-z][A-Z]", name)) and len(name) >= 4  # not `NaN`, `IoT`
        if (quoted or snake or camel) and len(name) >= 3 and name.lower() != project:
            found.setdefault(name.lower(), None)
    return list(found)


def _split_name(name: str) -> str:
    """`merge_environment_settings` / `handleRequest` as words."""
    return re.sub(r"([a-z])([A-Z])", r"\1 \2", name).replace("_", " ").lower()


#: Who asks, not what about: "can a user", "could the user", "a user can", "users may".
_FRAME_RE = re.compile(
    r"\b(?:(?:can|could|should|would|may|might|do|does|will)\s+(?:a|the|an?)?\s*users?"
    r"|(?:a|the)?\s*users?\s+(?:can|could|should|would|may|might|will))\b",
    re.IGNORECASE,
)
_FLOW_RE = re.compile(r"\b(how|where|flow|flows|handled?|called|calls|path|chain)\b")


def asks_flow(brief: Brief) -> bool:
    """Does the objective ask how something flows or where it is handled?"""
    return bool(_FLOW_RE.search(brief.objective.lower()))


def call_pattern(keys: str | Sequence[str]) -> str:
    """A grep for definitions and call sites of names holding one of `keys` (`resolve_key(`;
    a `whole` word as a part of its own: `url_for(`, not `curl(`)."""
    held = [k if is_whole(k) else re.escape(k) for k in ([keys] if isinstance(keys, str) else keys)]
    words = held[0] if len(held) == 1 else f"(?:{'|'.join(held)})"
    return rf"\b\w*{words}\w*\s*\("  # \b: linear on long lines


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
