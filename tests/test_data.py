"""east_hf.hf.data: CSV, image-folder and bundled sets, their splits, long tails and encoding, and refused rows."""

import logging
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from helpers import write_csv, write_text

from east_hf.hf.data import DataArguments, DataError, load_data, load_tabular_features


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """east_hf's data cache in a folder of the test's own: nothing shared with other tests or the user's cache."""
    folder = tmp_path_factory.mktemp("east_hf_cache")
    monkeypatch.setenv("EAST_HF_CACHE", str(folder))
    return folder


# ---- loading and splitting ----
def test_tabular_csv_split_encoding_and_training_statistics(tmp_path):
    rng = np.random.default_rng(0)
    n = 200
    rows = ["x,colour,y"] + [
        f"{rng.normal(5, 2):.4f},{['red', 'blue', 'green'][i % 3]},{'yes' if i % 4 == 0 else 'no'}" for i in range(n)
    ]
    csv = write_text(tmp_path / "d.csv", "\n".join(rows) + "\n")
    data = load_data(DataArguments(dataset_name=str(csv), label_column="y", positive_classes=["yes"]))
    assert data.modality == "tabular" and data.label_names == ["no", "yes"]
    assert [len(data.train), len(data.validation), len(data.test)] == [128, 32, 40]  # 64 / 16 / 20 %
    assert data.class_counts("test") == [30, 10]  # stratified: 25 % positive everywhere
    assert data.preprocessor.feature_names == ["x", "colour=blue", "colour=green", "colour=red"]
    x_train = torch.stack([row["input_features"] for row in data.train])  # (128, 4)
    assert torch.allclose(x_train.mean(0), torch.zeros(4), atol=1e-5)
    assert torch.allclose(x_train.std(0, unbiased=False), torch.ones(4), atol=1e-4)
    data.preprocessor.save_pretrained(tmp_path)
    assert load_tabular_features(tmp_path).to_dict() == data.preprocessor.to_dict()


def test_imagefolder_directory(tmp_path):
    from PIL import Image

    for k, name in enumerate(["cat", "dog"]):
        (tmp_path / "imgs" / name).mkdir(parents=True)
        for i in range(10):
            Image.new("RGB", (6, 6), (k * 200, i * 20, 0)).save(tmp_path / "imgs" / name / f"{i}.png")
    data = load_data(DataArguments(dataset_name=str(tmp_path / "imgs")))
    assert data.modality == "image" and data.label_names == ["cat", "dog"]
    assert len(data.train) + len(data.validation) + len(data.test) == 20 and data.class_counts("test") == [2, 2]


def test_long_tail_and_binary_relabel_of_bundled_sets():
    digits = load_data(DataArguments(dataset_name="sklearn:digits", imbalance_ratio=0.1))
    total = np.sum([digits.class_counts(s) for s in ("train", "validation", "test")], axis=0)
    assert digits.modality == "image" and digits.train[0]["image"].size == (8, 8)
    assert list(total) == sorted(total, reverse=True) and 0.08 < total[9] / total[0] < 0.12
    cancer = load_data(DataArguments(dataset_name="sklearn:breast_cancer", positive_classes=["malignant"]))
    assert cancer.label_names == ["benign", "malignant"]
    assert sum(cancer.class_counts(s)[1] for s in ("train", "validation", "test")) == 212


def test_long_tail_on_the_training_split_only_keeps_validation_and_test_balanced():
    data = load_data(DataArguments(dataset_name="sklearn:digits", imbalance_ratio=0.05, imbalance_splits="train"))
    train, val, test = (np.array(data.class_counts(s)) for s in ("train", "validation", "test"))
    assert test.sum() == 360 and test.max() - test.min() <= 2  # 20 % of 1,797, carved before the long tail
    assert val.sum() == 288 and val.max() - val.min() <= 2
    assert list(train) == sorted(train, reverse=True) and 0.03 < train[9] / train[0] < 0.07


