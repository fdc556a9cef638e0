"""Data faults a new user meets: a class written "None" or "NA" in a CSV, warnings of a first run, a separator that
occurs inside label names, an unseen category, an empty text column, a file that is not UTF-8, a summary of many
classes, a folder written by save_to_disk."""

import logging

import numpy as np
import pandas as pd
import pytest
from helpers import write_csv

from east_hf.hf.data import DataArguments, DataError, load_data, load_raw
from east_hf.scripts.east_train import _data_line

SPLITS = ("train", "validation", "test")


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """east_hf's data cache in a folder of the test's own: nothing shared with other tests or the user's cache."""
    folder = tmp_path_factory.mktemp("east_hf_cache")
    monkeypatch.setenv("EAST_HF_CACHE", str(folder))
    return folder


def _rows(data) -> int:
    return sum(len(getattr(data, s)) for s in SPLITS)


def _east_hf(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name.startswith("east_hf")]


def _labels_csv(path, labels: list[str], n: int = 60):
    rows = [f"{i * 0.1:.2f},{'NA' if i % 10 == 0 else i % 4},{labels[i % len(labels)]}" for i in range(n)]
    return write_csv(path, "x,z,label", rows)


# ---- a class written "None" or "NA" in a CSV is a class ----
def test_a_class_written_none_or_na_in_a_csv_keeps_its_rows(tmp_path):
    csv = _labels_csv(tmp_path / "d.csv", ["None", "NA", "null", "cat"])
    data = load_data(DataArguments(dataset_name=str(csv)))
    assert data.label_names == ["NA", "None", "cat", "null"] and _rows(data) == 60 and data.dropped == {}
    assert "dropped" not in _data_line("d.csv", data)
    # the feature columns keep the CSV reader's markers: 'NA' in a number column is a missing number, imputed
    assert data.preprocessor.feature_names == ["x", "z"]


def test_label_na_values_names_the_markers_read_as_missing_and_the_summary_counts_them(tmp_path):
    csv = _labels_csv(tmp_path / "d.csv", ["None", "NA", "cat", "dog", ""])
    data = load_data(DataArguments(dataset_name=str(csv), label_na_values="NA"))
    assert data.label_names == ["None", "cat", "dog"] and data.dropped == {"empty label": 12, "label 'NA'": 12}
    assert _data_line("d.csv", data).endswith(
        "; dropped 12 rows with an empty label, 12 rows labelled 'NA' (label_na_values)"
    )
    data = load_data(DataArguments(dataset_name=str(csv), label_na_values=["default"]))  # the reader's markers
    assert data.label_names == ["cat", "dog"] and _rows(data) == 24
    assert data.dropped == {"empty label": 12, "label 'NA'": 12, "label 'None'": 12}


def test_label_na_values_is_parsed_like_a_list_of_names():
    assert DataArguments(label_na_values="NA, None,").label_na_values == ["NA", "None"]
    assert DataArguments(label_na_values=["n/a", "NA,null"]).label_na_values == ["n/a", "NA", "null"]
    assert DataArguments().label_na_values is None


def test_the_label_columns_of_multi_label_data_read_none_as_a_label(tmp_path, caplog):
    genres = ["drama|None", "None", "comedy", "NA"] * 15
    pd.DataFrame({"x": np.arange(60) * 0.1, "genres": genres}).to_csv(tmp_path / "g.csv", index=False)
    args = {"dataset_name": str(tmp_path / "g.csv"), "label_column": "genres", "label_separator": "|"}
    assert load_data(DataArguments(**args)).label_names == ["NA", "None", "comedy", "drama"]
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        data = load_data(DataArguments(**args, label_na_values="NA,None"))
    assert data.label_names == ["None", "comedy", "drama"]  # 'None' inside a list is a label; a whole cell is not
    assert _east_hf(caplog) == ["label_na_values: read 30 label cells as missing: 'NA' (15), 'None' (15)"]
    # 0/1 columns: a marker is refused unless named, then the entry is left out
    pd.DataFrame({"x": range(40), "a": ["1", "0", "NA", "1"] * 10, "b": [0, 1] * 20}).to_csv(
        tmp_path / "b.csv", index=False
    )
    with pytest.raises(DataError, match=r"not 0/1: 'NA'; .*label_na_values"):
        load_data(DataArguments(dataset_name=str(tmp_path / "b.csv"), label_columns="a,b"))
    data = load_data(DataArguments(dataset_name=str(tmp_path / "b.csv"), label_columns="a,b", label_na_values="NA"))
    matrix = np.concatenate([np.asarray(getattr(data, s).with_format("numpy")[:]["labels"]) for s in SPLITS])
    assert (matrix[:, 0] == -100).sum() == 10 and len(matrix) == 40


# ---- warnings of preparing a new table print on its first run ----
def test_a_preparation_warning_prints_once_on_the_first_run_and_once_from_the_cache(tmp_path, capsys, monkeypatch):
    rows = [f"{'n.a.' if i % 12 == 3 else f'{i % 5 * 0.5:.1f}'},{i % 3}" for i in range(60)]
    csv = write_csv(tmp_path / "d.csv", "x,label", rows)
    # no handler above east_hf (as in east-train): Python's last-resort handler prints to stderr
    monkeypatch.setattr(logging.getLogger("east_hf"), "propagate", False)
    for run in ("first", "cached"):
        data = load_data(DataArguments(dataset_name=str(csv)))
        err = capsys.readouterr().err
        assert err.count("column 'x' holds numbers and text 'n.a.' in 5 of 60 rows") == 1, (run, err)
        assert data.preprocessor.feature_names[0].startswith("x=")  # one-hot encoded as text


