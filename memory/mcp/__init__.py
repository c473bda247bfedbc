"""tether's memory as an MCP server: `memory mcp`.

* `mcp_server.py`: the server (the official `mcp` SDK's `FastMCP` on stdio), its tools
  (`recall`, `memory_log` / `memory_fetch`, the five memory-file operations), and the tool
  providers it loads by name (`orchestrator.mcp_tools` when that package is installed);
* `_mcp_stdio.py`: the stdio transport, the SDK's plus JSON-RPC 2.0 errors for frames it
  cannot validate, so a client never waits forever for a reply.

Invariant: stdout carries only MCP messages, and the server never stops on bad input (a
tool's failure is an MCP error result with one line); it never imports `orchestrator`.
May import `memory.facts`, `memory.search`, `memory.errors` (and the `mcp` SDK).
"""