def test_synthetic_binary_set_is_fixed_imbalanced_and_split_64_16_20():
    first, again = (load_data(DataArguments(dataset_name="sklearn:make_classification")) for _ in range(2))
    assert first.modality == "tabular" and first.label_names == ["negative", "positive"]
    assert [len(first.train), len(first.validation), len(first.test)] == [12_800, 3_200, 4_000]
    positives = first.class_counts("test")[1]
    assert 380 < positives < 460 and first.class_counts("train")[1] / 12_800 == pytest.approx(
        positives / 4_000, abs=0.002
    )
    assert first.train[0]["input_features"].shape == (20,)
    assert np.array_equal(first.test[:5]["input_features"], again.test[:5]["input_features"])  # same rows every time


# ---- refused data: a non-finite validation row, a high-cardinality text column ----
# (what the trainer and east-train refuse of non-finite data: test_nonfinite_and_minor_faults.py)
def test_inf_in_a_validation_csv_row_is_refused_at_load(tmp_path):
    train = write_csv(tmp_path / "train.csv", "x,y", [f"{i * 0.1:.3f},{i % 2}" for i in range(40)])
    write_csv(tmp_path / "validation.csv", "x,y", [f"{'inf' if i == 2 else i},{i % 2}" for i in range(10)])
    write_csv(tmp_path / "test.csv", "x,y", [f"{i},{i % 2}" for i in range(10)])
    assert train.exists()
    with pytest.raises(DataError, match=r"inf in the validation split: 'x' \(1 rows\)"):
        load_data(DataArguments(dataset_name=str(tmp_path), label_column="y"))


# tabular loading has bounded memory: the peak measured in a fresh process
PEAK_SCRIPT = """
import resource, sys
from east_hf.hf.data import DataArguments, DataError, load_data
path = sys.argv[1]
load_data(DataArguments(dataset_name="sklearn:iris"))  # warm every import and code path
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
try:
    load_data(DataArguments(dataset_name=path, label_column="y"))
    print("LOADED")
except DataError as e:
    print("ERROR", e)
data = load_data(DataArguments(dataset_name=path, label_column="y", feature_columns=["x", "colour"]))
x = data.train.with_format("numpy")[:]["input_features"]
print("SHAPE", x.shape, x.dtype)
print("PEAK_MB", (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024)
"""


def test_an_id_column_of_a_50k_row_csv_is_refused_in_bounded_memory(tmp_path):
    rng = np.random.default_rng(0)
    colours = np.array(["red", "green", "blue"])
    rows = [f"u{i:06d},{x:.4f},{colours[i % 3]},{int(x > 0.5)}" for i, x in enumerate(rng.normal(size=50_000))]
    csv = write_csv(tmp_path / "big.csv", "id,x,colour,y", rows)
    out = subprocess.run(
        [sys.executable, "-c", PEAK_SCRIPT, str(csv)],
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ),
    )
    assert out.returncode == 0, out.stderr[-2000:]
    lines = dict(line.split(" ", 1) for line in out.stdout.splitlines() if " " in line)
    assert "text column 'id' has 32000 distinct values" in lines["ERROR"] and "feature_columns" in lines["ERROR"]
    assert lines["SHAPE"] == "(32000, 4) float32"
    assert float(lines["PEAK_MB"]) < 1024, lines


def test_one_hot_is_float32_and_a_mostly_unique_column_is_refused(tmp_path):
    csv = write_csv(tmp_path / "d.csv", "name,c,y", [f"n{i},{'ab'[i % 2]},{i % 2}" for i in range(100)])
    with pytest.raises(DataError, match="text column 'name' has 64 distinct values in 64 training rows"):
        load_data(DataArguments(dataset_name=str(csv), label_column="y"))
    data = load_data(DataArguments(dataset_name=str(csv), label_column="y", feature_columns=["c"]))
    assert data.preprocessor.encode(data.train.with_format("pandas")[:4].assign(c=["a", "b", "a", None])).dtype == (
        np.float32
    )


