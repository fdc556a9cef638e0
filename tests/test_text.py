"""Text classification: text_tiny trained from scratch through east-train, reloaded without east_hf, east-predict,
batched tokenization, and one line for each kind of bad text input."""

import json
import logging
import random
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
from helpers import one_line_error, run_without_east_hf

from east_hf.hf.data import DataArguments, DataError, load_data
from east_hf.hf.data.text import ensure_pad_token, tokenize_splits
from east_hf.hf.models.text import text_tiny_model, train_wordpiece_tokenizer
from east_hf.hf.predict.predictor import FOLDED_OFFSETS_KEY
from east_hf.scripts import east_predict
from east_hf.scripts.east_train import main

WORDS = {
    "sport": "goal match team score coach league player ball".split(),
    "money": "bank price stock market loan profit trade cash".split(),
    "food": "bread soup apple cheese salad pasta spice cook".split(),
}
NOISE = "the a of and today very new some big small".split()
RECIPE = Path(__file__).resolve().parents[1] / "recipes" / "text_tiny_demo.yaml"
COUNTS = {"sport": 200, "money": 90, "food": 50}  # imbalanced


def _sentences(seed: int = 0) -> list[tuple[str, str]]:
    """Short sentences: two words of the class's list among two to six shared noise words."""
    rng = random.Random(seed)
    rows = []
    for label, n in COUNTS.items():
        for _ in range(n):
            words = rng.sample(WORDS[label], 2) + rng.sample(NOISE, rng.randint(2, 6))
            rng.shuffle(words)
            rows.append((" ".join(words), label))
    rng.shuffle(rows)
    return rows


def _write(path: Path, rows, header=("text", "label")) -> Path:
    pd.DataFrame(rows, columns=list(header)).to_csv(path, index=False)
    return path


@pytest.fixture(scope="module")
def text_csv(tmp_path_factory) -> Path:
    return _write(tmp_path_factory.mktemp("text") / "texts.csv", _sentences())


