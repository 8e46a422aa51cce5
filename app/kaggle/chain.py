"""Planning a leg of a run's chain on Kaggle: the account it goes to, what it uploads, and
whether a leg that the account's quota cut short goes on as the next leg, for what is left
of the run's «Лимит, мин». LegPlanning is a part of KaggleRuns (app/kaggle/runner.py).
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from trainer.state.checkpoint_index import is_checkpoint

from ..base import run_status as st
from ..base.i18n import t
from . import datasets
from .errors import AuthError, KaggleError, NetworkDown, Transient
from .picker import Candidate, Pick, Want, capacities, pick
from .quota import hours

log = logging.getLogger(__name__)

# A quota-cut leg leaves less than this of the run's «Лимит, мин»: no new kernel is pushed
# (its setup alone would take that long); the user continues it when they wish.
MIN_LEG_MIN = 1.0


def run_limit_min(config: dict[str, Any]) -> float:
    """The run's «Лимит, мин», as the user set it (every leg's run.json keeps it)."""
    return float((config.get("training") or {}).get("limit_min", 630))


def leg_allotment(leg: dict[str, Any], config: dict[str, Any]) -> float:
    """What was left of the run's limit when this leg started (older legs: the limit)."""
    allot = leg.get("allot_min")
    return run_limit_min(config) if allot is None else float(allot)


class LegPlanning:
    """Choosing the account and the bundles of a leg, and continuing the chain (a part of
    KaggleRuns)."""

    registry: Any
    store: Any
    accounts: Any
    settings: Any
    _current_run: str | None  # the run being pushed (KaggleRuns._message says its news)

    # -- picking --------------------------------------------------------------------------------
    def candidates(self, refresh: bool = True) -> list[Candidate]:
        """Every account with its free quota and GPU sessions (picker.capacities), after
        asking Kaggle for fresh quotas when `refresh`."""
        if refresh:
            self.accounts.check_all()
        return capacities(self.accounts.views(), self.store.legs_in_flight(), self.settings.margin_min)

    def choose(self, config: dict[str, Any], account: str, want: Want, exclude: set[str],
               limit_min: float | None = None) -> Pick:
        """The account for a leg of `limit_min` minutes (default: the run's «Лимит, мин»)."""
        limit = run_limit_min(config) if limit_min is None else limit_min
        margin = self.settings.margin_min
        cands = self.candidates()
        if account != "auto":
            named = [c for c in cands if c.username == account]
            if not named:
                raise KaggleError(t(f"аккаунт {account!r} не добавлен: ternit kaggle add-account",
                                    f"account {account!r} is not added: ternit kaggle add-account"))
            c = named[0]
            if not c.usable:
                row = self.store.account(account)
                raise AuthError(account, 401, (row.key_reason if row else None) or t(
                    f"ключ аккаунта {account} не принят", f"the key of account {account} was refused"))
            if c.free_sessions <= 0:
                raise KaggleError(t(
                    f"аккаунт {account}: {c.why_not}; Kaggle не даёт больше сессий GPU одному аккаунту — "
                    "дождитесь конца одной или выберите «Авто»",
                    f"account {account}: {c.why_not}; Kaggle gives one account no more GPU sessions — "
                    "wait for one to end or choose Auto"))
            left = c.leg_min(limit, margin)
            if left <= 0:
                raise KaggleError(t(
                    f"у аккаунта {account} свободно {hours(c.free_s)} квоты — не больше запаса {margin:g} мин; "
                    "выберите «Авто» или другой аккаунт",
                    f"account {account} has {hours(c.free_s)} of free quota, no more than the {margin:g} min "
                    "margin; choose Auto or another account",
                ))
            return Pick(account, left >= limit, left, t(f"выбран аккаунт {account}", f"account {account} chosen"))
        return pick(cands, limit, margin, want, exclude)

    # -- starting a leg -------------------------------------------------------------------------
    def bundles(self, config: dict[str, Any]) -> list[datasets.Bundle]:
        data_dir = (config.get("data") or {}).get("dir") or ""
        if not data_dir:
            raise KaggleError(t("в run.json не указана папка данных (data.dir)",
                                "run.json names no data folder (data.dir)"))
        run_id = self._current_run  # a lean-state run's code carries its library's wheel
        code = datasets.code_bundle(datasets.needs_wheel(config), (lambda m: self._message(run_id, m)) if run_id else None)
        out = [code, datasets.data_bundle(Path(data_dir), self.store)]
        resume = config.get("resume_from")
        if resume:
            path = Path(resume)
            if not is_checkpoint(path):  # a .pt file, or a sharded run's .dcp folder
                raise KaggleError(t(f"чекпоинт {path} не найден", f"checkpoint {path} does not exist"))
            out.append(datasets.checkpoint_bundle(path, self.store))
        return out

    def _continue(self, rec: Any, leg: dict[str, Any], checkpoint: Path) -> tuple[str | None, str]:
        """Start the next leg of the chain on an account with quota (Auto, or the named
        account while it has quota). Returns (next run id or None, a note for the user)."""
        config = rec.config()
        config["resume_from"] = str(checkpoint)
        # «Лимит, мин» is the run's allotment, not each leg's: the next leg gets what the
        # quota-cut one left of it (its kernel ran to its own limit, setup included).
        left = leg_allotment(leg, config) - float(leg.get("limit_min") or 0.0)
        if left < MIN_LEG_MIN:
            return None, t(f"лимит прогона исчерпан (осталось {left:.1f} мин); продолжите кнопкой «Продолжить»",
                           f"the run's limit is used up ({left:.1f} min left); continue it with «Продолжить»")
        choice = leg.get("account_choice") or "auto"
        possible = self.choose(config, "auto", Want(), set(), left)
        if possible.username is None:  # no leg is created that could not start
            return None, t(f"Продолжить негде: {possible.reason}. Позже нажмите «Продолжить».",
                           f"Nowhere to continue: {possible.reason}. Press «Продолжить» (Continue) later.")
        last_error = ""
        try:
            nxt = self.registry.create_leg(rec.id, config)
        except Exception as e:  # noqa: BLE001 - said to the user; the chain stops here
            log.warning("the next leg of %s was not created", rec.id, exc_info=True)
            return None, t(f"следующий этап не создан: {e}", f"the next leg was not created: {e}")
        for attempt_choice in ([choice, "auto"] if choice != "auto" else ["auto"]):
            try:
                self.start(nxt.id, attempt_choice, left)
                return nxt.id, t(f"Продолжение на Kaggle: этап {nxt.leg}, {left:.0f} мин, оставшихся от лимита",
                                 f"Continuing on Kaggle: leg {nxt.leg}, for the {left:.0f} min left of the limit")
            except (NetworkDown, Transient):
                raise
            except KaggleError as e:
                last_error = str(e)
                continue
        self._status(nxt.id, st.FAILED, last_error)
        return nxt.id, t(f"Продолжить негде: {last_error}", f"Nowhere to continue: {last_error}")
