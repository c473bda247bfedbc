"""tether's offline chat model: deterministic, extractive, no network.

A documented library class, usable wherever a LangChain chat model is:

* `model`: `OfflineChatModel`, a `BaseChatModel` driven by a queue of replies or a policy;
* `policy`: `ResearchPolicy`, the default policy, which plans phases and investigates with
  the workdir tools, speaking tether's protocol (`PhasePlan`, `SubmitFindings`);
* `planning`: the lead's plan: the workdir's files grouped into areas, one subtask each;
* `evidence`: what the tools returned in one conversation, parsed;
* `wording`: how the findings are worded per phase, from that evidence only.
"""

from __future__ import annotations

from orchestrator.offline.model import MODEL_NAME, OfflineChatModel, Policy, tool_names
from orchestrator.offline.policy import ResearchPolicy

__all__ = ["MODEL_NAME", "OfflineChatModel", "Policy", "ResearchPolicy", "tool_names"]
