"""A run's live speed and time left (app.runs.live), as the banner and `--wait` print it:
the pace of the recent steps, the time to «Шагов до» or to «Лимит, мин», whichever first."""

from __future__ import annotations

import json
import time

import pytest

from app.runs.live import LiveFollower, LiveProgress

pytestmark = pytest.mark.usefixtures("russian")

T0 = 1_700_000_000.0


def start(steps_to: int = 1000, limit_min: float = 60, base: float = T0) -> dict:
    return {"event": "start", "time": base, "step": 0,
            "config": {"training": {"steps_to": steps_to, "limit_min": limit_min}}}


def steps(first: int, last: int, seconds_each: float, ms: float = 40.0, base: float = T0) -> list[dict]:
    return [{"event": "step", "step": s, "time": base + 5 + s * seconds_each, "step_ms": ms,
             "tokens_per_s": 12_345.6, "loss": 5.0} for s in range(first, last + 1)]


def plain(text: str) -> str:
    """The thin spaces between thousands as plain ones, to write the expected texts."""
    return text.replace("\u202f", " ").replace("\u00a0", " ")


class _Plain(LiveProgress):
    def text(self, now=None) -> str:
        return plain(super().text(now))


def fed(*events: dict) -> LiveProgress:
    live = _Plain()
    for ev in events:
        live.feed(ev)
    return live


def test_time_to_steps_to_when_it_comes_before_the_limit():
    live = fed(start(1000, 60), *steps(1, 100, 0.5))
    now = T0 + 5 + 100 * 0.5
    # 900 steps left at 0,5 s each (the wall-clock pace, evaluations included) = 7,5 min.
    assert live.text(now) == "12 346 ток/с · 40 мс/шаг (медиана по последним 50 шагам) · до шага 1 000 ≈8 мин"


def test_the_limit_first_says_where_it_stops():
    live = fed(start(100_000, 10), *steps(1, 100, 0.5))
    now = T0 + 5 + 100 * 0.5  # 55 s in: 545 s of the 10 min left, ≈1090 more steps
    text = live.text(now)
    assert "лимит через 9 мин на шаге ≈1 190, раньше «Шагов до»" in text, text


def test_kaggle_says_which_leg_ends_and_who_continues():
    live = fed(start(100_000, 10), *steps(1, 100, 0.5))
    live.kaggle_leg, live.kaggle_account, live.next_account = 2, "alice", "auto"
    text = live.text(T0 + 55)
    assert "этап 2 (alice) кончится по лимиту через 9 мин на шаге ≈1 190" in text
    assert "дальше — этап 3 на аккаунте с квотой (Авто)" in text


def test_english_and_nothing_before_the_first_step():
    from app.base.i18n import set_language

    assert fed(start()).text(T0) == ""
    set_language("en")
    live = fed(start(1000, 60), *steps(1, 100, 0.5, ms=4.25))
    assert live.text(T0 + 55) == "12,346 tok/s · 4.2 ms/step (median of the last 50 steps) · ≈8 min to step 1,000"


class _Rec:
    def __init__(self, folder, active=True):
        self.id, self.active, self.steps_to, self.started_at = "r1", active, 1000, T0
        self.target_kind, self.leg, self.target_account = "local", 1, None
        self.events_path = folder / "events.jsonl"


def test_the_follower_reads_new_lines_of_the_file_each_time(tmp_path):
    rec = _Rec(tmp_path)
    lines = [start(), *steps(1, 50, 0.5)]
    rec.events_path.write_text("".join(json.dumps(e) + "\n" for e in lines), encoding="utf-8")
    follower = LiveFollower()
    assert "до шага 1 000 ≈8 мин" in plain(follower.text_for(rec, now=T0 + 30))
    with rec.events_path.open("a", encoding="utf-8") as f:
        f.writelines(json.dumps(e) + "\n" for e in steps(51, 900, 0.5))
    assert "до шага 1 000 ≈50 с" in plain(follower.text_for(rec, now=T0 + 455))
    rec.active = False
    assert follower.text_for(rec) == ""


def test_ternit_run_wait_prints_the_same_line_as_the_banner():
    import io

    from app.runs.cli import Progress

    out = io.StringIO()
    progress = Progress(out=out, every_s=0.0)
    base = time.time() - 55  # the CLI says the time left from now
    events = (start(1000, 60, base), *steps(1, 100, 0.5, base=base))
    for ev in events:
        progress(ev)
    live = fed(*events)
    last = plain(out.getvalue().splitlines()[-1])
    assert last.startswith("  12 346 ток/с · 40 мс/шаг (медиана по последним 50 шагам) · до шага 1 000 ≈")
    assert last.strip() == plain(LiveProgress.text(live))


def test_tokens_per_s_and_ms_per_step_are_one_pair_from_the_same_steps():
    """The banner showed the last step's tokens/s beside the median step time: 1 000 tok/s
    beside 40 ms on a run of 2 048-token steps. Now both come from the same recent steps."""
    events = [start(1000, 60)]
    for s in range(1, 21):  # 2 048 tokens a step; every fifth step slow (an evaluation's neighbour)
        ms = 200.0 if s % 5 == 0 else 40.0
        events.append({"event": "step", "time": T0 + 5 + s, "step": s, "step_ms": ms,
                       "tokens_per_s": 2048 / (ms / 1000), "loss": 5.0})
    events[-1]["tokens_per_s"] = 1000.0  # a last step the trainer timed oddly
    live = fed(*events)
    tps, ms, n = live.measured_pair()
    assert ms == 40.0 and n == 20 and round(tps * ms / 1000) == 2048
    assert live.text(T0 + 30).startswith("51 200 ток/с · 40 мс/шаг (медиана по последним 20 шагам)")


def test_a_stop_asked_on_kaggle_says_no_next_leg_not_the_next_account(tmp_path):
    """«дальше — этап 3 на аккаунте с квотой (Авто)» stood over «продолжения не будет»."""
    rec = _Rec(tmp_path)
    rec.target_kind, rec.leg, rec.target_account = "kaggle", 2, "alice"
    rec.config = lambda: {"target": {"account": "auto"}}
    rec.events_path.write_text("".join(json.dumps(e) + "\n" for e in [start(100_000, 10), *steps(1, 100, 0.5)]),
                               encoding="utf-8")
    follower = LiveFollower()
    assert "дальше — этап 3" in plain(follower.text_for(rec, now=T0 + 55))
    rec.stop_requested_at = T0 + 50
    text = plain(follower.text_for(rec, now=T0 + 55))
    assert "продолжения не будет (остановка запрошена)" in text and "дальше" not in text, text
