"""The lab's measuring tools (`ternit bench NAME`, docs/PERF.md), kept out of trainer/ so
that the code bundle a Kaggle kernel runs holds only the trainer. bench/ may import
trainer/ and app/; nothing in app/, ui/ or trainer/ imports bench/ (app/cli/bench.py
starts these by module name)."""
