"""Multi-label data for east-train: 0/1 label columns, a separated or list-valued label column, stratified carving
that keeps rare labels in every split, one line for each kind of bad input, and models built with the multi-label
problem type."""

import json
import logging

import numpy as np
import pandas as pd
import pytest
import torch
from helpers import one_line_error

from east_hf.hf.data import DataArguments, DataError, load_data
from east_hf.hf.data.multilabel import label_strata, mergeable_strata
from east_hf.hf.models.build import MULTI_LABEL, ModelArguments, build_model

SPLITS = ("train", "validation", "test")
WORDS = {
    "sport": "goal match team score coach".split(),
    "money": "bank price stock market loan".split(),
    "food": "bread soup apple cheese salad".split(),
}


@pytest.fixture(autouse=True)
def cache(tmp_path_factory, monkeypatch):
    """east_hf's data cache in a folder of the test's own: nothing shared with other tests or the user's cache."""
    folder = tmp_path_factory.mktemp("east_hf_cache")
    monkeypatch.setenv("EAST_HF_CACHE", str(folder))
    return folder


def _table(n: int = 200, seed: int = 0, rare: float = 0.05) -> pd.DataFrame:
    """Two features and three 0/1 labels: ``a`` (~50 %), ``b`` (~30 %) and ``rare`` (``rare`` of the rows)."""
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "x": rng.normal(size=n).round(4),
            "colour": rng.choice(["red", "blue"], n),
            "a": (rng.random(n) < 0.5).astype(int),
            "b": (rng.random(n) < 0.3).astype(int),
            "rare": (np.arange(n) % round(1 / rare) == 0).astype(int),
        }
    )


def _matrix(ds) -> np.ndarray:
    column = "labels" if "labels" in ds.column_names else "label"
    return np.asarray(ds.with_format("numpy")[:][column], dtype=np.float32)


def _all(data) -> np.ndarray:
    return np.concatenate([_matrix(getattr(data, s)) for s in SPLITS])


def _sentences(n: int = 120, seed: int = 0) -> list[tuple[str, list[str]]]:
    """Texts of one to three topics, each topic's words in the text."""
    rng = np.random.default_rng(seed)
    topics = sorted(WORDS)
    rows = []
    for i in range(n):
        chosen = sorted({topics[i % 3], *(t for t in topics if rng.random() < 0.3)})
        words = [w for t in chosen for w in rng.choice(WORDS[t], 3)]
        rows.append((" ".join(rng.permutation(words)), chosen))
    return rows


# ---- the three ways of writing several labels per row ----
def test_three_binary_columns_give_float_multi_hot_labels_names_and_counts(tmp_path):
    frame = _table()
    frame.loc[7, "a"] = None  # an empty cell: that entry is left out (-100), the row stays
    frame.loc[9, ["a", "b", "rare"]] = None  # every entry empty: the row is dropped and counted
    frame.to_csv(tmp_path / "d.csv", index=False)
    data = load_data(DataArguments(dataset_name=str(tmp_path / "d.csv"), label_columns=["a,b", "rare"]))
    assert data.multi_label and data.modality == "tabular" and data.label_names == ["a", "b", "rare"]
    assert data.num_labels == 3 and data.dropped == {"empty label": 1}
    assert [len(data.train), len(data.validation), len(data.test)] == [127, 32, 40]  # 64 / 16 / 20 % of 199
    assert data.preprocessor.feature_names == ["x", "colour=blue", "colour=red"]  # the labels are no input
    row = data.train[0]
    assert row["labels"].dtype == torch.float32 and row["labels"].shape == (3,)
    labels = _all(data)
    assert set(np.unique(labels).tolist()) == {-100.0, 0.0, 1.0} and (labels == -100).sum() == 1
    kept = frame.drop(index=9)
    assert np.sum([data.class_counts(s) for s in SPLITS], axis=0).tolist() == kept[["a", "b", "rare"]].sum().tolist()
    assert data.class_counts("train") == (_matrix(data.train) == 1).sum(0).tolist()
    again = load_data(DataArguments(dataset_name=str(tmp_path / "d.csv"), label_columns=["a", "b", "rare"]))
    assert again.multi_label and again.train.cache_files == data.train.cache_files  # the prepared folder, mapped


