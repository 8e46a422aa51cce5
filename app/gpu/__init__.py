"""GPU and machine monitoring: NVML for the cards, psutil for CPU and RAM.

`nvml` talks to the driver and survives its absence; `sampler` turns it into `Snapshot`s
(once a second, off the UI thread); `present` turns snapshots into texts, colour levels and
warnings for the views; `heat_guard` pauses a local run while the card is too hot;
`cards` says which cards a run started here can train on.

Nothing is imported here: the window's first frame asks only `cards` (and `heat_guard`'s
words), and the sampler with psutil loads with the GPU tab, a moment later.
"""
