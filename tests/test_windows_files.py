"""Files on Windows (issue 22, items 1, 4 and 7): fsync through a handle that allows it, the
tests' isolation through TERNIT_HOME, prepared folders within the 260-character path limit."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import platformdirs
import pytest

from app.base import paths
from app.base.state import open_state
from app.data.library import Library
from app.data.prepare import prepare
from app.data.textgen import documents

pytestmark = pytest.mark.windows


@pytest.fixture
def windows_fsync(monkeypatch):
    """os.fsync with Windows' rule on every OS: FlushFileBuffers needs a handle opened for
    writing (a read-only one is Errno 13). Under Windows it is the real call."""
    real = os.fsync

    def fsync(fd: int) -> None:
        if os.name == "posix" and not stat.S_ISDIR(os.fstat(fd).st_mode):
            import fcntl

            if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_ACCMODE == os.O_RDONLY:
                raise PermissionError(13, "Permission denied (FlushFileBuffers on a read-only handle)")
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


@pytest.fixture
def lib(tmp_path):
    st = open_state(tmp_path / "state.sqlite")
    yield Library(st)
    st.close()


def russian_folder(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / "сказка первая.txt").write_text("\n\n".join(documents(120, seed=1, lang="ru")), encoding="utf-8")
    (root / "песня.txt").write_bytes("\n\n".join(documents(80, seed=2, lang="ru")).encode("cp1251"))
    return root


def test_prepare_flushes_its_files_through_writable_handles(windows_fsync, lib, tmp_path):
    lib.add(russian_folder(tmp_path / "тексты"), name="сказки", constellation="русские")
    res = prepare(["русские"], out=tmp_path / "готово", vocab=300, context=32, library=lib)
    assert sorted(p.name for p in res.path.iterdir()) == ["meta.json", "tokenizer.json", "train.bin", "val.bin"]


def test_a_kaggle_checkpoint_copy_is_flushed_through_a_writable_handle(windows_fsync, tmp_path):
    from app.kaggle.outputs import _copy_folder

    src = tmp_path / "step-00000010.dcp"
    src.mkdir()
    (src / "__0_0.distcp").write_bytes(b"shard")
    _copy_folder(src, tmp_path / ".copy.tmp")
    assert (tmp_path / ".copy.tmp" / "__0_0.distcp").read_bytes() == b"shard"


def test_long_constellation_names_keep_the_prepared_folder_short(lib, tmp_path):
    from app.data.prepare import NAME_CHARS

    long_names = ["очень длинное имя созвездия из сказок и песен " * 4, "второе созвездие " * 10]
    for i, name in enumerate(long_names):
        lib.add(russian_folder(tmp_path / f"src{i}"), name=f"набор{i}", constellation=name.strip())
    res = prepare([n.strip() for n in long_names], vocab=300, context=32, library=lib)
    assert res.path.parent == paths.prepared_dir()
    assert len(res.path.name) <= NAME_CHARS + len("-v300-") + 12
    # %LOCALAPPDATA% is about 30 characters: the deepest file the prepare writes (inside its
    # temporary sibling folder) stays far from MAX_PATH.
    deepest = f"C:\\Users\\someone\\AppData\\Local\\ternit-lab\\prepared\\.{res.path.name}.tmp-99999-abcdef01\\tokenizer.json"
    assert len(deepest) < 200


def test_the_tests_lab_folders_are_under_the_tests_home(isolated_home):
    """TERNIT_HOME, which the lab honours on every OS: on Windows platformdirs ignores HOME and
    XDG_*, and tests isolated by those alone wrote into the real %LOCALAPPDATA%\\ternit-lab."""
    for folder in (paths.data_dir(), paths.config_dir(), paths.state_db_path().parent):
        assert folder.resolve().is_relative_to(isolated_home.resolve())
    real = Path(platformdirs.user_data_dir(paths.APP_NAME, appauthor=False))
    assert not paths.data_dir().resolve().is_relative_to(real.resolve())
