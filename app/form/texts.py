"""Texts and specs of the run form's fields kept apart from the table in app/form/fields.py
(which makes its FieldSpecs from them): the «Дополнительно» section's fields — the
trainer's own knobs, folded by default, with trainer.config.run_config.TrainingConfig's defaults
(tests/test_fields.py holds them equal) — and the longer help pages («Подробнее»). Plain
data, no imports of the lab: app/form/fields.py turns each dict into a FieldSpec.
"""

from __future__ import annotations

from typing import Any

from ..base.plan_texts import FIELD_LABELS

# training.precision (trainer.config.run_config.PRECISIONS); "auto" is trainer.step.optim.pick_precision's.
PRECISION_OPTIONS: dict[str, dict[str, str]] = {
    "auto": {"ru": "Авто", "en": "Auto"},
    "fp32": {"ru": "fp32", "en": "fp32"},
    "bf16": {"ru": "bf16", "en": "bf16"},
    "fp16": {"ru": "fp16", "en": "fp16"},
}
PRECISION_OPTION_TOOLTIPS: dict[str, dict[str, str]] = {
    "auto": {"ru": "bf16 на картах с вычислительной способностью 8 и выше, fp16 на 7.x (T4), "
             "fp32 на процессоре.",
             "en": "bf16 on cards of compute capability 8 and up, fp16 on 7.x (a T4), fp32 on "
             "the CPU."},
    "fp32": {"ru": "полная точность: больше всего памяти и медленнее всего на видеокарте.",
             "en": "full precision: the most memory and the slowest on a card."},
    "bf16": {"ru": "16 бит с диапазоном fp32: для RTX 30xx и новее; на T4 эмулируется и "
             "медленный.",
             "en": "16 bits with fp32's range: for RTX 30xx and newer; emulated and slow on a "
             "T4."},
    "fp16": {"ru": "16 бит с масштабированием потерь (GradScaler): для T4 и карт 7.x.",
             "en": "16 bits with loss scaling (GradScaler): for a T4 and 7.x cards."},
}

# The model fields' help page: how the four numbers make the weight count and the data it
# wants (GUIDE.md, «Сколько весов» and «Как выбрать размер»).
MODEL_HELP = {
    "ru": "Сколько весов ≈ 12 · слои · d² + словарь · d + n · d. Для 8 слоёв, d 512, словаря "
    "4000 и n 1024 это 27 738 112 — ровно столько печатает журнал обучения (без смещений и "
    "обучаемых весов нормировок, общий вход и выход, обучаемые позиции, MLP шириной 4d).\n\n"
    "Около 20 токенов данных на вес: 27,7 млн весов хотят около 550 млн токенов; большая модель "
    "на тех же данных недоучится. Расти, когда валидация вышла на плато и данных хватает; пока "
    "валидация падает, дешевле учить дольше. 24 слоя примерно втрое медленнее 8.",
    "en": "How many weights ≈ 12 · layers · d² + vocabulary · d + n · d. For 8 layers, d 512, a "
    "vocabulary of 4000 and n 1024 this is 27,738,112 — exactly what the training log prints (no "
    "biases, no learnable norm weights, tied input and output embedding, learned positions, an "
    "MLP 4d wide).\n\n"
    "About 20 tokens of data per weight: 27.7 M weights want about 550 M tokens; a bigger model "
    "on the same data will be under-trained. Grow when validation has reached a plateau and there "
    "is enough data; while validation still falls, training longer is cheaper. 24 layers are about "
    "three times slower than 8.",
}
SCHEDULE_HELP = {
    "ru": "Скорость обучения: линейный разогрев («Шаги разогрева» в «Дополнительно»), затем "
    "косинусный спад до «Доли минимальной скорости» к «Шагов до». Продолженный прогон с новым "
    "«Шагов до» продолжает спад с той скорости, на которой остановился, растягивая его до нового "
    "конца.",
    "en": "The learning rate: a linear warm-up (“Warm-up steps” under “Advanced”), then a cosine "
    "decay to the “Minimum rate ratio” at “Steps to”. A continued run with a new “Steps to” goes "
    "on from the rate where it stopped and stretches the decay to the new end.",
}


