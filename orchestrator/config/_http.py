"""What an HTTP request can carry, checked when the workflow is read: a remote agent's
header names and values, its URLs' ports.

A header no request can send (a name with a space, a value with CR/LF or beyond ASCII) or
a port outside 1-65535 fails every attempt alike, so it is the user's mistake, said once
when the workflow is read, never retried as an unreachable server. Invariant: no message
holds a header's value (it may be a secret).
"""

from __future__ import annotations

import re

#: An HTTP header name (RFC 9110 `token`).
_HEADER_NAME_RE = re.compile(r"^[!#$%&'*+\-.^_`|~0-9A-Za-z]+$")
#: What a header value may not hold: control characters but the tab (CR and LF split the
#: request), and anything beyond ASCII (the HTTP client encodes values as ASCII).
_HEADER_BAD_RE = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")


def header_problem(name: str, value: str) -> str | None:
    """Why no HTTP request can carry header `name: value` (None: it can)."""
    if not _HEADER_NAME_RE.match(name):
        return "a header name is letters, digits and !#$%&'*+-.^_`|~ (no space, no colon)"
    if _HEADER_BAD_RE.search(value):
        return "its value holds a line break or a control character"
    if not value.isascii():
        return "its value is not ASCII; HTTP sends header values as ASCII"
    return None


def header_message(agent: str, header: str, problem: str, used: str = "") -> str:
    via = f" (from {used})" if used else ""
    tail = "; a header value is one line of text" if "line break" in problem else ""
    return f"agent {agent!r}: remote header {header!r}: {problem}{via}{tail}"


def host_port(url: str) -> tuple[str, str | None]:
    """The host and the port as written (None: no port) of an http(s) URL."""
    netloc = url.split("://", 1)[1].split("/", 1)[0].split("?", 1)[0]
    host = netloc.rsplit("@", 1)[-1]  # userinfo never shown
    if host.startswith("["):  # an IPv6 address: `[::1]:8000`
        end = host.find("]")
        rest = host[end + 1 :]
        return host[: end + 1], rest[1:] if rest.startswith(":") else None
    name, sep, port = host.partition(":")
    return name, port if sep else None
