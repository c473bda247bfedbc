"""Docs cannot drift: every CLI command has help and is documented in docs/cli.md, the
progress events table is generated from their models, and every code block of the README
and docs/ is marked, and run when marked `<!-- runs -->` (see `tests/docs/blocks.py`)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest

from memory.cli.app import cli as memory_cli
from orchestrator.cli.app import cli as orchestrator_cli
from orchestrator.config.workflow import KNOWN_TOOLS, load_workflow
from orchestrator.events import events_table
from orchestrator.tools.toolbox import PROTOCOL_TOOLS
from tests.docs.blocks import Block, parse_blocks, write_sample_project
from tests.orchestrator.openai_server import ScriptedOpenAI, policy_responder

ROOT = Path(__file__).resolve().parent.parent
PAGES = ["README.md", *sorted(str(p.relative_to(ROOT)) for p in (ROOT / "docs").glob("*.md"))]
TEXT = {page: (ROOT / page).read_text(encoding="utf-8") for page in PAGES}
BLOCKS = [block for page in PAGES for block in parse_blocks(TEXT[page], page)]
CLI_DOC = TEXT["docs/cli.md"]


def _command_paths(group: click.Group, prefix: str) -> list[tuple[str, click.Command]]:
    found = []
    for name, command in sorted(group.commands.items()):
        path = f"{prefix} {name}"
        found.append((path, command))
        if isinstance(command, click.Group):
            found.extend(_command_paths(command, path))
    return found


ALL_COMMANDS = _command_paths(memory_cli, "memory") + _command_paths(
    orchestrator_cli, "orchestrator"
)


def test_both_clis_have_their_core_verbs():
    paths = {path for path, _ in ALL_COMMANDS}
    expected = {
        "memory log",
        "memory fetch",
        "memory list",
        "memory search",
        "memory refs",
        "memory stats",
        "memory prune",
        "memory reindex",
        "memory summary status",
        "memory facts",
        "memory episodes",
        "orchestrator run",
        "orchestrator resume",
        "orchestrator handoff",
        "orchestrator status",
        "orchestrator checkpoint now",
        "orchestrator checkpoint load",
        "orchestrator checkpoint report",
        "orchestrator checkpoint list",
        "orchestrator snapshot",
    }
    assert expected <= paths, sorted(expected - paths)


@pytest.mark.parametrize("path,command", ALL_COMMANDS, ids=[p for p, _ in ALL_COMMANDS])
def test_every_command_has_help_and_a_heading_in_docs_cli(path, command):
    assert (command.help or "").strip(), f"{path} has no help text"
    heading = re.search(rf"^#+ `{re.escape(path)}( [^`]*)?`", CLI_DOC, flags=re.MULTILINE)
    assert heading, f"{path} has no heading of its own in docs/cli.md"


@pytest.mark.parametrize("path,command", ALL_COMMANDS, ids=[p for p, _ in ALL_COMMANDS])
def test_every_option_of_every_command_is_in_docs_cli(path, command):
    section = _section(CLI_DOC, path)
    missing = [
        opt
        for param in command.params
        if isinstance(param, click.Option) and param.name not in ("help", "memory_dir")
        for opt in param.opts[:1]
        if opt not in section
    ]
    assert not missing, f"{path}: options not documented in its docs/cli.md section: {missing}"


def _section(text: str, path: str) -> str:
    """The text from `path`'s heading to the next heading of the same or a higher level."""
    found = re.search(rf"^(#+) `{re.escape(path)}( [^`]*)?`.*$", text, flags=re.MULTILINE)
    if not found:
        return ""
    level = len(found[1])
    rest = text[found.end() :]
    end = re.search(rf"^#{{1,{level}}} ", rest, flags=re.MULTILINE)
    return rest[: end.start()] if end else rest


def test_the_docs_list_every_progress_event_as_its_model_defines_it():
    assert events_table() in TEXT["docs/events.md"], "regenerate its table with events_table()"


def test_the_exit_code_table_names_every_code_the_commands_use():
    from orchestrator.cli import exits

    codes = {0, 1, 2, 130, 143} | {
        value for name, value in vars(exits).items() if name.startswith("EXIT_")
    }
    for code in sorted(codes):
        assert re.search(rf"^\| `{code}` \|", CLI_DOC, flags=re.MULTILINE), code


