"""The run queue: runs that wait for this PC's card or a Kaggle account and start by
themselves, in the user's order, while nobody watches (issue 26). Plain Python, no Qt.

    store.py     the queue's tables (migrations 005, 006): items, series, the pause; QueueStore
    plan.py      the scheduler's rule and the predicted timeline: one pure function, predict()
    estimates.py how long a run takes on this PC and on Kaggle, whether it fits (app/sizing)
    capacity.py  the Kaggle accounts as the planner sees them (quota, running legs, sessions)
    world.py     the planner's inputs from the state; Planner.timeline() for the list and plot
    runner.py    QueueRunner: settles, retries, starts; survives being killed; ends when idle
    retry.py     the one retry policy: machine loss and a full disk keep the retry
    detach.py    the runner as a process of its own, started detached (the window, the CLI)
    driver.py    the window's side: shows and edits the queue, starts the runner, never drives
    autostart.py the logon entry that carries the queue on after a reboot; logon.py runs it
    lock.py      exactly one runner per queue
    series.py    series: the combinations, and their results table with the winner
    adding.py    add_runs(): one run or a series, each pre-checked
    faults.py    fault points for the tests of a killed runner
    cli.py       `ternit queue …`
"""
