"""The vocabulary is chosen in «Данные…» (with the guide's note: its share of the weights,
V·d) and «Подготовить данные» builds it; what was built is said right after, with its
tokens and size."""

from __future__ import annotations

import pytest

from app.data import manage, vocab
from app.form.run_form import RunForm
from app.window.lab import Lab

pytestmark = pytest.mark.usefixtures("russian")


@pytest.fixture
def dialog(qtbot):
    from ui.data.dialog import DataDialog

    d = DataDialog()
    qtbot.addWidget(d)
    yield d
    d.done(0)


def test_the_vocabulary_chosen_in_the_data_dialog_is_the_one_prepared(qtbot, dialog):
    box = dialog.vocab_box
    assert box.currentData() == vocab.DEFAULT == 4000 and "2,05 млн весов" in box.toolTip()
    box.setCurrentIndex(vocab.CHOICES.index(8000))
    assert vocab.chosen() == 8000 and "Словарь 8000 × ширина 512" in box.toolTip()
    assert "продолжить прогон с прежним словарём нельзя" in dialog.status.text()
    args = Lab.prepare_args(RunForm(), ["demo"])
    assert args[args.index("--vocab") + 1] == "8000"


def test_a_continued_run_prepares_with_its_checkpoints_tokenizer_not_the_choice(tmp_path):
    args = manage.prepare_command(["demo"], 64, tokenizer=tmp_path / "tokenizer.json", vocab=8000)
    assert "--tokenizer" in args and "--vocab" not in args


def test_the_share_of_the_weights_follows_the_form_shape():
    assert vocab.share_text(4000, 512, 8, 1024, "en").startswith("Vocabulary 4000 × width 512 = 2.05 M weights, 7%")
    assert "72%" in vocab.share_text(32000, 256, 4, 256, "en")


def test_what_was_prepared_is_said_with_its_vocabulary_tokens_and_size(tiny_data):
    out = manage.CliOutput()
    out.lines.append(str(tiny_data))
    said = manage.prepare_outcome(0, out, ["tiny"]).status
    assert said.startswith("Данные «tiny» подготовлены (словарь 300; для обучения ") and "проверки" in said
    assert "КиБ" in said or "МиБ" in said
