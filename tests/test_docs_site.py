"""The docs site as `mkdocs build --strict` makes it: a front door, working links, offline.

The home page is the README (what tether is, why, the install line and the start), the
reference pages follow, bench/README.md is a page; every link of every page leads to a built
page; code is highlighted by Pygments at build time, and no page loads a script, style sheet
or font from another host (the site works offline).
"""

from __future__ import annotations

import html
import re
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def _pages(site: Path) -> list[Path]:
    return sorted(site.rglob("*.html"))


def _text(page: Path) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))


def test_the_home_page_is_the_front_door(site: Path) -> None:
    home = (site / "index.html").read_text(encoding="utf-8")
    text = _text(site / "index.html")
    assert "Long-running multi-agent LLM work" in text
    assert "Why tether" in text and "deepagents" in text  # the comparison
    assert "pip install -e '.[dev]'" in text  # the install line
    assert 'orchestrator run "Survey this repository' in text  # the start
    assert "<ol>" in home  # the README's three jobs are a list, as on a forge
    assert 'href="reference/"' in home and 'href="cli/"' in home  # then the reference


def test_every_link_of_every_page_leads_to_a_built_page(site: Path) -> None:
    broken = []
    for page in _pages(site):
        for href in re.findall(r'<a [^>]*href="([^"]+)"', page.read_text(encoding="utf-8")):
            parts = urlsplit(html.unescape(href))
            if parts.scheme or parts.netloc or not parts.path:
                continue
            base = site if parts.path.startswith("/") else page.parent  # 404.html: from the root
            target = (base / parts.path.lstrip("/")).resolve()
            if target.is_dir():
                target = target / "index.html"
            if not target.is_file():
                broken.append(f"{page.relative_to(site)}: {href}")
                continue
            if parts.fragment and f'id="{parts.fragment}"' not in target.read_text("utf-8"):
                broken.append(f"{page.relative_to(site)}: {href} (no such anchor)")
    assert not broken, broken


def test_the_readme_and_bench_readme_links_reach_their_pages(site: Path) -> None:
    agents = (site / "agents" / "index.html").read_text(encoding="utf-8")
    assert 'href="../#your-agents-and-tools"' in agents  # ../README.md#your-agents-and-tools
    benchmarks = (site / "benchmarks" / "index.html").read_text(encoding="utf-8")
    assert 'href="../bench-results/"' in benchmarks  # ../bench/README.md
    assert 'href="bench-results/"' in (site / "index.html").read_text(encoding="utf-8")
    assert "What a run costs" in _text(site / "bench-results" / "index.html")


def test_code_is_highlighted_at_build_time(site: Path) -> None:
    home = (site / "index.html").read_text(encoding="utf-8")
    assert re.search(r'<div class="highlight"><pre><span></span><code>.*?<span class="', home, re.S)
    assert 'href="css/pygments.css"' in home
    assert ".highlight .k " in (site / "css" / "pygments.css").read_text(encoding="utf-8")


def test_no_page_loads_anything_from_another_host(site: Path) -> None:
    outside = []
    loads = re.compile(r'<(?:script|link|img|iframe)\b[^>]*\b(?:src|href)="([^"]+)"')
    for page in _pages(site):
        for url in loads.findall(page.read_text(encoding="utf-8")):
            if urlsplit(url).netloc:
                outside.append(f"{page.relative_to(site)}: {url}")
    for sheet in sorted(site.rglob("*.css")):
        for url in re.findall(r"(?:url\(|@import)\s*['\"]?([^'\")\s]+)", sheet.read_text("utf-8")):
            if urlsplit(url).netloc:
                outside.append(f"{sheet.relative_to(site)}: {url}")
    assert not outside, outside
