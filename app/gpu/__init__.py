"""GPU and machine monitoring: NVML for the cards, psutil for CPU and RAM.

`nvml` talks to the driver and survives its absence; `sampler` turns it into `Snapshot`s
(once a second, off the UI thread); `present` turns snapshots into texts, colour levels and
warnings for the views; `heat_guard` pauses a local run while the card is too hot.
"""

from .sampler import Sampler, SamplerThread
from .samples import GpuSample, HostSample, Snapshot, TrainerSample

__all__ = ["GpuSample", "HostSample", "Sampler", "SamplerThread", "Snapshot", "TrainerSample"]
