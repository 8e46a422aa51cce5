"""A search as `ternit search show --json` prints it and the window's search view shows it:
its trials (values, state, final held-out loss with its interval, run), the best one, the
optimisation history, and each field's importance once enough trials have completed."""

from __future__ import annotations

import logging
from typing import Any

from . import study as studies
from .store import COMPLETE, Search, SearchStore, Trial

log = logging.getLogger(__name__)

MIN_FOR_IMPORTANCE = 4   # complete trials before an importance means anything


def trial_json(tr: Trial) -> dict[str, Any]:
    ci = [tr.val_low, tr.val_high] if tr.val_low is not None and tr.val_high is not None else None
    return {"number": tr.number, "values": tr.params, "state": tr.state, "val_loss": tr.val_loss,
            "val_ci95": ci, "run_id": tr.run_id, "message": tr.message}


def best(trials: list[Trial]) -> Trial | None:
    done = [tr for tr in trials if tr.state == COMPLETE and tr.val_loss is not None]
    return min(done, key=lambda tr: (tr.val_loss, tr.number)) if done else None


def history(trials: list[Trial]) -> list[tuple[int, float, float]]:
    """(trial number, its final loss, the best so far) of the complete trials, in order: the
    optimisation history plot."""
    out, so_far = [], float("inf")
    for tr in sorted(trials, key=lambda x: x.number):
        if tr.state == COMPLETE and tr.val_loss is not None:
            so_far = min(so_far, tr.val_loss)
            out.append((tr.number, tr.val_loss, so_far))
    return out


def importances(search: Search) -> dict[str, float]:
    """Each searched field's importance (Optuna's PedAnovaImportanceEvaluator: no
    scikit-learn, which the default fANOVA needs); empty below MIN_FOR_IMPORTANCE complete
    trials or with one field (its importance is 1 by definition)."""
    import optuna
    from optuna.importance import PedAnovaImportanceEvaluator, get_param_importances
    from optuna.trial import TrialState

    if len(search.space) < 2:
        return {}
    study, _ = studies.load_study(studies.journal_path(search.journal), search.study_name)
    if len(study.get_trials(deepcopy=False, states=(TrialState.COMPLETE,))) < MIN_FOR_IMPORTANCE:
        return {}
    try:
        return dict(get_param_importances(study, evaluator=PedAnovaImportanceEvaluator()))
    except (ValueError, RuntimeError, optuna.exceptions.OptunaError) as e:  # too few distinct values yet
        log.info("search %s: importances not computed: %s", search.id, e)
        return {}


def search_json(store: SearchStore, search: Search) -> dict[str, Any]:
    trials = store.trials(search.id)
    top = best(trials)
    return {
        "id": search.id, "name": search.name, "state": search.state,
        "storage": studies.storage_text(studies.journal_path(search.journal)), "study_name": search.study_name,
        "space": [d.as_json() for d in search.space], "pruner": search.pruner, "target": search.target,
        "of": search.trials, "budget_hours": search.budget_hours,
        "trials": [trial_json(tr) for tr in trials],
        "best": trial_json(top) if top else None,
        "history": [list(h) for h in history(trials)],
        "importances": importances(search),
    }


def best_config(store: SearchStore, search: Search) -> dict[str, Any] | None:
    """The best trial's run.json (the search's base with its values): the window's «Лучшая —
    в форму» opens it as a new form."""
    from .space import with_params

    top = best(store.trials(search.id))
    if top is None:
        return None
    cfg = with_params(search.config, top.params)
    cfg["name"] = f"{search.name}-best"
    return cfg