# ---- labels the training split does not have ----
def _three_splits(folder, test_labels, validation_labels=("cat", "dog")):
    """train.csv / validation.csv / test.csv with one feature; training holds cat and dog only."""
    folder.mkdir()
    write_csv(folder / "train.csv", "x,y", [f"{i * 0.1:.2f},{'cat' if i % 2 else 'dog'}" for i in range(40)])
    for name, labels in (("validation", validation_labels), ("test", test_labels)):
        write_csv(folder / f"{name}.csv", "x,y", [f"{i},{labels[i % len(labels)]}" for i in range(10)])
    return folder


def test_a_label_only_in_validation_or_test_is_refused_naming_it_and_its_split(tmp_path):
    words = _three_splits(tmp_path / "words", ["cat", "dog", "cat", "dog", "fox"])
    with pytest.raises(
        DataError,
        match=r"Expected every validation/test label to appear in training, got 'fox' only "
        r"in test \(2 rows\).*unseen_labels: drop",
    ):
        load_data(DataArguments(dataset_name=str(words), label_column="y"))
    numbers = tmp_path / "numbers"
    numbers.mkdir()
    write_csv(numbers / "train.csv", "x,y", [f"{i},{1 + i % 3}" for i in range(60)])
    write_csv(numbers / "validation.csv", "x,y", [f"{i},{[1, 2, 3, 99][i % 4]}" for i in range(8)])
    write_csv(numbers / "test.csv", "x,y", [f"{i},{[1, 2, 3, 99][i % 4]}" for i in range(12)])
    with pytest.raises(DataError, match=r"got '99' only in validation \(2 rows\) and test \(3 rows\)"):
        load_data(DataArguments(dataset_name=str(numbers), label_column="y"))


def test_unseen_labels_drop_leaves_their_rows_and_class_out_with_one_warning(tmp_path, caplog):
    words = _three_splits(tmp_path / "words", ["cat", "dog", "cat", "dog", "fox"], ["cat", "dog", "fox", "fox", "cat"])
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.data"):
        data = load_data(DataArguments(dataset_name=str(words), label_column="y", unseen_labels="drop"))
    assert data.label_names == ["cat", "dog"] and data.train.features["labels"].names == ["cat", "dog"]
    assert [len(data.validation), len(data.test)] == [6, 8] and data.class_counts("test") == [4, 4]
    (record,) = caplog.records
    assert record.getMessage() == (
        "unseen_labels=drop: left out 6 rows of labels with no training rows: 'fox' only in validation (4 rows) and "
        "test (2 rows)"
    )
    with pytest.raises(ValueError, match=r"Expected unseen_labels in \('error', 'drop'\), got 'keep'"):
        DataArguments(dataset_name=str(words), unseen_labels="keep")


def test_a_class_without_training_rows_warns_before_training(tmp_path, caplog):
    import datasets

    features = datasets.Features(
        {"x": datasets.Value("float32"), "label": datasets.ClassLabel(names=["cat", "dog", "fox"])}
    )
    rows = {"x": [i * 0.1 for i in range(60)], "label": [i % 2 for i in range(60)]}  # no fox anywhere
    parquet = tmp_path / "d.parquet"
    datasets.Dataset.from_dict(rows, features=features).to_parquet(parquet)
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.data"):
        data = load_data(DataArguments(dataset_name=str(parquet)))
        assert data.label_names == ["cat", "dog", "fox"] and data.class_counts("train")[2] == 0
        relabelled = load_data(DataArguments(dataset_name=str(parquet), positive_classes=["fox"]))
        assert relabelled.label_names == ["rest", "fox"]
        capped = load_data(
            DataArguments(
                dataset_name=str(_three_splits(tmp_path / "w", ["cat", "dog"])), label_column="y", max_train_samples=1
            )
        )
        assert capped.class_counts("train") in ([1, 0], [0, 1])
    missing = "dog" if capped.class_counts("train")[0] else "cat"
    assert [r.getMessage() for r in caplog.records] == [
        "no training rows in class 'fox' (no rows anywhere): the model cannot learn it and macro averages count it "
        "as 0",
        "no training rows in class 'fox' (no rows anywhere): the model cannot learn it and macro averages count it "
        "as 0",
        f"no training rows in class '{missing}' (5 rows in validation, 5 rows in test): the model cannot learn it and "
        "macro averages count it as 0",
    ]


