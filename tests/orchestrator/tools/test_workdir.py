"""The read-only workdir tools: listing, reading, grepping, confinement and noise skipping."""

from __future__ import annotations

import json
import re

import pytest

from orchestrator.config.settings import check_workdir
from orchestrator.errors import WorkdirError
from orchestrator.tools.workdir import workdir_tools


@pytest.fixture
def repo(tmp_path):
    """A small project with source, docs, noise folders, a binary and a secret outside."""
    root = tmp_path / "repo"
    (root / "pkg").mkdir(parents=True)
    (root / "pkg" / "__init__.py").write_text('"""The pkg package."""\n')
    (root / "pkg" / "core.py").write_text(
        '"""Core logic."""\n\n\ndef compute(x):\n    # TODO: handle negatives\n    return x * 2\n'
    )
    (root / "README.md").write_text("# Demo\n\nA demo project.\n")
    (root / ".git").mkdir()
    (root / ".git" / "config").write_text("secret git config compute\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "core.txt").write_text("compute cache\n")
    (root / "node_modules" / "dep").mkdir(parents=True)
    (root / "node_modules" / "dep" / "index.js").write_text("compute()\n")
    (root / ".hidden").mkdir()
    (root / ".hidden" / "notes.md").write_text("compute hidden\n")
    (root / "logo.dat").write_bytes(b"compute\x00\x01\x02binary")
    (root / "image.png").write_bytes(b"not really a png")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.txt").write_text("top secret compute\n")
    return root


@pytest.fixture
def tools(repo):
    return {t.name: t for t in workdir_tools(repo)}


class TestCheckWorkdir:
    def test_existing_dir_is_resolved(self, repo):
        assert check_workdir(str(repo)) == repo.resolve()

    @pytest.mark.parametrize(
        "make, expected",
        [
            (lambda p: p / "missing", "does not exist"),
            (lambda p: p / "repo" / "README.md", "is not a directory"),
        ],
    )
    def test_bad_workdir_is_one_line_error_naming_it(self, repo, tmp_path, make, expected):
        path = make(tmp_path)
        with pytest.raises(WorkdirError) as info:
            check_workdir(path)
        message = str(info.value)
        assert expected in message and repr(str(path)) in message and "\n" not in message

    def test_unreadable_workdir(self, tmp_path, monkeypatch):
        # chmod 0 does not stop root, so simulate the permission error scandir would raise
        def denied(path):
            raise PermissionError(13, "Permission denied", str(path))

        monkeypatch.setattr("orchestrator.tools.workdir.os.scandir", denied)
        with pytest.raises(WorkdirError) as info:
            check_workdir(tmp_path)
        assert str(info.value) == (
            f"workdir {str(tmp_path)!r} is not readable (Permission denied): fix its permissions"
        )

    def test_tools_of_each_workdir_read_that_workdir(self, tmp_path):
        # each call builds tools over its own workdir, with the same argument schemas
        roots = [tmp_path / "a", tmp_path / "b"]
        for root in roots:
            root.mkdir()
            (root / "which.txt").write_text(f"this is {root.name}\n")
        first, second = ({t.name: t for t in workdir_tools(r)} for r in roots)
        assert "this is a" in first["read_file"].invoke({"path": "which.txt"})
        assert "this is b" in second["read_file"].invoke({"path": "which.txt"})
        assert first["grep_files"].tool_call_schema.model_json_schema() == (
            second["grep_files"].tool_call_schema.model_json_schema()
        )
        assert "max_lines" in first["read_file"].args

    def test_workdir_tools_rejects_missing_dir(self, tmp_path):
        with pytest.raises(WorkdirError):
            workdir_tools(tmp_path / "missing")


class TestListFiles:
    def test_lists_one_level_by_default_folders_with_their_file_counts(self, tools, repo):
        out = tools["list_files"].invoke({})
        size = (repo / "README.md").stat().st_size
        assert out.splitlines() == [
            f"# '.' (workdir {repo.name!r}): 1 folders, 1 text files (recursive=true lists "
            "every file)",
            "pkg/ (2 files)",
            f"README.md ({size} bytes)",
        ]
        sub = tools["list_files"].invoke({"path": "pkg"}).splitlines()
        assert sub[0].startswith("# 'pkg': 0 folders, 2 text files")
        assert [ln.split(" (")[0] for ln in sub[1:]] == ["pkg/__init__.py", "pkg/core.py"]

    def test_lists_text_files_with_sizes_breadth_first(self, tools, repo):
        out = tools["list_files"].invoke({"recursive": True})
        lines = out.splitlines()
        assert lines[0].startswith("# 3 text files under '.'")
        size = (repo / "README.md").stat().st_size
        assert lines[1:] == [
            f"README.md ({size} bytes)",
            f"pkg/__init__.py ({(repo / 'pkg/__init__.py').stat().st_size} bytes)",
            f"pkg/core.py ({(repo / 'pkg/core.py').stat().st_size} bytes)",
        ]

    def test_skips_noise_hidden_and_binary(self, tools):
        out = tools["list_files"].invoke({"path": "."})
        for noise in (".git", "__pycache__", "node_modules", ".hidden", "logo.dat", "image.png"):
            assert noise not in out

    def test_sub_path_and_truncation(self, tools):
        out = tools["list_files"].invoke({"path": "pkg", "max_entries": 1, "recursive": True})
        assert out.splitlines()[0] == (
            "# 2 text files under 'pkg', showing the first 1; pass a sub-path to see more"
        )
        assert len(out.splitlines()) == 2

    def test_text_by_extension_else_by_its_first_bytes(self, tmp_path):
        (tmp_path / "mod.py").write_bytes(b"x = 1\x00\n")  # a source name is taken as text
        (tmp_path / "notes").write_bytes(b"plain words\n")  # no extension: looked inside
        (tmp_path / "blob.dat").write_bytes(b"\x00\x01")
        (tmp_path / "pic.png").write_bytes(b"not really a png")
        out = {t.name: t for t in workdir_tools(tmp_path)}["list_files"].invoke({"path": "."})
        assert [ln.split(" (")[0] for ln in out.splitlines()[1:]] == ["mod.py", "notes"]

    def test_a_cut_listing_names_every_folder_with_its_file_count(self, tmp_path):
        files = {"a.py": "x\n", "zeta/deep/z.py": "z\n", "zeta/y.md": "y\n", "beta/b.py": "b\n"}
        files |= {f"alpha/m{i}.py": "m\n" for i in range(5)}
        for rel, text in files.items():
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
        tools = {t.name: t for t in workdir_tools(tmp_path)}
        listed = tools["list_files"].invoke({"path": ".", "max_entries": 3, "recursive": True})
        lines = listed.splitlines()
        assert lines[0] == (
            f"# 9 text files under '.' (workdir {tmp_path.name!r}), showing the first 3; "
            "pass a sub-path to see more"
        )
        assert lines[1] == "# text files per folder: alpha/ 5, beta/ 1, zeta/ 2"
        assert len(lines) == 5 and not any("zeta" in ln for ln in lines[2:])  # cut before it
        whole = tools["list_files"].invoke({"path": ".", "max_entries": 200, "recursive": True})
        assert "per folder" not in whole  # nothing hidden, nothing to name


class TestReadFile:
    def test_numbered_lines_and_continuation_hint(self, tools):
        out = tools["read_file"].invoke({"path": "pkg/core.py", "start_line": 4, "max_lines": 2})
        assert out.splitlines() == [
            "# pkg/core.py (lines 4-5 of 6)",
            "4: def compute(x):",
            "5:     # TODO: handle negatives",
            "# ... 1 more lines: call read_file with start_line=6",
        ]

    def test_design_files_that_look_like_text_are_binary(self, tools, repo):
        # an Illustrator file opens as PDF text: objects and streams, no NUL in its head
        (repo / "logo.ai").write_text("%PDF-1.5\n1 0 obj\n<< /Type /Catalog >>\nendobj\n")
        read = tools["read_file"].invoke({"path": "logo.ai"})
        assert read.startswith("Error: 'logo.ai' is a binary file")
        assert "logo.ai" not in tools["grep_files"].invoke({"pattern": "Catalog"})

    def test_binary_and_directory_are_errors_not_exceptions(self, tools):
        assert (
            tools["read_file"]
            .invoke({"path": "logo.dat"})
            .startswith("Error: 'logo.dat' is a binary file")
        )
        assert tools["read_file"].invoke({"path": "pkg"}).startswith("Error: 'pkg' is a directory")
        assert tools["read_file"].invoke({"path": "nope.py"}) == (
            "Error: path 'nope.py' does not exist in the workdir"
        )


class TestConfinement:
    @pytest.mark.parametrize(
        "path, expected",
        [
            ("../outside/secret.txt", "Error: path '../outside/secret.txt' leaves the workdir"),
            ("pkg/../../outside/secret.txt", "leaves the workdir"),
            ("/etc/passwd", "Error: path '/etc/passwd' is absolute"),
            ("link_out/secret.txt", "resolves outside the workdir"),
            ("secret_link.txt", "resolves outside the workdir"),
        ],
    )
    def test_paths_leaving_the_workdir_are_refused(self, tools, repo, tmp_path, path, expected):
        (repo / "link_out").symlink_to(tmp_path / "outside", target_is_directory=True)
        (repo / "secret_link.txt").symlink_to(tmp_path / "outside" / "secret.txt")
        for name in ("read_file", "list_files"):
            out = tools[name].invoke({"path": path})
            assert out.startswith("Error:") and expected in out and "top secret" not in out
        out = tools["grep_files"].invoke({"pattern": "secret", "path": path})
        assert out.startswith("Error:") and "top secret" not in out

    def test_tool_folders_and_env_files_are_refused_by_name(self, tools, repo):
        (repo / ".env").write_text("API_KEY=secret\n")
        (repo / ".github").mkdir()
        (repo / ".github" / "ci.yml").write_text("on: push\n")
        assert tools["read_file"].invoke({"path": ".git/config"}) == (
            "Error: path '.git/config' is excluded from the file tools (tool or VCS folder)"
        )
        assert tools["read_file"].invoke({"path": ".env"}).startswith("Error: path '.env' is")
        assert "secret" not in tools["grep_files"].invoke({"pattern": "secret", "path": ".git"})
        # other hidden files are readable when named (never listed)
        assert tools["read_file"].invoke({"path": ".github/ci.yml"}).endswith("1: on: push")
        assert ".github" not in tools["list_files"].invoke({})

    def test_a_file_named_like_a_skipped_folder_is_a_file(self, tools, repo):
        (repo / "scripts").mkdir()
        (repo / "scripts" / "build").write_text("#!/bin/sh\npython -m build --wheel\n")
        (repo / "build").mkdir()
        (repo / "build" / "out.txt").write_text("python -m build output\n")
        read = tools["read_file"].invoke
        assert "scripts/build" in tools["list_files"].invoke({"path": "scripts"})
        assert read({"path": "scripts/build"}).endswith("2: python -m build --wheel")
        assert tools["grep_files"].invoke({"pattern": "wheel"}) == (
            "scripts/build:2: python -m build --wheel"
        )
        assert read({"path": "build/out.txt"}).startswith("Error: path 'build/out.txt' is excluded")

    def test_symlinks_out_are_not_listed_or_grepped(self, tools, repo, tmp_path):
        (repo / "secret_link.txt").symlink_to(tmp_path / "outside" / "secret.txt")
        (repo / "link_out").symlink_to(tmp_path / "outside", target_is_directory=True)
        assert "secret" not in tools["list_files"].invoke({})
        assert "top secret" not in tools["grep_files"].invoke({"pattern": "secret"})


class TestGrepFiles:
    def test_case_insensitive_hits_as_file_line_text(self, tools):
        out = tools["grep_files"].invoke({"pattern": "COMPUTE"})
        # the copies in .git, __pycache__, node_modules, .hidden, binaries and outside don't count
        assert out == "pkg/core.py:4: def compute(x):"

    def test_regex_and_literal_fallback(self, tools):
        assert tools["grep_files"].invoke({"pattern": r"TODO|pkg"}).splitlines() == [
            'pkg/__init__.py:1: """The pkg package."""',
            "pkg/core.py:5: # TODO: handle negatives",
        ]
        # an invalid regex is searched literally instead of failing
        assert tools["grep_files"].invoke({"pattern": "compute("}) == (
            "pkg/core.py:4: def compute(x):"
        )

    def test_skips_big_files_and_reports_no_match(self, tools, repo, monkeypatch):
        import orchestrator.tools.workdir as wd

        monkeypatch.setattr(wd, "MAX_GREP_BYTES", 30)
        assert (
            tools["grep_files"].invoke({"pattern": "compute"})
            == "# no matches for 'compute' under '.'"
        )

    @pytest.mark.parametrize(
        "pattern",
        ["beta", r"^beta", r"beta$", r"^\s*#\s*todo", r"\Agamma", r"alpha\s+beta", r"a[^x]b"],
    )
    def test_hits_are_those_of_a_line_by_line_search(self, tmp_path, pattern):
        texts = {
            "unix.py": "alpha\nbeta\n  # TODO one\ngamma beta\n",
            "crlf.py": "alpha\r\nbeta\r\n# todo two\r\ngamma\r\n",
            "old_mac.py": "gamma\rbeta\r# TODO three\r",
            "feeds.py": "alpha\x0cbeta\x0c\u2028gamma beta",
            "none.py": "nothing here\n",
        }
        for name, text in texts.items():
            (tmp_path / name).write_bytes(text.encode())
        regex = re.compile(pattern, re.IGNORECASE)
        expected = [
            f"{name}:{no}: {line.strip()}"
            for name, text in sorted(texts.items())
            for no, line in enumerate(text.splitlines(), start=1)
            if regex.search(line)
        ]
        tools = {t.name: t for t in workdir_tools(tmp_path)}
        out = tools["grep_files"].invoke({"pattern": pattern, "max_matches": 100})
        got = [] if out.startswith("# no matches") else out.splitlines()
        assert sorted(got) == sorted(expected)

    def test_several_paths_separated_by_commas(self, tmp_path):
        for rel, text in {"a.py": "beta\n", "b.md": "beta\n", "sub/c.py": "beta\n",
                          "x, y.txt": "beta\n", "deep/d.py": "beta\n"}.items():  # fmt: skip
            (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
            (tmp_path / rel).write_text(text)
        grep = {t.name: t for t in workdir_tools(tmp_path)}["grep_files"]
        out = grep.invoke({"pattern": "beta", "path": "a.py, sub,sub/c.py"})
        assert out.splitlines() == ["a.py:1: beta", "sub/c.py:1: beta"]  # each file once
        assert grep.invoke({"pattern": "beta", "path": "x, y.txt"}) == "x, y.txt:1: beta"
        assert grep.invoke({"pattern": "nope", "path": "a.py, b.md"}) == (
            "# no matches for 'nope' under 'a.py, b.md'"
        )
        assert grep.invoke({"pattern": "beta", "path": "a.py, gone.py"}) == (
            "Error: path 'gone.py' does not exist in the workdir"
        )

    def test_max_matches(self, tools):
        # a capped search shows lines of as many files as it can (not the first file's
        # lines only), then its totals and the files holding the most matches
        out = tools["grep_files"].invoke({"pattern": "e", "max_matches": 2})
        *shown, total, busiest = out.splitlines()
        assert len(shown) == 2 and len({line.split(":")[0] for line in shown}) == 2
        assert total.endswith("5 more matches not shown: narrow the path or pattern")
        assert total.startswith("# 7 lines in 3 file(s) match 'e'")
        assert busiest == "# most matches: pkg/core.py (4), README.md (2), pkg/__init__.py (1)"


def test_wrong_argument_types_come_back_as_errors(tools):
    assert tools["read_file"].invoke({"path": "README.md", "max_lines": "many"}) == (
        "Error: invalid arguments (max_lines: Input should be a valid integer, "
        "unable to parse string as an integer)"
    )
    assert tools["grep_files"].invoke({}) == "Error: invalid arguments (pattern: Field required)"


def test_a_memory_inside_the_workdir_is_not_part_of_the_project(tmp_path):
    """`--memory-dir` inside the workdir: the agents never list, grep or survey tether's
    own files (plans, findings) as the project's."""
    import subprocess
    import sys

    work = tmp_path / "work"
    (work / "pkg").mkdir(parents=True)
    (work / "pkg" / "core.py").write_text('"""Core logic."""\n\n\ndef compute(x):\n    return x\n')
    mem = work / "notes"  # any name: a memory is known by its records' folder
    run = subprocess.run(
        [sys.executable, "-m", "orchestrator.cli", "run", "Survey what compute does",
         "--task", "t1", "--workdir", str(work), "--memory-dir", str(mem)],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert run.returncode == 0, run.stderr
    assert (mem / "findings").is_dir()
    tools = {t.name: t for t in workdir_tools(work)}
    listed = tools["list_files"].invoke({"path": ".", "recursive": True})
    assert "pkg/core.py" in listed and "notes" not in listed
    assert "notes/" not in tools["grep_files"].invoke({"pattern": "compute"})
    # the survey itself planned no subtask on the memory's folder
    plan = (mem / "research_plans" / "t1.md").read_text()
    data = json.loads(plan.split("<!-- tether:plan ", 1)[1].rsplit(" -->", 1)[0])
    assert data["completed"] and not any("notes" in s for s in data["completed"])
    assert "notes" not in plan.split("<!-- tether:plan ", 1)[0]
