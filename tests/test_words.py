"""The words of both languages, checked in the code itself: an AST walk over every text the
interface shows — the `t(ru, en)` pairs (and `said`, `Said`, `both`), the {"ru": …, "en": …}
tables `pick()` reads (the form's field tables among them) — that fails on

- Cyrillic letters in an English text (an English reader meets «Продолжить»), «» quotes in
  English (English writes “ ” or none), "(s)" plurals;
- run.json's key names (`training.lean_state`, `resume_from`) in a text for people, unless
  the text sends the reader to run.json itself: the keys belong in `--json` and the docs;
- numbers formatted outside app/base/numbers.py (an f-string's `:.1f`, `:g`, `:,`, `:.0%`
  mixes «0,003» with «1.5» and the group spaces);
- a count followed by its noun without `numbers.counted` («3 прогонов», «21 токенов»).

And the one plural helper itself, at 1, 2, 5, 11, 21, 22, 25, in both languages.
"""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

import trainer.config.run_config as contract
from app.base.numbers import GROUP_RU, counted, decimal_text, format_value, int_text, percent_text

ROOT = Path(__file__).resolve().parent.parent
SOURCES = sorted([*ROOT.glob("app/**/*.py"), *ROOT.glob("ui/**/*.py")])
CYRILLIC = re.compile("[А-Яа-яЁё]")
PAIR_CALLS = {"t", "tr", "said", "Said", "both"}  # tr: app/gpu/present.py's t in one language
# The command line's own modules: their help names run.json's keys because the user types
# them (`--vary training.lr=…`, `--config`), as docs/RUN_JSON.md does.
KEYS_ALLOWED_IN = re.compile(r"(^|_)cli\.py$|^start_flags\.py$|^cli_args\.py$|^series\.py$")
# Nouns whose form follows a count (any ending): «1 прогон, 2 прогона, 5 прогонов».
COUNTED_NOUNS = re.compile(
    r"^\s(прогон|шаг|токен|вес|файл|аккаунт|набор|документ|минут|секунд|строк|ядр|образц|символ|"
    r"чекпоинт|сегмент|датасет|значени|микрошаг|карт)[а-яё]*\b(?!/)")  # «токенов/с»: a unit
# Calls that put the number and its noun together, or write a decimal (which takes the
# genitive singular whatever its digits: «1,5 токена»).
COUNT_HELPERS = {"counted", "decimal_text", "sig_text", "format_value", "loss_text", "bytes_text", "mb_text", "duration_text"}


def _run_json_keys() -> set[str]:
    keys = {"resume_from"}
    for section, cls in (("model", contract.ModelConfig), ("training", contract.TrainingConfig),
                         ("data", contract.DataConfig), ("target", contract.TargetConfig)):
        for f in dataclasses.fields(cls):
            keys.add(f"{section}.{f.name}")
            if "_" in f.name:  # «lr», «width»: words anyone writes; «lean_state» is a key
                keys.add(f.name)
    return keys


KEYS = re.compile(r"(?<![\w.`/-])(" + "|".join(sorted(map(re.escape, _run_json_keys()), key=len, reverse=True))
                  + r")(?![\w`])")


Part = tuple[str, object]  # ("s", text) or ("v", ast.FormattedValue)


def parts_of(node: ast.AST, names: dict[str, ast.AST]) -> list[Part] | None:
    """A text's literal pieces and its formatted values in order; None when it is not a
    literal text (a variable, a call)."""
    if isinstance(node, ast.Name) and node.id in names:
        return parts_of(names[node.id], names)
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [("s", node.value)]
    if isinstance(node, ast.JoinedStr):
        return [("s", v.value) if isinstance(v, ast.Constant) else ("v", v) for v in node.values]
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = parts_of(node.left, names), parts_of(node.right, names)
        return None if left is None or right is None else left + right
    return None


def flat(parts: list[Part]) -> str:
    return "".join(p if k == "s" else "{}" for k, p in parts)  # type: ignore[misc]


def texts(tree: ast.Module) -> Iterator[tuple[int, ast.AST, ast.AST]]:
    """(line, the Russian text, the English one) of every pair in a module."""
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else None
            if name in PAIR_CALLS and len(n.args) >= 2:
                yield n.lineno, n.args[0], n.args[1]
            elif name == "_t" and len(n.args) >= 3:  # app/sizing's _t(lang, ru, en)
                yield n.lineno, n.args[1], n.args[2]
        elif isinstance(n, ast.Dict):
            table = {k.value: v for k, v in zip(n.keys, n.values, strict=True) if isinstance(k, ast.Constant)}
            if "ru" in table and "en" in table:
                yield n.lineno, table["ru"], table["en"]