@pytest.fixture(scope="module")
def text_run(text_csv, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("run") / "run"
    argv = [
        RECIPE, "--dataset_name", text_csv, "--output_dir", out, "--num_train_epochs", 10,
        "--report_to", "none", "--save_total_limit", 1, "--tune_decision_rule", "true",
    ]  # fmt: skip
    assert main([str(a) for a in argv]) == 0
    return out


def east_predict_labels(run: Path, texts: list[str]) -> list[str]:
    from east_hf.hf.predict.predictor import Predictor

    return Predictor(run).predict(texts)["predicted_label"].tolist()


# ---- end to end ----
def test_text_tiny_learns_with_the_default_loss(text_run):
    results = json.loads((text_run / "test_results.json").read_text())
    assert results["test_fbeta"] > 0.8  # macro F1; chance is about 0.33
    assert (text_run / "decision_rule.json").is_file()  # tuned, and folded into the classifier's bias
    assert set(json.loads((text_run / "config.json").read_text())[FOLDED_OFFSETS_KEY]) == set(COUNTS)
    config = json.loads((text_run / "config.json").read_text())
    assert config["model_type"] == "bert" and config["hidden_size"] == 64 and config["num_hidden_layers"] == 2
    assert set(config["label2id"]) == set(COUNTS) and config["east_text_columns"] == ["text", None]
    # its warm start predicts one class early on, as early training does, without losing its input: no restart
    (state,) = [json.loads(p.read_text()) for p in text_run.glob("checkpoint-*/trainer_state.json")]
    annealing = state["stateful_callbacks"]["TemperatureAnnealingCallback"]["attributes"]
    assert annealing["initial_spread"] > 0 and annealing["schedule_state"]["fell_back"] is False


def test_run_loads_with_auto_classes_and_a_pipeline_without_east_hf(text_run, tmp_path):
    script = """
import json
from transformers import AutoModelForSequenceClassification, AutoTokenizer, pipeline
assert "east_hf" not in sys.modules or sys.modules["east_hf"] is None
tokenizer = AutoTokenizer.from_pretrained(sys.argv[1])
model = AutoModelForSequenceClassification.from_pretrained(sys.argv[1])
assert model.config.num_labels == 3
classify = pipeline("text-classification", model=sys.argv[1])
print(json.dumps([r["label"] for r in classify(TEXTS)]))
"""
    texts = ["goal match team the a", "bank loan price of the", "bread soup cheese", "the new cook"]
    script = f"TEXTS = {texts!r}\n" + script
    out = run_without_east_hf("sys.modules['east_hf'] = None\n" + script, tmp_path, text_run)
    assert out.returncode == 0, out.stderr
    labels = json.loads(out.stdout.strip().splitlines()[-1])
    assert labels[:3] == ["sport", "money", "food"]
    # the pipeline and east-predict agree: the tuned rule is in the saved bias, applied by both
    assert labels == east_predict_labels(text_run, texts)


def test_card_has_the_text_pipeline_tag_and_snippet(text_run):
    card = (text_run / "README.md").read_text()
    assert "pipeline_tag: text-classification" in card
    assert 'pipeline("text-classification"' in card


def test_east_predict_writes_labels_and_probabilities(text_run, tmp_path):
    texts = _write(tmp_path / "in.csv", [("goal team match", "sport"), ("soup bread", "food")])
    out = tmp_path / "pred.csv"
    assert east_predict.main([str(text_run), str(texts), "-o", str(out), "--probabilities"]) == 0
    frame = pd.read_csv(out)
    assert list(frame["label"]) == ["sport", "food"] and len(frame) == 2
    assert set(frame["predicted_label"]) <= set(COUNTS)
    probs = frame[[f"probability_{c}" for c in sorted(COUNTS)]].sum(axis=1)
    assert probs.round(5).eq(1).all()


# ---- the tokenization ----
def _text_data(csv: Path, **kwargs):
    return load_data(DataArguments(dataset_name=str(csv), **kwargs), text=True)


def test_tokenization_is_batched_and_pads_nothing(text_csv, monkeypatch):
    import datasets

    data = _text_data(text_csv)
    tokenizer = train_wordpiece_tokenizer(data.train["text"], vocab_size=200)
    calls = []
    call = type(tokenizer).__call__

    def counting(self, text, *args, **kwargs):
        calls.append(1 if isinstance(text, str) else len(text))
        return call(self, text, *args, **kwargs)

    monkeypatch.setattr(type(tokenizer), "__call__", counting)
    datasets.disable_caching()  # a cached map would call nothing
    try:
        tokenize_splits(data, tokenizer, text_tiny_model(tokenizer, {0: "a", 1: "b", 2: "c"}, max_length=32))
    finally:
        datasets.enable_caching()
    rows = len(data.train) + len(data.validation) + len(data.test)
    assert sum(calls) == rows and len(calls) <= 3  # one call per batch of texts, never one per row
    assert set(data.train.column_names) == {"label", "input_ids", "token_type_ids", "attention_mask"}
    lengths = {len(ids) for ids in data.train["input_ids"]}
    assert len(lengths) > 1  # no padding at tokenization: the collator pads each batch


def test_a_text_column_is_found_without_being_named(tmp_path):
    rows = [(t, label, i % 2) for i, (t, label) in enumerate(_sentences()[:60])]
    data = _text_data(_write(tmp_path / "t.csv", rows, ("body", "label", "flag")))
    assert data.modality == "text" and data.text_column == "body"


# ---- bad input: one line each ----
def test_empty_and_missing_texts_are_dropped_and_counted(tmp_path, caplog):
    rows = _sentences()[:100] + [("", "sport"), ("   ", "money"), (None, "food")]
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        data = _text_data(_write(tmp_path / "t.csv", rows), text_column="text")
    assert data.dropped == {"empty text": 3}
    assert len(data.train) + len(data.validation) + len(data.test) == 100
    lines = [r.getMessage() for r in caplog.records if "empty or missing text" in r.getMessage()]
    assert lines == ["dropped 3 rows with an empty or missing text in text"]
    from east_hf.scripts.east_train import _data_line

    assert _data_line("t.csv", data).endswith("; dropped 3 rows with an empty text")


def test_a_column_of_numbers_is_not_text(tmp_path):
    rows = [(t, label, 7) for t, label in _sentences()[:40]]
    with pytest.raises(DataError, match=r"text column 'n' holds int64 values, not text \(row 0: 7\)"):
        _text_data(_write(tmp_path / "t.csv", rows, ("text", "label", "n")), text_column="n")


def test_json_lines_text_of_mixed_types_names_the_first_row_that_is_not_a_string(tmp_path):
    path = tmp_path / "t.jsonl"
    rows = [{"text": t, "label": label} for t, label in _sentences()[:40]]
    rows[0]["text"], rows[1]["text"], rows[5]["text"] = None, "", 123  # a missing and an empty text are not refused
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    with pytest.raises(DataError) as err:
        _text_data(path, text_column="text")
    assert str(err.value) == (
        "text column 'text' holds JSON values of several types, not text (row 5: 123); pass the column of strings, "
        "or convert it"
    )


def test_texts_all_empty_or_blank_are_refused_before_splitting(tmp_path, capsys):
    csv = _write(tmp_path / "t.csv", [("   ", label) for _, label in _sentences()[:60]] + [(None, "food")])
    with pytest.raises(DataError) as err:
        _text_data(csv, text_column="text")
    message = "Expected some non-empty texts in column 'text', got all 61 texts empty or blank: pass the column that "
    assert str(err.value) == message + "holds the texts (--text_column)"
    err = one_line_error(
        capsys, main, ["--dataset_name", csv, "--text_column", "text", "--output_dir", tmp_path / "out"]
    )
    assert err.endswith(message + "holds the texts (--text_column)")


def test_a_missing_text_column_names_the_closest(tmp_path, capsys):
    csv = _write(tmp_path / "t.csv", _sentences()[:40])
    err = one_line_error(
        capsys, main, ["--dataset_name", csv, "--text_column", "texts", "--output_dir", tmp_path / "out"]
    )
    assert "text column 'texts' not found" in err and "closest: text" in err


def test_a_tokenizer_without_a_pad_token_pads_with_unk_or_is_refused(caplog):
    tokenizer = train_wordpiece_tokenizer(["a b c", "b c d"], vocab_size=40)
    tokenizer.pad_token = None
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        ensure_pad_token(tokenizer)
    assert tokenizer.pad_token == "[UNK]"
    assert [r.getMessage() for r in caplog.records] == [
        "the tokenizer has no pad token: padding with its unk token '[UNK]'"
    ]
    bare = SimpleNamespace(pad_token=None, eos_token=None, unk_token=None)
    with pytest.raises(ValueError, match="no pad, eos or unk token"):
        ensure_pad_token(bare)


def test_texts_longer_than_max_length_warn_with_the_share(text_csv, caplog):
    data = _text_data(text_csv)
    tokenizer = train_wordpiece_tokenizer(data.train["text"], vocab_size=200)
    model = text_tiny_model(tokenizer, {0: "a", 1: "b", 2: "c"}, max_length=32)
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        tokenize_splits(
            data, tokenizer, model, max_length=5, num_proc=2
        )  # two processes, as --preprocessing_num_workers 2
    assert [r.getMessage() for r in caplog.records] == [
        "100.0% of the training texts are longer than max_length=5: truncated"
    ]
    assert max(len(ids) for ids in data.train["input_ids"]) == 5
    with pytest.raises(ValueError, match=r"Expected max_length <= 32 \(the model's longest input\), got 64"):
        tokenize_splits(_text_data(text_csv), tokenizer, model, max_length=64)


@pytest.mark.parametrize("max_length", [1, 2])
def test_a_max_length_with_no_room_for_a_token_of_text_is_refused(text_csv, tmp_path, max_length):
    data = _text_data(text_csv)
    tokenizer = train_wordpiece_tokenizer(data.train["text"], vocab_size=200)
    model = text_tiny_model(tokenizer, {0: "a", 1: "b", 2: "c"}, max_length=32)
    with pytest.raises(ValueError) as err:
        tokenize_splits(data, tokenizer, model, max_length=max_length)
    assert str(err.value) == (
        f"Expected max_length >= 3 (the tokenizer adds 2 special tokens, plus one token of text), got {max_length}"
    )
    assert "input_ids" not in data.train.column_names  # refused before tokenizing
    tokenize_splits(data, tokenizer, model, max_length=3)  # [CLS] one token [SEP]
    assert {len(ids) for ids in data.train["input_ids"]} == {3}
    rows = [(t, t[::-1], label) for t, label in _sentences()[:60]]
    pairs = _text_data(_write(tmp_path / "p.csv", rows, ("text", "other", "label")), text_column="text",
                       text_pair_column="other")  # fmt: skip
    with pytest.raises(ValueError, match=r"^Expected max_length >= 4 \(the tokenizer adds 3 special tokens to a pair"):
        tokenize_splits(pairs, tokenizer, model, max_length=3)


def test_a_pair_column_needs_a_tokenizer_that_takes_pairs(tmp_path):
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    rows = [(t, t[::-1], label) for t, label in _sentences()[:60]]
    data = _text_data(_write(tmp_path / "t.csv", rows, ("text", "other", "label")), text_column="text",
                      text_pair_column="other")  # fmt: skip
    words = Tokenizer(models.WordLevel({"[UNK]": 0, "[PAD]": 1}, unk_token="[UNK]"))
    words.pre_tokenizer = pre_tokenizers.Whitespace()
    plain = PreTrainedTokenizerFast(tokenizer_object=words, unk_token="[UNK]", pad_token="[PAD]", model_max_length=16)
    with pytest.raises(ValueError, match="cannot take text pairs"):
        tokenize_splits(data, plain, SimpleNamespace(config=None))
    bert = train_wordpiece_tokenizer(data.train["text"], vocab_size=200)
    tokenize_splits(data, bert, text_tiny_model(bert, {0: "a", 1: "b", 2: "c"}, max_length=32))
    assert 1 in data.train[0]["token_type_ids"]  # the second text is marked
    # a saved pair model predicts from rows holding both columns, as east-predict reads them from a file
    from east_hf.hf.predict.predictor import TEXT_COLUMNS_KEY, Predictor

    model = text_tiny_model(bert, {0: "food", 1: "money", 2: "sport"}, max_length=32)
    setattr(model.config, TEXT_COLUMNS_KEY, ["text", "other"])
    model.save_pretrained(tmp_path / "pair_run")
    bert.save_pretrained(tmp_path / "pair_run")
    rows = pd.DataFrame({"text": ["goal team", "soup"], "other": ["maet", "puos"]})
    frame = Predictor(tmp_path / "pair_run").predict(rows, probabilities=True)
    assert len(frame) == 2 and set(frame["predicted_label"]) <= set(COUNTS)
    with pytest.raises(ValueError, match="got an input without other"):
        Predictor(tmp_path / "pair_run").predict(rows[["text"]])


def test_json_lines_and_a_checkpoint_with_another_head(tmp_path, caplog):
    from east_hf.hf.models.build import ModelArguments, build_model

    path = tmp_path / "texts.jsonl"
    pd.DataFrame(_sentences()[:120], columns=["text", "label"]).to_json(path, orient="records", lines=True)
    data = _text_data(path)
    assert data.modality == "text" and data.num_labels == 3
    tokenizer = train_wordpiece_tokenizer(data.train["text"], vocab_size=200)
    text_tiny_model(tokenizer, {0: "yes", 1: "no"}, max_length=32).save_pretrained(tmp_path / "ckpt")
    tokenizer.save_pretrained(tmp_path / "ckpt")
    with caplog.at_level(logging.WARNING):
        model, processor, base = build_model(ModelArguments(model_name_or_path=str(tmp_path / "ckpt")), data)
    assert model.config.num_labels == 3 and model.config.label2id == {"food": 0, "money": 1, "sport": 2}
    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING] == [
        f"{tmp_path / 'ckpt'} has a head of 2 classes: a new head of 3 classes is trained from scratch"
    ]
    assert processor.sep_token == "[SEP]" and base == str(tmp_path / "ckpt")


