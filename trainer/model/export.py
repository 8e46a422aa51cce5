"""python -m trainer.model.export CKPT OUT.safetensors — the weights alone, with the model config
in the file's metadata (what another program needs to load them).

python -m trainer.model.export CKPT OUT --format hf [--tokenizer TOKENIZER.json] — a folder that
Hugging Face transformers loads as GPT2LMHeadModel (and AutoTokenizer as its tokenizer),
which llama.cpp's convert_hf_to_gguf.py also reads."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from trainer.state.checkpoint import load
from trainer.state.checkpoint_index import CheckpointError

EOT = "<|endoftext|>"


def export(checkpoint: Path, out: Path) -> dict[str, str]:
    from safetensors.torch import save_file

    state = load(checkpoint)
    # fp32 whichever combination trained them: the lean state keeps bf16 weights.
    tensors = {k: (v.float() if v.is_floating_point() else v).contiguous() for k, v in state["model"].items()}
    metadata = {
        "format": "ternit-lab",
        "model": json.dumps(state["config"]["model"]),
        "step": str(state["step"]),
        "tokens_seen": str(state["tokens_seen"]),
        "params": str(state["params"]),
        "data_id": state["data"]["data_id"],
        "tokenizer_sha256": state["data"]["tokenizer_sha256"],
        "tied": "tok.weight is also the output layer",
    }
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        save_file(tensors, str(tmp), metadata=metadata)
        os.replace(tmp, out)
    # safetensors reports a failed write as its own error type (not OSError): caught as
    # Exception, the half-written file removed, and said as one line.
    except Exception as e:
        try:
            tmp.unlink(missing_ok=True)
        except OSError:
            pass
        raise WriteError(f"cannot write {out} ({type(e).__name__}: {e})") from None
    return metadata


class WriteError(Exception):
    """OUT could not be written: a read-only folder, a full disk, a file where a folder should be."""


class TokenizerError(Exception):
    """(hf) the checkpoint's tokenizer.json is not found, or another one was given."""


# ---- `--format hf`: a folder transformers loads as GPT2LMHeadModel ------------------------
# The lab's GPT is GPT-2's architecture without what it does not learn: no biases and no
# norm weights (GPT-2's are written as zeros and ones, which change nothing), the output
# layer tied to the token embedding, learned positions, MLP 4·d, the exact (erf) GELU
# (trainer.model.gpt.GELU_APPROXIMATE) and torch's LayerNorm eps. GPT-2's Conv1D keeps its
# weight as (in, out): nn.Linear's (out, in) transposed.
HF_ACTIVATION = {"none": "gelu", "tanh": "gelu_pytorch_tanh"}
LAYER_NORM_EPS = 1e-5  # F.layer_norm's default, which trainer.model.gpt.norm uses
HF_FILES = ("config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json",
            "special_tokens_map.json", "vocab.json", "merges.txt")


def hf_tensors(model_state: dict[str, Any], layers: int) -> dict[str, Any]:
    """The lab's state dict in GPT2LMHeadModel's names (fp32; lm_head is tied, not stored)."""
    import torch

    w = {k: v.float() for k, v in model_state.items()}
    d = w["tok.weight"].shape[1]
    zeros, ones = (lambda n: torch.zeros(n)), (lambda n: torch.ones(n))
    out = {"transformer.wte.weight": w["tok.weight"], "transformer.wpe.weight": w["pos.weight"],
           "transformer.ln_f.weight": ones(d), "transformer.ln_f.bias": zeros(d)}
    for i in range(layers):
        lab, hf = f"blocks.{i}.", f"transformer.h.{i}."
        for norm in ("ln_1", "ln_2"):
            out[hf + f"{norm}.weight"], out[hf + f"{norm}.bias"] = ones(d), zeros(d)
        for lab_name, hf_name in (("attn.qkv", "attn.c_attn"), ("attn.proj", "attn.c_proj"),
                                  ("mlp.up", "mlp.c_fc"), ("mlp.down", "mlp.c_proj")):
            weight = w[lab + lab_name + ".weight"]
            out[hf + hf_name + ".weight"] = weight.t()
            out[hf + hf_name + ".bias"] = zeros(weight.shape[0])
    return {k: v.contiguous() for k, v in out.items()}


def hf_config(model: dict[str, int], eot_id: int | None) -> dict[str, Any]:
    from trainer.model.gpt import GELU_APPROXIMATE

    d = model["width"]
    return {
        "architectures": ["GPT2LMHeadModel"], "model_type": "gpt2",
        "vocab_size": model["vocab"], "n_positions": model["context"], "n_ctx": model["context"],
        "n_embd": d, "n_layer": model["layers"], "n_head": model["heads"], "n_inner": 4 * d,
        "activation_function": HF_ACTIVATION[GELU_APPROXIMATE], "layer_norm_epsilon": LAYER_NORM_EPS,
        "resid_pdrop": 0.0, "embd_pdrop": 0.0, "attn_pdrop": 0.0,
        "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "reorder_and_upcast_attn": False,
        "tie_word_embeddings": True, "bos_token_id": eot_id, "eos_token_id": eot_id,
        "torch_dtype": "float32", "use_cache": True,
    }