ADVANCED_FIELDS: tuple[dict[str, Any], ...] = (
    dict(
        name="warmup_steps",
        section="advanced",
        kind="int",
        path="training.warmup_steps",
        default=200,
        minimum=0,
        maximum=100_000_000,
        label=FIELD_LABELS["training.warmup_steps"],  # the label names the unit: none after it
        tooltip={
            "ru": "Сколько первых шагов скорость обучения растёт от нуля до полной: случайные "
            "веса в начале легко сорвать большим шагом (потери скачут или NaN). Обычно это "
            "1–5 % от «Шагов до»; 0 — без разогрева. По умолчанию: {default}.",
            "en": "For how many first steps the learning rate climbs from zero to the full one: "
            "random weights at the start are easily thrown off by a big update (the loss jumps "
            "or turns NaN). Usually 1–5 % of “Steps to”; 0: no warm-up. Default: {default}.",
        },
        help={
            "ru": "Расписание скорости: линейный разогрев за эти шаги, затем косинусный спад "
            "до «Доли минимальной скорости» к «Шагов до». Продолженный прогон разогрев не "
            "повторяет: спад продолжается с той скорости, на которой он остановился.",
            "en": "The rate's schedule: a linear warm-up over these steps, then a cosine decay "
            "to the “Minimum rate ratio” at “Steps to”. A continued run does not warm up again: "
            "the decay goes on from the rate where it stopped.",
        },
    ),
    dict(
        name="min_lr_ratio",
        section="advanced",
        kind="float",
        path="training.min_lr_ratio",
        default=0.1,
        minimum=0.0,
        maximum=1.0,
        label=FIELD_LABELS["training.min_lr_ratio"],
        tooltip={
            "ru": "До какой доли «Скорости обучения» она спадает к «Шагов до»: 0,1 — до "
            "десятой части. 0 — до нуля (последние шаги почти ничего не меняют), 1 — без "
            "спада. По умолчанию: {default}.",
            "en": "The share of the “Learning rate” it decays to by “Steps to”: 0.1 is a tenth. "
            "0 decays to zero (the last steps change almost nothing), 1 means no decay. "
            "Default: {default}.",
        },
    ),
    dict(
        name="weight_decay",
        section="advanced",
        kind="float",
        path="training.weight_decay",
        default=0.1,
        minimum=0.0,
        maximum=10.0,
        label=FIELD_LABELS["training.weight_decay"],
        tooltip={
            "ru": "Сила, с которой AdamW тянет веса к нулю на каждом шаге (кроме эмбеддингов): "
            "сдерживает переобучение. Больше — осторожнее модель, но учится медленнее; 0 — "
            "выключено. По умолчанию: {default}.",
            "en": "How hard AdamW pulls the weights towards zero at every step (embeddings "
            "excepted): it holds back overfitting. More makes a more cautious model that learns "
            "slower; 0 turns it off. Default: {default}.",
        },
    ),
    dict(
        name="grad_clip",
        section="advanced",
        kind="float",
        path="training.grad_clip",
        default=1.0,
        minimum=0.0,
        maximum=1_000.0,
        label=FIELD_LABELS["training.grad_clip"],
        tooltip={
            "ru": "Наибольшая норма градиента за шаг: больший градиент уменьшается до неё, "
            "так один неудачный батч не сбивает обучение. 0 — без обрезки. "
            "По умолчанию: {default}.",
            "en": "The largest gradient norm a step may use: a larger gradient is scaled down "
            "to it, so one bad batch cannot throw training off. 0: no clipping. "
            "Default: {default}.",
        },
    ),
    dict(
        name="precision",
        section="advanced",
        kind="choice",
        path="training.precision",
        default="auto",
        options=PRECISION_OPTIONS,
        option_tooltips=PRECISION_OPTION_TOOLTIPS,
        label=FIELD_LABELS["training.precision"],
        tooltip={
            "ru": "В каких числах считать: «Авто» берёт bf16 на картах RTX 30xx и новее, fp16 "
            "на T4 и fp32 на процессоре. bf16 и fp16 вдвое экономнее по памяти активаций и "
            "быстрее на картах с тензорными ядрами. По умолчанию: {default}.",
            "en": "Which numbers to compute in: “Auto” takes bf16 on RTX 30xx cards and newer, "
            "fp16 on a T4 and fp32 on the CPU. bf16 and fp16 halve the activations' memory and "
            "run faster on cards with tensor cores. Default: {default}.",
        },
    ),
)
