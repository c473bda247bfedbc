"""tether's orchestrator: a LangGraph graph that runs a lead agent and subagents in phases."""
