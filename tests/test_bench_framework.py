"""`python -m bench.framework` unpacks its sdist on every Python the README promises (3.11+)."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from bench.framework import best_file, extract


def _archive(path: Path, members: dict[str, bytes], link: tuple[str, str] | None = None) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
        if link:
            info = tarfile.TarInfo(link[0])
            info.type = tarfile.SYMTYPE
            info.linkname = link[1]
            tar.addfile(info)
    return path


@pytest.fixture
def python_3_11_2(monkeypatch: pytest.MonkeyPatch) -> None:
    """tarfile as Python 3.11.0-3.11.3 have it: no `data_filter`, no `filter` argument."""
    plain = tarfile.TarFile.extractall

    def extractall(self, path=".", members=None, *, numeric_owner=False):  # noqa: ANN001
        return plain(self, path, members, numeric_owner=numeric_owner)

    monkeypatch.delattr(tarfile, "data_filter")
    monkeypatch.setattr(tarfile.TarFile, "extractall", extractall)


SDIST = {"requests-2.32.3/setup.py": b"setup()\n", "requests-2.32.3/src/api.py": b"x = 1\n"}


def test_an_sdist_unpacks_where_tarfile_has_its_data_filter(tmp_path: Path) -> None:
    extract(_archive(tmp_path / "r.tar.gz", SDIST), tmp_path / "out")
    assert (tmp_path / "out/requests-2.32.3/src/api.py").read_bytes() == b"x = 1\n"


def test_an_sdist_unpacks_on_python_3_11_2(tmp_path: Path, python_3_11_2: None) -> None:
    extract(_archive(tmp_path / "r.tar.gz", SDIST), tmp_path / "out")
    assert (tmp_path / "out/requests-2.32.3/setup.py").read_bytes() == b"setup()\n"
    assert (tmp_path / "out/requests-2.32.3/src/api.py").read_bytes() == b"x = 1\n"


@pytest.mark.parametrize(
    "members, link",
    [({"../escaped.py": b"bad"}, None), ({"pkg/a.py": b"a"}, ("pkg/link", "/etc/passwd"))],
    ids=["a path outside", "a symbolic link"],
)
def test_on_python_3_11_2_a_member_leaving_the_folder_is_refused_before_anything_is_written(
    tmp_path: Path, python_3_11_2: None, members: dict[str, bytes], link: tuple[str, str] | None
) -> None:
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(ValueError, match="refusing to extract"):
        extract(_archive(tmp_path / "bad.tar.gz", members, link), out)
    assert list(out.iterdir()) == [] and not (tmp_path / "escaped.py").exists()


def test_the_script_reads_the_file_with_most_hits_in_either_frameworks_grep_output() -> None:
    tether = "# 3 matches\nsrc/a.py:1: x\nsrc/b.py:4: x\nsrc/b.py:9: x\n"
    deepagents = "/src/a.py:\n  1: x\n/src/b.py:\n  4: x\n  9: x\n"
    assert best_file(tether) == "src/b.py"
    assert best_file(deepagents) == "/src/b.py"
