"""What a run is given, checked before training: a checkpoint folder without tokenizer files or without weights, image
files PIL cannot open, and text in a numeric column (or a category first seen late) of a streamed table."""

import logging
import random
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from helpers import one_line_error, write_text

from east_hf.hf.data import DataArguments, DataError, load_data, set_image_transforms
from east_hf.hf.models.text import train_wordpiece_tokenizer
from east_hf.scripts.east_train import _data_line
from east_hf.scripts.east_train import main as east_train

WORDS = {"sport": "goal match team score".split(), "money": "bank price stock loan".split()}


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """east_hf's data cache in a folder of the test's own: nothing shared with other tests or the user's cache."""
    monkeypatch.setenv("EAST_HF_CACHE", str(tmp_path_factory.mktemp("east_hf_cache")))


def _east_hf(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("east_hf")]


# ---- a text checkpoint folder: no tokenizer files, no weights ----
@pytest.fixture(scope="module")
def text_checkpoint(tmp_path_factory) -> dict[str, Path]:
    """A tiny BERT saved three ways (whole, without its tokenizer files, without its weights) and a CSV of texts."""
    from transformers import BertConfig, BertForSequenceClassification

    rng = random.Random(0)
    rows = [
        {"review": " ".join([*rng.sample(WORDS[label], 2), "the", "very", "new"]), "label": label}
        for label in WORDS
        for _ in range(40)
    ]
    root = tmp_path_factory.mktemp("text_checkpoint")
    pd.DataFrame(rows).to_csv(root / "texts.csv", index=False)
    tokenizer = train_wordpiece_tokenizer([r["review"] for r in rows], vocab_size=120, cache=False)
    config = BertConfig(
        vocab_size=len(tokenizer), hidden_size=16, num_hidden_layers=1, num_attention_heads=2, intermediate_size=32,
        max_position_embeddings=32, pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    model = BertForSequenceClassification(config)
    model.save_pretrained(root / "whole")
    tokenizer.save_pretrained(root / "whole")
    model.save_pretrained(root / "no_tokenizer")
    config.save_pretrained(root / "no_weights")
    tokenizer.save_pretrained(root / "no_weights")
    return {"root": root, "texts": root / "texts.csv", "tokenizer": tokenizer, "vocab_size": len(tokenizer)}


def _finetune(checkpoint, folder: str, out: Path, *more) -> list:
    return [
        "finetune_text", "--model_name_or_path", checkpoint["root"] / folder, "--dataset_name", checkpoint["texts"],
        "--max_length", 16, "--max_steps", 2, "--output_dir", out, "--report_to", "none", "--model_card", "false",
        "--disable_tqdm", "true", "--use_cpu", "true", *more,
    ]  # fmt: skip


@pytest.mark.parametrize("text_column", [["--text_column", "review"], []], ids=["text_column", "found"])
def test_a_checkpoint_folder_without_tokenizer_files_is_refused_before_training(
    capsys, tmp_path, text_checkpoint, text_column
):
    """transformers reads a folder without tokenizer files as a BertTokenizer of its 5 special tokens: every text would
    train as [UNK]. Refused in one line naming the folder, what it lacks and the fix; nothing is written. Without
    --text_column the folder's config (a vocab_size) still marks a text model, so the texts are read as texts."""
    out = tmp_path / "run"
    folder = text_checkpoint["root"] / "no_tokenizer"
    err = one_line_error(capsys, east_train, _finetune(text_checkpoint, "no_tokenizer", out, *text_column))
    size = text_checkpoint["vocab_size"]
    assert err == (
        f"east-train: error: Expected the tokenizer of checkpoint folder '{folder}', got a BertTokenizer of 5 tokens "
        f"for a model of {size} (config.vocab_size), reading 100% of the tokens of the first 51 training texts as "
        "[UNK]: the folder holds no tokenizer files (tokenizer.json, tokenizer_config.json, vocab.txt, ...); save the "
        "tokenizer the model was trained with into it "
        f"(AutoTokenizer.from_pretrained(BASE).save_pretrained('{folder}'))"
    )
    assert not (out / "tokenizer.json").exists() and not list(out.glob("checkpoint-*"))


def test_the_tokenizer_check_passes_the_checkpoints_own_and_names_texts_it_cannot_read(text_checkpoint):
    from east_hf.hf.models.text import check_tokenizer

    tokenizer, size = text_checkpoint["tokenizer"], text_checkpoint["vocab_size"]
    check_tokenizer("owner/model", tokenizer, size, ["goal match the very new", "bank loan the new"])
    with pytest.raises(ValueError) as err:  # a Hub tokenizer that reads none of the texts: another language, a column
        check_tokenizer("owner/model", tokenizer, size, ["zqj qzj"] * 3)
    assert re.fullmatch(
        rf"Expected the tokenizer of 'owner/model' to read the training texts, got a \w+ of {size} tokens, reading "
        r"100% of the tokens of the first 3 training texts as \[UNK\]: check that text_column holds the texts, or "
        r"fine-tune a checkpoint whose tokenizer covers them",
        str(err.value),
    ), str(err.value)


def test_a_checkpoint_folder_without_weights_is_named_so_before_the_data_loads(capsys, tmp_path, text_checkpoint):
    folder = text_checkpoint["root"] / "no_weights"
    argv = _finetune(text_checkpoint, "no_weights", tmp_path / "run")
    argv[argv.index("--dataset_name") + 1] = tmp_path / "no_such_data.csv"  # never read: the model is refused first
    err = one_line_error(capsys, east_train, argv)
    assert err == (
        f"east-train: error: Expected model weights in checkpoint folder '{folder}' (model.safetensors, "
        "pytorch_model.bin, model.safetensors.index.json, pytorch_model.bin.index.json), got no weights: it holds "
        "config.json, tokenizer.json, tokenizer_config.json; save the model into it with save_pretrained (or copy its "
        "weights file there), or name the folder that holds the weights"
    )


# ---- image files PIL cannot open ----
def _image_folder(root: Path, n: int = 24) -> Path:
    from PIL import Image

    rng = np.random.default_rng(0)
    for name in ("red", "green"):
        (root / name).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 255, (8, 8, 3)).astype(np.uint8)).save(root / name / f"{i}.png")
    return root