# ---- empty files and text in a numeric column: one line naming the file, the column, the value ----
def _refusal(dataset: Path) -> str:
    with pytest.raises(DataError) as error:
        load_data(DataArguments(dataset_name=str(dataset), label_column="y"))
    return str(error.value)


def test_an_empty_csv_is_refused_naming_the_file_before_datasets_reads_it(tmp_path):
    empty = write_text(tmp_path / "empty.csv", "")
    assert _refusal(empty) == f"Expected data rows in dataset file '{empty}', got an empty file (0 bytes)"
    header = write_text(tmp_path / "header.csv", "x,y\n\n")
    assert _refusal(header) == f"Expected data rows in dataset file '{header}', got a header and no rows"
    folder = _three_splits(tmp_path / "splits", ["cat", "dog"])
    write_text(folder / "validation.csv", "")
    validation = folder / "validation.csv"
    assert _refusal(folder) == f"Expected data rows in dataset file '{validation}', got an empty file (0 bytes)"


def test_text_in_a_numeric_column_names_the_file_the_column_and_the_value(tmp_path, caplog):
    folder = _three_splits(tmp_path / "splits", ["cat", "dog"])
    write_csv(folder / "test.csv", "x,y", [f"{'abc' if i == 3 else i},{'cat' if i % 2 else 'dog'}" for i in range(10)])
    assert _refusal(folder).startswith(
        f"Expected numbers in column 'x' of '{folder / 'test.csv'}', got text 'abc' in 1 row (first: data row 4)"
    )
    # one file, text after the first 10,000 rows: datasets has typed the column as numbers by then
    late = write_csv(tmp_path / "late.csv", "x,y", [f"{'n.a.' if i == 15_000 else i},{i % 2}" for i in range(20_000)])
    assert _refusal(late).startswith(
        f"Expected numbers in column 'x' of '{late}', got text 'n.a.' in 1 row (first: data row 15001)"
    )
    # text early: the column is read as text, with too many values to one-hot
    early = write_csv(tmp_path / "early.csv", "x,y", [f"{'abc' if i == 7 else i * 0.01},{i % 2}" for i in range(1000)])
    assert _refusal(early).startswith("Expected numbers in column 'x', got text 'abc' in 1 of 1000 rows: fix or empty")
    few = write_csv(tmp_path / "few.csv", "x,y", [f"{'abc' if i == 7 else i % 5},{i % 2}" for i in range(40)])
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.data"):
        load_data(DataArguments(dataset_name=str(few), label_column="y"))
    assert "column 'x' holds numbers and text 'abc' in 1 of 40 rows, so it is one-hot encoded as text" in caplog.text


def test_json_lines_labels_of_mixed_types_are_refused_naming_a_row_of_each(tmp_path):
    import json

    def jsonl(name: str, labels: list) -> Path:
        rows = [json.dumps({"x": i * 0.5, "y": y}) for i, y in enumerate(labels)]
        return write_text(tmp_path / name, "\n".join(rows) + "\n")

    mixed = jsonl("mixed.jsonl", [1] + ["neg", "pos"] * 20)
    assert _refusal(mixed) == (
        "Expected label values of one type in column 'y', got mixed types (row 0: 1, row 1: 'neg'): write every "
        "label as text, or every label as a number"
    )
    unlabelled = jsonl(
        "unlabelled.jsonl", [None, -100, "neg", "pos", 2.5] + ["neg", "pos"] * 20
    )  # no type: null, -100
    assert "got mixed types (row 2: 'neg', row 4: 2.5)" in _refusal(unlabelled)
    lists = jsonl("lists.jsonl", [-100, [1, "a"], [0, "b"]] * 10)
    assert _refusal(lists).startswith("Expected one number or text label per row in column 'y', got JSON lists (row 1")
    ignored = jsonl("ignored.jsonl", [-100] + ["neg", "pos"] * 20)  # -100 alone among strings is typed as text
    data = load_data(DataArguments(dataset_name=str(ignored), label_column="y"))
    assert data.label_names == ["neg", "pos"] and data.dropped == {"label -100": 1}


