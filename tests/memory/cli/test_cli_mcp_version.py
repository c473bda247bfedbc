"""`memory mcp` tells a client tether's name and version in its `initialize` reply.

A subprocess, as an MCP client starts it: the server owns the process's stdin and stdout.
"""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "raw", "version": "1"},
    },
}


def test_server_info_is_tethers_not_the_sdks(memory_dir, cli_env):
    memory_dir.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "memory", "mcp"],
        input=json.dumps(INIT) + "\n",  # then the end of its input: the server stops
        env=cli_env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    reply = json.loads(done.stdout.splitlines()[0])
    assert reply["result"]["serverInfo"] == {"name": "tether-memory", "version": version("tether")}
    assert version("tether") != version("mcp")
