"""The stdio transport of `memory mcp`: the SDK's, plus JSON-RPC errors for bad frames.

The `mcp` SDK's `stdio_server` hands a line it cannot validate to the session as an
exception, which answers with a log notification and no response: a client that sent a
malformed frame, or a request with `"jsonrpc": "1.0"`, waits forever for its reply. Here
each line is checked first and answered as JSON-RPC 2.0 says:

* not JSON at all: `-32700 Parse error`, `id: null`;
* JSON, but not a valid JSON-RPC 2.0 message: `-32600 Invalid Request`, with the request's
  `id` when it has a usable one (a string or an integer), else `null`;
* an invalid response (the client answering the server): nothing, as JSON-RPC says.

The server goes on reading after either. Everything else is the SDK's transport: one JSON
message per line, UTF-8 both ways, stdout written by one task only (the error replies go
through the same stream as every other message, so lines never interleave).
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from io import TextIOWrapper
from typing import Any

import anyio
import mcp.types as types
from anyio.streams.memory import MemoryObjectSendStream
from mcp.shared.message import SessionMessage

PARSE_ERROR = -32700
INVALID_REQUEST = -32600


def read_frame(line: str) -> tuple[types.JSONRPCMessage | None, types.JSONRPCError | None]:
    """`(message, None)` for a valid line, else `(None, the error that answers it)`.

    An invalid *response* (the client answering a request of the server's) is answered by
    nothing, as JSON-RPC says: `(None, None)`.
    """
    try:
        frame = json.loads(line)
    except ValueError:
        return None, _error(None, PARSE_ERROR, "Parse error: the frame is not valid JSON")
    if not isinstance(frame, dict):
        return None, _error(None, INVALID_REQUEST, "Invalid Request: a message is a JSON object")
    request_id = frame.get("id")
    usable_id = isinstance(request_id, str | int) and not isinstance(request_id, bool)
    if frame.get("jsonrpc") != "2.0":
        got = json.dumps(frame.get("jsonrpc"))[:40]
        why = f"'jsonrpc' must be \"2.0\", got {got}"
    elif "id" in frame and not usable_id:
        why = "'id' must be a string or an integer"  # (the SDK would take it as a notification)
    else:
        try:
            return types.JSONRPCMessage.model_validate(frame), None
        except ValueError:
            why = "not a JSON-RPC 2.0 request, notification or response"
    if "method" not in frame and ("result" in frame or "error" in frame):
        return None, None
    reply_id = request_id if usable_id else None
    return None, _error(reply_id, INVALID_REQUEST, f"Invalid Request: {why}")


def _error(request_id: Any, code: int, message: str) -> types.JSONRPCError:
    # `id` may be null here (JSON-RPC 2.0, section 5): the SDK's model only types it as
    # str | int, so it is built without validation.
    return types.JSONRPCError.model_construct(
        jsonrpc="2.0", id=request_id, error=types.ErrorData(code=code, message=message)
    )


def _frame(message: Any) -> str:
    """One message as its line of JSON (an error whose request id is unknown says `null`)."""
    if isinstance(message, types.JSONRPCError) and message.id is None:
        error = message.error.model_dump(exclude_none=True, mode="json")
        return json.dumps({"jsonrpc": "2.0", "id": None, "error": error})
    return message.model_dump_json(by_alias=True, exclude_none=True)


@asynccontextmanager
async def stdio_server() -> AsyncIterator[tuple[Any, MemoryObjectSendStream[SessionMessage]]]:
    """`(read_stream, write_stream)` over this process's stdin and stdout."""
    stdin = anyio.wrap_file(TextIOWrapper(sys.stdin.buffer, encoding="utf-8", errors="replace"))
    stdout = anyio.wrap_file(TextIOWrapper(sys.stdout.buffer, encoding="utf-8"))
    read_writer, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](0)
    write_stream, write_reader = anyio.create_memory_object_stream[SessionMessage](0)

    async def stdin_reader(replies: MemoryObjectSendStream[SessionMessage]) -> None:
        async with read_writer, replies:
            async for line in stdin:
                if not line.strip():
                    continue
                message, reply = read_frame(line)
                if message is not None:
                    await read_writer.send(SessionMessage(message))
                elif reply is not None:
                    await replies.send(SessionMessage(types.JSONRPCMessage(reply)))

    async def stdout_writer() -> None:
        async with write_reader:
            async for session_message in write_reader:
                await stdout.write(_frame(session_message.message.root) + "\n")
                await stdout.flush()

    async with anyio.create_task_group() as tg:
        tg.start_soon(stdin_reader, write_stream.clone())
        tg.start_soon(stdout_writer)
        yield read_stream, write_stream
