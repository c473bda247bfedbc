"""`memory mcp` answers bad frames with JSON-RPC errors and keeps serving.

Raw lines go to a spawned `memory mcp` over its stdin, the way a buggy or hostile client
would send them: a frame that is not JSON gets `-32700` with `id: null`; JSON that is not a
JSON-RPC 2.0 message (`"jsonrpc": "1.0"`, no method, an array) gets `-32600` with the
request's id when it has one; the next valid request on the same session is answered.
"""

from __future__ import annotations

import json
import os
import select
import subprocess
import sys
import time

import pytest

from memory.mcp.mcp_server import read_frame

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


class RawClient:
    """A `memory mcp` process spoken to one line at a time."""

    def __init__(self, memory_dir):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "memory", "--memory-dir", str(memory_dir), "mcp"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=dict(os.environ),
        )

    def send(self, line: str) -> None:
        self.proc.stdin.write(line.encode("utf-8") + b"\n")
        self.proc.stdin.flush()

    def receive(self, timeout: float = 30.0) -> dict:
        """The next message (a reply is due: no reply within `timeout` fails the test)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                line = self.proc.stdout.readline()
                assert line, f"the server exited: {self.proc.stderr.read().decode()[-2000:]}"
                return json.loads(line)
        pytest.fail("no reply from `memory mcp` (a client would wait forever)")

    def close(self) -> None:
        self.proc.stdin.close()
        try:
            self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.stdout.close()
            self.proc.stderr.close()


@pytest.fixture
def client(memory_dir):
    raw = RawClient(memory_dir)
    raw.send(json.dumps(INIT))
    assert raw.receive()["id"] == 1
    raw.send(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}))
    yield raw
    raw.close()


BAD_FRAMES = [
    ("{not json", None, -32700),
    ('{"jsonrpc": "2.0", "id": 3, "method": "tools/list"', None, -32700),  # cut short
    ("\x00\x01binary", None, -32700),
    (json.dumps({"jsonrpc": "1.0", "id": 7, "method": "tools/list"}), 7, -32600),
    (json.dumps({"jsonrpc": "2.0", "id": "abc"}), "abc", -32600),  # no method, no result
    (json.dumps({"id": 9, "method": "tools/list"}), 9, -32600),  # no "jsonrpc"
    (json.dumps([{"jsonrpc": "2.0", "id": 4, "method": "tools/list"}]), None, -32600),
    (json.dumps({"jsonrpc": "2.0", "id": {"x": 1}, "method": "ping"}), None, -32600),
    ("42", None, -32600),
]


def test_each_bad_frame_gets_an_error_reply_and_the_session_goes_on(client):
    for number, (frame, reply_id, code) in enumerate(BAD_FRAMES, start=100):
        client.send(frame)
        reply = client.receive()
        assert reply["jsonrpc"] == "2.0", frame
        assert "id" in reply and reply["id"] == reply_id, (frame, reply)
        assert reply["error"]["code"] == code, (frame, reply)
        assert "result" not in reply
        client.send(json.dumps({"jsonrpc": "2.0", "id": number, "method": "tools/list"}))
        after = client.receive()
        assert after["id"] == number, (frame, after)
        assert "recall" in {t["name"] for t in after["result"]["tools"]}


def test_the_version_error_names_the_field():
    message, reply = read_frame(json.dumps({"jsonrpc": "1.0", "id": 7, "method": "ping"}))
    assert message is None
    assert reply.error.message == 'Invalid Request: \'jsonrpc\' must be "2.0", got "1.0"'


def test_valid_messages_pass_and_a_bad_response_is_not_answered():
    ping = read_frame(json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}))
    assert ping[0].root.method == "ping" and ping[1] is None
    note = read_frame(json.dumps({"jsonrpc": "2.0", "method": "notifications/x"}))
    assert note[0] is not None and note[1] is None
    # JSON-RPC never answers a response, even a malformed one
    assert read_frame(json.dumps({"jsonrpc": "2.0", "id": None, "result": {}})) == (None, None)
