"""east_hf.hf.data: CSV, image-folder and bundled sets, their splits, long tails and encoding, and refused rows."""

import os
import subprocess
import sys

import numpy as np
import pytest
import torch
from helpers import write_csv, write_text

from east_hf.hf.data import DataArguments, DataError, load_data, load_tabular_features


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


# ---- refused data (issue 15, see test_faults.py): a non-finite validation row, a high-cardinality text column ----
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
