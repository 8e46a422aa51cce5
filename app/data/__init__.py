"""The lab's data side: the dataset library, constellations, the tokenizer and prepared data.

The window and the CLI use these:
    Library(state)            datasets and constellations (app.data.library)
    prepare(...)              tokenizer + train.bin/val.bin/meta.json (app.data.pipeline)
    Progress, CancelToken     progress callbacks and cancelling (app.data.progress)
"""

from .library import (
    DEMO_CONSTELLATION,
    DEMO_DATASET,
    AddResult,
    Constellation,
    Dataset,
    Library,
    LibraryError,
)
from .pipeline import (
    DEFAULT_CONTEXT,
    DEFAULT_VOCAB,
    PrepareError,
    PrepareResult,
    prepare,
    validate_vocab,
)
from .progress import Cancelled, CancelToken, Progress

__all__ = [
    "DEMO_CONSTELLATION", "DEMO_DATASET", "AddResult", "Constellation", "Dataset", "Library",
    "LibraryError", "DEFAULT_CONTEXT", "DEFAULT_VOCAB", "PrepareError", "PrepareResult", "prepare",
    "validate_vocab", "CancelToken", "Cancelled", "Progress",
]
