"""mkdocs hooks: the site's home page is the README, and bench/README.md is a page of it.

The README and bench/README.md stay outside docs/, where a forge shows them; the site takes
them in as generated pages (`index.md`, `bench-results.md`, at the site's root like every
page) and rewrites each relative link to a file that is on the site (`docs/cli.md` from the
README, `../README.md` from a docs page) to that page's site name. The sources are left as
they are, so on a forge every link still names a file; a link to a file that is not on the
site stays as written and fails `mkdocs build --strict`.
"""

from __future__ import annotations

import posixpath
import re
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
GENERATED = {"index.md": "README.md", "bench-results.md": "bench/README.md"}
"""Site page -> its source, relative to the repository's root."""
LINK = re.compile(r"(?P<open>\]\()(?P<target>[^)#\s]+)(?P<rest>(?:#[^)\s]*)?\))")


def site_name(path: str) -> str | None:
    """The site page of `path` (relative to the repository's root), if it is on the site."""
    by_source = {source: page for page, source in GENERATED.items()}
    if path in by_source:
        return by_source[path]
    if path.startswith("docs/") and path.endswith(".md"):
        return path.removeprefix("docs/")
    return None


def rewrite_links(markdown: str, folder: str) -> str:
    """`markdown`'s relative links, written from `folder` (of the repository), as site names."""

    def one(link: re.Match[str]) -> str:
        target = link["target"]
        if "://" in target or target.startswith("mailto:"):
            return link[0]
        name = site_name(posixpath.normpath(posixpath.join(folder, target)))
        return link[0] if name is None else f"{link['open']}{name}{link['rest']}"

    return LINK.sub(one, markdown)


def on_files(files: Any, config: Any) -> Any:
    from mkdocs.structure.files import File

    for page, source in GENERATED.items():
        text = (ROOT / source).read_text(encoding="utf-8")
        files.append(File.generated(config, page, content=text))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    source = GENERATED.get(page.file.src_uri, f"docs/{page.file.src_uri}")
    return rewrite_links(markdown, posixpath.dirname(source))
