"""`ternit-lab`: the window. `ternit-lab --snapshot FILE.png [--lang ru|en]` renders the main
window offscreen to a PNG and exits (the README's screenshot, and the tests)."""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time

_T0 = time.perf_counter()
log = logging.getLogger(__name__)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="ternit-lab", description="Ternit Lab: plan, train and compare small GPT models.")
    p.add_argument("--snapshot", metavar="FILE.png", help="render the main window offscreen to this PNG and exit")
    p.add_argument("--lang", choices=["ru", "en"], help="interface language for this start (default: the setting, else Russian)")
    p.add_argument("--size", default="1560x980", help="window size for --snapshot, WIDTHxHEIGHT")
    p.add_argument("--dark", action="store_true", help="a dark palette, as a dark desktop theme gives (to check it)")
    p.add_argument("--print-startup", action="store_true",
                   help="print the seconds from importing ui.main to the first shown window, to the "
                        "fully built one (plot and monitor), from the process's launch to the first "
                        "shown window, and the process's CPU seconds to it, then exit")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    from app.cli.main import utf8_stdio

    utf8_stdio()  # what it prints, redirected, is UTF-8 on Windows too (trainer/base/streams.py)
    args = parse(sys.argv[1:] if argv is None else argv)
    if args.snapshot:
        # Offscreen: no display needed, and nothing flashes on screen.
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
    from app.base.i18n import set_language, t

    if args.lang:
        set_language(args.lang)
    if (sys.platform.startswith("linux") and not os.environ.get("QT_QPA_PLATFORM")
            and not os.environ.get("DISPLAY") and not os.environ.get("WAYLAND_DISPLAY")):
        print(t("ternit-lab: нет дисплея (DISPLAY/WAYLAND_DISPLAY не заданы). Запустите окно на рабочем столе, "
                "снимок сделайте так: ternit-lab --snapshot FILE.png; без окна — команда ternit.",
                "ternit-lab: no display (DISPLAY/WAYLAND_DISPLAY are not set). Start the window on a desktop; "
                "for a picture use ternit-lab --snapshot FILE.png; without a window, the ternit command."),
              file=sys.stderr)
        return 2
    from app.base import logs

    logs.setup()  # what a broad except swallows goes to the lab's log file (Справка → О программе)
    from ui.window.main_window import MainWindow, app_instance

    app = app_instance([sys.argv[0]])
    if args.dark:
        from ui.base.palette import use_dark

        use_dark(app)
    try:
        # A snapshot neither takes the user's window layout nor leaves its own size there.
        window = MainWindow(remember_layout=not args.snapshot, drive_queue=not args.snapshot)
    except Exception as e:  # the lab's state or folders cannot be opened: say so, lose nothing
        from app.base import paths

        log.exception("the window could not open")

        text = t(f"Лаборатория не открылась: {e}\nПапка данных: {paths.data_dir()}",
                 f"The lab could not open: {e}\nData folder: {paths.data_dir()}")
        print(text, file=sys.stderr)
        if not args.snapshot and not args.print_startup:
            from PySide6.QtWidgets import QMessageBox

            QMessageBox.critical(None, "Ternit Lab", text)
        return 1
    if args.snapshot:
        return snapshot(app, window, args.snapshot, args.size)
    window.show()  # at the size and place the last start left (MainWindow restores them)
    if args.print_startup:
        import psutil

        window.repaint()  # the first frame, painted now (before queued work such as the plot)
        shown = time.perf_counter() - _T0
        cpu = time.process_time()  # this process's CPU seconds to the first frame (a loaded machine's wall is not)
        since_launch = time.time() - psutil.Process().create_time()  # interpreter start included
        window.ensure_ready()
        app.processEvents()
        print(f"{shown:.3f} {time.perf_counter() - _T0:.3f} {since_launch:.3f} {cpu:.3f}")
        return 0
    return app.exec()


def snapshot(app, window, path: str, size: str) -> int:
    """Lay the window out at `size`, let it draw once, grab it to a PNG."""
    try:
        w, h = (int(x) for x in size.lower().split("x"))
    except ValueError:
        print(f"ternit-lab: --size must look like 1560x980, not {size!r}", file=sys.stderr)
        return 2
    window.resize(w, h)
    window.show()
    window.ensure_ready()
    for _ in range(3):  # layout, then the plot's first paint
        app.processEvents()
    ok = window.grab().save(path, "PNG")
    window.close()
    if not ok:
        print(f"ternit-lab: could not write {path}", file=sys.stderr)
        return 1
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