def test_text_tiny_tokenizer_and_tokenization_are_cached_and_east_cache_clears_them(text_csv, tmp_path, monkeypatch):
    from east_hf.hf.data import cache_store
    from east_hf.scripts import east_cache

    monkeypatch.setenv("EAST_HF_CACHE", str(tmp_path / "cache"))
    data = _text_data(text_csv)
    texts = data.train["text"]
    first = train_wordpiece_tokenizer(texts, vocab_size=200)
    assert len(cache_store.tokenizer_folders()) == 1  # trained once, kept by its texts
    assert train_wordpiece_tokenizer(list(texts), vocab_size=200).get_vocab() == first.get_vocab()
    assert train_wordpiece_tokenizer(texts[:-1], vocab_size=200, cache=False) is not None
    assert len(cache_store.tokenizer_folders()) == 1  # cache=False keeps nothing

    def tokenized():  # as a new run: the data read again, the tokenizer from the cache
        fresh, tokenizer = _text_data(text_csv), train_wordpiece_tokenizer(texts, vocab_size=200)
        tokenize_splits(fresh, tokenizer, text_tiny_model(tokenizer, {0: "a", 1: "b", 2: "c"}, max_length=32))
        return fresh.train

    once, again = tokenized(), tokenized()
    assert again.cache_files and once.cache_files[0]["filename"] == again.cache_files[0]["filename"]  # found again
    assert east_cache.main(["clear"]) == 0
    assert not cache_store.tokenizer_folders()  # "everything east_hf cached" includes the tokenizers