def test_a_separated_text_column_is_multi_label_with_sorted_names(tmp_path):
    genres = ["drama|comedy", "comedy", "horror| drama", "drama"] * 30 + [None] * 5  # empty: a row with no label
    pd.DataFrame({"x": np.arange(125) * 0.1, "genres": genres}).to_csv(tmp_path / "g.csv", index=False)
    data = load_data(DataArguments(dataset_name=str(tmp_path / "g.csv"), label_column="genres", label_separator="|"))
    assert data.multi_label and data.label_names == ["comedy", "drama", "horror"]
    assert not data.dropped and sum(len(getattr(data, s)) for s in SPLITS) == 125  # kept, every entry 0
    assert sum(int((_matrix(getattr(data, s)).sum(1) == 0).sum()) for s in SPLITS) == 5
    assert data.preprocessor.feature_names == ["x"]
    assert np.sum([data.class_counts(s) for s in SPLITS], axis=0).tolist() == [60, 90, 30]


def test_a_json_lines_list_column_is_multi_label_as_names_or_as_0_1_vectors(tmp_path):
    rows = _sentences()
    path = tmp_path / "texts.jsonl"
    pd.DataFrame(rows, columns=["text", "labels"]).to_json(path, orient="records", lines=True)
    data = load_data(DataArguments(dataset_name=str(path)), text=True)
    assert data.multi_label and data.modality == "text" and data.label_names == ["food", "money", "sport"]
    expected = [sum(name in topics for _, topics in rows) for name in data.label_names]
    assert np.sum([data.class_counts(s) for s in SPLITS], axis=0).tolist() == expected
    assert len(data.train[0]["label"]) == 3 and set(data.train.column_names) == {"label", "text"}
    vectors = tmp_path / "vectors.jsonl"
    frame = _table(120)
    frame["y"] = frame[["a", "b", "rare"]].values.tolist()
    frame[["x", "colour", "y"]].to_json(vectors, orient="records", lines=True)
    data = load_data(DataArguments(dataset_name=str(vectors), label_column="y"))
    assert data.multi_label and data.label_names == ["0", "1", "2"]
    assert np.sum([data.class_counts(s) for s in SPLITS], axis=0).tolist() == frame[["a", "b", "rare"]].sum().tolist()


def test_a_list_of_class_label_ids_uses_the_class_names():
    import datasets

    from east_hf.hf.data.pipeline import _prepare

    feature = datasets.Sequence(datasets.ClassLabel(names=["anger", "joy", "fear"]))
    ids = [[0], [1, 2], [1], [], [2, 0]] * 20  # an empty list: a row with no label (all 0), kept
    ds = datasets.Dataset.from_dict(
        {"x": np.arange(100.0).tolist(), "labels": ids},
        features=datasets.Features({"x": datasets.Value("float64"), "labels": feature}),
    )
    data = _prepare(datasets.DatasetDict({"train": ds}), DataArguments(dataset_name="memory"))
    assert data.multi_label and data.label_names == ["anger", "joy", "fear"]
    assert np.sum([data.class_counts(s) for s in SPLITS], axis=0).tolist() == [40, 40, 40]
    assert len(data.train) + len(data.validation) + len(data.test) == 100


# ---- stratified carving ----
@pytest.mark.parametrize("seed", [0, 1, 2, 3, 4])
def test_carving_keeps_a_5_percent_label_in_every_split(tmp_path, seed):
    frame = _table(300, seed=seed)
    frame["rare"] = (np.random.default_rng(seed).permutation(300) < 15).astype(int)  # 5 %, anywhere
    frame.to_csv(tmp_path / "d.csv", index=False)
    data = load_data(DataArguments(dataset_name=str(tmp_path / "d.csv"), label_columns="a,b,rare", split_seed=seed))
    rare = [data.class_counts(s)[2] for s in SPLITS]
    assert sum(rare) == 15 and min(rare) >= 2, rare  # 64 / 16 / 20 % of 15: about 10 / 2 / 3
    assert [len(getattr(data, s)) for s in SPLITS] == [192, 48, 60]


