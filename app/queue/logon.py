"""`python -m app.queue.logon --data DIR --lang L [--home H]`: what the autostart entry
(app/queue/autostart.py) runs at logon — the lab's folder and language it was made with,
then the detached runner started as `ternit queue run` starts it (nothing to do: it ends).
A lab that is gone since is said in the runner's log, and nothing is created in its place."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m app.queue.logon")
    p.add_argument("--data", required=True)
    p.add_argument("--lang", choices=["ru", "en"])
    p.add_argument("--home")
    args = p.parse_args(argv)
    if args.home:
        os.environ["TERNIT_HOME"] = args.home
    if args.lang:
        os.environ["TERNIT_LANG"] = args.lang
    if not Path(args.data).is_dir():  # checked before anything would create it afresh
        print(f"{time.strftime('%Y-%m-%d %H:%M:%S')} ternit queue autostart: the lab {args.data} is gone; "
              "nothing to carry on (ternit queue autostart off removes this entry)", file=sys.stderr)
        return 2
    from .cli import main as queue_main

    return queue_main(["run"])


if __name__ == "__main__":
    sys.exit(main())
