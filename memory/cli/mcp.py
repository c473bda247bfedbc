"""`memory mcp`: serve the memory directory to MCP clients (Claude Code, Cursor) over stdio.

The verb only opens the store and hands it to `memory.mcp.mcp_server`; the `mcp` SDK (and,
through `memory.facts.tools`, LangChain) is imported when the verb runs, never at CLI start-up.
stdout belongs to the MCP protocol, so nothing else is written there.
"""

from __future__ import annotations

import click

from memory.cli.common import get_store


def register(cli: click.Group) -> None:
    """Add `mcp` to the `memory` group."""
    cli.add_command(memory_mcp)


@click.command("mcp")
@click.pass_context
def memory_mcp(ctx: click.Context) -> None:
    """Serve this memory directory over MCP (stdio) to Claude Code, Cursor and others.

    Tools: recall, memory_log/fetch, memory_read/list/write/patch/append, and (with the
    orchestrator installed) task_status and checkpoint_report, read-only.

    \b
    Examples:
      claude mcp add tether-memory -- memory --memory-dir "$PWD/.temp/memory" mcp
      memory mcp        # speaks MCP on stdin/stdout; not for typing into
    """
    try:
        from memory.mcp.mcp_server import serve_stdio
    except ModuleNotFoundError as exc:
        if exc.name != "mcp" and not (exc.name or "").startswith("mcp."):
            raise
        raise click.ClickException(
            "the MCP server needs the `mcp` package; install it with `pip install 'tether[mcp]'`"
        ) from None
    serve_stdio(get_store(ctx))
