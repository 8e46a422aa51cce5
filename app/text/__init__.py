"""Text from a run's checkpoint, without torch: the child process `python -m trainer.text.sample`
and its JSON lines (`generation`), the «Текст» tab's playground and evaluation
(`playground`), the samples a run wrote while training (`training_samples`), and the
commands `ternit sample` / `ternit eval` (`sample_cli`, `eval_cli`)."""