# ---- the vectorised path: the same values as an independent pandas / scikit-learn reference ----
def _mixed_csv(path: Path, n: int = 600) -> Path:
    """Numbers with missing cells, a text column with spaces and missing cells, labels as text with spaces, and a
    few empty and -100 labels (dropped)."""
    rng = np.random.default_rng(3)
    rows = []
    for i in range(n):
        a = "" if i % 13 == 0 else f"{rng.normal(3, 2):.4f}"
        colour = "" if i % 7 == 0 else ["red", " blue", "green "][i % 3]
        label = ["cat", " dog", "fox"][min(2, int(rng.exponential(0.9)))]
        label = "" if i % 50 == 0 else "-100" if i % 61 == 0 else label
        rows.append(f"{a},{rng.integers(0, 9)},{colour},{label}")
    return write_csv(path, "a,b,colour,y", rows)


def test_tabular_values_match_a_pandas_and_sklearn_reference(tmp_path, monkeypatch):
    import pandas as pd
    from sklearn.model_selection import train_test_split

    import east_hf.hf.data.tabular as tabular

    monkeypatch.setattr(tabular, "BATCH_CELLS", 200)  # 66 rows a batch: the statistics are merged across batches
    csv = _mixed_csv(tmp_path / "d.csv")
    data = load_data(DataArguments(dataset_name=str(csv), label_column="y"))

    frame = pd.read_csv(csv, dtype={"y": str}, keep_default_na=False, na_values={"a": [""], "colour": [""]})
    labels = frame["y"].str.strip()
    frame = frame[(labels != "") & (labels != "-100")].reset_index(drop=True)
    names = sorted(frame["y"].str.strip().unique())
    y = frame["y"].str.strip().map({name: k for k, name in enumerate(names)}).to_numpy()
    rest, test = train_test_split(np.arange(len(y)), test_size=0.2, stratify=y, random_state=42)
    rest = np.sort(rest)
    train, val = train_test_split(rest, test_size=0.16 / 0.8, stratify=y[rest], random_state=42)
    train, val, test = np.sort(train), np.sort(val), np.sort(test)
    colour = frame["colour"].str.strip()
    x = pd.concat([frame[["a", "b"]], pd.get_dummies(colour, prefix="colour", prefix_sep="=", dtype=float)], axis=1)
    x = x.astype(np.float64)
    x = x.fillna(x.iloc[train].mean())
    x = ((x - x.iloc[train].mean()) / x.iloc[train].std(ddof=0)).to_numpy(np.float32)

    assert data.label_names == names == ["cat", "dog", "fox"] and data.dropped == {"empty label": 12, "label -100": 9}
    assert data.preprocessor.feature_names == ["a", "b", "colour=blue", "colour=green", "colour=red"]
    for split, rows in (("train", train), ("validation", val), ("test", test)):
        got = getattr(data, split).with_format("numpy")[:]
        np.testing.assert_allclose(got["input_features"], x[rows], atol=2e-6)
        assert got["input_features"].dtype == np.float32 and np.array_equal(got["labels"], y[rows])
        assert data.class_counts(split) == np.bincount(y[rows], minlength=3).tolist()