def test_image_files_pil_cannot_open_are_skipped_counted_and_named_at_load(tmp_path, caplog):
    """A file that is not an image and a PNG cut short are left out at load with one warning naming them, and counted
    in the summary line; every row left decodes, so training never meets them."""
    images = _image_folder(tmp_path / "images")
    (images / "red" / "notes.png").write_bytes(b"not an image")
    (images / "green" / "cut.png").write_bytes((images / "green" / "0.png").read_bytes()[:40])
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        data = load_data(DataArguments(dataset_name=str(images)))
    assert _east_hf(caplog) == [
        f"skipped 2 image files PIL cannot open: {images / 'green' / 'cut.png'}, {images / 'red' / 'notes.png'}; fix "
        "or delete them to train on the rest without this warning"
    ]
    assert data.dropped == {"unreadable image": 2} and len(data.train) + len(data.validation) + len(data.test) == 48
    assert _data_line("images", data).endswith("; dropped 2 rows with an image PIL cannot open")
    set_image_transforms(data, np.asarray, np.asarray)
    assert all(row["pixel_values"].shape == (8, 8, 3) for ds in (data.train, data.validation, data.test) for row in ds)


def test_a_split_without_any_readable_image_is_refused_in_one_line(tmp_path):
    images = tmp_path / "images"
    for name in ("red", "green"):
        (images / name).mkdir(parents=True)
        for i in range(10):
            (images / name / f"{i}.png").write_bytes(b"GIF89a")  # an image header, and nothing after it
    with pytest.raises(DataError, match=r"^Expected images PIL can open in the train split of .*, got 12 unreadable"):
        load_data(DataArguments(dataset_name=str(images)))


