"""The queue's timeline with six machines (this PC and five Kaggle accounts): a row for
each, every label within its own bar's room, no two labels drawn over each other."""

from __future__ import annotations

import time

import pytest
from PySide6.QtCore import QPointF

from app.kaggle.credentials import Credential, CredentialStore
from app.kaggle.quota import Quota
from app.kaggle.store import KaggleStore
from app.queue.store import QueueStore
from app.queue.world import Planner
from app.runs.registry import Registry
from tests.test_queue_store import cfg

pytestmark = pytest.mark.usefixtures("russian")


def test_six_machines_and_many_runs_draw_no_label_over_another(qtbot):
    from ui.queue.timeline import QueueTimeline

    reg = Registry()
    store = QueueStore(reg.state)
    kaggle = KaggleStore(reg.state)
    try:
        for i, name in enumerate(("alice", "bob", "carol", "dave", "erin")):
            CredentialStore().add(Credential(name, f"{i}" * 32))
            kaggle.set_quota(name, Quota(30 * 3600, (10 + i) * 3600, 0, time.time() + 86400, time.time()))
        for n in range(14):  # short and long runs with long names: neighbours in one lane
            store.add(cfg(name=f"прогон-с-длинным-именем-{n}", limit_min=5 if n % 3 else 40), "kaggle")
        store.add(cfg(name="локальный-прогон-с-длинным-именем"), "local")
        tl = Planner(store, reg).timeline()
        timeline = QueueTimeline()
        qtbot.addWidget(timeline)
        timeline.show()
        timeline.show_timeline(tl)
        timeline.resize(900, timeline.minimumHeight())
        qtbot.waitExposed(timeline)
        timeline.fit_labels()
        assert len(tl.machines) == 6
        assert {b.row for b in timeline.bars} >= {0, 1, 2}
        shown = [(bar, label) for bar, label in timeline.labels if label.textItem.toPlainText()]
        assert shown, "no label at all fits: the check below would prove nothing"
        rects = [label.sceneBoundingRect() for _, label in shown]
        for i, a in enumerate(rects):
            for j in range(i + 1, len(rects)):
                assert not a.intersects(rects[j]), (shown[i][0].name, shown[j][0].name)
        vb = timeline.getPlotItem().getViewBox()
        for bar, label in shown:  # a label stays in its bar's room: before the next bar of its lane
            nxt = [b.start for b, _ in timeline.labels if (b.row, b.lane) == (bar.row, bar.lane) and b.start > bar.start]
            if nxt:
                assert label.sceneBoundingRect().right() <= vb.mapViewToScene(QPointF(min(nxt), 0)).x() + 1, bar.name
    finally:
        store.close()
        reg.close()

