"""Which vocabulary «Подготовить данные» builds: chosen in «Данные…» (settings.json, key
"vocab"; 4000, the guide's, by default), with the guide's note on what it costs.

The vocabulary is part of the model: its embedding is V·d weights (tied with the output),
so 4000 × 512 = 2.0 M of the guide's 27.7 M. A larger one cuts text into fewer, longer
tokens (more text per context) at more weights; a run with another vocabulary has another
V·d and cannot continue one trained with this one.
"""

from __future__ import annotations

from ..base import settings
from ..base.i18n import t
from ..base.numbers import counted, percent_text

KEY = "vocab"
DEFAULT = 4000
CHOICES = (1000, 2000, 4000, 8000, 16000, 32000)


def chosen() -> int:
    """The vocabulary the next «Подготовить данные» builds (a stored value off the list:
    the default)."""
    value = settings.load().get(KEY)
    return value if isinstance(value, int) and not isinstance(value, bool) and value in CHOICES else DEFAULT


def choose(vocab: int) -> None:
    """Keep the choice (OSError: the config folder cannot be written)."""
    if vocab not in CHOICES:
        raise ValueError(f"vocabulary {vocab}: one of {CHOICES}")
    settings.update(**{KEY: vocab})


def share_text(vocab: int, width: int = 512, layers: int = 8, context: int = 1024, lang: str | None = None) -> str:
    """The guide's note on a vocabulary: its share of the weights, V·d (the embedding, shared
    with the output), at the form's width — «словарь 4000 × ширина 512 = 2,05 млн весов, 7 %
    модели»."""
    own = vocab * width
    total = 12 * layers * width * width + own + context * width
    share = percent_text(own / total, lang)
    weights = (("вес", "веса", "весов"), ("weight", "weights"))
    deep = (("слой", "слоя", "слоёв"), ("layer", "layers"))
    return t(f"Словарь {vocab} × ширина {width} = {counted(own, *weights, 'ru', sig=3)}, {share} модели "
             f"({counted(layers, *deep, 'ru')}): больше словарь — меньше токенов на тот же текст, но больше "
             "весов. Другой словарь — другая модель: продолжить прогон с прежним словарём нельзя.",
             f"Vocabulary {vocab} × width {width} = {counted(own, *weights, 'en', sig=3)}, {share} of the model "
             f"({counted(layers, *deep, 'en')}): a larger vocabulary cuts the same text into fewer tokens, at "
             "more weights. Another vocabulary is another model: a run with the old one cannot be continued.",
             lang)
