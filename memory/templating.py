"""The Jinja environment that renders every file tether writes.

Templates are looked up first in the project's own `templates/` folder, then in tether's
shipped ones, so a project overrides a template by giving a file the same name. Rendering
is sandboxed (`SandboxedEnvironment`) with `StrictUndefined`, so a missing variable fails
loudly instead of writing an empty section. JSON templates must pass every value through
`tojson`; that filter escapes `<`, `>`, `&` and `'` as `\\u` sequences, which keeps the
output valid JSON for any string (quotes, newlines, unicode, `{{`, `</script>`). `tojson`
encodes with orjson (keys sorted, compact, UTF-8 text as it is): the standard encoder took
a third of a checkpoint's write. `tojson(indent=N)` and what orjson refuses (an integer
beyond 64 bits, a key that is not a string) go through the standard encoder.

Jinja is imported here only, and only when a template is rendered. Compiled templates are
kept in Jinja's bytecode cache in `memory.cachedir`, so a new process does not compile them
again (about 25 ms per command); a template whose source changed is compiled again, and
without a usable cache folder nothing is cached.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path
from typing import Any

import orjson

from memory.cachedir import cache_dir
from memory.errors import TemplateRenderError
from memory.resources import shipped_dir


@functools.lru_cache(maxsize=8)
def _environment(project_dir: str):
    import jinja2
    from jinja2.sandbox import SandboxedEnvironment

    search = [Path(project_dir) / "templates", shipped_dir("templates")]
    env = SandboxedEnvironment(
        loader=jinja2.FileSystemLoader([str(p) for p in search]),
        bytecode_cache=_bytecode_cache(),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.policies["json.dumps_function"] = _tojson_dumps
    return env


def _tojson_dumps(obj: Any, **kwargs: Any) -> str:
    """`json.dumps` for Jinja's `tojson` (called with `sort_keys=True`, and `indent` when
    the template asks), through orjson when it can; NaN and infinities become `null`."""
    if kwargs.get("indent") is None:
        option = orjson.OPT_SORT_KEYS if kwargs.get("sort_keys") else 0
        try:
            return orjson.dumps(obj, option=option).decode("utf-8")
        except orjson.JSONEncodeError:
            pass
    return json.dumps(obj, **kwargs)


@functools.lru_cache(maxsize=1)
def _bytecode_cache() -> Any:
    import jinja2

    folder = cache_dir()
    return jinja2.FileSystemBytecodeCache(str(folder)) if folder is not None else None


def render(name: str, project_dir: str | os.PathLike[str] | None = None, **context: Any) -> str:
    """Render template `name` (e.g. `"research_plan.md.j2"`) with `context`.

    Raises:
        TemplateRenderError: unknown template, syntax error, or an undefined variable.
    """
    import jinja2

    env = _environment(str(Path(project_dir) if project_dir else Path.cwd()))
    try:
        return env.get_template(name).render(**context)
    except jinja2.TemplateNotFound:
        raise TemplateRenderError(
            f"template {name!r} not found in the project's templates/ or tether's"
        ) from None
    except jinja2.TemplateSyntaxError as exc:
        raise TemplateRenderError(
            f"template {name!r} has a syntax error at line {exc.lineno}: {exc.message}"
        ) from None
    except jinja2.UndefinedError as exc:
        raise TemplateRenderError(f"template {name!r}: {exc.message}") from None
    except jinja2.exceptions.SecurityError as exc:
        raise TemplateRenderError(f"template {name!r} tried an unsafe operation: {exc}") from None