# ---- a streamed table: text in a numeric column, a category first seen after the sample ----
def _table(n: int, seed: int, bad: dict[int, str] | None = None, late: int | None = None) -> str:
    """x (numbers; ``bad``: row -> text), colour (red / blue; from row ``late`` on, green) and a 2-class label."""
    rng = random.Random(seed)
    lines = ["x,colour,label"]
    for i in range(n):
        colour = "green" if late is not None and i >= late else rng.choice(["red", "blue"])
        lines.append(f"{(bad or {}).get(i, f'{rng.random():.3f}')},{colour},{rng.choice('ab')}")
    return "\n".join(lines) + "\n"


@pytest.fixture
def small_sample(monkeypatch):
    """The first pass keeps 100 rows to fit the encoding on, so a late row is a few hundred rows in."""
    monkeypatch.setattr("east_hf.hf.data.streaming.SAMPLE_ROWS", 100)


def test_text_in_a_numeric_column_of_a_stream_is_named_with_its_file_row_and_column_before_training(tmp_path):
    """Row 11,001: past the 10,000 rows the encoding is fitted on, in the CSV reader's second chunk of rows."""
    data = tmp_path / "data"
    data.mkdir()
    write_text(data / "train.csv", _table(11_100, 0, bad={11_000: "oops", 11_050: "n.a."}))
    write_text(data / "validation.csv", _table(40, 1))
    with pytest.raises(DataError) as err:
        load_data(DataArguments(dataset_name=str(data), streaming=True))
    assert str(err.value) == (
        "Expected numbers in column 'x' (numbers in the first 10000 training rows, which the encoder was fitted "
        f"on), got 'oops' in data row 11001 of {data / 'train.csv'} and 1 row more: fix or empty those cells (an "
        "empty cell is imputed), or leave the column out with feature_columns"
    )


@pytest.mark.usefixtures("small_sample")
def test_text_in_a_numeric_column_after_the_sample_in_its_chunk_of_rows_is_named_too(tmp_path):
    """The CSV reader reads the sample's rows as text too where a later row of their chunk holds text: the sample's
    numbers are still numbers, and the text cell is named."""
    data = tmp_path / "data"
    data.mkdir()
    write_text(data / "train.csv", _table(300, 0, bad={250: "oops"}))
    write_text(data / "validation.csv", _table(40, 1))
    with pytest.raises(DataError, match=f"got 'oops' in data row 251 of {data / 'train.csv'}:"):
        load_data(DataArguments(dataset_name=str(data), streaming=True))


@pytest.mark.usefixtures("small_sample")
def test_a_streamed_split_of_several_files_names_the_file_and_its_row(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    write_text(data / "train-0.csv", _table(150, 0))
    write_text(data / "train-1.csv", _table(150, 1, bad={40: "oops"}))
    write_text(data / "validation.csv", _table(40, 2))
    with pytest.raises(DataError, match=f"got 'oops' in data row 41 of {data / 'train-1.csv'}:"):
        load_data(DataArguments(dataset_name=str(data), streaming=True))


@pytest.mark.usefixtures("small_sample")
def test_a_category_first_seen_after_the_sample_is_named_as_such(tmp_path, caplog):
    data = tmp_path / "data"
    data.mkdir()
    write_text(data / "train.csv", _table(300, 0, late=200))
    write_text(data / "validation.csv", _table(40, 1, late=30))
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        load_data(DataArguments(dataset_name=str(data), streaming=True))
    assert _east_hf(caplog) == [
        "values not in the first 100 training rows, which the encoder was fitted on, are encoded as all zeros (no "
        "category) in 'colour': 'green' (10 rows of validation, 10 rows of test)",
        "values first seen after the 100 training rows the encoder was fitted on are encoded as unknown (all zeros) "
        "in 'colour': 'green' (100 rows of train): shuffle the training rows, or put a row of each value among the "
        "first 100",
    ]
