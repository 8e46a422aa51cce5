"""The sampler's thread, delivered to the UI thread as a Qt signal.

app.gpu.SamplerThread is a plain thread (app/ knows no Qt). Its callback emits `sampled`
from that thread; Qt queues the call to receivers living in the UI thread, so the widgets
are only ever touched there.
"""

from __future__ import annotations

from PySide6.QtCore import QObject, Signal

from app.gpu.sampler import Sampler, SamplerThread


class SamplerBridge(QObject):
    sampled = Signal(object)  # app.gpu.samples.Snapshot

    def __init__(self, sampler: Sampler, interval_s: float = 1.0,
                 parent: QObject | None = None) -> None:
        super().__init__(parent)
        self.sampler = sampler
        self.interval_s = interval_s
        self.thread: SamplerThread | None = None

    @property
    def running(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def start(self, interval_s: float | None = None) -> None:
        if interval_s is not None:
            self.interval_s = interval_s
        if self.running:
            return
        signal = self.sampled
        thread = SamplerThread(self.sampler, lambda snap: None, self.interval_s)

        def deliver(snap: object) -> None:
            try:
                signal.emit(snap)
            except RuntimeError:  # the panel was deleted without stop(): end the thread too
                thread.request_stop()

        thread.on_sample = deliver
        self.thread = thread
        thread.start()

    def stop(self) -> None:
        if self.thread is not None:
            self.thread.stop()
            self.thread = None
