"""The private cache folder: used only when it is this user's and nobody else can write it
(what is loaded from it is code)."""

from __future__ import annotations

import os
import tempfile

import pytest

from memory import cachedir


@pytest.fixture
def temp_root(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    cachedir.cache_dir.cache_clear()
    yield tmp_path
    cachedir.cache_dir.cache_clear()


def test_a_new_folder_is_private_and_keeps_files(temp_root):
    folder = cachedir.cache_dir()
    assert folder is not None and folder.parent == temp_root
    assert oct(folder.stat().st_mode & 0o777) == "0o700"
    cachedir.write_cache_file("x.bin", b"kept")
    assert cachedir.read_cache_file("x.bin") == b"kept"
    assert cachedir.read_cache_file("missing.bin") is None


def test_a_folder_others_can_write_is_not_used(temp_root):
    folder = temp_root / f"tether-cache-{os.getuid()}"
    folder.mkdir()
    folder.chmod(0o777)
    (folder / "x.bin").write_bytes(b"planted")
    assert cachedir.cache_dir() is None
    assert cachedir.read_cache_file("x.bin") is None
    cachedir.write_cache_file("y.bin", b"data")  # nothing written, nothing raised
    assert not (folder / "y.bin").exists()
