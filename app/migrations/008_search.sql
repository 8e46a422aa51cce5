-- 008: the hyperparameter search (issue 35, app/search/): one Optuna study per search, kept
-- in a journal file under the lab's data folder (`journal`, relative to it, so a moved lab
-- still finds it), and the lab's own record of each trial: its queued run and where it is.
--
-- searches.state: running -> done (every trial told, or the budget spent) | stopping -> stopped
-- search_trials.state: waiting (queued, not started) -> running -> complete | pruned | failed
-- A trial is asked (study.ask) and then recorded here; its queue item is added in the same
-- transaction that writes item_id, so a runner killed in between adopts the asked trial
-- (a RUNNING trial of the study without a row) instead of asking another, and never queues
-- one trial twice. `told` is set after study.tell; a tell already in the study is not repeated.
CREATE TABLE IF NOT EXISTS searches (
    id            INTEGER PRIMARY KEY,
    name          TEXT NOT NULL,
    study_name    TEXT NOT NULL,
    journal       TEXT NOT NULL,             -- the study's journal file, relative to the data folder
    config        TEXT NOT NULL,             -- the base run.json (JSON)
    space         TEXT NOT NULL,             -- JSON [[run.json key, kind, spec], ...] (app/search/space.py)
    trials        INTEGER NOT NULL,          -- how many trials at most
    budget_hours  REAL,                      -- GPU hours at most (NULL: no budget)
    pruner        TEXT NOT NULL DEFAULT 'median',  -- median | halving | none
    target        TEXT NOT NULL DEFAULT 'any',
    account       TEXT NOT NULL DEFAULT 'auto',
    seed          INTEGER NOT NULL,
    state         TEXT NOT NULL DEFAULT 'running',
    message       TEXT,
    created_at    REAL NOT NULL,
    updated_at    REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS search_trials (
    search_id      INTEGER NOT NULL REFERENCES searches(id) ON DELETE CASCADE,
    number         INTEGER NOT NULL,         -- the study's trial number
    params         TEXT NOT NULL,            -- JSON {run.json key: value}
    item_id        INTEGER,                  -- its queue item (NULL until queued)
    state          TEXT NOT NULL DEFAULT 'waiting',
    reported_step  INTEGER,                  -- the last evaluation reported to the study
    prune_at       REAL,                     -- when the pruner (or the search's stop) wrote STOP
    val_loss       REAL,                     -- the final held-out loss (complete trials)
    val_low        REAL,
    val_high       REAL,
    run_id         TEXT,                     -- its run (a chain's last leg)
    told           INTEGER NOT NULL DEFAULT 0,
    message        TEXT,
    created_at     REAL NOT NULL,
    updated_at     REAL NOT NULL,
    PRIMARY KEY (search_id, number)
);
