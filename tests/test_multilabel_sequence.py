"""Multi-label labels as lists of label ids, the layout of go_emotions and most Hub multi-label sets
(``Sequence(ClassLabel(...))``, or ``Sequence(Value("int64"))``): EASTTrainer turns a training or evaluation set of
them into multi-hot rows of the model's labels and trains on it; ``multi_hot_labels`` does the same for a pipeline of
the user's; a layout it cannot turn is one line saying what to do."""

import datasets
import numpy as np
import pytest
import torch
from helpers import east_args
from sklearn.metrics import f1_score

from east_hf import EASTTrainer
from east_hf.hf.data.multi_hot import multi_hot_labels
from east_hf.hf.models import TabularMLPConfig, TabularMLPForClassification

pytestmark = pytest.mark.usefixtures("one_thread")

F, NAMES = 6, ["joy", "anger", "fear"]
EMOTIONS = datasets.ClassLabel(names=NAMES)


def _rows(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """(X (n, F), Y (n, 3) bool): three labels of a fixed linear map plus noise, at about 20 %, 35 % and 50 %."""
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, F)).astype(np.float32)
    W = np.random.default_rng(7).normal(size=(F, len(NAMES)))
    return X, X @ W + np.array([-1.5, -0.6, 0.0]) + rng.normal(scale=0.5, size=(n, len(NAMES))) > 0


def _ids(X: np.ndarray, Y: np.ndarray, inner=EMOTIONS) -> datasets.Dataset:
    """A set whose ``labels`` holds each row's list of label ids, as go_emotions does."""
    features = datasets.Features(
        {"input_features": datasets.List(datasets.Value("float32")), "labels": datasets.Sequence(inner)}
    )
    rows = {"input_features": X.tolist(), "labels": [np.flatnonzero(y).tolist() for y in Y]}
    return datasets.Dataset.from_dict(rows, features=features).with_format("torch")


def _model(num_labels: int = len(NAMES)):
    torch.manual_seed(0)
    config = TabularMLPConfig(
        num_features=F, num_labels=num_labels, hidden_sizes=[32], problem_type="multi_label_classification"
    )
    return TabularMLPForClassification(config)


def test_a_sequence_of_class_labels_trains_as_multi_label(tmp_path):
    (X, Y), (Xv, Yv) = _rows(400, 0), _rows(200, 1)
    args = east_args(
        tmp_path, per_device_train_batch_size=64, per_device_eval_batch_size=256, max_steps=-1, num_train_epochs=10,
        eval_strategy="epoch", save_strategy="epoch", load_best_model_at_end=True, east_annealing=True,
        east_warm_start_epochs=2, east_patience=1, east_stage_monitor="eval_fbeta", logging_strategy="epoch",
    )  # fmt: skip
    model = _model()
    before = [p.detach().clone() for p in model.parameters()]
    trainer = EASTTrainer(model, args, train_dataset=_ids(X, Y), eval_dataset=_ids(Xv, Yv))
    assert trainer.multi_label
    assert trainer.train_dataset.features["labels"] == datasets.List(datasets.Value("float32"), length=3)
    trainer.train()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))  # it learned
    metrics = trainer.evaluate()
    with torch.no_grad():
        predicted = (model(input_features=torch.as_tensor(Xv)).logits > 0).numpy()
    assert metrics["eval_fbeta"] == pytest.approx(f1_score(Yv, predicted, average="macro", zero_division=0))
    assert metrics["eval_fbeta"] > 0.6


def test_a_sequence_of_integer_ids_is_read_with_the_models_labels(tmp_path):
    (X, Y), (Xv, Yv) = _rows(64, 0), _rows(40, 1)
    ints = datasets.Value("int64")
    trainer = EASTTrainer(
        _model(), east_args(tmp_path), train_dataset=_ids(X, Y, ints), eval_dataset=_ids(Xv, Yv, ints)
    )
    labels = trainer.eval_dataset["labels"][:]  # (40, 3)
    assert trainer.multi_label and torch.equal(labels, torch.as_tensor(Yv, dtype=torch.float32))
    trainer.train()
    assert {"eval_fbeta", "eval_jaccard"} <= set(trainer.evaluate())


def test_the_helper_converts_splits_and_keeps_multi_hot_integers_as_floats():
    splits = datasets.DatasetDict(
        train=datasets.Dataset.from_dict({"labels": [[0, 2], [], None]}, features=datasets.Features(
            {"labels": datasets.Sequence(EMOTIONS)})),
        test=datasets.Dataset.from_dict({"labels": [[1], [0, 1, 2]]}, features=datasets.Features(
            {"labels": datasets.Sequence(EMOTIONS)})),
    )  # fmt: skip
    out = multi_hot_labels(splits)
    assert out["train"]["labels"][:] == [[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [-100.0, -100.0, -100.0]]
    assert out["test"]["labels"][:] == [[0.0, 1.0, 0.0], [1.0, 1.0, 1.0]]
    multi_hot = datasets.Dataset.from_dict({"label": [[0, 1, 1], [1, 0, 0]]})  # every row L entries of 0/1
    assert multi_hot_labels(multi_hot, num_labels=3)["label"][:] == [[0.0, 1.0, 1.0], [1.0, 0.0, 0.0]]
    ids = datasets.Dataset.from_dict({"label": [[2], [0, 1]]})  # other lengths: label ids
    assert multi_hot_labels(ids, num_labels=3)["label"][:] == [[0.0, 0.0, 1.0], [1.0, 1.0, 0.0]]


@pytest.mark.parametrize(
    "labels, inner, num_labels, message",
    [
        ([[0], [2]], EMOTIONS, 4, "Expected the model's 4 labels (config.num_labels) to match the 3 names of the "
         "ClassLabel in label column 'labels': make the model with num_labels=3"),
        ([[0], [3]], datasets.Value("int64"), 3, "Expected label ids in [0, 2] in label column 'labels' (3 labels), "
         "got 3: give the model as many labels (config.num_labels) as the data has"),
    ],
)  # fmt: skip
def test_ids_the_model_cannot_hold_are_one_line(tmp_path, labels, inner, num_labels, message):
    features = datasets.Features(
        {"input_features": datasets.List(datasets.Value("float32")), "labels": datasets.Sequence(inner)}
    )
    data = datasets.Dataset.from_dict({"input_features": [[0.0] * F] * 2, "labels": labels}, features=features)
    with pytest.raises(ValueError) as error:
        EASTTrainer(_model(num_labels), east_args(tmp_path), train_dataset=data)
    assert str(error.value) == message


def test_label_names_in_lists_say_to_map_them_to_ids():
    names = datasets.Dataset.from_dict({"labels": [["joy"], ["fear", "anger"]]})
    with pytest.raises(ValueError, match=r"got lists of string: map label names to ids first"):
        multi_hot_labels(names, num_labels=3)
