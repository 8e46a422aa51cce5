"""Data added to a constellation that was already prepared: the form sees the change (the
library's content against the texts the prepared folder was made from), asks to prepare
again instead of training on the old data, and takes the new counts once it is prepared."""

from __future__ import annotations

import json

import pytest

from app.data.library import Library
from app.data.prepare import prepare
from app.data.textgen import documents
from app.form.run_form import RunForm
from app.window.lab import load_form_context

pytestmark = pytest.mark.usefixtures("russian")


def _texts(folder, seed: int, n: int = 60):
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "a.jsonl").write_text("".join(json.dumps({"text": d}, ensure_ascii=False) + "\n"
                                            for d in documents(n, seed=seed, lang="ru")), encoding="utf-8")
    return folder


def _form() -> RunForm:
    form = RunForm(load_form_context())
    form.set("context", 32)
    form.values["constellations"] = ["книги"]
    return form


def test_added_data_makes_the_prepared_folder_stale_until_prepared_again(tmp_path):
    lib = Library()
    try:
        lib.add(_texts(tmp_path / "one", 1), name="one", constellation="книги")
        first = prepare(["книги"], vocab=300, context=32, library=lib).meta
        form = _form()
        assert form.prepared_for_selection() is not None
        old_tokens = form.ctx.constellations["книги"]
        lib.add(_texts(tmp_path / "two", 2), name="two", constellation="книги")  # more text, same name
        form = _form()  # the window reads the context again when the library changes
        assert form.prepared_for_selection() is None
        said = " ".join(i.text for i in form.issues())
        assert "«Подготовить данные»" in said, said
        second = prepare(["книги"], vocab=300, context=32, library=lib).meta
        assert second["train_tokens"] > first["train_tokens"]
        form = _form()
        prep = form.prepared_for_selection()
        assert prep is not None and prep.train_tokens == second["train_tokens"]
        assert form.ctx.constellations["книги"] > old_tokens  # the new count, not the one before
    finally:
        lib.state.close()
