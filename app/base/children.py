"""The environment of every Python child the lab starts: the trainer, its run.json check,
the samplers, exports and the CPU-rate probe (the window's data commands add theirs to the
window's own, app.data.manage.cli_env)."""

from __future__ import annotations

import os

from trainer.base.streams import UTF8_ENV

from .paths import trainer_root


def child_env(changes: dict[str, str] | None = None) -> dict[str, str]:
    """This process's environment, the trainer importable from any folder, the child's lines
    unbuffered and its standard streams in UTF-8 (trainer/base/streams.py: on Windows a pipe or a
    file is otherwise the ANSI code page, which dies on «₽»). `changes` go on top."""
    env = dict(os.environ)
    root = trainer_root()
    if root:
        env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env["PYTHONUNBUFFERED"] = "1"
    env.update(UTF8_ENV)
    env.update(changes or {})
    return env
