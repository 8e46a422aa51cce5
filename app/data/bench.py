"""`ternit bench data`: data preparation throughput, the lab's pipeline against `tokenizers`.

Same files, same tokenizer, one process, alternating order each round (A B C, C B A, ...):
  lab        app.data.prepare(..., tokenizer=FILE, use_cache=False): stat-check the dataset,
             read, hash, encode, write train/val, choose val, fsync, rename, record
  encode     read each file, `Tokenizer.encode_batch(docs)`, count tokens (no writing)
  encode_fast the same with `encode_batch_fast` (no offsets): the fastest the library goes
MB/s are of the input's UTF-8 bytes, by wall clock and by CPU time (user + system, all
threads: steadier than wall time on a machine others are using). The target: lab / encode
>= 0.8 (medians).

`--rss SIZES` instead measures peak resident memory in a fresh process per input size: a
whole prepare (tokenizer training included), then one reusing that tokenizer (the
streaming encode alone), to show memory stays flat as the input grows.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import psutil

from trainer.base.streams import UTF8_ENV

from .textgen import document


def make_corpus(root: Path, mb: float, seed: int = 0) -> int:
    """A folder of .jsonl files (many documents) and one big .txt (one long document);
    returns the UTF-8 bytes of text written."""
    root.mkdir(parents=True, exist_ok=True)
    rng = random.Random(seed)
    target = int(mb * 1_000_000)
    written = 0
    big = int(target * 0.25)
    with open(root / "book.txt", "w", encoding="utf-8") as f:
        while written < big:
            doc = document(rng, paragraphs=20)
            f.write(doc)
            written += len(doc.encode())
    part = 0
    while written < target:
        with open(root / f"part-{part:03d}.jsonl", "w", encoding="utf-8") as f:
            chunk = 0
            while chunk < 4_000_000 and written < target:
                doc = document(rng)
                f.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
                n = len(doc.encode())
                chunk += n
                written += n
        part += 1
    return written


def train_tokenizer(root: Path, out: Path, vocab: int) -> None:
    from .prepare import new_tokenizer

    tok, trainer = new_tokenizer(vocab)
    tok.train_from_iterator((doc for _, doc in _iter_docs(root)), trainer)
    tok.save(str(out))


def _iter_docs(root: Path):
    for p in sorted(root.iterdir()):
        if p.suffix == ".jsonl":
            with open(p, encoding="utf-8") as f:
                for line in f:
                    yield p, json.loads(line)["text"]
        elif p.suffix == ".txt":
            yield p, p.read_text(encoding="utf-8")


def run_encode(root: Path, tok, fast: bool) -> int:
    """Plain `tokenizers` over the same files: the documents of each file in one call."""
    encode = tok.encode_batch_fast if fast else tok.encode_batch
    tokens = 0
    for p in sorted(root.iterdir()):
        docs = [d for q, d in _iter_docs(root) if q == p] if p.suffix in (".jsonl", ".txt") else []
        if docs:
            tokens += sum(len(e.ids) for e in encode(docs, add_special_tokens=False))
    return tokens


def run_lab(lib, tok_path: Path, out: Path, context: int) -> int:
    from .prepare import prepare

    res = prepare(["bench"], out=out, tokenizer=tok_path, context=context, library=lib, use_cache=False)
    return res.meta["train_tokens"] + res.meta["val_tokens"]


def throughput(args: argparse.Namespace) -> int:
    from ..base.state import open_state
    from .library import Library

    with tempfile.TemporaryDirectory(prefix="ternit-bench-data-") as tmpdir:
        tmp = Path(tmpdir)
        t0 = time.perf_counter()
        nbytes = make_corpus(tmp / "corpus", args.mb)
        tok_path = tmp / "tokenizer.json"
        train_tokenizer(tmp / "corpus", tok_path, args.vocab)
        print(f"corpus: {nbytes / 1e6:.1f} MB of text in {len(list((tmp / 'corpus').iterdir()))} files, "
              f"tokenizer vocab {args.vocab} (set-up {time.perf_counter() - t0:.1f} s); "
              f"{os.cpu_count()} CPUs; TOKENIZERS_PARALLELISM={os.environ.get('TOKENIZERS_PARALLELISM', 'unset')}",
              flush=True)
        state = open_state(tmp / "state.sqlite")
        lib = Library(state)
        lib.add(tmp / "corpus", name="bench", constellation="bench")
        # One loaded tokenizer each, reused every round: the lab keeps its own by content
        # (tokenizers leaks memory per dropped instance), the plain calls get theirs here.
        from tokenizers import Tokenizer

        plain_tok = Tokenizer.from_file(str(tok_path))
        variants = {
            "lab": lambda i: run_lab(lib, tok_path, tmp / f"out{i % 2}", args.context),
            "encode": lambda i: run_encode(tmp / "corpus", plain_tok, fast=False),
            "encode_fast": lambda i: run_encode(tmp / "corpus", plain_tok, fast=True),
        }
        names = list(variants)
        times: dict[str, list[float]] = {n: [] for n in names}
        cpus: dict[str, list[float]] = {n: [] for n in names}
        tokens: dict[str, int] = {}
        # warm the page cache, the library and both tokenizers' caches
        run_lab(lib, tok_path, tmp / "warm", args.context)
        run_encode(tmp / "corpus", plain_tok, fast=True)
        for r in range(args.repeats):
            order = names if r % 2 == 0 else names[::-1]
            for n in order:
                c, t = _cpu(), time.perf_counter()
                tokens[n] = variants[n](r)
                times[n].append(time.perf_counter() - t)
                cpus[n].append(_cpu() - c)
            print(f"round {r + 1}/{args.repeats}: " + ", ".join(
                f"{n} {nbytes / 1e6 / times[n][-1]:.2f} MB/s ({_per_cpu_text(nbytes, cpus[n][-1])})"
                for n in names), flush=True)
        state.close()
    result = {"mb": round(nbytes / 1e6, 2), "repeats": args.repeats, "vocab": args.vocab}
    for n in names:
        speeds = sorted(nbytes / 1e6 / s for s in times[n])
        # a round shorter than the CPU clock's tick reads 0 CPU-s: it has no rate (None), not an infinite one
        per_cpu = sorted(nbytes / 1e6 / c for c in cpus[n] if c > 0)
        result[n] = {"median_mb_s": round(statistics.median(speeds), 3),
                     "min_mb_s": round(speeds[0], 3), "max_mb_s": round(speeds[-1], 3),
                     "median_mb_per_cpu_s": round(statistics.median(per_cpu), 3) if per_cpu else None,
                     "min_mb_per_cpu_s": round(per_cpu[0], 3) if per_cpu else None,
                     "max_mb_per_cpu_s": round(per_cpu[-1], 3) if per_cpu else None,
                     "tokens": tokens[n]}
    for base in ("encode", "encode_fast"):
        result[f"ratio_lab_vs_{base}_wall"] = round(result["lab"]["median_mb_s"] / result[base]["median_mb_s"], 3)
        # best of the rounds: the least disturbed by other work on a shared machine
        result[f"ratio_lab_vs_{base}_best"] = round(result["lab"]["max_mb_s"] / result[base]["max_mb_s"], 3)
        lab_cpu, base_cpu = result["lab"]["median_mb_per_cpu_s"], result[base]["median_mb_per_cpu_s"]
        result[f"ratio_lab_vs_{base}_cpu"] = round(lab_cpu / base_cpu, 3) if lab_cpu and base_cpu else None
    result["load_average"] = psutil.getloadavg()
    print(json.dumps(result, indent=2))
    return 0


def _per_cpu_text(nbytes: int, cpu_s: float) -> str:
    """MB per CPU-second, or why there is none: psutil counts CPU time in clock ticks
    (10 ms on Linux), so a tiny round can read 0 (a fresh clone's .ci/run divided by it)."""
    if cpu_s <= 0:
        return "CPU time under one clock tick"
    return f"{nbytes / 1e6 / cpu_s:.2f} per CPU-s"


def _cpu() -> float:
    """This process's CPU seconds, user + system, all threads (psutil: Windows has no `resource`)."""
    times = psutil.Process().cpu_times()
    return times.user + times.system


def _peak_rss_kib() -> float:
    """This process's peak resident memory in KiB: getrusage where there is `resource` (Linux
    counts in KiB), else the peak working set (Windows)."""
    try:
        import resource
    except ImportError:
        return psutil.Process().memory_info().peak_wset / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def rss(args: argparse.Namespace) -> int:
    sizes = [float(x) for x in args.rss.split(",")]
    rows = []
    for mb in sizes:
        with tempfile.TemporaryDirectory(prefix="ternit-bench-rss-") as tmpdir:
            tmp = Path(tmpdir)
            nbytes = make_corpus(tmp / "corpus", mb)
            # 1: a whole prepare, the tokenizer trained; 2: a fresh process reusing that
            # tokenizer (the streaming encode alone, as a continued run prepares new data).
            for mode in ("train", "encode"):
                proc = subprocess.run(
                    [sys.executable, "-m", "app.data.bench", "--child", str(tmp), "--vocab", str(args.vocab),
                     "--child-mode", mode],
                    capture_output=True, encoding="utf-8", check=True,
                    env={**os.environ, **UTF8_ENV, "TERNIT_HOME": str(tmp / f"home-{mode}")})
                child = json.loads(proc.stdout.strip().splitlines()[-1])
                rows.append({"mb": round(nbytes / 1e6, 1), "mode": mode, **child})
                print(json.dumps(rows[-1]), flush=True)
    return 0


def child(args: argparse.Namespace) -> int:
    """One whole prepare (train a tokenizer, encode, write) in this fresh process."""
    from .library import Library
    from .prepare import prepare

    tmp = Path(args.child)
    base = _peak_rss_kib()
    lib = Library()
    lib.add(tmp / "corpus", name="bench", constellation="bench")
    after_add = _peak_rss_kib()
    t = time.perf_counter()
    if args.child_mode == "encode":
        res = prepare(["bench"], out=tmp / "out-encode", tokenizer=tmp / "out" / "tokenizer.json",
                      library=lib, use_cache=False)
    else:
        res = prepare(["bench"], out=tmp / "out", vocab=args.vocab, library=lib, use_cache=False)
    seconds = time.perf_counter() - t
    peak = _peak_rss_kib()
    print(json.dumps({"peak_rss_mb": round(peak / 1024, 1), "rss_before_mb": round(base / 1024, 1),
                      "rss_after_add_mb": round(after_add / 1024, 1), "prepare_s": round(seconds, 2),
                      "tokens": res.meta["train_tokens"] + res.meta["val_tokens"]}))
    return 0


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="ternit bench data", description=__doc__.split("\n\n")[0])
    p.add_argument("--mb", type=float, default=16.0, help="input size in MB of text (16)")
    p.add_argument("--repeats", type=int, default=5, help="rounds, alternating order (5)")
    p.add_argument("--vocab", type=int, default=4000)
    p.add_argument("--context", type=int, default=1024)
    p.add_argument("--rss", default=None, help="measure peak memory at these sizes instead, e.g. 8,64")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--child-mode", default="train", choices=("train", "encode"), help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        return child(args)
    if args.rss:
        return rss(args)
    return throughput(args)


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    sys.exit(main(sys.argv[1:]))
