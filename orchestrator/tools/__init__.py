"""The tools agents call: the toolbox, the workdir's read and write tools, MCP servers.

* `toolbox`: the tools a run's agents can name (tether's own, the user's Python tools, MCP
  tools), each agent's tools by name, with clear errors for unknown or clashing names.
* `workdir`: read-only file tools over the `--workdir` (`list_files`, `read_file`,
  `grep_files`), confined to it.
* `workdir_write`: opt-in `write_file` and `edit_file`, which keep the previous content in
  memory before they change a file.
* `mcp_client`: the workflow's MCP servers, started once per run, their tools as LangChain
  tools.
* `assembly`: what a run is assembled from besides the model (its workflow and its tools).
* `call_keys`: the idempotency key of each call of a user's tool, recorded before the call
  and its result after (`tool_call_key()`, the `ToolCallKeys` middleware).

Invariant: every path a tool touches is confined to its root (the workdir or the memory).
May import: `orchestrator.config`, `orchestrator.artifacts`, `orchestrator.types`,
`orchestrator.errors`, `memory`.
"""