def module_strings(tree: ast.Module) -> dict[str, ast.AST]:
    """Module-level NAME = "text" (DESCRIPTION_EN), which a pair may name."""
    out: dict[str, ast.AST] = {}
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            out[stmt.targets[0].id] = stmt.value
    return out


def problems(source: str, name: str) -> list[str]:
    """What the walk finds in one module's source, one line each."""
    tree = ast.parse(source)
    names = module_strings(tree)
    found: list[str] = []
    for line, ru_node, en_node in texts(tree):
        ru, en = parts_of(ru_node, names), parts_of(en_node, names)
        if en is not None:
            text = flat(en)
            if CYRILLIC.search(text):
                found.append(f"{name}:{line}: Cyrillic in English: {text[:80]!r}")
            if "«" in text or "»" in text:
                found.append(f"{name}:{line}: «» in English (write “ ” or none): {text[:80]!r}")
            if "(s)" in text:
                found.append(f"{name}:{line}: '(s)' in English (numbers.counted): {text[:80]!r}")
        for lang, parts in (("ru", ru), ("en", en)):
            if parts is None:
                continue
            text = re.sub(r"`[^`]*`", "", flat(parts))
            key = KEYS.search(text)
            if key and "run.json" not in text and not KEYS_ALLOWED_IN.search(name.rsplit("/", 1)[-1]):
                found.append(f"{name}:{line}: run.json key {key.group(1)!r} in a text for people ({lang})")
            for kind, value in parts:
                if kind == "v" and value.format_spec is not None:  # type: ignore[union-attr]
                    spec = flat(parts_of(value.format_spec, names) or [])  # type: ignore[union-attr]
                    if re.search(r"[fgeE%,]", spec):
                        found.append(f"{name}:{line}: a number formatted with ':{spec}' outside "
                                     f"app/base/numbers.py ({lang})")
        if ru is not None:
            found += [f"{name}:{line}: {why}" for why in _bare_counts(ru)]
    return found


def _bare_counts(parts: list[Part]) -> Iterator[str]:
    for (kind, value), (next_kind, next_text) in zip(parts, parts[1:], strict=False):
        if kind != "v" or next_kind != "s" or not COUNTED_NOUNS.match(next_text):  # type: ignore[arg-type]
            continue
        expr = value.value  # type: ignore[union-attr]
        if isinstance(expr, ast.Call) and isinstance(expr.func, ast.Name) and expr.func.id in COUNT_HELPERS:
            continue
        yield f"a count before «{next_text.split()[0]}» without numbers.counted: {{{ast.unparse(expr)}}}"


def test_the_interface_texts_keep_each_language_its_own_words_and_numbers():
    found: list[str] = []
    for path in SOURCES:
        found += problems(path.read_text(encoding="utf-8"), str(path.relative_to(ROOT)))
    assert not found, "\n".join(found)


def test_the_walk_finds_each_kind_of_mistake():
    """The check catches what it claims, in the forms the lab's code writes texts."""
    bad = '''
DESCRIPTION_EN = "the «Steps to» field"
a = t("готово", "готово")
b = t(f"{n} прогонов", f"{n} runs")
c = t(f"скорость {x:.1f}", f"speed {x:.1f}")
d = {"ru": "выключите lean_state", "en": "turn training.lean_state off"}
e = t("шаги", "step(s)")
f = t("описание", DESCRIPTION_EN)
ok = t(f"{counted(n, RU, EN)} — в run.json: training.lean_state", f"{decimal_text(x, 1)} tokens")
'''
    found = problems(bad, "x.py")
    kinds = [line.split(": ", 1)[1].split(":")[0].split(" (")[0] for line in found]
    assert len(found) == 8, "\n".join(found)
    assert sum("Cyrillic" in k for k in kinds) == 1 and sum("«»" in k for k in kinds) == 1
    assert sum("run.json key" in k for k in kinds) == 2 and sum("formatted" in k for k in kinds) == 2
    assert sum("(s)" in k for k in kinds) == 1 and sum("count before" in k for k in kinds) == 1
    assert not [line for line in found if ":9:" in line]  # the helpers' and run.json's own line passes


RUNS = (("прогон", "прогона", "прогонов"), ("run", "runs"))


@pytest.mark.parametrize(("n", "ru", "en"), [
    (1, "1 прогон", "1 run"), (2, "2 прогона", "2 runs"), (5, "5 прогонов", "5 runs"),
    (11, "11 прогонов", "11 runs"), (21, "21 прогон", "21 runs"), (22, "22 прогона", "22 runs"),
    (25, "25 прогонов", "25 runs"), (1021, f"1{GROUP_RU}021 прогон", "1,021 runs"),
])
def test_one_plural_rule_for_every_count(n, ru, en):
    assert counted(n, *RUNS, "ru") == ru and counted(n, *RUNS, "en") == en


