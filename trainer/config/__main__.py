"""`python -m trainer.config RUN.json [--machine NAME] [--json]`: the command that checks a
run.json as the trainer will and prints its plan. It stands above both rooms it calls: the
contract (trainer/config/run_config.py) never needs the plan, the plan
(trainer/plan/planner.py) reads the contract."""

from __future__ import annotations

import json

from trainer.config.reasons import Refusal
from trainer.config.run_config import ConfigError, load
from trainer.plan.fit import speed_reason, verdict
from trainer.plan.planner import KNOWN_CARDS, known_machine, plan


def main(argv: list[str] | None = None) -> int:
    """`python -m trainer.config RUN.json [--machine NAME] [--json]`: check a run.json as
    the trainer will (no torch imported, nothing trained); with --machine, the plan of what
    it would run on that machine of the lab's catalogue (trainer.plan.planner.KNOWN_CARDS: the
    names `ternit estimate --gpu` knows), each choice with its reason. Exit 0, or 2 with
    the refusal (on stderr; with --json as {"refusal": …} on stdout). The lab runs the same
    rules in its own process before any run exists (app/runs/precheck.py), with the start
    checks of trainer.plan.preflight, which need the data this command does not."""
    import argparse
    import sys

    parser = argparse.ArgumentParser(prog="python -m trainer.config", description=(
        "Check a run.json as the trainer will; with --machine, print what it would run there."))
    parser.add_argument("run_json", metavar="RUN.json")
    parser.add_argument("--machine", choices=list(KNOWN_CARDS), help="a machine of the lab's catalogue")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)

    def refused(refusal: Refusal) -> int:
        if args.json:
            print(json.dumps({"refusal": refusal.as_json()}, ensure_ascii=False))
        print(f"error: {refusal.text()}", file=sys.stderr)
        return 2

    try:
        cfg = load(args.run_json)
    except ConfigError as e:
        return refused(e.refusal)
    if args.machine is None:
        if args.json:
            print(json.dumps({"plan": None}))
        return 0
    result = plan(cfg, known_machine(args.machine))
    if isinstance(result, Refusal):
        return refused(result)
    # The plan's memory against the card (trainer/plan/fit.py): a plan that does not fit is
    # refused with the fastest combination that does.
    memory = verdict(cfg, result)
    speed = speed_reason(cfg, result)  # what the plan's speed rests on, beside its memory
    if isinstance(memory, Refusal):
        if not args.json:
            print("\n".join(result.lines()))
        return refused(memory)
    if args.json:
        print(json.dumps({"plan": result.as_json(), "memory": memory.as_json() if memory else None,
                          "speed": speed.as_json()}, ensure_ascii=False))
    else:
        print("\n".join(result.lines() + ([f"  {'memory':<12} {memory.text()}"] if memory else [])
                        + [f"  {'speed':<12} {speed.text()}"]))
    return 0


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    raise SystemExit(main())
