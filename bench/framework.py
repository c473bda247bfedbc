"""What a run costs in model calls and prompt tokens, by how the run is sized.

Run::

    python -m bench.framework                       # requests 2.32.3, one question
    python -m bench.framework --sdist click==8.1.7 --question "How are options parsed?"

The same question about a small real sdist (downloaded once into `bench/.data/sdists/` with
`pip download --no-binary :all:`), asked through the real `langchain-openai` client against
tether's scripted OpenAI-compatible server (`tests/orchestrator/openai_server.py`), which
logs every request. Rows:

1. `create_agent`: a plain LangChain `create_agent` agent with list, read and grep tools,
   the baseline: a scripted reader lists the root, greps the question's words, reads the
   file with most hits and answers;
2. `alone`: tether, the lead answering alone: the same scripted reader as the lead, whose
   plan has no subtasks, `done` and the answer (`PhasePlan.answer`);
3. `one-phase`: a one-phase workflow of 3 subagents, then the final answer call;
4. `default`: the default workflow, four phases, then the final answer call;
5. `answered`: the default workflow with a lead that declares the objective answered in
   its first plan (`PhasePlan.done`), so the later phases are skipped.

Every agent reads the same way (the scripted `reader`: grep the question's words, read the
file with most hits, 80 lines, answer), so the rows differ by what tether adds around the
reading. In rows 3-5 the lead's plans (one subtask per area of the workdir) and its final
answer come from tether's offline policy (the offline model's `ResearchPolicy`). For each
row: model calls, prompt tokens as the messages make them (JSON characters / 4, the tool
schemas not counted), the tool schemas' tokens, and each row's ratio to `create_agent`,
measured in the same process.
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


def _best_file(grep: str) -> str | None:
    hits: dict[str, int] = {}
    for line in grep.splitlines():
        path = line.split(":", 1)[0]
        if not line.startswith("#") and ("/" in path or "." in path):
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
    words = keywords(_question(body))[:3]
    pattern = "|".join(words) or "def "
    steps = [] if "SubmitFindings" in tools else ["list"]  # a subagent has its scope
    steps += ["grep", "read"]
    if len(done) < len(steps):
        step = steps[len(done)]
        if step == "list":
            return {"tool": "list_files", "args": {"path": "."}}
        if step == "grep":
            args = {"pattern": pattern, "path": _scope(body), "max_matches": 20}
            return {"tool": "grep_files", "args": args}
        best = _best_file(done[-1][1])
        if best:
            return {"tool": "read_file", "args": {"path": best, "max_lines": 80}}
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
    return {"calls": len(requests), "prompt": messages, "schemas": schemas}


def baseline(workdir: Path, question: str, model: Any) -> dict[str, Any]:
    """The plain `create_agent` agent with list/read/grep tools over `workdir`."""
    from langchain.agents import create_agent

    from orchestrator.tools.workdir import workdir_tools

    agent = create_agent(model, tools=workdir_tools(workdir))
    agent.invoke({"messages": [{"role": "user", "content": question}]})
    return {"status": "answered", "phases": 0, "findings": 0, "answer": True}


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


def measure(workdir: Path, question: str, kind: str) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI

    from tests.orchestrator.openai_server import ScriptedOpenAI

    responder = {"create_agent": reader, "alone": reader}.get(kind) or planner(kind == "answered")
    with tempfile.TemporaryDirectory() as tmp, ScriptedOpenAI(responder=responder) as server:
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="sk-bench", max_retries=0
        )
        start = time.perf_counter()
        if kind == "create_agent":
            row = baseline(workdir, question, model)
        else:
            row = tether(workdir, question, model, kind, Path(tmp))
        seconds = time.perf_counter() - start
        return {"kind": kind, **row, **_costs(server.requests), "seconds": seconds}


KINDS = ("create_agent", "alone", "one-phase", "default", "answered")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", default="requests==2.32.3")
    parser.add_argument(
        "--question", default="How does requests decide whether to retry a failed connection?"
    )
    parser.add_argument("--only", default=",".join(KINDS), help="Rows to run (comma-separated).")
    args = parser.parse_args(argv)
    import os

    os.environ.setdefault("TETHER_ALLOW_MODEL_REQUESTS", "1")
    workdir = sdist(args.sdist)
    kinds = ["create_agent", *(k for k in args.only.split(",") if k and k != "create_agent")]
    rows = [measure(workdir, args.question, kind) for kind in kinds]
    base = rows[0]
    print(f"{args.sdist}: {args.question!r}")
    header = ["run", "status", "phases run", "findings", "answer", "model calls",
              "prompt tokens", "tool-schema tokens", "seconds", "vs create_agent"]  # fmt: skip
    table = [header]
    for r in rows:
        table.append(
            [
                r["kind"], r["status"], str(r["phases"]), str(r["findings"]),
                "yes" if r["answer"] else "no", str(r["calls"]), f"{r['prompt']:,}",
                f"{r['schemas']:,}", f"{r['seconds']:.1f}",
                f"{r['prompt'] / max(base['prompt'], 1):.2f}x",
            ]
        )  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