def test_counts_with_a_word_unit_take_the_plural_and_decimals_the_genitive():
    tokens = (("токен", "токена", "токенов"), ("token", "tokens"))
    assert counted(113_000, *tokens, "ru", sig=3) == "113 тыс. токенов"
    assert counted(21, *tokens, "ru", sig=3) == "21 токен"
    assert counted(27_700_000, *tokens, "en", sig=3) == "27.7 M tokens"


def test_one_decimal_mark_and_one_group_space_per_language():
    """The Russian group space is CLDR's U+00A0 everywhere (int_text and format_value wrote
    U+202F and U+00A0), the decimal mark the language's in every helper."""
    assert int_text(20000, "ru") == format_value(20000, "ru") == f"20{GROUP_RU}000" and GROUP_RU == "\u00a0"
    assert int_text(20000, "en") == format_value(20000, "en") == "20,000"
    assert decimal_text(0.003, 3, "ru") == format_value(0.003, "ru") == "0,003"
    assert decimal_text(1.5, 1, "en") == format_value(1.5, "en") == "1.5"
    assert percent_text(0.953, "ru") == "95\u00a0%" and percent_text(0.953, "en") == "95%"


def _table_texts(path: Path, table: str) -> dict[str, str]:
    """code -> every literal piece of that code's sentence in a module's table (a string, an
    f-string, a function of the parameters), joined: what the walk checks for key names."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for stmt in tree.body:
        target = stmt.target if isinstance(stmt, ast.AnnAssign) else (
            stmt.targets[0] if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 else None)
        if isinstance(target, ast.Name) and target.id == table and isinstance(stmt.value, ast.Dict):
            out = {}
            for k, v in zip(stmt.value.keys, stmt.value.values, strict=True):
                pieces = [n.value for n in ast.walk(v) if isinstance(n, ast.Constant) and isinstance(n.value, str)]
                out[k.value] = " ".join(pieces)  # type: ignore[union-attr]
            return out
    raise AssertionError(f"no table {table} in {path}")


def _names_a_key(text: str) -> str | None:
    """A run.json key a sentence for people names (a sentence about run.json itself may)."""
    key = KEYS.search(re.sub(r"`[^`]*`", "", text))
    return key.group(1) if key and "run.json" not in text else None


def test_the_plan_s_sentences_in_the_form_use_the_form_s_words():
    """The trainer's reasons and refusals the form shows (app/base/plan_texts.py: RU, and in
    English EN_FORM over the trainer's own sentences) named run.json's keys («выберите
    lean_state true», "batch_per_card"): each uses the form's field labels; the English a code
    has no EN_FORM line for is the trainer's, checked too."""
    from trainer.config.reasons import TEXTS

    plan_texts = ROOT / "app" / "base" / "plan_texts.py"
    ru, en_form = _table_texts(plan_texts, "RU"), _table_texts(plan_texts, "EN_FORM")
    trainer_en = _table_texts(ROOT / "trainer" / "config" / "reasons.py", "TEXTS")
    assert set(ru) == set(TEXTS) and set(trainer_en) == set(TEXTS)
    found = [f"RU {code}: {key}" for code, text in ru.items() if (key := _names_a_key(text))]
    found += [f"EN {code}: {key}" for code in TEXTS
              if (key := _names_a_key(en_form.get(code, trainer_en[code])))]
    found += [f"EN {code}: Cyrillic" for code, text in en_form.items() if CYRILLIC.search(text)]
    found += [f"EN {code}: «»" for code, text in en_form.items() if "«" in text or "»" in text]
    assert not found, "\n".join(found)


def test_the_plan_s_field_labels_are_the_form_s():
    from app.base.plan_texts import FIELD_LABELS
    from app.form.fields import FIELDS

    by_path = {f.path: f.label for f in FIELDS if f.path}
    assert {key: by_path.get(key) for key in FIELD_LABELS} == FIELD_LABELS


@pytest.mark.parametrize("lang", ["ru", "en"])
def test_a_refusal_in_the_form_reads_in_the_form_s_words(lang):
    from app.base.plan_texts import text
    from trainer.config.reasons import Refusal

    said = text(Refusal("fused_micro_steps", {"lean": "fused", "micro": 2}), lang)
    want = ("«Облегчённое состояние» «8 бит, без градиентов»", "«8 бит»", "«Токенов за шаг» 0") if lang == "ru" \
        else ("“Lean state” “8-bit, no gradients”", "“8-bit”", "“Tokens per step” 0")
    assert all(w in said for w in want) and not KEYS.search(said), said
    short = text(Refusal("tokens_per_step", {"wanted": 384, "cards": 2, "batch": 6, "context": 64, "micro": 768,
                                             "near": [768], "batches": [3]}), lang)
    assert ("«Батч на карту» 3" if lang == "ru" else "“Batch per card” 3") in short and not KEYS.search(short), short
