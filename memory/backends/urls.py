"""Memory URLs: which backend a URL names, the URL from the environment, and a URL as shown.

* no URL, a path or `file://`: a memory directory (`is_directory`);
* `memory://`: the in-memory reference backend;
* `postgresql://...` or `postgres://...`: PostgreSQL (`is_postgres`).

`resolve_url` takes `TETHER_MEMORY_URL` when no URL is given; `redact` is every URL as it is
shown or stored (a memory URL, a model's base URL): without the password of its userinfo
(the last `@` before the host ends it, so an unencoded `@` in a password hides it whole),
without the userinfo of a web URL (a token used as the user name), and with the values of
secret query parameters (`password`, `token`, `api_key`, `sig`, ...) replaced by `***`.
`redact_text` does the same to every URL inside a message.

A leaf: it imports nothing of tether, so every backend and the savers can use it.
"""

from __future__ import annotations

import os
import re
from urllib.parse import quote, unquote

ENV_URL = "TETHER_MEMORY_URL"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def resolve_url(url: str | None = None) -> str | None:
    """The URL given, else `$TETHER_MEMORY_URL`, else `None` (the files default)."""
    return url or os.environ.get(ENV_URL) or None


def is_postgres(url: str | None) -> bool:
    """Whether `url` names a PostgreSQL database."""
    return bool(url) and url.startswith(POSTGRES_SCHEMES)


def is_directory(url: str | None) -> bool:
    """Whether `url` names a memory directory (no URL, a path, or `file://`)."""
    return url is None or url.startswith("file://") or "://" not in url


#: Query parameters whose values are secrets (compared without case, `-` as `_`).
SECRET_PARAMS = frozenset(
    """password passwd pwd pass secret client_secret token access_token refresh_token
    id_token auth auth_token authorization api_key apikey key access_key secret_key sig
    signature sslpassword x_amz_signature x_amz_security_token""".split()
)
_URL_IN_TEXT = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^\s'\"<>`]+")
_HIDDEN = "***"


def redact(url: str) -> str:
    """`url` as it may be shown or stored (see the module docstring):
    `postgresql://user:***@host/db?sslmode=require&password=***`."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = len(rest)
    for mark in "/?#":
        found = rest.find(mark)
        if found != -1:
            end = min(end, found)
    at = rest.rfind("@", 0, end)
    if at == -1 and "@" in rest[end:]:
        # an unencoded `/`, `?` or `#` in a password: the userinfo runs to the last `@`
        # before the host, which follows it without another `/`
        later = rest.rfind("@")
        if ":" in rest[:later] and "/" not in rest[later:].split("?")[0].split("#")[0][:1]:
            at, end = later, len(rest)
    userinfo, host_and_rest = (rest[:at], rest[at + 1 :]) if at != -1 else ("", rest)
    if userinfo:
        user, colon, _password = userinfo.partition(":")
        web = scheme.lower() in ("http", "https", "ws", "wss")
        userinfo = _HIDDEN if web else (f"{user}:{_HIDDEN}" if colon else user)
        host_and_rest = f"{userinfo}@{host_and_rest}"
    return f"{scheme}://{_redact_query(host_and_rest)}"


def encode_userinfo(url: str) -> str:
    """`url` with the user and password of its userinfo percent-encoded when they hold an
    unencoded `@` (`postgresql://bob:p@ss@host/db`): libpq would take the password's tail
    for the host, connect elsewhere and name it in its error."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    end = min([i for i in (rest.find(m) for m in "/?#") if i != -1] or [len(rest)])
    at = rest.rfind("@", 0, end)
    if at == -1 or "@" not in rest[:at]:
        return url
    user, colon, password = rest[:at].partition(":")
    encoded = quote(unquote(user), safe="") + (colon + quote(unquote(password), safe=""))
    return f"{scheme}://{encoded}{rest[at:]}"


def _redact_query(text: str) -> str:
    head, q, query = text.partition("?")
    if not q:
        return text
    query, hash_mark, fragment = query.partition("#")
    parts = []
    for pair in query.split("&"):
        name, eq, _value = pair.partition("=")
        secret = name.strip().lower().replace("-", "_") in SECRET_PARAMS
        parts.append(f"{name}={_HIDDEN}" if eq and secret else pair)
    return f"{head}?{'&'.join(parts)}{hash_mark}{fragment}"


def redact_text(text: str) -> str:
    """`text` with every URL in it `redact`ed (an error message, a warning, a record)."""
    if "://" not in text:
        return text
    return _URL_IN_TEXT.sub(lambda m: redact(m.group(0)), text)
