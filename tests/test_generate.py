"""The generator (trainer.text.generate) and the trainer's own tokenizer (trainer.text.tokenizer)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from tests.trainer_run import ROOT, run_module, run_trainer, trainer_env, write_run
from trainer.config.run_config import ModelConfig
from trainer.model.gpt import GPT
from trainer.text.generate import Sampling, crop, generate, generate_reference, load_for_generation
from trainer.text.tokenizer import Tokenizer, split_words

MIXED = [
    "the cat sees the ball. кот видит мяч.",
    "  two  spaces,\n\nnew lines\tand tabs   ",
    "it's, they're, I'll, we'd — 'quoted' 12345 ½ ² 3.14",
    "Ёжик в тумане!!! ... ??? (скобки) [x] {y} <|endoftext|> после",
    "日本語のテキスト and emoji 🙂🙂 mixed",
    "",
]


def test_tokenizer_matches_hugging_face(tiny_data):
    from tokenizers import Tokenizer as HF

    hf = HF.from_file(str(tiny_data / "tokenizer.json"))
    mine = Tokenizer.from_file(tiny_data / "tokenizer.json")
    for text in MIXED:
        assert mine.encode(text) == hf.encode(text).ids, text
        assert mine.decode(mine.encode(text)) == text
    assert mine.eot == hf.token_to_id("<|endoftext|>")


def test_split_words_follows_gpt2_rule():
    assert split_words("it's  a\n b") == ["it", "'s", " ", " a", "\n", " b"]


def tiny_model(context: int = 16, seed: int = 0) -> GPT:
    model = GPT(ModelConfig(context=context, width=32, heads=2, layers=2, vocab=50))
    model.init_weights(seed)
    # float64: the cached and the full forward add in different orders; in double precision
    # the difference (~1e-15) cannot flip a token, so the comparison tests the logic only.
    return model.double().eval()


@pytest.mark.parametrize("sampling", [Sampling(temperature=0), Sampling(0.9, top_k=20, top_p=0.9), Sampling(1.3)])
def test_cache_gives_the_reference_tokens(sampling):
    model = tiny_model()
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    # 40 new tokens through a 16-token context: the window refills several times
    cached = list(generate(model, prompt, 40, sampling, seed=7))
    reference = list(generate_reference(model, prompt, 40, sampling, seed=7))
    assert len(cached) == 40
    assert cached == reference


@pytest.mark.parametrize("sampling", [Sampling(temperature=0), Sampling(0.9, top_k=20, top_p=0.9)])
def test_the_fixed_shape_step_gives_the_cached_tokens(sampling):
    """StaticStep (the CUDA graph's step, run eagerly on the CPU) against the growing cache:
    the same tokens through several window refills of a 16-token context."""
    model = tiny_model()
    prompt = [3, 1, 4, 1, 5, 9, 2, 6]
    static = list(generate(model, prompt, 40, sampling, seed=7, static=True))
    assert static == list(generate(model, prompt, 40, sampling, seed=7))
    assert len(static) == 40


def test_the_fixed_shape_step_equals_the_full_forward_and_refuses_a_full_cache():
    from trainer.text.generate import StaticStep, forward_cached, pack

    model = tiny_model(context=8)
    ids = [3, 1, 4, 1, 5, 9, 2, 6]
    step = StaticStep(model, pack(model), "fp32")
    buffers = [k.data_ptr() for k in step.cache.k]
    with torch.no_grad():
        got = [forward_cached(model, torch.tensor([ids[:3]]), step.cache, step.w)]
        got += [step(token) for token in ids[3:]]
        full = model(torch.tensor([ids]))[0]
        assert [k.data_ptr() for k in step.cache.k] == buffers and step.cache.length == 8
        assert step.cache.k[0].dtype == torch.float64  # the weights' own type in fp32
        with pytest.raises(ValueError, match="cache is full"):
            step(1)
    for j, logits in enumerate(got):
        assert torch.allclose(logits[0], full[j + 2], atol=1e-12, rtol=0)


def test_cache_is_written_in_place_and_equals_the_full_forward():
    from trainer.text.generate import Cache, forward_cached, pack

    model = tiny_model()
    ids = [3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5]
    cache, w = Cache(model), pack(model)
    with torch.no_grad():
        got = [forward_cached(model, torch.tensor([ids[:4]]), cache, w)]
        buffers = [(k.data_ptr(), v.data_ptr()) for k, v in zip(cache.k, cache.v, strict=True)]
        for i in range(4, len(ids)):
            got.append(forward_cached(model, torch.tensor([[ids[i]]]), cache, w))
        # one buffer per block, made at the first write and never replaced (no concatenation)
        assert [(k.data_ptr(), v.data_ptr()) for k, v in zip(cache.k, cache.v, strict=True)] == buffers
        assert len(cache.k) == len(model.blocks) and cache.k[0].size(2) == model.cfg.context
        assert cache.length == len(ids)
        full = model(torch.tensor([ids]))[0]
    for j, logits in enumerate(got):
        assert torch.allclose(logits[0], full[j + 3], atol=1e-12, rtol=0)


def test_the_packed_weights_lie_in_one_buffer_in_the_order_a_pass_reads_them():
    """A token's pass streams every weight once: pack lays them (in, out) one after the other in
    one allocation, qkv, proj, up, down of each block, then the output layer; the model keeps
    its own."""
    from trainer.text.generate import pack

    model = tiny_model()
    w = pack(model)
    got = w.matrices()
    want = [m for b in model.blocks for m in (b.attn.qkv.weight, b.attn.proj.weight, b.mlp.up.weight,
                                              b.mlp.down.weight)] + [model.tok.weight]
    for g, m in zip(got, want, strict=True):
        assert g.is_contiguous() and g.dtype == m.dtype and torch.equal(g, m.t())
        assert g.data_ptr() != m.data_ptr()  # a copy: the model's weights stay as they are
    assert [g.data_ptr() for g in got[1:]] == [g.data_ptr() + g.numel() * g.element_size() for g in got[:-1]]


def _mapping_flags(address: int) -> list[str] | None:
    """VmFlags of the mapping of this process that holds `address` (/proc/self/smaps), or None."""
    inside = False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split()
        if head and "-" in head[0] and ":" not in head[0]:
            low, high = (int(x, 16) for x in head[0].split("-"))
            inside = low <= address < high
        elif inside and line.startswith("VmFlags:"):
            return head[1:]
    return None


@pytest.mark.skipif(sys.platform != "linux" or not Path("/sys/kernel/mm/transparent_hugepage").is_dir(),
                    reason="Linux with transparent huge pages: elsewhere pack uses an ordinary tensor")
def test_on_linux_the_weights_lie_in_a_private_mapping_advised_for_huge_pages_freed_with_the_pack():
    import gc

    from trainer.text.generate import HUGE_PAGE, pack

    model = GPT(ModelConfig(context=64, width=256, heads=4, layers=2, vocab=1000))  # 7 MB of weights
    w = pack(model)
    assert sum(m.numel() for layer in w.layers for m in layer) * 4 > HUGE_PAGE
    address = w.layers[0][0].data_ptr()
    flags = _mapping_flags(address)
    # hg: madvise(MADV_HUGEPAGE) taken; not sh: a shared (shmem) map follows another switch, off by default
    assert flags is not None and "hg" in flags and "sh" not in flags, flags
    del w
    gc.collect()
    after = _mapping_flags(address)  # unmapped with the last view (training samples pack at every evaluation)
    assert after is None or "hg" not in after


def test_seed_reproducible_and_global_rng_untouched():
    model = tiny_model()
    torch.manual_seed(123)
    before = torch.get_rng_state()
    a = list(generate(model, [1, 2, 3], 30, Sampling(1.0), seed=5))
    b = list(generate(model, [1, 2, 3], 30, Sampling(1.0), seed=5))
    c = list(generate(model, [1, 2, 3], 30, Sampling(1.0), seed=6))
    assert a == b and a != c
    assert torch.equal(torch.get_rng_state(), before)


def test_stop_token_and_crop():
    model = tiny_model()
    greedy = list(generate(model, [1, 2, 3], 10, Sampling(0), seed=0))
    stopped = list(generate(model, [1, 2, 3], 10, Sampling(0), seed=0, stop=greedy[3]))
    assert stopped == greedy[: greedy.index(greedy[3])]
    assert crop(list(range(20)), 16) == (list(range(4, 20)), 4)
    assert crop([1, 2], 16) == ([1, 2], 0)


@pytest.fixture(scope="module")
def trained(tiny_data, tmp_path_factory) -> Path:
    """A tiny model trained by the real trainer on the demo data; its run folder."""
    run = write_run(tmp_path_factory.mktemp("gen") / "run", tiny_data, steps_to=150, eval_every=150, lr=0.01)
    done = run_trainer(run, timeout=240)
    assert done.returncode == 0, done.stderr
    return run


def sample(ckpt: Path, prompt: str, *args: str) -> list[dict]:
    done = run_module("trainer.text.sample", "sample", str(ckpt), *args, input=prompt)
    assert done.returncode in (0, 2), done.stderr
    return [json.loads(line) for line in done.stdout.splitlines()]


def test_trained_model_writes_text_that_differs_by_seed(trained):
    ckpt = sorted((trained / "checkpoints").glob("step-*.pt"))[-1]
    texts = []
    # Two processes: seeds 1, 2 and 3, 4 (sample i uses seed + i); were --seed ignored, the
    # second would repeat the first's two texts.
    for seed in ("1", "3"):
        lines = sample(ckpt, "кот", "--tokens", "40", "--top-k", "8", "--seed", seed, "--num", "2")
        done = [x for x in lines if x["kind"] == "done"]
        assert len(done) == 2 and lines[0]["kind"] == "start" and lines[0]["device"] == "cpu"
        for d in done:
            pieces = "".join(x["text"] for x in lines if x["kind"] == "text" and x["sample"] == d["sample"])
            assert pieces == d["text"] and "\ufffd" not in d["text"] and d["text"].strip()
            texts.append(d["text"])
    assert len(set(texts)) >= 3, texts


def test_sampler_stops_at_end_of_text(trained):
    ckpt = sorted((trained / "checkpoints").glob("step-*.pt"))[-1]
    lines = sample(ckpt, "the fox", "--tokens", "100", "--temperature", "0")
    done = lines[-1]
    # every document of the demo data is one sentence followed by <|endoftext|>
    assert done["stopped"] == "eot" and done["tokens"] < 100 and done["text"].rstrip().endswith(".")


def test_any_precision_and_prefix_loads(trained, tmp_path):
    ckpt = sorted((trained / "checkpoints").glob("step-*.pt"))[-1]
    payload = torch.load(ckpt, weights_only=True)
    # as a compiled, lean (bf16 weights, no optimizer) checkpoint would hold them
    payload["model"] = {f"_orig_mod.{k}": v.bfloat16() for k, v in payload["model"].items()}
    payload.pop("optimizer")
    odd = tmp_path / "step-00000150.pt"
    torch.save(payload, odd)
    loaded = load_for_generation(odd, "cpu")
    assert loaded.step == 150 and loaded.model.tok.weight.dtype == torch.float32
    assert len(list(generate(loaded.model, [1, 2], 5, Sampling(0), seed=0))) == 5


def test_sampler_input_errors(trained, tmp_path):
    ckpt = sorted((trained / "checkpoints").glob("step-*.pt"))[-1]
    bad = sample(ckpt, "x", "--temperature", "-1")
    assert bad[-1]["kind"] == "error" and bad[-1]["what"] == "value"
    missing = sample(tmp_path / "nope.pt", "x")
    assert missing[-1] == {"kind": "error", "what": "checkpoint", "message": missing[-1]["message"]}
    wrong_tok = tmp_path / "tokenizer.json"
    wrong_tok.write_text(json.dumps({"model": {"type": "BPE", "vocab": {}, "merges": []},
                                     "pre_tokenizer": {"type": "ByteLevel"}}), encoding="utf-8")
    other = sample(ckpt, "x", "--tokenizer", str(wrong_tok))
    assert other[-1]["what"] == "tokenizer" and "not the tokenizer" in other[-1]["message"]


# ---- ternit sample / ternit eval ---------------------------------------------------------


def ternit(*args: str, lang: str = "en") -> subprocess.CompletedProcess:
    env = {**trainer_env(), "TERNIT_LANG": lang}
    return subprocess.run([sys.executable, "-m", "app", *args], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)


def test_ternit_sample_streams_and_json(trained):
    ckpt = str(sorted((trained / "checkpoints").glob("step-*.pt"))[-1])
    plain = ternit("sample", ckpt, "--prompt", "the cat", "--tokens", "12", "--temperature", "0")
    assert plain.returncode == 0, plain.stderr
    assert plain.stdout.startswith("the cat") and "device: CPU, checkpoint of step 150" in plain.stderr
    js = ternit("sample", ckpt, "--prompt", "the cat", "--tokens", "12", "--temperature", "0", "--json", "--num", "2")
    rows = [json.loads(x) for x in js.stdout.splitlines()]
    assert [r["sample"] for r in rows] == [0, 1] and rows[0]["prompt"] == "the cat"
    assert "the cat" + rows[0]["text"] == plain.stdout.rstrip("\n")  # greedy: the same text both ways


@pytest.mark.parametrize("args, words", [
    (("sample", "no-such-run"), "не файл чекпоинта и не прогон"),
    (("sample", "X", "--tokens", "много"), "неверное значение"),
    (("sample", "X", "--top-p", "1.5"), "top-p 1,5 не подходит"),
    (("eval", "X", "missing.txt"), "файла missing.txt нет"),
])
def test_bad_input_is_one_line_and_exit_2(args, words):
    done = ternit(*args, lang="ru")
    assert done.returncode == 2 and words in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and (len(done.stderr.splitlines()) == 1 or "неверное" in words)


def test_run_without_checkpoint_says_so(tmp_path):
    from app.text.generation import GenerationError, run_target

    (tmp_path / "run.json").write_text("{}", encoding="utf-8")
    with pytest.raises(GenerationError, match="no checkpoint yet|ещё нет чекпоинта"):
        run_target(tmp_path, "r1")


def test_eval_bits_per_byte_by_hand(trained, tiny_data, tmp_path):
    import math

    from tokenizers import Tokenizer as HF

    from bench.synthetic import make_text

    ckpt = sorted((trained / "checkpoints").glob("step-*.pt"))[-1]
    text = " ".join(make_text(25, seed=99)) + " И ещё: ёж."
    file = tmp_path / "held.txt"
    file.write_text(text, encoding="utf-8")
    done = ternit("eval", str(ckpt), str(file), "--json")
    assert done.returncode == 0, done.stderr
    r = json.loads(done.stdout)
    hf = HF.from_file(str(tiny_data / "tokenizer.json"))
    ids = hf.encode(text).ids
    nbytes = file.stat().st_size
    assert r["tokens"] == len(ids) and r["bytes"] == nbytes
    assert r["bits_per_byte"] == pytest.approx(r["loss"] * len(ids) / (nbytes * math.log(2)), rel=1e-12)
    assert r["bpb_ci95"][0] < r["bits_per_byte"] < r["bpb_ci95"][1]
    # the loss itself, by hand: every token after <|endoftext|> predicted, a context at a time
    loaded = load_for_generation(ckpt, "cpu")
    seq = torch.tensor([hf.token_to_id("<|endoftext|>"), *ids])
    n, nats = loaded.model.cfg.context, 0.0
    with torch.no_grad():
        for s in range(0, len(seq) - 1, n):
            window = seq[s : s + n + 1]
            logits = loaded.model(window[None, :-1])[0].double()
            nats += float(torch.nn.functional.cross_entropy(logits, window[1:], reduction="sum"))
    assert r["loss"] == pytest.approx(nats / len(ids), rel=1e-5)
    assert r["perplexity"] == pytest.approx(math.exp(r["loss"]))
    words = ternit("eval", str(ckpt), str(file), lang="ru")
    assert "бит на байт:" in words.stdout and words.returncode == 0
