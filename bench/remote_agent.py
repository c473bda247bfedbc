"""The remote agent `bench/remote.py` serves: a LangChain `create_agent` agent whose model
takes `$BENCH_LATENCY` seconds (default 0.5) per call and answers once, with its usage.

Served by `langgraph dev` as `bench.remote_agent:agent` (the servers import it with the
repository on `PYTHONPATH`).
"""

from __future__ import annotations

import os
import re
import time
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.chat_models import BaseChatModel
from langchain_core.messages import AIMessage
from langchain_core.outputs import ChatGeneration, ChatResult


class SlowModel(BaseChatModel):
    """A chat model that sleeps `latency` seconds, then names the subtask it was given."""

    latency: float = 0.5

    @property
    def _llm_type(self) -> str:
        return "bench-slow"

    def _generate(
        self, messages: list[Any], stop: Any = None, run_manager: Any = None, **kwargs: Any
    ) -> ChatResult:
        time.sleep(self.latency)
        text = "\n".join(str(m.content) for m in messages)
        found = re.search(r"^Subtask: (\S+)", text, re.MULTILINE)
        words = len(text.split())
        usage = {"input_tokens": words, "output_tokens": 5, "total_tokens": words + 5}
        answer = f"Done {found.group(1) if found else '?'}: read its part."
        return ChatResult(
            generations=[ChatGeneration(message=AIMessage(answer, usage_metadata=usage))]
        )

    def bind_tools(self, tools: Any, **kwargs: Any) -> SlowModel:
        return self  # it calls no tools


agent = create_agent(SlowModel(latency=float(os.environ.get("BENCH_LATENCY") or 0.5)), tools=[])