def test_strata_are_each_rows_rarest_positive_label_and_small_ones_merge():
    labels = np.array([[1, 1, 0], [1, 0, 0], [0, 0, 0], [1, 1, 1], [0, 1, 0], [1, 0, 0]], dtype=np.float32)
    # positives: a 4, b 3, c 1 -> rarest first c, b, a; no positive: stratum 3
    assert label_strata(labels).tolist() == [1, 0, 3, 2, 1, 0]
    merged = mergeable_strata(label_strata(labels), 0.5)
    assert np.bincount(merged).min(initial=2) >= 0 and all(np.unique(merged, return_counts=True)[1] >= 2)


# ---- bad input: one line each, before training ----
def test_values_that_are_not_0_1_name_the_column_and_the_values(tmp_path):
    frame = _table()
    frame.loc[[3, 5], "b"] = [2, 7]
    frame.to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(DataError, match=r"label column 'b' holds values that are not 0/1: 2\.0, 7\.0"):
        load_data(DataArguments(dataset_name=str(tmp_path / "d.csv"), label_columns="a,b,rare"))
    frame = _table()
    frame["b"] = frame["b"].map({0: "no", 1: "yes"})
    frame.to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(DataError, match=r"label column 'b' holds values that are not 0/1: 'no', 'yes'"):
        load_data(DataArguments(dataset_name=str(tmp_path / "t.csv"), label_columns="a,b,rare"))


def test_list_rows_of_another_length_are_refused(tmp_path):
    path = tmp_path / "v.jsonl"
    rows = [{"x": i * 0.1, "y": [i % 2, 1 - i % 2, 0]} for i in range(40)]
    rows[6]["y"] = [1, 0]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(
        DataError, match=r"label column 'y' has rows with a different label count: 1 row\(s\) of \[2\]"
    ):
        load_data(DataArguments(dataset_name=str(path), label_column="y"))


def test_a_label_never_positive_or_never_negative_in_training_warns_with_its_f1(tmp_path, caplog):
    frame = _table(100)
    frame["never"] = 0
    frame["always"] = 1
    frame.loc[0, "always"] = None  # an empty entry does not make it negative
    frame.to_csv(tmp_path / "d.csv", index=False)
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        load_data(DataArguments(dataset_name=str(tmp_path / "d.csv"), label_columns="a,never,always"))
    lines = [r.getMessage() for r in caplog.records]
    assert len(lines) == 2
    assert lines[0].startswith("label 'never' (no positive anywhere) never positive in the 64 training rows")
    assert "its predictions are untrained), its F1 will be about 0" in lines[0]
    assert lines[1].startswith("label 'always' (F1 1.000 on validation, 1.000 on test) positive in every training")


def test_a_missing_label_column_names_the_closest(tmp_path):
    _table().to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(DataError, match=r"label column 'rar' not found .*closest: rare"):
        load_data(DataArguments(dataset_name=str(tmp_path / "d.csv"), label_columns="a,b,rar"))
    pd.DataFrame({"x": [1.0] * 4, "tag": ["a|b"] * 4}).to_csv(tmp_path / "t.csv", index=False)
    with pytest.raises(DataError, match=r"label column 'tags' not found .*closest: tag"):
        load_data(DataArguments(dataset_name=str(tmp_path / "t.csv"), label_column="tags", label_separator="|"))