def test_the_readme_is_short_and_its_lines_fit():
    lines = TEXT["README.md"].splitlines()
    assert len(lines) <= 260, len(lines)
    long = [i + 1 for i, line in enumerate(lines) if len(line) > 100]
    assert not long, f"README.md lines over 100 characters: {long}"


def test_the_docs_keep_naming_the_command_that_regenerates_the_checkpoint_schema():
    everything = "".join(TEXT.values())
    assert "python -m orchestrator.artifacts.checkpoint_model" in everything


def test_every_docs_page_is_in_the_mkdocs_nav():
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    missing = [p for p in PAGES if p.startswith("docs/") and p.removeprefix("docs/") not in nav]
    assert not missing, missing


def test_links_between_pages_name_files_that_exist():
    broken = []
    for page in PAGES:
        for target in re.findall(r"\]\(([^)#\s]+)(?:#[^)]*)?\)", TEXT[page]):
            if "://" in target:
                continue
            if not ((ROOT / page).parent / target).exists():
                broken.append(f"{page}: {target}")
    assert not broken, broken


@pytest.mark.parametrize("block", BLOCKS, ids=[b.where for b in BLOCKS])
def test_every_code_block_is_marked_as_run_or_not(block: Block):
    assert block.mark, (
        f"{block.where}: put `<!-- runs -->` or `<!-- not run: why -->` before the block"
    )
    assert block.mark != "not run" or block.reason, f"{block.where}: say why it is not run"
    if block.runs:
        assert block.lang in RUNNERS, f"{block.where}: cannot run a {block.lang!r} block"


OURS = re.compile(r"(from|import) (memory|orchestrator|langchain\w*|langgraph\w*|mcp)\b")


def _python_imports() -> list[str]:
    """Every `import` line of the python examples: in a block marked `not run`, those of
    tether and the packages `.[dev]` installs (an example may show another package)."""
    lines = [
        ln.strip()
        for b in BLOCKS
        if b.lang == "python"
        for ln in b.code.splitlines()
        if b.runs or OURS.match(ln.strip())
    ]
    return sorted({ln for ln in lines if re.match(r"(from \S+ )?import \S", ln)})


@pytest.mark.parametrize("line", _python_imports())
def test_every_import_in_the_examples_works(line):
    namespace: dict = {}
    exec(compile(line, "docs", "exec"), namespace)  # an ImportError fails the test
    code = line.split("#", 1)[0].strip()
    if code.startswith("import "):
        names = [n.strip().split(" as ")[-1].split(".")[0] for n in code[7:].split(",")]
    elif code.endswith(" import *"):
        names = [n for n in namespace if not n.startswith("__")][:1] or ["(nothing imported)"]
    else:
        names = [n.strip().split(" as ")[-1] for n in code.split(" import ", 1)[-1].split(",")]
    assert all(name in namespace for name in names), line


# -- running the blocks -----------------------------------------------------------------

TETHER_TOOLS = frozenset(KNOWN_TOOLS) | PROTOCOL_TOOLS
SAMPLE_ARGS = {"string": "red", "integer": 1, "number": 1.0, "boolean": False}


def calls_each_user_tool_once(body: dict) -> dict:
    """The scripted model: calls each tool that is not tether's once per conversation (so
    the examples' own tools really run), then answers as the offline model would."""
    if body.get("tool_choice") in (None, "auto"):
        called = {
            call["function"]["name"]
            for message in body.get("messages", [])
            for call in message.get("tool_calls") or []
        }
        for tool in body.get("tools") or []:
            function = tool["function"]
            if function["name"] in TETHER_TOOLS or function["name"] in called:
                continue
            schema = function.get("parameters") or {}
            args = {
                name: SAMPLE_ARGS.get(spec.get("type"), "red")
                for name, spec in (schema.get("properties") or {}).items()
                if name in (schema.get("required") or [])
            }
            return {"tool": function["name"], "args": args}
    return policy_responder(body)


def user_tool_errors(server: ScriptedOpenAI) -> list[str]:
    """The answers to the user tools' calls that were errors."""
    errors = []
    for body in server.requests:
        names = {}
        for message in body.get("messages", []):
            for call in message.get("tool_calls") or []:
                names[call["id"]] = call["function"]["name"]
            name = names.get(message.get("tool_call_id"))
            content = str(message.get("content"))
            if (
                message.get("role") == "tool"
                and name not in TETHER_TOOLS
                and "Error" in content[:80]
            ):
                errors.append(f"{name}: {content[:200]}")
    return sorted(set(errors))


