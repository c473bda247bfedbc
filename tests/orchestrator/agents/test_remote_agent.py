"""A remote agent's pieces (the seam `orchestrator.agents.remote` and its LangGraph Server
implementation `orchestrator.agents.langgraph_server`) without a server: the derived
thread ids, a final state read as a finding and its usage, the spread over servers, and an
unreachable server given up on within the timeout with a message that names no header."""

from __future__ import annotations

import socket
import threading
import time
import uuid

import pytest

from orchestrator.agents.langgraph_server import LangGraphServer, findings_of, usage_of
from orchestrator.agents.remote import NoFinding, RemoteRuns, shown, thread_id_for
from orchestrator.errors import RemoteAgentError, RemoteUnreachableError


def ai(content, usage=None, **extra):
    return {"type": "ai", "content": content, "usage_metadata": usage, **extra}


def test_thread_ids_are_uuids_of_task_subtask_and_attempt():
    one = thread_id_for("t", "2026-01-01T00:00:00", "exploration/a", 1)
    assert uuid.UUID(one).version == 5
    assert one == thread_id_for("t", "2026-01-01T00:00:00", "exploration/a", 1)  # any process
    others = {
        thread_id_for("t", "2026-01-01T00:00:00", "exploration/a", 2),
        thread_id_for("t", "2026-01-01T00:00:00", "exploration/b", 1),
        thread_id_for("t", "2026-02-02T00:00:00", "exploration/a", 1),  # same id, other task
    }
    assert one not in others and len(others) == 3


@pytest.mark.parametrize(
    "values,expected",
    [
        ({"messages": [{"type": "human", "content": "do"}, ai("Found it in a.py:3.")]},
         {"status": "completed", "summary": "Found it in a.py:3."}),
        ({"messages": [ai([{"type": "text", "text": "Part one. "}, {"type": "text",
          "text": "Part two."}]), ai("", tool_calls=[{"name": "x"}])]},
         {"status": "completed", "summary": "Part one. Part two."}),  # the last with text
        ({"messages": [ai("plain")], "structured_response": {"summary": "S", "key_discoveries":
          ["k"]}}, {"summary": "S", "key_discoveries": ["k"]}),
        ({"messages": [ai("plain")], "structured_response": {"answer": 42}},
         {"status": "completed", "summary": "plain"}),  # not tether's shape: the message
    ],
)  # fmt: skip
def test_a_final_state_becomes_a_finding(values, expected):
    found = findings_of(values)
    assert {k: found[k] for k in expected} == expected


def test_a_final_state_without_an_answer_is_an_error():
    with pytest.raises(RemoteAgentError, match="no AI message and no structured_response"):
        findings_of({"messages": [{"type": "human", "content": "x"}]})


def test_usage_is_what_the_messages_report_or_unknown():
    reported = {"input_tokens": 100, "output_tokens": 20, "total_tokens": 120}
    values = {"messages": [ai("a", reported), ai("b", reported), ai("c")]}
    assert usage_of(values) == {"calls": 3, "input_tokens": 200, "tokens": 240}
    assert usage_of({"messages": [ai("a"), {"type": "human", "content": "x"}]}) is None


@pytest.mark.parametrize("messages", [[], 5, "text", {"type": "ai"}])
def test_a_final_state_whose_messages_give_no_answer_is_no_finding(messages):
    with pytest.raises(NoFinding):
        findings_of({"messages": messages})


def test_malformed_usage_is_unknown_and_negative_counts_are_zero():
    answer = {"messages": [ai("found", {"input_tokens": "abc", "output_tokens": 3})]}
    assert usage_of(answer) is None  # unknown, and the answer is still the finding
    assert findings_of(answer)["summary"] == "found"
    negative = {"input_tokens": -999_999_999, "output_tokens": 5, "total_tokens": -7}
    assert usage_of({"messages": [ai("a", negative)]}) == {
        "calls": 1,
        "input_tokens": 0,
        "tokens": 5,
    }
    for bad in (float("nan"), True, [1], None and 1):
        counted = usage_of({"messages": [ai("a", {"input_tokens": bad, "output_tokens": 1})]})
        assert counted is None or counted["input_tokens"] >= 0


def test_new_attempts_go_to_the_server_with_fewest_runs_in_flight():
    runs = RemoteRuns()
    urls = ["http://a", "http://b"]
    picked = [runs.pick(urls) for _ in range(4)]
    assert picked == ["http://a", "http://b", "http://a", "http://b"]
    runs.release("http://a")
    runs.release("http://a")
    assert runs.pick(urls) == "http://a"  # a has none in flight now
    runs.hold("http://a")
    assert runs.pick(urls) == "http://b"