def test_a_separator_in_no_cell_is_refused_naming_the_one_the_cells_hold(tmp_path):
    rows = [(i, "|".join(chosen)) for i, (_, chosen) in enumerate(_sentences(60))]
    pd.DataFrame(rows, columns=["x", "topics"]).to_csv(tmp_path / "d.csv", index=False)
    args = {"dataset_name": str(tmp_path / "d.csv"), "label_column": "topics"}
    with pytest.raises(DataError) as err:
        load_data(DataArguments(**args, label_separator=";"))
    assert str(err.value) == (
        "Expected labels separated by ';' in label column 'topics', got none; the cells hold '|' (e.g. "
        f"{next(t for _, t in rows if '|' in t)!r}): pass --label_separator '|'"
    )
    assert load_data(DataArguments(**args, label_separator="|")).label_names == ["food", "money", "sport"]
    # no separator in any cell: one label per row is a legitimate multi-label set
    pd.DataFrame({"x": range(60), "topics": ["food", "money", "sport"] * 20}).to_csv(tmp_path / "d.csv", index=False)
    data = load_data(DataArguments(**args, label_separator=";"))
    assert data.multi_label and data.label_names == ["food", "money", "sport"]
    assert (_all(data).sum(1) == 1).all()
    # names that hold another separator but share no part with other cells are names, not lists
    pd.DataFrame({"x": range(60), "topics": ["sci/tech", "world", "sports"] * 20}).to_csv(
        tmp_path / "d.csv", index=False
    )
    assert load_data(DataArguments(**args, label_separator="|")).label_names == ["sci/tech", "sports", "world"]


def test_multi_hot_vectors_written_as_text_in_one_label_column_are_refused(tmp_path):
    rng = np.random.default_rng(0)
    vectors = [str(list(v)) for v in rng.integers(0, 2, (80, 4)).tolist()]  # "[1, 0, 0, 1]": what a CSV holds
    pd.DataFrame({"x": range(80), "labels": vectors}).to_csv(tmp_path / "d.csv", index=False)
    with pytest.raises(DataError) as err:
        load_data(DataArguments(dataset_name=str(tmp_path / "d.csv")))
    message = str(err.value)
    assert message.startswith(
        "Expected one class per row in label column 'labels', got values that look like multi-hot vectors written "
        "as text (e.g. '[0, 0, 0, 0]'): "
    )
    assert "--label_columns" in message and "--label_separator" in message and "JSON-lines list" in message
    assert "\n" not in message
    pd.DataFrame({"x": range(4), "labels": ["[0 1]", "[1.0, 0.0]", " [] ", "[1;1]"]}).to_csv(
        tmp_path / "d.csv", index=False
    )
    with pytest.raises(DataError, match="look like multi-hot vectors written as text"):
        load_data(DataArguments(dataset_name=str(tmp_path / "d.csv")))
    # a class name with brackets among others is a class
    pd.DataFrame({"x": range(40), "labels": ["[1, 0]", "other"] * 20}).to_csv(tmp_path / "d.csv", index=False)
    assert load_data(DataArguments(dataset_name=str(tmp_path / "d.csv"))).label_names == ["[1, 0]", "other"]


def test_east_train_refuses_bad_multi_label_data_in_one_line_before_training(tmp_path, capsys):
    from east_hf.scripts.east_train import main

    _table().to_csv(tmp_path / "d.csv", index=False)
    argv = ["--dataset_name", tmp_path / "d.csv", "--label_columns", "a,bb,rare", "--output_dir", tmp_path / "out"]
    err = one_line_error(capsys, main, argv)
    assert "label column 'bb' not found" in err and "closest: b" in err
    err = one_line_error(capsys, main, [*argv[:3], "a,b", "--positive_classes", "a", *argv[4:]])
    assert "positive_classes relabels one class per row" in err


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"label_columns": "a,b", "label_column": "c"}, "Expected label_column or label_columns, got both"),
        ({"label_columns": "a,b", "positive_classes": ["a"]}, "positive_classes relabels one class per row"),
        ({"label_separator": "|", "imbalance_ratio": 0.1}, "imbalance_ratio subsamples by each row's one class"),
        ({"label_columns": "a"}, r"Expected at least 2 label_columns"),
        ({"label_columns": "a,b,a"}, r"Expected each of label_columns once, got \['a'\]"),
        ({"label_columns": "a,b", "feature_columns": ["x", "b"]}, r"feature_columns apart from label_columns"),
        ({"label_columns": "a,b", "label_separator": "|"}, "Expected label_separator with one text label_column"),
        ({"label_separator": ""}, "Expected label_separator to be a non-empty string"),
    ],
)
def test_contradicting_settings_are_refused_by_data_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DataArguments(dataset_name="d.csv", **kwargs)