def tokenizer_files(tokenizer_json: Path, context: int) -> tuple[dict[str, str], int | None]:
    """tokenizer.json as it is, plus what GPT2TokenizerFast / GPT2Tokenizer read beside it
    (tokenizer_config.json, special_tokens_map.json, vocab.json, merges.txt); and the
    id of <|endoftext|> (None if the tokenizer has none)."""
    text = tokenizer_json.read_text(encoding="utf-8")
    tok = json.loads(text)
    eot = next((a for a in tok.get("added_tokens") or [] if a.get("content") == EOT), None)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tok["model"].get("merges") or []]
    special = {"bos_token": EOT, "eos_token": EOT, "unk_token": EOT} if eot else {}
    config = {"tokenizer_class": "GPT2TokenizerFast", "model_max_length": context,
              "add_prefix_space": False, "clean_up_tokenization_spaces": False, **special}
    files = {
        "tokenizer.json": text,
        "tokenizer_config.json": json.dumps(config, ensure_ascii=False, indent=2),
        "special_tokens_map.json": json.dumps(special, ensure_ascii=False, indent=2),
        "vocab.json": json.dumps(tok["model"]["vocab"], ensure_ascii=False),
        "merges.txt": "#version: 0.2\n" + "".join(m + "\n" for m in merges),
    }
    return files, (int(eot["id"]) if eot else None)


def find_tokenizer(state: dict[str, Any], given: Path | None) -> Path:
    """The prepared data's tokenizer.json: `given`, else the one in the checkpoint's data
    folder; either must be the one the checkpoint was trained with (its SHA-256)."""
    import hashlib

    want = state["data"].get("tokenizer_sha256")
    path = given if given is not None else Path(state["data"].get("dir") or "") / "tokenizer.json"
    if given is not None and path.is_dir():
        path = path / "tokenizer.json"
    if not path.is_file():
        raise TokenizerError(
            f"the checkpoint's tokenizer {path} is not there (data prepared elsewhere, e.g. on Kaggle): "
            "pass --tokenizer with the prepared data's tokenizer.json")
    if want and hashlib.sha256(path.read_bytes()).hexdigest() != want:
        raise TokenizerError(
            f"{path} is not the tokenizer the checkpoint was trained with (another SHA-256): "
            "pass --tokenizer with the tokenizer.json of the run's prepared data")
    return path


def export_hf(checkpoint: Path, out: Path, tokenizer: Path | None = None) -> dict[str, str]:
    """Write the folder OUT: config.json, model.safetensors, the tokenizer files. It is
    built beside OUT and moved into place whole; an OUT that holds anything but an earlier
    export's files is refused."""
    import shutil

    from safetensors.torch import save_file

    state = load(checkpoint)
    model = state["config"]["model"]
    files, eot_id = tokenizer_files(find_tokenizer(state, tokenizer), model["context"])
    if out.exists() and (not out.is_dir() or any(p.name not in HF_FILES for p in out.iterdir())):
        raise WriteError(f"{out} exists and is not an earlier export: choose a new folder")
    meta = {"format": "pt", "ternit_step": str(state["step"]), "ternit_params": str(state["params"]),
            "ternit_data_id": state["data"]["data_id"]}
    tmp = out.with_name(f".{out.name}.tmp")
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        save_file(hf_tensors(state["model"], model["layers"]), str(tmp / "model.safetensors"), metadata=meta)
        (tmp / "config.json").write_text(json.dumps(hf_config(model, eot_id), indent=2), encoding="utf-8")
        for name, text in files.items():
            (tmp / name).write_text(text, encoding="utf-8")
        if out.exists():
            shutil.rmtree(out)
        os.replace(tmp, out)
    # safetensors reports a failed write as its own error type (not OSError): caught as
    # Exception, the half-written folder removed, and said as one line.
    except Exception as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise WriteError(f"cannot write {out} ({type(e).__name__}: {e})") from None
    return {"params": str(state["params"]), "step": str(state["step"])}


EXIT_CHECKPOINT, EXIT_WRITE, EXIT_TOKENIZER = 2, 4, 5


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trainer.model.export", description=__doc__)
    p.add_argument("checkpoint", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("--format", choices=("safetensors", "hf"), default="safetensors")
    p.add_argument("--tokenizer", type=Path, default=None,
                   help="(hf) the prepared data's tokenizer.json, if not in the checkpoint's data folder")
    args = p.parse_args(argv)
    try:
        if args.format == "hf":
            meta = export_hf(args.checkpoint, args.out, args.tokenizer)
        else:
            meta = export(args.checkpoint, args.out)
    except CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_CHECKPOINT
    except WriteError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_WRITE
    except TokenizerError as e:
        print(f"error: {e}", file=sys.stderr)
        return EXIT_TOKENIZER
    print(f"wrote {args.out} ({meta['params']} weights, step {meta['step']})")
    return 0


if __name__ == "__main__":
    from trainer.base.streams import utf8_stdio

    utf8_stdio()  # a redirected stdout in UTF-8 on Windows too (trainer/base/streams.py)
    sys.exit(main())
