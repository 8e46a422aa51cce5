"""`python -m app.cli ARGS`: the same as `ternit ARGS` (the window's child processes use it)."""

import sys

from app.cli.main import main

sys.exit(main())
