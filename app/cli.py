"""`ternit`: the lab without the window. Each command group lives in its own module.

A group module provides `main(argv: list[str]) -> int`; it is imported only when used, so
`ternit --help` stays fast and one group's dependencies never slow down another.
"""

from __future__ import annotations

import importlib
import sys

GROUPS: dict[str, tuple[str, str]] = {
    "data": ("app.data.cli", "datasets, constellations and prepared data"),
    "run": ("app.runs.cli", "start, list, stop and continue training runs"),
    "estimate": ("app.sizing.cli", "weights, speed, memory and data estimates for a run"),
    "monitor": ("app.gpu.cli", "GPU memory, temperature and load (NVML)"),
    "kaggle": ("app.kaggle.cli", "Kaggle accounts, quota and kernels"),
    "bench": ("app.bench_cli", "benchmarks (economical mode, data preparation)"),
    "export": ("app.export_cli", "export a checkpoint's weights as safetensors"),
}


def usage() -> str:
    lines = ["usage: ternit COMMAND [ARGS...]", "", "commands:"]
    lines += [f"  {name:<10} {about}" for name, (_, about) in GROUPS.items()]
    lines.append("\n`ternit COMMAND --help` for each command's arguments.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help", "help"):
        print(usage())
        return 0
    name, rest = argv[0], argv[1:]
    if name not in GROUPS:
        print(f"ternit: unknown command {name!r}\n\n{usage()}", file=sys.stderr)
        return 2
    module = importlib.import_module(GROUPS[name][0])
    return int(module.main(rest) or 0)


if __name__ == "__main__":
    sys.exit(main())
