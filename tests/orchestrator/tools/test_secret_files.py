"""Credential files are kept from every workdir tool (issue 52 item 2): `read_file` and the
write tools refuse them naming the rule (never the content), `list_files` and `grep_files`
leave them out, a link to one is no way around, the workflow's `secret_files` adds rules,
and an offline run over a project holding them stores none of their content in the memory.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from memory import MemoryStore
from orchestrator import Orchestrator
from orchestrator.config.secret_files import DEFAULT_SECRET_FILES
from orchestrator.config.workflow import load_workflow
from orchestrator.errors import WorkflowError
from orchestrator.tools.workdir import workdir_tools
from orchestrator.tools.workdir_write import WorkdirWriter
from tests.orchestrator.conftest import build_repo

#: (path, the rule that keeps it)
KEPT = [
    ("prod.env", "*.env"),
    (".env", ".env*"),
    (".env.production", ".env*"),
    (".envrc", ".env*"),
    (".netrc", ".netrc"),
    (".pgpass", ".pgpass"),
    (".npmrc", ".npmrc"),
    (".pypirc", ".pypirc"),
    (".git-credentials", ".git-credentials"),
    (".aws/credentials", ".aws/"),
    ("home/.ssh/config", ".ssh/"),
    (".gnupg/secring.gpg", ".gnupg/"),
    ("id_rsa", "id_rsa"),
    ("deploy/id_ed25519", "id_ed25519"),
    ("certs/server.pem", "*.pem"),
    ("certs/tls.KEY", "*.key"),
    ("cert.p12", "*.p12"),
    ("credentials.json", "credentials*.json"),
    ("gcp/credentials-prod.json", "credentials*.json"),
]


def secret(path: str) -> str:
    return f"S3CRET-{path.replace('/', '-')}"


def plant(root: Path) -> Path:
    for path, _ in KEPT:
        target = root / path
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(f"token = {secret(path)}\n")
    (root / "id_rsa.pub").write_text("ssh-ed25519 AAAA public half\n")
    (root / "src").mkdir(exist_ok=True)
    (root / "src" / "id_utils.py").write_text("def ids():\n    return 'token'\n")
    return root


@pytest.fixture
def repo(tmp_path) -> Path:
    return plant(build_repo(tmp_path / "repo"))


@pytest.fixture
def tools(repo):
    return {t.name: t for t in workdir_tools(repo)}


@pytest.mark.parametrize("path,rule", KEPT)
def test_read_file_refuses_a_credentials_file_naming_the_rule(tools, path, rule):
    out = tools["read_file"].invoke({"path": path})
    assert out == (
        f"Error: path {path!r} is kept from agents: it may hold credentials (secret_files "
        f"rule {rule!r}); tether never reads, searches or writes such files"
    )
    assert "S3CRET" not in tools["grep_files"].invoke({"pattern": "token", "path": path})


def test_listings_and_searches_leave_them_out(tools, repo):
    listed = tools["list_files"].invoke({"recursive": True, "max_entries": 2000})
    for folder in (".", "certs", "deploy", "gcp", "home"):
        listed += tools["list_files"].invoke({"path": folder})
    found = tools["grep_files"].invoke({"pattern": "token", "max_matches": 1000})
    found += tools["grep_files"].invoke({"pattern": "S3CRET", "path": "certs,gcp,deploy"})
    shown = {line.split(" (")[0].rsplit("/", 1)[-1] for line in listed.splitlines()}
    for path, _ in KEPT:
        name = path.rsplit("/", 1)[-1]
        assert name not in shown, (name, listed)
        assert secret(path) not in found and f"{name}:" not in found, found
    # what is not a credential stays: the public half of a key, a module named `id_*`
    assert "id_rsa.pub" in listed and "src/id_utils.py" in listed
    assert tools["read_file"].invoke({"path": "id_rsa.pub"}).endswith("public half")
    assert "src/id_utils.py:2:" in found


def test_a_link_to_a_credentials_file_is_no_way_around(tools, repo):
    (repo / "notes.txt").symlink_to(repo / "id_rsa")
    assert (
        tools["read_file"]
        .invoke({"path": "notes.txt"})
        .startswith("Error: path 'notes.txt' is kept from agents")
    )
    assert "= S3CRET" not in tools["grep_files"].invoke({"pattern": "S3CRET"})
    assert "notes.txt" not in tools["list_files"].invoke({})


@pytest.mark.parametrize("path,rule", KEPT[:4] + [("new.pem", "*.pem"), (".ssh/id", ".ssh/")])
def test_the_write_tools_refuse_them_and_keep_nothing_in_memory(repo, memory_dir, path, rule):
    with MemoryStore(memory_dir) as store:
        writer = WorkdirWriter(repo, store)
        with pytest.raises(PermissionError) as caught:
            writer.write_file(path, "overwritten\n", call_id="c1")
        assert f"secret_files rule {rule!r}" in str(caught.value)
        if (repo / path).exists():
            with pytest.raises(PermissionError, match="kept from agents"):
                writer.edit_file(path, "token", "other", call_id="c2")
            assert (repo / path).read_text() == f"token = {secret(path)}\n"
        assert store.list_entries(limit=None) == []


def test_the_workflow_adds_rules_of_its_own(tmp_path, repo):
    wf = tmp_path / "wf.yaml"
    wf.write_text("secret_files: ['*.secret', 'vault/', 'config/prod/*.yaml']\n")
    workflow = load_workflow(wf)
    assert workflow.secret_files == ["*.secret", "vault/", "config/prod/*.yaml"]
    for path in ("db.secret", "vault/notes.md", "config/prod/app.yaml", "config/dev/app.yaml"):
        (repo / path).parent.mkdir(parents=True, exist_ok=True)
        (repo / path).write_text(f"token = {secret(path)}\n")
    tools = {t.name: t for t in workdir_tools(repo, workflow.secret_files)}
    for path, rule in (("db.secret", "*.secret"), ("vault/notes.md", "vault/"),
                       ("config/prod/app.yaml", "config/prod/*.yaml")):  # fmt: skip
        assert f"rule {rule!r}" in tools["read_file"].invoke({"path": path})
    found = tools["grep_files"].invoke({"pattern": "S3CRET"})
    assert found == "config/dev/app.yaml:1: token = S3CRET-config-dev-app.yaml"


@pytest.mark.parametrize("bad", ["''", "'/etc/*'", "'../x'"])
def test_a_bad_secret_files_pattern_is_one_error_line(tmp_path, bad):
    wf = tmp_path / "wf.yaml"
    wf.write_text(f"secret_files: [{bad}]\n")
    with pytest.raises(WorkflowError) as caught:
        load_workflow(wf)
    assert str(caught.value).startswith(f"workflow file {str(wf)!r}: 'secret_files': ")
    assert "\n" not in str(caught.value)


def test_the_default_list_is_the_documented_one():
    docs = (Path(__file__).parents[3] / "docs" / "agents.md").read_text()
    for pattern in DEFAULT_SECRET_FILES:
        assert f"`{pattern}`" in docs, pattern


def test_an_offline_run_over_credentials_stores_none_of_them(tmp_path, repo, memory_dir):
    """The offline model uses the same tools: nothing it reads, finds or answers, and no
    file of the memory, holds a credential."""
    (repo / "notes.txt").write_text("token = S3CRET-by-workflow\n")
    wf = tmp_path / "wf.yaml"
    wf.write_text("phases: [exploration]\nsecret_files: [notes.txt]\n")
    with Orchestrator(workdir=repo, workflow=wf, model="offline") as orch:
        result = orch.run("Where are the tokens and credentials configured?", task_id="sec")
    assert result.status == "done", result.failed
    stored = b"".join(p.read_bytes() for p in memory_dir.rglob("*") if p.is_file())
    assert b"S3CRET" not in stored