# ---- a separator that occurs inside label names ----
def test_a_separator_inside_label_names_is_refused_naming_the_one_to_pass(tmp_path):
    genres = ["comedy|sci-fi", "drama|film-noir", "drama", "comedy|drama", "sci-fi"] * 12
    pd.DataFrame({"x": range(60), "genres": genres}).to_csv(tmp_path / "g.csv", index=False)
    args = {"dataset_name": str(tmp_path / "g.csv"), "label_column": "genres"}
    with pytest.raises(DataError) as err:
        load_data(DataArguments(**args, label_separator="-"))
    assert str(err.value) == (
        "label_separator '-' cuts the label names of column 'genres' into fragments ('comedy|sci-fi' -> 'comedy|sci', "
        "'fi'): the cells list their labels by '|' (3 of 5 cells); pass --label_separator '|'"
    )
    data = load_data(DataArguments(**args, label_separator="|"))
    assert data.label_names == ["comedy", "drama", "film-noir", "sci-fi"]


# ---- minors: an unseen category, an empty text column, a file not UTF-8, many classes ----
def test_an_unseen_category_is_named_once(tmp_path, caplog):
    (tmp_path / "d").mkdir()
    write_csv(
        tmp_path / "d" / "train.csv", "x,colour,label", [f"{i},{['red', 'blue'][i % 2]},{i % 2}" for i in range(40)]
    )
    write_csv(
        tmp_path / "d" / "test.csv", "x,colour,label", [f"{i},{['red', 'green'][i % 2]},{i % 2}" for i in range(10)]
    )
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        load_data(DataArguments(dataset_name=str(tmp_path / "d")))
    assert _east_hf(caplog) == [
        "values never seen in training are encoded as all zeros (no category) in 'colour': 'green' (5 rows of test)"
    ]


def test_an_all_empty_text_column_is_named_empty(tmp_path):
    csv = write_csv(tmp_path / "t.csv", "text,label", [f",{i % 2}" for i in range(20)])
    with pytest.raises(DataError) as err:
        load_data(DataArguments(dataset_name=str(csv), text_column="text"))
    assert str(err.value) == (
        "Expected some non-empty texts in column 'text', got all 20 texts empty (an empty column): pass the column "
        "that holds the texts (--text_column)"
    )


def test_a_file_that_is_not_utf8_is_named_with_how_to_convert_it(tmp_path):
    path = tmp_path / "l.csv"
    path.write_bytes(b"x,label\n" + "".join(f"{i},caf\u00e9{i % 2}\n" for i in range(20)).encode("latin-1"))
    with pytest.raises(DataError) as err:
        load_raw(str(path))
    assert str(err.value) == (
        f"Expected UTF-8 text in dataset file {str(path)!r}, got byte 0xe9 at line 2 (offset 13), not UTF-8: convert "
        "the file, e.g. iconv -f latin1 -t utf-8 l.csv > l.utf8.csv (latin1, or the encoding it was written in)"
    )


def test_the_summary_of_many_classes_names_the_fewest_and_the_most(tmp_path):
    rows = [f"{i * 0.01:.2f},c{i % 40:02d}" for i in range(40 * 10)] + ["9,c00" for _ in range(5)]
    data = load_data(DataArguments(dataset_name=str(write_csv(tmp_path / "d.csv", "x,label", rows))))
    counts = _data_line("d.csv", data).split("training samples per class: ")[1]
    assert counts.startswith("40 classes, ") and "; most: c00: " in counts
    assert counts.count(": ") == 2 + 2 * 5  # "fewest: ", "most: ", the 5 fewest and the 5 most, not 40 counts


def test_a_number_that_is_not_a_class_is_named_by_its_value_not_read_as_an_index(tmp_path):
    csv = write_csv(tmp_path / "d.csv", "x,label", [f"{i},{[0, 1, 2, 7][i % 4]}" for i in range(80)])
    with pytest.raises(DataError) as err:
        load_data(DataArguments(dataset_name=str(csv), positive_classes=["3"]))  # index 3 would be class '7'
    assert str(err.value) == (
        "Expected positive_classes among the class names ['0', '1', '2', '7'], got '3': the classes are numbers, so "
        "an entry names a class, not an index"
    )
    assert load_data(DataArguments(dataset_name=str(csv), positive_classes=["7"])).label_names == ["rest", "7"]


# ---- a folder written by save_to_disk ----
@pytest.mark.parametrize("whole", [True, False])
def test_a_save_to_disk_folder_loads(tmp_path, whole):
    import datasets

    table = {"x": [i * 0.1 for i in range(60)], "label": [i % 3 for i in range(60)]}
    ds = datasets.Dataset.from_dict(table)
    saved = datasets.DatasetDict(
        {"train": ds.select(range(40)), "validation": ds.select(range(40, 50)), "test": ds.select(range(50, 60))}
    )
    (saved if whole else ds).save_to_disk(str(tmp_path / "saved"))
    data = load_data(DataArguments(dataset_name=str(tmp_path / "saved")))
    assert data.label_names == ["0", "1", "2"] and _rows(data) == 60
    if whole:
        assert [len(getattr(data, s)) for s in SPLITS] == [40, 10, 10]