def test_a_list_column_refuses_positive_classes_and_a_separator_needs_text(tmp_path):
    path = tmp_path / "texts.jsonl"
    pd.DataFrame(_sentences(30), columns=["text", "labels"]).to_json(path, orient="records", lines=True)
    with pytest.raises(DataError, match="positive_classes relabels one class per row"):
        load_data(DataArguments(dataset_name=str(path), positive_classes=["food"]), text=True)
    with pytest.raises(DataError, match="label_separator splits a text column, got label column 'labels'"):
        load_data(DataArguments(dataset_name=str(path), label_separator="|"), text=True)


def test_the_command_line_and_a_recipe_take_label_columns(tmp_path):
    from east_hf.scripts.arguments import EASTArgumentParser

    parsed = EASTArgumentParser().parse(["--dataset_name", "d.csv", "--label_columns", "a,b,c"])
    assert parsed.data.label_columns == ["a", "b", "c"] and parsed.data.multi_label
    recipe = tmp_path / "r.yaml"
    recipe.write_text("dataset_name: d.csv\nlabel_columns: [a, b]\nlabel_separator: null\n")
    assert EASTArgumentParser().parse([str(recipe)]).data.label_columns == ["a", "b"]


# ---- the model ----
def test_models_built_for_multi_label_data_have_the_problem_type_and_one_logit_per_label(tmp_path):
    from transformers import DataCollatorWithPadding

    from east_hf.hf.data.text import tokenize_splits

    _table().to_csv(tmp_path / "d.csv", index=False)
    data = load_data(DataArguments(dataset_name=str(tmp_path / "d.csv"), label_columns="a,b,rare"))
    model, processor, _ = build_model(ModelArguments(hidden_sizes=[8]), data)
    model.eval()  # no dropout: the two losses below see the same logits
    assert model.config.problem_type == MULTI_LABEL and model.config.num_labels == 3
    assert model.config.id2label == {0: "a", 1: "b", 2: "rare"} and model.config.label2id["rare"] == 2
    batch = data.train[:4]
    out = model(input_features=batch["input_features"], labels=batch["labels"])
    reference = torch.nn.functional.binary_cross_entropy_with_logits(out.logits, batch["labels"])
    assert out.logits.shape == (4, 3) and torch.allclose(out.loss, reference)
    masked = batch["labels"].clone()
    masked[0, 0] = -100  # an entry that does not count
    counted = masked != -100
    loss = model(input_features=batch["input_features"], labels=masked).loss
    assert torch.allclose(
        loss, torch.nn.functional.binary_cross_entropy_with_logits(out.logits[counted], masked[counted])
    )

    path = tmp_path / "texts.jsonl"
    pd.DataFrame(_sentences(), columns=["text", "labels"]).to_json(path, orient="records", lines=True)
    text = load_data(DataArguments(dataset_name=str(path), max_length=32), text=True)
    model, tokenizer, _ = build_model(ModelArguments(model_name_or_path="text_tiny"), text, max_length=32)
    assert model.config.problem_type == MULTI_LABEL and model.config.num_labels == 3
    assert list(model.config.id2label.values()) == ["food", "money", "sport"]
    tokenize_splits(text, tokenizer, model, 32)
    batch = DataCollatorWithPadding(tokenizer)([text.train[i] for i in range(4)])
    assert batch["labels"].dtype == torch.float32 and batch["labels"].shape == (4, 3)
    assert model(**batch).logits.shape == (4, 3)
