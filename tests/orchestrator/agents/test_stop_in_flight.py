"""A stop (Ctrl-C, SIGTERM: the `stop` event) ends an agent whose model request the
provider sits on, instead of waiting for the provider; the call stays counted as sent in
the usage journal. Through `run_agent`, the real `langchain-openai` client and the scripted
server, whose request hangs for 300 s.
"""

from __future__ import annotations

import threading

from langchain_openai import ChatOpenAI

from orchestrator.agents.loop import run_agent
from orchestrator.artifacts.documents import Docs
from orchestrator.artifacts.usage import UsageJournal, read_spend
from orchestrator.errors import Stopped
from orchestrator.types import SubmitFindings
from tests.orchestrator.openai_server import ScriptedOpenAI


def test_a_stop_abandons_a_hung_request_and_the_journal_counts_it(tmp_path):
    docs = Docs.of(tmp_path / "memory")
    journal = UsageJournal(docs, "t1")
    outcome: dict = {}
    with ScriptedOpenAI([{"hang": 300}], responder=None) as server:
        model = ChatOpenAI(model="gpt-4o-mini", base_url=server.base_url, api_key="sk-test",
                           max_retries=0, timeout=600)  # fmt: skip
        stop = threading.Event()

        def agent() -> None:
            try:
                run_agent(
                    model, tools=[], final_tool=SubmitFindings, stop=stop,
                    messages=[("system", "You look."), ("user", "Look around.")],
                    journal=journal.recorder("scout", "scout:p/s1", "p"),
                )  # fmt: skip
            except BaseException as exc:  # noqa: BLE001 - the test reads it
                outcome["error"] = exc

        thread = threading.Thread(target=agent, daemon=True)
        thread.start()
        for _ in range(600):  # the request reached the server (polled, 60 s at most)
            if server.requests:
                break
            threading.Event().wait(0.1)
        assert server.requests, "the request never reached the server"
        stop.set()
        thread.join(60)
        assert not thread.is_alive(), "the agent still waits for the hung request"
    assert isinstance(outcome.get("error"), Stopped)
    spent = read_spend(docs, "t1")
    assert spent is not None and spent.calls == 1 and spent.cut == 1
    assert spent.tokens > 0 and spent.by_agent == {"scout": spent.tokens}