def test_inf_rows_are_counted_over_every_batch_of_a_split(tmp_path, monkeypatch):
    import east_hf.hf.data.tabular as tabular

    monkeypatch.setattr(tabular, "BATCH_CELLS", 20)  # 1,024 rows a batch at least: 3 batches
    rows = [f"{'inf' if i in (5, 2_000, 2_900) else f'{i * 0.1:.3f}'},{i % 2}" for i in range(3_000)]
    csv = write_csv(tmp_path / "d.csv", "x,y", rows)
    with pytest.raises(DataError, match=r"inf in the train split: 'x' \(3 rows\)"):
        load_data(DataArguments(dataset_name=str(csv), label_column="y", test_size=0.001, val_size=0.001))


def test_the_data_layer_reads_no_row_into_python(tmp_path, monkeypatch):
    """Label encoding, relabelling, dropping, splitting and feature encoding read Arrow columns and numpy arrays:
    no ``datasets`` map / filter, no Python-formatted read of a column or a row, no read of an indices mapping row by
    row, no row-by-row category lookup."""
    import datasets
    from datasets.formatting import PythonFormatter
    from datasets.table import IndexedTableMixin

    import east_hf.hf.data.tabular_features as tabular_features

    csv = _mixed_csv(tmp_path / "d.csv")

    def refuse(*args, **kwargs):
        raise AssertionError("a per-row Python path ran")

    for owner, name in (
        (datasets.Dataset, "map"),
        (datasets.Dataset, "filter"),
        (datasets.Dataset, "from_dict"),
        (datasets.Dataset, "to_pandas"),
        (IndexedTableMixin, "fast_gather"),  # how datasets reads through an indices mapping: a slice per row
        (PythonFormatter, "format_row"),
        (PythonFormatter, "format_column"),
        (PythonFormatter, "format_batch"),
        (tabular_features, "_is_missing"),
    ):
        monkeypatch.setattr(owner, name, refuse)
    data = load_data(
        DataArguments(
            dataset_name=str(csv), label_column="y", positive_classes=["fox"], imbalance_ratio=0.5, max_test_samples=50
        )
    )
    assert data.label_names == ["rest", "fox"] and len(data.test) == 50
    assert data.class_counts("train") == np.bincount(data.train.with_format("numpy")[:]["labels"]).tolist()


def test_prepared_splits_are_written_once_and_mapped_by_the_next_load(tmp_path, monkeypatch, caplog, cache):
    from transformers import AutoFeatureExtractor

    import east_hf.hf.data.pipeline as pipeline
    import east_hf.hf.models  # noqa: F401 - registers the feature extractor

    folder = _three_splits(tmp_path / "words", ["cat", "dog", "fox"])
    args = DataArguments(dataset_name=str(folder), label_column="y", unseen_labels="drop")
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.data"):
        first = load_data(args)
        monkeypatch.setattr(pipeline, "_prepare", lambda *a: pytest.fail("prepared twice"))
        again = load_data(args)  # another process of a distributed run, after the main one
    prepared = Path(first.train.cache_files[0]["filename"]).parent
    assert prepared.name.startswith("prepared-") and prepared.parent.parent == cache
    assert again.train.cache_files == first.train.cache_files
    messages = [r.getMessage() for r in caplog.records]  # the warnings of the preparation, then the same again
    assert (
        messages[0].startswith("unseen_labels=drop")
        and messages[: len(messages) // 2] == messages[len(messages) // 2 :]
    )
    for split in ("train", "validation", "test"):
        assert np.array_equal(getattr(first, split)["input_features"], getattr(again, split)["input_features"])
    assert again.label_names == ["cat", "dog"] and again.preprocessor.to_dict() == first.preprocessor.to_dict()
    assert again.train.features["input_features"].feature.dtype == "float32"
    assert AutoFeatureExtractor.from_pretrained(prepared).to_dict() == first.preprocessor.to_dict()
    write_csv(folder / "train.csv", "x,y", [f"{i * 0.2:.2f},{'cat' if i % 2 else 'dog'}" for i in range(40)])
    monkeypatch.undo()
    changed = load_data(args)  # new rows: a new raw cache, a new prepared folder
    assert Path(changed.train.cache_files[0]["filename"]).parent != prepared
