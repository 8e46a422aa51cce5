"""`--format hf`: the folder transformers loads as GPT2LMHeadModel gives the lab's logits
(to 1e-5 on the CPU), and its tokenizer is the prepared data's, text for text."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.trainer_run import run_module, run_trainer, write_run

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers", reason="the hf export's test needs transformers (dev extra)")

TEXT = "Звёзды над рекой, and the stars — 42 of them!"


def _export(*args: str) -> subprocess.CompletedProcess:
    return run_module("trainer.model.export", *args)


@pytest.fixture(scope="module")
def exported(tmp_path_factory, tiny_data):
    tmp = tmp_path_factory.mktemp("hf")
    # Width 64, 4 heads: the attention's split into heads is tested, not only one layout.
    run = write_run(tmp / "run", tiny_data, {"width": 64, "heads": 4}, steps_to=3, eval_every=3)
    p = run_trainer(run)
    assert p.returncode == 0, p.stderr
    from trainer.state import checkpoint as C

    # Weights ×3: pre-activations of order 1, where the erf and tanh GELUs (or two norm
    # epsilons) differ by ~1e-4 in the logits, so a wrong mapping cannot pass the 1e-5.
    state = C.load(run / "checkpoints" / "step-00000003.pt")
    state["model"] = {k: v * 3 for k, v in state["model"].items()}
    ckpt, _ = C.save(tmp / "scaled", 3, state, 1)
    p = _export(str(ckpt), str(tmp / "hf"), "--format", "hf")
    assert p.returncode == 0, p.stderr
    return ckpt, tmp / "hf"


def test_transformers_loads_it_as_gpt2_with_the_labs_logits(exported):
    from trainer.config.run_config import ModelConfig
    from trainer.model.gpt import GPT
    from trainer.state.checkpoint import load

    ckpt, folder = exported
    state = load(ckpt)
    lab = GPT(ModelConfig(**state["config"]["model"]))
    lab.load_state_dict(state["model"])
    lab.eval()
    hf = transformers.GPT2LMHeadModel.from_pretrained(str(folder))
    hf.eval()
    assert sum(p.numel() for p in hf.parameters()) > state["params"]  # + the zero biases and unit norms
    assert hf.lm_head.weight.data_ptr() == hf.transformer.wte.weight.data_ptr()  # tied
    ids = torch.randint(0, 300, (2, 32), generator=torch.Generator().manual_seed(3))
    with torch.no_grad():
        want = lab(ids)
        got = hf(ids).logits
    assert got.shape == want.shape
    assert torch.allclose(got, want, atol=1e-5, rtol=0), float((got - want).abs().max())
    cfg = json.loads((folder / "config.json").read_text())
    assert cfg["activation_function"] == "gelu" and cfg["layer_norm_epsilon"] == 1e-5
    # GPT-2's own default activation (the tanh form) would be seen at this tolerance.
    tanh = transformers.GPT2LMHeadModel.from_pretrained(str(folder), activation_function="gelu_new").eval()
    with torch.no_grad():
        assert float((tanh(ids).logits - want).abs().max()) > 1e-5


@pytest.mark.parametrize("cls", ["AutoTokenizer", "GPT2TokenizerFast", "GPT2Tokenizer"])
def test_its_tokenizer_is_the_prepared_datas(exported, tiny_data, cls):
    from tokenizers import Tokenizer

    _, folder = exported
    tok = getattr(transformers, cls).from_pretrained(str(folder))
    ids = tok.encode(TEXT)
    assert ids == Tokenizer.from_file(str(tiny_data / "tokenizer.json")).encode(TEXT).ids
    assert tok.decode(ids) == TEXT
    assert tok.eos_token == "<|endoftext|>" and tok.eos_token_id == 0


def test_a_tokenizer_other_than_the_checkpoints_is_refused(exported, tmp_path, tiny_data):
    ckpt, _ = exported
    other = tmp_path / "tokenizer.json"
    other.write_text((tiny_data / "tokenizer.json").read_text().replace('"<|endoftext|>"', '"<|end|>"'))
    p = _export(str(ckpt), str(tmp_path / "hf"), "--format", "hf", "--tokenizer", str(other))
    assert p.returncode == 5 and "not the tokenizer the checkpoint was trained with" in p.stderr
    assert not (tmp_path / "hf").exists()
    (tmp_path / "busy").mkdir()
    (tmp_path / "busy" / "notes.txt").write_text("mine")
    p = _export(str(ckpt), str(tmp_path / "busy"), "--format", "hf")
    assert p.returncode == 4 and "not an earlier export" in p.stderr
    assert (tmp_path / "busy" / "notes.txt").read_text() == "mine"


def test_ternit_export_format_hf_from_a_run_id_finds_the_runs_tokenizer(exported, tmp_path, tiny_data):
    """A run's checkpoint whose data folder is gone (trained on Kaggle): the tokenizer comes
    from the run's run.json; the lines are the lab's, in the interface language."""
    from app.runs import Registry
    from tests.test_cli_i18n import run_cli
    from trainer.state import checkpoint as C

    ckpt, _ = exported
    reg = Registry()
    rec = reg.create_run({"name": "hf", "model": {"context": 32, "width": 64, "heads": 4, "layers": 2, "vocab": 300},
                          "data": {"dir": str(tiny_data), "constellations": ["tiny"]}})
    reg.close()
    state = C.load(ckpt)
    state["data"]["dir"] = "/kaggle/input/gone"
    state["run_id"] = rec.id  # as a Kaggle kernel writes it (--run-id), its folder being "run"
    C.save(rec.path, 3, state, 1)
    code, text, err = run_cli(["export", rec.id, str(tmp_path / "a"), "--format", "hf"], "ru")
    assert code == 0, err
    assert text.strip().startswith(f"папка Hugging Face записана: {tmp_path / 'a'} (") and "шаг 3" in text
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (tiny_data / "tokenizer.json").read_bytes()
    code, _, err = run_cli(["export", str(rec.path / "checkpoints" / "step-00000003.pt"), str(tmp_path / "b"),
                            "--format", "hf"], "en")
    assert code == 1 and "Pass --tokenizer with the tokenizer.json" in err


def test_greedy_generation_gives_hf_generates_tokens(exported):
    """The lab's cached generate (its own weight layout and attention) against transformers'
    generate(use_cache=True) on the exported folder, greedy: the same tokens. In double
    precision, so a different order of additions cannot flip a near tie."""
    from trainer.text.generate import Sampling, generate, load_for_generation

    ckpt, folder = exported
    lab = load_for_generation(ckpt, "cpu").model.double()
    hf = transformers.GPT2LMHeadModel.from_pretrained(str(folder)).double().eval()
    for prompt in ([5, 17, 2, 99, 41], [7]):
        new = lab.cfg.context - len(prompt)  # within the context: HF's generate has no refilled window
        want = hf.generate(torch.tensor([prompt]), attention_mask=torch.ones(1, len(prompt), dtype=torch.long),
                           max_new_tokens=new, do_sample=False, use_cache=True, pad_token_id=0, eos_token_id=None)
        got = list(generate(lab, prompt, new, Sampling(temperature=0), seed=0))
        assert got == want[0, len(prompt):].tolist()
