"""The lab's data side: the dataset library, constellations, the tokenizer and prepared data.

The window and the CLI use these:
    app.data.library.Library(state)     datasets and constellations
    app.data.library.constellation_summaries()   plain dicts for the run form
    app.data.prepare.prepare(...)       tokenizer + train.bin/val.bin/meta.json, with
                                        progress callbacks and a CancelToken
    app.data.progress                   Progress, CancelToken, Cancelled
(`from app.data import prepare` gives the module; `prepare.prepare(...)` the function.)
"""
