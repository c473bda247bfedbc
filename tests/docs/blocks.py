"""The code blocks of the README and docs/, each marked as run by the tests or not.

A fenced block is preceded (blank lines aside) by one of two HTML comments, invisible on a
forge and in mkdocs:

* `<!-- runs -->`, optionally with options after a colon, comma-separated:
  `model` (an OpenAI key is set: the block's model is the scripted server),
  `exit N` (a shell block must end with exit code N, default 0),
  `file NAME` (the block is written as NAME in the page's folder; later blocks use it);
* `<!-- not run: REASON -->`.

`tests/test_docs.py` runs the `runs` blocks of each page in order, in one fresh folder
holding a small sample project (`write_sample_project`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,})(?P<info>[^`]*)$")
MARK = re.compile(r"^\s*<!--\s*(?P<kind>runs|not run)\s*(?::\s*(?P<rest>.*?))?\s*-->\s*$")


@dataclass
class Block:
    """One fenced block of a Markdown page."""

    page: str
    line: int
    """The line of its opening fence (from 1)."""
    lang: str
    code: str
    mark: str | None
    """`runs`, `not run` or None (unmarked)."""
    reason: str = ""
    options: dict[str, str] = field(default_factory=dict)

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"

    @property
    def runs(self) -> bool:
        return self.mark == "runs"


def parse_blocks(text: str, page: str) -> list[Block]:
    """Every fenced block of `text` with the mark just before it."""
    lines = text.splitlines()
    blocks: list[Block] = []
    i = 0
    while i < len(lines):
        opening = FENCE.match(lines[i])
        if not opening:
            i += 1
            continue
        indent, fence = len(opening["indent"]), opening["fence"]
        body: list[str] = []
        j = i + 1
        while j < len(lines) and not re.match(rf"^ *{fence}`*\s*$", lines[j]):
            body.append(lines[j][indent:] if lines[j][:indent].isspace() else lines[j])
            j += 1
        mark, reason, options = _mark_before(lines, i)
        blocks.append(
            Block(
                page=page,
                line=i + 1,
                lang=opening["info"].strip().split(" ")[0].lower(),
                code="\n".join(body) + "\n",
                mark=mark,
                reason=reason,
                options=options,
            )
        )
        i = j + 1
    return blocks


def _mark_before(lines: list[str], index: int) -> tuple[str | None, str, dict[str, str]]:
    k = index - 1
    while k >= 0 and not lines[k].strip():
        k -= 1
    found = MARK.match(lines[k]) if k >= 0 else None
    if not found:
        return None, "", {}
    rest = (found["rest"] or "").strip()
    if found["kind"] == "not run":
        return "not run", rest, {}
    options = {}
    for part in filter(None, (p.strip() for p in rest.split(","))):
        key, _, value = part.partition(" ")
        options[key] = value.strip()
    return "runs", "", options


SAMPLE_FILES = {
    "README.md": "# Shop\nA tiny shop service: carts, orders and payments.\n",
    "src/shop/__init__.py": '"""Shop: carts, orders and payments."""\n',
    "src/shop/cart.py": (
        '"""The cart: items a customer is about to buy."""\n\n\n'
        "def add_item(cart, item):\n    # TODO: refuse items out of stock\n"
        "    cart.append(item)\n    return cart\n"
    ),
    "src/shop/payments.py": (
        '"""Payments: charge a card, retry a declined charge once."""\n\n\n'
        "def charge(card, amount):\n    return {'card': card, 'amount': amount}\n"
    ),
}


def write_sample_project(root: Path) -> Path:
    """A small project for the blocks' runs to survey (`--workdir .` stays fast)."""
    for rel, text in SAMPLE_FILES.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return root