def test_an_unreachable_server_is_given_up_on_within_the_timeout():
    with socket.socket() as sock:  # a port nobody listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = LangGraphServer(
        f"http://127.0.0.1:{port}", "g", {"x-api-key": "k3y-value"}, timeout=1.0
    )
    start = time.monotonic()
    with pytest.raises(RemoteUnreachableError) as caught:
        server.latest(thread_id_for("t", "c", "k", 1))
    assert 0.8 <= time.monotonic() - start < 4
    message = str(caught.value)
    assert message.startswith(f"LangGraph Server http://127.0.0.1:{port} unreachable")
    assert "k3y-value" not in message and "\n" not in message


def test_a_join_stops_waiting_at_ctrl_c_and_leaves_the_run_alone():
    """The join waits in a thread of its own, so Ctrl-C (`stop`) ends the wait at once."""
    from orchestrator.errors import Stopped

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    accepted = []
    threading.Thread(target=lambda: accepted.append(listener.accept()), daemon=True).start()
    server = LangGraphServer(f"http://127.0.0.1:{listener.getsockname()[1]}", "g", {}, timeout=30)
    stop = threading.Event()
    threading.Timer(0.3, stop.set).start()
    start = time.monotonic()
    with pytest.raises(Stopped, match="while joining remote run r1"):
        server.join("t1", "r1", stop)  # the "server" accepts and never answers
    assert time.monotonic() - start < 2
    listener.close()


def test_urls_are_shown_without_credentials():
    assert shown("https://user:pw@host:2024/x") == "https://host:2024/x"
    assert shown("http://host:2024") == "http://host:2024"
    assert shown("http://host:2024/?token=t0k&x=1") == "http://host:2024/?token=***&x=1"
    assert shown("http://u:p@ss@host/x?api_key=k") == "http://host/x?api_key=***"


class _JoinServer:
    """A stand-in for a server's join endpoint: silent for `silence` seconds, then the run's
    values; the first `drops` joins are cut off after `silence` seconds instead."""

    def __init__(self, silence: float, drops: int = 0) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        outer = self
        self.joins = 0

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"  # a body of a stated length: a cut one is an error

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                outer.joins += 1
                body = b'{"messages": []}'
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                time.sleep(silence)
                if outer.joins <= drops:
                    self.wfile.write(body[:3])
                    self.wfile.flush()
                    self.connection.shutdown(socket.SHUT_RDWR)  # dropped mid-join
                    self.close_connection = True
                    return
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def close(self) -> None:
        self.http.shutdown()


def test_a_join_outlasts_the_timeout_while_the_run_goes_on():
    """The timeout bounds reaching the server, not the run: a join silent for longer (a
    real server's heartbeat comes every 5 s) is not given up on."""
    fake = _JoinServer(silence=1.5)
    try:
        LangGraphServer(fake.url, "g", {}, timeout=0.5).join("t1", "r1", threading.Event())
        assert fake.joins == 1
    finally:
        fake.close()


def test_a_join_dropped_after_the_timeout_is_joined_again():
    """The retries' timeout starts at the failure: a join cut off after a long wait joins
    again instead of giving up at once."""
    fake = _JoinServer(silence=1.0, drops=1)
    try:
        LangGraphServer(fake.url, "g", {}, timeout=0.5).join("t1", "r1", threading.Event())
        assert fake.joins == 2
    finally:
        fake.close()


class _Answers:
    """A stand-in for a server that answers every request with `body` (status 200)."""

    def __init__(self, body: bytes) -> None:
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer  # noqa: N815 - http.server's names

            def log_message(self, *args: object) -> None:
                pass

        self.http = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.http.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.http.server_address[1]}"

    def close(self) -> None:
        self.http.shutdown()


@pytest.mark.parametrize(
    "body",
    [b"{}", b"[1]", b"<html>not json</html>", b'[{"status": "success"}]', b'"text"', b"[[]]"],
)
def test_a_server_answering_something_unexpected_is_named_in_one_line(body):
    fake = _Answers(body)
    server = LangGraphServer(fake.url, "g", {}, timeout=2.0)
    try:
        for call in (
            lambda: server.latest("t1"),
            lambda: server.start("t1", {}, {"messages": []}),
        ):
            with pytest.raises(RemoteAgentError) as caught:
                call()
            message = str(caught.value)
            assert message.startswith(fake.url), message
            assert "does not speak LangGraph Server's protocol" in message
            assert "\n" not in message
        assert server.memory() is None  # a probe answered so: cannot tell
    finally:
        server.close()
        fake.close()
