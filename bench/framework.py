"""What a run costs in model calls and prompt tokens: tether, deepagents and `create_agent`.

Run::

    python -m bench.framework                       # requests 2.32.3, one question
    python -m bench.framework --sdist click==8.1.7 --question "How are options parsed?"

The same question about a small real sdist (downloaded once into `bench/.data/sdists/` with
`pip download --no-binary :all:`), asked through the real `langchain-openai` client against
tether's scripted OpenAI-compatible server (`tests/orchestrator/openai_server.py`), which
logs every request. Every column of the table in one run, on one script. Rows:

1. `create_agent`: a plain LangChain `create_agent` agent with list, read and grep tools,
   the baseline;
2. `alone`: tether, the lead answering alone (a plan with no subtasks, `done` and the
   answer, `PhasePlan.answer`);
3. `deepagents`: deepagents' `create_deep_agent` answering alone, with its own file tools
   (`ls`, `grep`, `read_file` over a `FilesystemBackend` of the sdist);
4. `one-phase`: tether, a one-phase workflow of at most 3 subagents a wave, in waves while
   the lead's plan continues the phase, then the final answer call;
5. `deepagents-subtasks`: deepagents' lead delegating the subtasks of row 4 (their briefs
   word for word, every wave's) to its `general-purpose` subagent through `task`, in one
   reply, then answering;
6. `default`: tether's default workflow, four phases, then the final answer call;
7. `answered`: the default workflow with a lead that declares the objective answered in
   its first plan (`PhasePlan.done`), so the later phases are skipped.

The script (`reader`): an agent of its own lists the root; every agent greps the question's
longest content word (a literal word: deepagents' `grep` takes no regex), in its scope when
it has one, reads the file with most hits (80 lines) and answers. In rows 4, 6 and 7 the
lead's plans (it lists the root, then one subtask per area of the workdir) and its final
answer come from tether's offline policy; in row 5 deepagents' lead lists the root, sends row
4's briefs, and answers from the results. For each row: model calls, message tokens (the
messages' JSON characters / 4), the tool schemas' tokens counted the same way (a provider
bills both), their total, and its ratio to `create_agent`, all measured in the same process.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import time
from importlib.util import find_spec
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / ".data" / "sdists"


def sdist(spec: str) -> Path:
    """The unpacked sdist of `spec` (`name==version`), downloaded once."""
    name, _, version = spec.partition("==")
    folder = DATA / f"{name}-{version}"
    if folder.is_dir():
        return folder
    DATA.mkdir(parents=True, exist_ok=True)
    got = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "-d", str(DATA), spec],
        capture_output=True, text=True,
    )  # fmt: skip
    archives = sorted(DATA.glob(f"{name}-{version}.tar.gz"))
    if got.returncode != 0 or not archives:
        sys.exit(
            f"could not download {spec} ({got.stderr.strip().splitlines()[-1:]}); put its "
            f"sdist in {DATA} (pip download --no-deps --no-binary :all: {spec})"
        )
    extract(archives[0], DATA)
    return folder


def extract(archive: Path, dest: Path) -> None:
    """Unpack `archive` into `dest`, refusing members that would land outside it.

    Python 3.11.4+ (and 3.12+) filter with tarfile's own `data` filter; older 3.11 releases
    (Debian 12's 3.11.2) have no `filter` argument, so each member is checked here: a regular
    file or folder whose path stays inside `dest`, nothing else (links, devices)."""
    with tarfile.open(archive) as tar:
        if hasattr(tarfile, "data_filter"):
            tar.extractall(dest, filter="data")
            return
        root = dest.resolve()
        members = tar.getmembers()
        for member in members:
            target = (root / member.name).resolve()
            if not (member.isfile() or member.isdir()) or not target.is_relative_to(root):
                raise ValueError(f"{archive.name}: refusing to extract {member.name!r}")
        for member in members:
            tar.extract(member, root)


# -- the scripted reader (the baseline agent, and the lead that answers alone) ----------
def _tool_results(body: dict[str, Any]) -> list[tuple[str, str]]:
    """`(tool name, result)` of each tool message so far, in order."""
    names = {}
    out = []
    for m in body.get("messages", []):
        for call in m.get("tool_calls") or []:
            names[call["id"]] = call["function"]["name"]
        if m.get("role") == "tool":
            out.append((names.get(m.get("tool_call_id"), "?"), str(m.get("content") or "")))
    return out


def _question(body: dict[str, Any]) -> str:
    first = next((m for m in body["messages"] if m.get("role") == "user"), {})
    text = str(first.get("content") or "")
    found = re.search(r"^Objective: (.+)$", text, re.M)
    return found.group(1) if found else text


def _scope(body: dict[str, Any]) -> str:
    first = next((m for m in body["messages"] if m.get("role") == "user"), {})
    found = re.search(r"^Scope: (.+)$", str(first.get("content") or ""), re.M)
    return found.group(1).split(",")[0].strip() if found else "."


def _scoped(body: dict[str, Any]) -> bool:
    first = next((m for m in body["messages"] if m.get("role") == "user"), {})
    return bool(re.search(r"^Scope: ", str(first.get("content") or ""), re.M))


def _call(tools: set[str], name: str, args: dict[str, Any]) -> dict[str, Any]:
    """A step of the script as tether's tools take it, or deepagents' (`ls`, `grep`,
    `read_file` with absolute paths in its backend) when those are the ones offered."""
    if "ls" not in tools:
        return {"tool": name, "args": args}
    rel = args["path"].removeprefix("./").lstrip("/")
    path = "/" if rel in ("", ".") else f"/{rel}"
    if name == "list_files":
        return {"tool": "ls", "args": {"path": path}}
    if name == "grep_files":
        grep = {"pattern": args["pattern"], "path": path, "output_mode": "content"}
        return {"tool": "grep", "args": {**grep, "max_count": args["max_matches"]}}
    return {"tool": "read_file", "args": {"file_path": path, "limit": args["max_lines"]}}


def best_file(grep: str) -> str | None:
    """The file with most matching lines, from tether's `path:line: text` lines or
    deepagents' `path:` headers with indented `line: text` lines under them."""
    hits: dict[str, int] = {}
    header = None
    for line in grep.splitlines():
        if line.startswith(" ") and header:
            hits[header] = hits.get(header, 0) + 1
            continue
        header = line[:-1] if line.endswith(":") and not line.startswith("#") else None
        path = line.split(":", 1)[0]
        if not header and not line.startswith("#") and ("/" in path or "." in path):
            hits[path] = hits.get(path, 0) + 1
    return max(hits, key=hits.get) if hits else None


def reader(body: dict[str, Any]) -> dict[str, Any]:
    """A scripted reader: grep the question's content words (in its scope, when a subagent;
    after listing the root, when an agent of its own), read the file with most hits,
    answer: as text, or as the final protocol tool offered (`SubmitFindings`, `PhasePlan`
    answering alone, `SubmitAnswer`)."""
    from memory.text.words import keywords

    tools = {t["function"]["name"] for t in body.get("tools") or []}
    done = _tool_results(body)
    words = sorted(keywords(_question(body)), key=len, reverse=True)
    pattern = words[0] if words else "def "
    steps = [] if _scoped(body) else ["list"]  # a subagent greps its scope
    steps += ["grep", "read"]
    if len(done) < len(steps):
        step = steps[len(done)]
        if step == "list":
            return _call(tools, "list_files", {"path": "."})
        if step == "grep":
            args = {"pattern": pattern, "path": _scope(body), "max_matches": 20}
            return _call(tools, "grep_files", args)
        best = best_file(done[-1][1])
        if best:
            return _call(tools, "read_file", {"path": best, "max_lines": 80})
    read = done[-1][1].splitlines() if done else []
    where = read[0].lstrip("# ").split(" (")[0] if read else ""
    quote = "\n".join(read[1:13])
    answer = f"From {where or 'the files read'}:\n{quote}"
    if "SubmitFindings" in tools:
        files = [{"path": where, "description": "read for the question"}] if where else []
        return {
            "tool": "SubmitFindings",
            "args": {"summary": f"{where or _scope(body)}: what it says about {pattern}.",
                     "key_discoveries": [ln for ln in read[1:4] if ln.strip()], "files": files},
        }  # fmt: skip
    if "PhasePlan" in tools:
        return {
            "tool": "PhasePlan",
            "args": {"strategy": "Answered from the files read.", "subtasks": [], "done": True,
                     "reason": "read the code that answers it", "answer": answer},
        }  # fmt: skip
    if "SubmitAnswer" in tools:
        return {"tool": "SubmitAnswer", "args": {"answer": answer}}
    return {"text": answer}


# -- measuring ----------------------------------------------------------------------------
def _costs(requests: list[dict[str, Any]]) -> dict[str, int]:
    messages = sum(len(json.dumps(r.get("messages", []))) // 4 for r in requests)
    schemas = sum(len(json.dumps(r.get("tools", []))) // 4 for r in requests)
    return {"calls": len(requests), "prompt": messages, "schemas": schemas,
            "total": messages + schemas}  # fmt: skip


def baseline(workdir: Path, question: str, model: Any) -> dict[str, Any]:
    """The plain `create_agent` agent with list/read/grep tools over `workdir`."""
    from langchain.agents import create_agent

    from orchestrator.tools.workdir import workdir_tools

    agent = create_agent(model, tools=workdir_tools(workdir))
    agent.invoke({"messages": [{"role": "user", "content": question}]})
    return {"status": "answered", "phases": 0, "findings": 0, "answer": True}


def deep_agent(workdir: Path, question: str, model: Any) -> dict[str, Any]:
    """deepagents' agent with its own file tools over `workdir` (its `general-purpose`
    subagent is what `task` starts)."""
    from deepagents import create_deep_agent
    from deepagents.backends import FilesystemBackend

    backend = FilesystemBackend(root_dir=workdir, virtual_mode=True)
    agent = create_deep_agent(model, backend=backend)
    agent.invoke({"messages": [{"role": "user", "content": question}]})
    return {"status": "answered", "phases": 0, "findings": 0, "answer": True}


def deep_lead(briefs: list[str]) -> Any:
    """deepagents' lead: lists the root, sends `briefs` to `task` in one reply, answers
    from the results; every subagent the reader."""

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        if _scoped(body):
            return reader(body)
        done = _tool_results(body)
        if not done:
            return {"tool": "ls", "args": {"path": "/"}}
        if len(done) == 1:
            calls = [{"tool": "task", "args": {"description": brief,
                      "subagent_type": "general-purpose"}} for brief in briefs]  # fmt: skip
            return {"calls": calls}
        results = [text.strip().splitlines()[0] for name, text in done if name == "task"]
        return {"text": "From the subagents:\n" + "\n".join(f"- {r}" for r in results)}

    return respond


def briefs_of(requests: list[dict[str, Any]]) -> list[str]:
    """The subtask briefs tether's lead wrote, as its subagents' first messages hold them
    (less the protocol's last line, which names `SubmitFindings`)."""
    briefs = []
    for body in requests:
        if not _scoped(body) or len(body["messages"]) > 2:
            continue
        first = next(m for m in body["messages"] if m.get("role") == "user")
        lines = str(first["content"]).splitlines()
        briefs.append("\n".join(ln for ln in lines if "SubmitFindings" not in ln))
    return briefs


def tether(workdir: Path, question: str, model: Any, kind: str, tmp: Path) -> dict[str, Any]:
    from orchestrator.api import Orchestrator

    workflow = None
    if kind == "one-phase":
        workflow = tmp / "one.yaml"
        workflow.write_text("phases: [exploration]\n")
    result = Orchestrator(
        memory_dir=tmp / "memory",
        workdir=workdir,
        workflow=workflow,
        model=model,
        max_subtasks=3 if kind == "one-phase" else None,
    ).run(question)
    return {
        "status": result.status,
        "phases": len(result.phases) - len(result.skipped_phases),
        "findings": len(result.findings),
        "answer": bool(result.answer),
    }


def planner(answering: bool = False) -> Any:
    """The lead's plans from tether's offline policy (areas of the workdir, one subtask
    each), its answer the offline model's extractive one; every other agent the reader."""

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        from tests.orchestrator.openai_server import policy_responder

        tools = {t["function"]["name"] for t in body.get("tools") or []}
        if "PhasePlan" in tools or "SubmitAnswer" in tools:
            step = policy_responder(body)
            if answering and step.get("tool") == "PhasePlan":
                step["args"] = {**step["args"], "done": True, "reason": "one phase answers it"}
            return step
        return reader(body)

    return respond


def measure(workdir: Path, question: str, kind: str, briefs: list[str]) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI

    from tests.orchestrator.openai_server import ScriptedOpenAI

    responders = {"create_agent": reader, "alone": reader, "deepagents": reader}
    if kind == "deepagents-subtasks":
        responder = deep_lead(briefs)
    else:
        responder = responders.get(kind) or planner(kind == "answered")
    with tempfile.TemporaryDirectory() as tmp, ScriptedOpenAI(responder=responder) as server:
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="sk-bench", max_retries=0
        )
        start = time.perf_counter()
        if kind == "create_agent":
            row = baseline(workdir, question, model)
        elif kind.startswith("deepagents"):
            row = deep_agent(workdir, question, model)
            row["findings"] = len(briefs) if kind == "deepagents-subtasks" else 0
        else:
            row = tether(workdir, question, model, kind, Path(tmp))
        seconds = time.perf_counter() - start
        return {"kind": kind, **row, **_costs(server.requests), "seconds": seconds,
                "briefs": briefs_of(server.requests)}  # fmt: skip


KINDS = (
    "create_agent",
    "alone",
    "deepagents",
    "one-phase",
    "deepagents-subtasks",
    "default",
    "answered",
)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", default="requests==2.32.3")
    parser.add_argument(
        "--question", default="How does requests decide whether to retry a failed connection?"
    )
    parser.add_argument("--only", default=",".join(KINDS), help="Rows to run (comma-separated).")
    parser.add_argument("--markdown", action="store_true", help="Print the table as Markdown.")
    args = parser.parse_args(argv)
    import os

    os.environ.setdefault("TETHER_ALLOW_MODEL_REQUESTS", "1")
    workdir = sdist(args.sdist)
    only = set(args.only.split(","))
    if only & {"deepagents", "deepagents-subtasks"} and find_spec("deepagents") is None:
        print("deepagents is not installed (pip install deepagents): its rows are left out")
        only -= {"deepagents", "deepagents-subtasks"}
    if "deepagents-subtasks" in only:
        only.add("one-phase")  # deepagents' lead sends the briefs tether's lead wrote
    kinds = [k for k in KINDS if k in only or k == "create_agent"]
    rows, briefs = [], []
    for kind in kinds:
        rows.append(measure(workdir, args.question, kind, briefs))
        if kind == "one-phase":
            briefs = rows[-1]["briefs"]
    print(conditions(args.sdist, args.question))
    print(render(rows, markdown=args.markdown))


def conditions(spec: str, question: str) -> str:
    """What the table was measured on: the sdist, the question, the versions, the machine."""
    import os
    import platform
    from importlib.metadata import PackageNotFoundError, version

    def v(name: str) -> str:
        try:
            return version(name)
        except PackageNotFoundError:
            return "absent"

    return (
        f"{time.strftime('%Y-%m-%d')}, {spec}, {question!r}; one scripted server and script "
        f"for every row; Python {platform.python_version()}, tether {v('tether')}, "
        f"deepagents {v('deepagents')}, langchain {v('langchain')}, langgraph "
        f"{v('langgraph')}; {os.cpu_count()} cores"
    )


def render(rows: list[dict[str, Any]], markdown: bool = False) -> str:
    """The rows as a table; tokens are the messages' and the tool schemas' (both billed)."""
    base = rows[0]
    header = ["run", "status", "phases run", "findings", "answer", "model calls",
              "message tokens", "tool-schema tokens", "total tokens", "seconds",
              "total vs create_agent"]  # fmt: skip
    table = [header]
    for r in rows:
        table.append(
            [
                r["kind"], r["status"], str(r["phases"]), str(r["findings"]),
                "yes" if r["answer"] else "no", str(r["calls"]), f"{r['prompt']:,}",
                f"{r['schemas']:,}", f"{r['total']:,}", f"{r['seconds']:.1f}",
                f"{r['total'] / max(base['total'], 1):.2f}x",
            ]
        )  # fmt: skip
    if markdown:
        lines = ["| " + " | ".join(row) + " |" for row in table]
        lines.insert(1, "|" + "---|" * len(header))
        return "\n".join(lines)
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    return "\n".join(
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in table
    )


if __name__ == "__main__":
    main()
