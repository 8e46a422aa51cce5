"""python -m trainer.text.sample sample CKPT [options] < PROMPT
   python -m trainer.text.sample eval CKPT FILE [--tokenizer PATH] [--device D]

The child process behind `ternit sample`, `ternit eval` and the window's «Текст» tab (the
lab's core never imports torch). It speaks JSON lines on stdout, one object per line:
  {"kind": "start", "device", "precision", "step", "prompt_tokens", "dropped", "sample",
   "cpu_because"}   the last only where --device auto runs on the CPU although there is a card
  {"kind": "text", "sample", "text"}                       a piece of text as it is produced
  {"kind": "done", "sample", "text", "tokens", "tokens_per_s", "stopped": "eot"|"length"}
  {"kind": "eval", "loss", "loss_ci95", "perplexity", "bits_per_byte", "bpb_ci95", ...}
  {"kind": "error", "what": "checkpoint"|"tokenizer"|"file"|"value"|"device", "message"}
and exits 0, or 2 after an error line (the lab says it in the interface language).
The prompt is read from stdin as UTF-8; an empty prompt starts after an end-of-text token.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import time
from pathlib import Path
from typing import Any

from trainer.text.sampling import (
    DEFAULT_NUM,
    DEFAULT_SEED,
    DEFAULT_TOKENS,
    Sampling,
    request_problem,
)
from trainer.text.tokenizer import Tokenizer, TokenizerError

EXIT_OK, EXIT_INPUT = 0, 2


class InputError(Exception):
    def __init__(self, what: str, message: str) -> None:
        super().__init__(message)
        self.what, self.message = what, message


def emit(kind: str, **fields: Any) -> None:
    print(json.dumps({"kind": kind, **fields}, ensure_ascii=False), flush=True)


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="python -m trainer.text.sample", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = p.add_subparsers(dest="command", required=True)
    s = sub.add_parser("sample")
    s.add_argument("checkpoint", type=Path)
    d = Sampling()  # the defaults and their check: trainer.text.sampling
    s.add_argument("--tokens", type=int, default=DEFAULT_TOKENS)
    s.add_argument("--temperature", type=float, default=d.temperature)
    s.add_argument("--top-k", type=int, default=d.top_k)
    s.add_argument("--top-p", type=float, default=d.top_p)
    s.add_argument("--seed", type=int, default=DEFAULT_SEED)
    s.add_argument("--num", type=int, default=DEFAULT_NUM)
    e = sub.add_parser("eval")
    e.add_argument("checkpoint", type=Path)
    e.add_argument("file", type=Path)
    for q in (s, e):
        q.add_argument("--tokenizer", type=Path, help="tokenizer.json (default: the checkpoint's data folder's)")
        q.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"])
    return p.parse_args(argv)


def open_tokenizer(path: Path | None, data: dict[str, Any]) -> Tokenizer:
    if path is None:
        if not data.get("dir"):
            raise InputError("tokenizer", "the checkpoint names no data folder: give --tokenizer")
        path = Path(data["dir"]) / "tokenizer.json"
    try:
        tok = Tokenizer.from_file(path)
    except TokenizerError as e:
        raise InputError("tokenizer", str(e)) from None
    want = data.get("tokenizer_sha256")
    if want and hashlib.sha256(path.read_bytes()).hexdigest() != want:
        raise InputError("tokenizer", f"{path} is not the tokenizer this checkpoint was trained with")
    return tok


def run_sample(args: argparse.Namespace, loaded: Any, tok: Tokenizer) -> None:
    from trainer.text.generate import crop, generate

    s = Sampling(args.temperature, args.top_k, args.top_p)
    problem = request_problem(s, args.tokens, args.num)
    if problem:
        raise InputError("value", problem.text())
    text = sys.stdin.read()
    ids = tok.encode(text)
    if not ids:
        if tok.eot is None:
            raise InputError("value", "the prompt is empty and the tokenizer has no end-of-text token to start from")
        ids = [tok.eot]
    prompt, dropped = crop(ids, loaded.model.cfg.context)
    allowed = min(tok.size, loaded.model.cfg.vocab)
    for i in range(args.num):
        emit("start", sample=i, device=loaded.device.type, precision=loaded.precision, step=loaded.step,
             prompt_tokens=len(ids), dropped=dropped, **_fallback(loaded))
        stream, parts, count = tok.stream(), [], 0
        began = time.perf_counter()
        for token in generate(loaded.model, prompt, args.tokens, s, args.seed + i, tok.eot, allowed, loaded.precision):
            count += 1
            piece = stream.add(token)
            if piece:
                parts.append(piece)
                emit("text", sample=i, text=piece)
        tail = stream.finish()
        if tail:
            parts.append(tail)
            emit("text", sample=i, text=tail)
        seconds = time.perf_counter() - began
        emit("done", sample=i, text="".join(parts), tokens=count,
             tokens_per_s=round(count / seconds, 1) if seconds > 0 else None,
             stopped="length" if count == args.tokens else "eot")


def run_eval(args: argparse.Namespace, loaded: Any, tok: Tokenizer) -> None:
    from trainer.text.generate import score_tokens

    try:
        raw = args.file.read_bytes()
        text = raw.decode("utf-8-sig")
    except FileNotFoundError:
        raise InputError("file", f"{args.file} does not exist") from None
    except UnicodeDecodeError as e:
        raise InputError("file", f"{args.file} is not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise InputError("file", f"{args.file} cannot be read ({e.strerror})") from None
    ids = tok.encode(text)
    # Documents follow an end-of-text token in training: one before the text lets every
    # token of the file be predicted, so all its bytes count.
    lead = [tok.eot] if tok.eot is not None else []
    if len(lead + ids) < 2:
        raise InputError("file", f"{args.file} is too short: it needs at least two tokens of text")
    byte_counts = [len(tok.token_bytes(i)) for i in lead + ids]
    score = score_tokens(loaded, lead + ids, byte_counts)
    emit("eval", loss=score.loss, loss_ci95=list(score.loss_ci95), perplexity=score.perplexity,
         bits_per_byte=score.bits_per_byte, bpb_ci95=list(score.bpb_ci95), tokens=score.tokens,
         bytes=score.bytes, segments=score.segments, device=loaded.device.type, step=loaded.step, **_fallback(loaded))


def _fallback(loaded: Any) -> dict[str, str]:
    """Why --device auto runs on the CPU while there is a card (trainer.plan.cuda_build's line)."""
    return {"cpu_because": loaded.cpu_because} if loaded.cpu_because else {}


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    from trainer.state.checkpoint_index import CheckpointError
    from trainer.text.generate import load_for_generation

    try:
        try:
            loaded = load_for_generation(args.checkpoint, args.device)
        except CheckpointError as e:
            raise InputError("device" if "CUDA" in str(e) else "checkpoint", str(e)) from None
        tok = open_tokenizer(args.tokenizer, loaded.data)
        (run_sample if args.command == "sample" else run_eval)(args, loaded, tok)
    except InputError as e:
        emit("error", what=e.what, message=e.message)
        print(f"error: {e.message}", file=sys.stderr)
        return EXIT_INPUT
    return EXIT_OK


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    sys.exit(main())
