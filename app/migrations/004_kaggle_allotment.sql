-- What is left of the run's «Лимит, мин» for a Kaggle leg. The limit is the whole run's:
-- a leg that the quota cut short leaves the next leg the rest (app/kaggle/runner.py). The
-- run.json of every leg keeps the limit the user set, so «Продолжить» offers it again.
-- NULL (legs from before this column): the run's own limit.
ALTER TABLE kaggle_legs ADD COLUMN allot_min REAL;
