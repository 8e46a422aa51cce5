"""The searches' side of the queue (app/search/): each runner round drives them after the
ended runs are settled and before new ones start, so a trial asked now can start at once;
and the rule that a trial is never retried with a searched field changed.

The search part knows the queue only through the small port below (its QueuePort): it adds
a trial's run.json as a queue item, reads the item's state and runs, and removes a waiting
one; the queue knows the search only through this file.
"""

from __future__ import annotations

import logging
from typing import Any

from ..runs.manager import RunManager
from ..runs.precheck import RunError
from ..search.driver import QueuedRun, SearchDriver, retry_allowed
from ..search.store import SEARCH_ACTIVE, SearchStore
from .adding import KINDS as TARGET_KINDS
from .adding import refusals
from .store import QueueError, QueueStore

log = logging.getLogger(__name__)


def searching(store: QueueStore) -> bool:
    """Whether a search is going on (it needs a runner to ask its trials, even with nothing
    queued yet)."""
    return bool(SearchStore(store.state).searches(SEARCH_ACTIVE))


class QueuePort:
    """app.search.driver.QueuePort over the queue's tables."""

    def __init__(self, store: QueueStore) -> None:
        self.store = store

    def check(self, config: dict[str, Any], target: str) -> None:
        refused = refusals(config, target)
        if len(refused) == len(TARGET_KINDS[target]):
            raise QueueError("; ".join(dict.fromkeys(refused.values())))

    def add(self, config: dict[str, Any], target: str, account: str) -> int:
        return self.store.add(config, target, account, refused=refusals(config, target)).id

    def queued(self, item_id: int) -> QueuedRun | None:
        try:
            it = self.store.item(item_id)
        except QueueError:
            return None
        return QueuedRun(it.state, it.run_id, list(it.runs) or ([it.run_id] if it.run_id else []), it.message)

    def remove(self, item_id: int) -> bool:
        try:
            self.store.remove(item_id)
        except QueueError:
            return False
        return True


class Trials:
    """The runner's hold on the searches: `tick()` each round, `retry_allowed` when settling."""

    def __init__(self, store: QueueStore, manager: RunManager) -> None:
        self.searches = SearchStore(store.state)
        self.driver = SearchDriver(self.searches, manager.registry, QueuePort(store), manager.stop)

    def tick(self) -> list[str]:
        try:
            said = self.driver.tick()
        except (RunError, OSError, ValueError) as e:  # the searches never stop the queue
            log.warning("queue: the searches' round failed: %s", e, exc_info=True)
            return []
        for line in said:
            log.info("queue: %s", line)
        return said

    def retry_allowed(self, item_id: int, retry_config: dict[str, Any]) -> bool:
        return retry_allowed(self.searches, item_id, retry_config)
