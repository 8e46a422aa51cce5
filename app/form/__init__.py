"""The «Новый прогон» form without Qt: its state and the run.json it writes (`run_form`),
its fields table (`fields`, with the «Дополнительно» texts in `texts`), what it says about
each field (`checks`), the «Как выбрать размер» rows (`sizes`), micro-steps
(`tokens_per_step`), what it remembers between starts (`remembered`) and the tooltip text
rule (`tooltips`)."""
