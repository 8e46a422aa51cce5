"""The hyperparameter search («Поиск»): Optuna studies whose trials are the queue's runs.

- `space`: the searched fields (`--space KEY=log:LOW..HIGH | LOW..HIGH | V1,V2,…`);
- `store`: its tables (migration 008); `study`: the journal file each study lives in;
- `driver`: one round per queue-runner tick (ask, report, prune, tell), restart-safe;
- `view`: what `ternit search show` and the window show; `cli`: `ternit search`.
"""
