"""Where the lab keeps its files: platformdirs folders (XDG_DATA_HOME/XDG_CONFIG_HOME honoured).

TERNIT_HOME, when set, puts data and config under one folder (handy for portable installs
and for tests).
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

import platformdirs

APP_NAME = "ternit-lab"


def data_dir() -> Path:
    """The lab's data folder (state.sqlite, runs/, prepared/), created on first use."""
    home = os.environ.get("TERNIT_HOME")
    path = Path(home) / "data" if home else Path(platformdirs.user_data_dir(APP_NAME, appauthor=False))
    path.mkdir(parents=True, exist_ok=True)
    return path


def config_dir(create: bool = True) -> Path:
    """The lab's config folder (settings, Kaggle credentials), created on first use
    (`create=False`: only where it is, for a reader that takes a missing file as empty)."""
    env = os.environ
    path = _config_path(env.get("TERNIT_HOME"), *(env.get(k) for k in _PLATFORM_ENV))
    if create:
        private_dir(path)  # the Kaggle keys live here
    return path


def private_dir(path: Path) -> Path:
    """A folder only its owner can enter (0700 on POSIX, whatever the umask: mkdir's mode is
    narrowed by it, never widened, and a umask of 000 would leave it world-writable)."""
    path.mkdir(parents=True, exist_ok=True)
    if os.name == "posix":
        import stat

        if stat.S_IMODE(path.stat().st_mode) != 0o700:
            os.chmod(path, 0o700)
    return path


def not_world_writable(path: Path) -> None:
    """Drop group and others' write from a file or folder the lab made (a log, its folder)
    that a umask of 000 left writable to every user of the machine."""
    if os.name != "posix":
        return
    import stat

    try:
        mode = stat.S_IMODE(path.stat().st_mode)
        if mode & 0o022:
            os.chmod(path, mode & ~0o022)
    except OSError:
        pass  # not ours to change (a shared folder): as it is


def config_file(name: str) -> str:
    """A file's path in the config folder, as a string, the folder not made: for a reader
    asked very often (the interface language, at every label)."""
    env = os.environ
    return _config_file(name, env.get("TERNIT_HOME"), *(env.get(k) for k in _PLATFORM_ENV))


@functools.lru_cache(maxsize=8)
def _config_file(name: str, home: str | None, *platform_env: str | None) -> str:
    return str(_config_path(home, *platform_env) / name)


# What platformdirs reads for the config folder on Linux, macOS and Windows.
_PLATFORM_ENV = ("XDG_CONFIG_HOME", "HOME", "APPDATA", "LOCALAPPDATA", "USERPROFILE")


@functools.lru_cache(maxsize=8)
def _config_path(home: str | None, *_platform_env: str | None) -> Path:
    """The config folder for these environment values: worked out once for them, since the
    language is asked for at every label."""
    return Path(home) / "config" if home else Path(platformdirs.user_config_dir(APP_NAME, appauthor=False))


def runs_dir() -> Path:
    path = data_dir() / "runs"
    path.mkdir(parents=True, exist_ok=True)
    return path


def prepared_dir() -> Path:
    path = data_dir() / "prepared"
    path.mkdir(parents=True, exist_ok=True)
    return path


def state_db_path() -> Path:
    return data_dir() / "state.sqlite"


def trainer_root() -> str | None:
    """The folder that holds the `trainer` package (so a child process finds it from any cwd)."""
    spec = importlib.util.find_spec("trainer")
    if spec is None or not spec.submodule_search_locations:
        return None
    return str(Path(next(iter(spec.submodule_search_locations))).resolve().parent)