class Page:
    """One page's folder, environment and scripted model server."""

    def __init__(self, folder: Path, server: ScriptedOpenAI, monkeypatch: pytest.MonkeyPatch):
        self.folder = folder
        self.server = server
        self.monkeypatch = monkeypatch
        env = {k: v for k, v in os.environ.items() if k != "TETHER_MEMORY_DIR"}
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env.update(
            OPENAI_BASE_URL=server.base_url,
            OPENAI_API_BASE=server.base_url,
            TETHER_ALLOW_MODEL_REQUESTS="1",
            COLUMNS="100",
        )
        self.env = env

    def block_env(self, block: Block) -> dict[str, str]:
        env = dict(self.env)
        if "model" in block.options:
            env["OPENAI_API_KEY"] = "sk-test"
        return env

    def run(self, block: Block) -> None:
        name = block.options.get("file")
        if name:
            (self.folder / name).write_text(block.code, encoding="utf-8")
        RUNNERS[block.lang](self, block)

    def shell(self, block: Block) -> None:
        done = subprocess.run(
            ["bash", "-e", "-o", "pipefail", "-c", block.code],
            cwd=self.folder,
            env=self.block_env(block),
            capture_output=True,
            text=True,
            timeout=120,
        )
        expected = int(block.options.get("exit") or 0)
        assert done.returncode == expected, (
            f"{block.where}: exit {done.returncode}, expected {expected}\n"
            f"stdout:\n{done.stdout[-3000:]}\nstderr:\n{done.stderr[-3000:]}"
        )

    def python(self, block: Block) -> None:
        code = compile(block.code, block.where, "exec")
        if block.options.get("file"):
            return  # a module later blocks import: compiled here, run where it is used
        with self.monkeypatch.context() as patch:
            patch.chdir(self.folder)
            patch.delenv("TETHER_MEMORY_DIR", raising=False)
            for key, value in self.block_env(block).items():
                patch.setenv(key, value)
            patch.syspath_prepend(str(self.folder))
            namespace: dict = {"__name__": "__docs__"}
            exec(code, namespace)
        result = namespace.get("result")
        if hasattr(result, "status"):
            assert result.status == "done", f"{block.where}: the run ended {result.status}"

    def yaml(self, block: Block) -> None:
        name = block.options.get("file")
        if name:  # loaded here; a later block runs it
            load_workflow(self.folder / name, project_dir=self.folder)
            return
        path = self.folder / "docs-workflow.yaml"
        path.write_text(block.code, encoding="utf-8")
        self.shell(
            Block(
                page=block.page,
                line=block.line,
                lang="bash",
                code=f"orchestrator run 'Survey this project' --workflow {path.name}\n",
                mark="runs",
                options=block.options,
            )
        )

    def json(self, block: Block) -> None:
        json.loads(block.code)

    def written(self, block: Block) -> None:
        assert block.options.get("file"), f"{block.where}: a {block.lang} block runs as a file"


RUNNERS = {
    "bash": Page.shell,
    "sh": Page.shell,
    "shell": Page.shell,
    "python": Page.python,
    "yaml": Page.yaml,
    "json": Page.json,
    "markdown": Page.written,
}
RUN_PAGES = [page for page in PAGES if any(b.runs for b in BLOCKS if b.page == page)]


@pytest.mark.parametrize("page", RUN_PAGES)
def test_the_blocks_marked_runs_run_as_pasted(page, tmp_path, monkeypatch):
    _run_page(page, write_sample_project(tmp_path / "project"), monkeypatch)


def test_the_python_api_example_runs_in_a_project_whose_readme_is_not_markdown(
    tmp_path, monkeypatch
):
    folder = write_sample_project(tmp_path / "project")
    (folder / "README.md").rename(folder / "README.rst")
    _run_page("docs/serving.md", folder, monkeypatch)


def _run_page(page: str, folder: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with ScriptedOpenAI(responder=calls_each_user_tool_once) as server:
        runner = Page(folder, server, monkeypatch)
        for block in (b for b in BLOCKS if b.page == page and b.runs):
            runner.run(block)
        assert not user_tool_errors(server), user_tool_errors(server)
