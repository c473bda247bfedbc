"""`memory.backends.conformance` runs against a backend that is not tether's: a module of its own
imports the tests and gives the `backend` fixture. A correct backend passes them all; one
that breaks the contract (a version that does not grow) fails them."""

from __future__ import annotations

import re
import subprocess
import sys
import textwrap
from pathlib import Path

MODULE = '''
import pytest
from memory.backends.inmemory import InMemoryBackend
from memory.backends.conformance import *  # noqa: F403


class ThirdPartyBackend(InMemoryBackend):
    """Somebody's backend (built here on the in-memory one)."""

    kind = "third-party"
    {override}


@pytest.fixture
def backend():
    with ThirdPartyBackend() as opened:
        yield opened
'''

BROKEN = """
    def put_document(self, path, data, *, expected_version=None):
        info = super().put_document(path, data, expected_version=expected_version)
        return type(info)(info.path, 1, info.mtime, info.size)  # the version never grows
"""


def _run(tmp_path: Path, override: str) -> subprocess.CompletedProcess:
    test = tmp_path / "test_my_backend.py"
    test.write_text(textwrap.dedent(MODULE).replace("{override}", override.strip() or "pass"))
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-n", "0", str(test)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=300,
    )


def test_a_backend_of_its_own_passes_the_imported_contract_tests(tmp_path):
    ran = _run(tmp_path, "")
    assert ran.returncode == 0, ran.stdout + ran.stderr
    passed = re.search(r"(\d+) passed", ran.stdout)
    assert passed and int(passed.group(1)) >= 24 and "failed" not in ran.stdout


def test_a_backend_that_breaks_the_contract_fails_them(tmp_path):
    ran = _run(tmp_path, textwrap.indent(textwrap.dedent(BROKEN), "    ").strip())
    assert ran.returncode == 1, ran.stdout + ran.stderr
    assert "test_documents_have_growing_versions_and_list_by_prefix" in ran.stdout
