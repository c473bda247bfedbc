"""A real run never imports the offline model: its heuristics (stemmer, stopwords, ticks)
stay out of every run with a real model (here the real `langchain-openai` client against
the scripted server), in a fresh interpreter."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys, tempfile
from pathlib import Path
from langchain_openai import ChatOpenAI
from tests.orchestrator.openai_server import ScriptedOpenAI
from tests.orchestrator.scripted_agents import agents, findings, one_subtask
from orchestrator.api import Orchestrator
tmp = Path(tempfile.mkdtemp())
wf = tmp / "wf.yaml"
wf.write_text("phases: [a, b]\\nagents:\\n  s:\\n    prompt: AGENT=s\\n    tools: [list_files]\\n")
with ScriptedOpenAI(responder=agents(one_subtask("s", done=False), {"s": [findings("x")]})) as s:
    model = ChatOpenAI(model="gpt-4o-mini", base_url=s.base_url, api_key="k", max_retries=0)
    result = Orchestrator(memory_dir=tmp / "m", workdir=tmp, workflow=wf, model=model).run("q")
print(result.status, sorted(m for m in sys.modules if m.startswith("orchestrator.offline")))
"""


def test_a_real_run_imports_nothing_of_the_offline_model(cli_env):
    env = {**cli_env, "TETHER_ALLOW_MODEL_REQUESTS": "1"}
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True, timeout=120,
        cwd=Path(__file__).parents[3],
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "done []"
