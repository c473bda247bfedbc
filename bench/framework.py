"""What a run costs in model calls and prompt tokens, by how the run is sized.

Run::

    python -m bench.framework                       # requests 2.32.3, one question
    python -m bench.framework --sdist click==8.1.7 --question "How are options parsed?"

The same question about a small real sdist (downloaded once into `bench/.data/sdists/` with
`pip download --no-binary :all:`), answered three ways through the real `langchain-openai`
client against tether's scripted OpenAI-compatible server (`tests/orchestrator/
openai_server.py`, which reports usage: prompt tokens at about 4 characters a token, tool
schemas included), the lead and subagents played by tether's offline policy:

1. `default`: the default workflow, four phases;
2. `one-phase`: a workflow of one phase (`phases: [exploration]`);
3. `answered`: the default workflow, with a lead that declares the objective answered in
   its first plan (`PhasePlan.done`), so the later phases are skipped.

It prints model calls, prompt tokens and wall time per row, and each row's ratio to the
default run measured in the same process.
"""

from __future__ import annotations

import argparse
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
    with tarfile.open(archives[0]) as tar:
        tar.extractall(DATA, filter="data")
    return folder


def _answering(responder: Any) -> Any:
    """`responder` with a lead that declares the objective answered in its first plan."""

    def respond(body: dict[str, Any]) -> dict[str, Any]:
        step = responder(body)
        if step.get("tool") == "PhasePlan":
            step["args"] = {**step["args"], "done": True, "reason": "one phase answers it"}
        return step

    return respond


def measure(workdir: Path, question: str, kind: str) -> dict[str, Any]:
    from langchain_openai import ChatOpenAI

    from orchestrator.api import Orchestrator
    from tests.orchestrator.openai_server import ScriptedOpenAI, policy_responder

    responder = _answering(policy_responder) if kind == "answered" else policy_responder
    with tempfile.TemporaryDirectory() as tmp, ScriptedOpenAI(responder=responder) as server:
        workflow = None
        if kind == "one-phase":
            workflow = Path(tmp) / "one.yaml"
            workflow.write_text("phases: [exploration]\n")
        model = ChatOpenAI(
            model="gpt-4o-mini", base_url=server.base_url, api_key="sk-bench", max_retries=0
        )
        start = time.perf_counter()
        result = Orchestrator(
            memory_dir=Path(tmp) / "memory", workdir=workdir, workflow=workflow, model=model
        ).run(question)
        seconds = time.perf_counter() - start
        from tests.orchestrator.openai_server import prompt_tokens

        prompt = sum(prompt_tokens(body) for body in server.requests)
    return {
        "kind": kind,
        "status": result.status,
        "phases": len(result.phases) - len(result.skipped_phases),
        "findings": len(result.findings),
        "calls": len(server.requests),
        "reported_calls": result.usage.get("calls", 0),
        "prompt": prompt,
        "seconds": seconds,
    }


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sdist", default="requests==2.32.3")
    parser.add_argument(
        "--question", default="How does a Session merge its settings with a request's?"
    )
    args = parser.parse_args(argv)
    import os

    os.environ.setdefault("TETHER_ALLOW_MODEL_REQUESTS", "1")
    workdir = sdist(args.sdist)
    rows = [measure(workdir, args.question, kind) for kind in ("default", "one-phase", "answered")]
    base = rows[0]
    print(f"{args.sdist}: {args.question!r}")
    header = ["run", "status", "phases run", "findings", "model calls", "prompt tokens",
              "seconds", "calls ratio", "tokens ratio"]  # fmt: skip
    table = [header]
    for r in rows:
        table.append(
            [
                r["kind"], r["status"], str(r["phases"]), str(r["findings"]),
                f"{r['calls']} (run says {r['reported_calls']})", f"{r['prompt']:,}",
                f"{r['seconds']:.1f}", f"{r['calls'] / base['calls']:.2f}x",
                f"{r['prompt'] / base['prompt']:.2f}x",
            ]
        )  # fmt: skip
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)))


if __name__ == "__main__":
    main()
