"""EASTTrainer faults blamed on the right data, ignored rows, and callbacks users add by habit (early stopping), and
what a baseline's logs carry."""

import copy
import re

import pytest
import torch
from helpers import (
    IgnoredRows,
    PlainClassifier,
    TinyTabular,
    annealer,
    annealing_trainer,
    east_args,
    evaluations,
    hard_metrics,
    loss_spy,
)
from transformers import EarlyStoppingCallback

from east_hf import EASTTrainer
from east_hf.hf.config.east_config import EASTConfig

pytestmark = pytest.mark.usefixtures("one_thread")


# ---- faults blamed on the right data ----
def test_inf_in_a_training_row_is_blamed_on_the_training_data_not_the_evaluation(tmp_path):
    """The README quick start with an inf in training row 5 (row 2 onwards escapes the first-batch check). With
    transformers' default logging (every 500 steps) the first evaluation comes before any training log, on weights the
    non-finite loss has already spoilt: the error names the training data and the step, not the evaluation inputs."""
    import datasets
    import numpy as np
    from sklearn.datasets import load_breast_cancer

    from east_hf import build_compute_metrics
    from east_hf.hf.models import TabularMLPConfig, TabularMLPForClassification

    X, y = load_breast_cancer(return_X_y=True)
    X = (X - X.mean(0)) / X.std(0)
    data = datasets.Dataset.from_dict({"input_features": X.astype("float32"), "labels": y}).train_test_split(
        0.25, seed=0
    )
    train = data["train"].to_dict()
    train["input_features"][5][3] = float("inf")
    train = datasets.Dataset.from_dict(train)
    assert np.isfinite(np.asarray(data["test"]["input_features"])).all()
    model = TabularMLPForClassification(TabularMLPConfig(num_features=30, num_labels=2))
    args = EASTConfig(
        output_dir=str(tmp_path),
        num_train_epochs=2,
        learning_rate=1e-3,
        per_device_train_batch_size=128,
        logging_strategy="steps",  # transformers' default: a training log every 500 steps, none before the evaluation
        use_cpu=True,
        report_to=[],
        disable_tqdm=True,
    )
    trainer = EASTTrainer(
        model=model,
        args=args,
        train_dataset=train,
        eval_dataset=data["test"],
        compute_metrics=build_compute_metrics(num_classes=2),
    )
    with pytest.raises(FloatingPointError) as error:
        trainer.train()
    message = str(error.value)
    assert re.fullmatch(
        r"Expected a finite training loss, got NaN or inf at step \d+: check the training data.*", message
    )
    assert "evaluation" not in message


@pytest.mark.parametrize(
    "loss, annealing",
    [
        ("east", dict(east_warm_start="ce", east_warm_start_steps=4, east_ce_weight=1.0)),  # CE, then EAST + CE
        ("east", dict(east_warm_start="none", east_ce_weight=0.0)),
        ("ce", None),
        ("wce", None),
        ("dice", None),
    ],
)
def test_a_training_batch_whose_rows_are_all_ignored_contributes_nothing(tmp_path, loss, annealing):
    # 64 rows in order, 16 a batch: steps 2 and 6 see rows 16-31, all labelled -100.
    data = IgnoredRows(slice(16, 32), n=64)
    more = dict(east_annealing=True, eval_strategy="steps", eval_steps=2, **annealing) if annealing else {}
    args = east_args(
        tmp_path, east_loss=loss, max_steps=8, logging_steps=1, train_sampling_strategy="sequential", **more
    )
    model = PlainClassifier()
    before = copy.deepcopy(model.state_dict())
    spy = loss_spy()
    evaluation = dict(eval_dataset=TinyTabular(32, seed=1), compute_metrics=hard_metrics) if annealing else {}
    trainer = EASTTrainer(model=model, args=args, train_dataset=data, callbacks=[spy], **evaluation)
    spy.trainer = trainer
    trainer.train()
    losses = {h["step"]: h["loss"] for h in trainer.state.log_history if "loss" in h}
    assert sorted(losses) == list(range(1, 9))
    assert losses[2] == losses[6] == 0.0
    assert all(losses[step] > 0 for step in (1, 3, 4, 5, 7, 8)), losses
    assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())  # it trained
    if annealing and annealing["east_warm_start"] == "ce":  # step 2 in the warm start, step 6 on EAST + CE
        assert spy.weights[1] == (-1, None) and spy.weights[5] == (0, 1.0), spy.weights


@pytest.mark.parametrize("loss", ["east", "ce", "dice"])
def test_an_evaluation_set_whose_rows_are_all_ignored_is_refused(tmp_path, loss):
    """A set without labels has no loss and no metric: refused, never an eval_loss of 0 (a perfect model) or NaN."""
    unlabelled = IgnoredRows(slice(None), n=24)
    model = PlainClassifier()
    args = east_args(tmp_path, east_loss=loss)
    trainer = EASTTrainer(model=model, args=args, train_dataset=TinyTabular(), eval_dataset=unlabelled)
    expected = r"Expected labelled rows in the {} set, got none: every label is the ignore_index -100"
    with pytest.raises(ValueError, match=expected.format("eval")):
        trainer.evaluate()
    predicted = trainer.predict(unlabelled)  # placeholder labels: predictions without a loss
    assert predicted.predictions.shape == (24, 3) and "test_loss" not in predicted.metrics
    partly = IgnoredRows(slice(0, 16), n=24)  # a batch of ignored rows, then one of labelled rows
    with torch.no_grad():
        labelled = trainer.east_loss(model(partly.x[16:]), partly.y[16:]).item()
    assert trainer.evaluate(partly)["eval_loss"] == pytest.approx(labelled, rel=1e-5)


# ---- callbacks users add by habit, and what a baseline's logs carry ----
def test_an_early_stopping_callback_beside_the_annealing_is_refused_in_one_line(tmp_path):
    """transformers' EarlyStoppingCallback would end training inside stage 0 (its patience on metric_for_best_model),
    before the annealing's own stopping criterion: refused in __init__ (an instance or the class) and in add_callback,
    naming EAST's early stopping."""
    message = (
        r"^Expected no EarlyStoppingCallback with temperature annealing "
        r"\(EAST's early stopping is east_patience within a stage and east_stage_patience across stages\), "
        r"got EarlyStoppingCallback; remove it, or set "
        r"east_annealing=False to make it the only early stopping$"
    )
    for callback in (EarlyStoppingCallback(2), EarlyStoppingCallback):
        with pytest.raises(ValueError, match=message):
            annealing_trainer(tmp_path, callbacks=[callback])
    trainer = annealing_trainer(tmp_path)
    with pytest.raises(ValueError, match=message):
        trainer.add_callback(EarlyStoppingCallback(2))
    assert not any(isinstance(c, EarlyStoppingCallback) for c in trainer.callback_handler.callbacks)
    trainer.train()  # the annealing alone runs through its stages to its own stop
    schedule = annealer(trainer).schedule
    assert schedule.finished and schedule.stage >= 2 and trainer.state.global_step < trainer.args.max_steps


def test_an_early_stopping_callback_without_annealing_is_the_runs_early_stopping(tmp_path):
    trainer = annealing_trainer(tmp_path, callbacks=[EarlyStoppingCallback(2)], east_annealing=False)
    assert trainer.annealing is None
    trainer.train()
    assert trainer.state.global_step < trainer.args.max_steps  # EarlyStoppingCallback ended it


@pytest.mark.parametrize("loss", ["ce", "la", "dice"])
def test_baseline_logs_carry_no_temperature_and_binary_runs_report_precision_once(tmp_path, loss):
    """A baseline has no temperature: no east_temperature in its logs, and east_stage only where a warm start makes
    stages (Dice's is stage -1). A binary run reports precision, recall and F-beta once, under the averaged keys the
    model card reads (not again under the positive class's name)."""
    from east_hf.hf.metrics import build_compute_metrics

    torch.manual_seed(0)
    args = east_args(
        tmp_path, east_loss=loss, east_average="binary", east_annealing=True, eval_strategy="steps", eval_steps=2,
        logging_steps=2, max_steps=8, east_warm_start_steps=2,
    )  # fmt: skip
    trainer = EASTTrainer(
        model=PlainClassifier(num_classes=2),
        args=args,
        train_dataset=TinyTabular(64, num_classes=2),
        eval_dataset=TinyTabular(32, num_classes=2, seed=1),
        compute_metrics=build_compute_metrics(2, average="binary", id2label={0: "negative", 1: "positive"}),
    )
    trainer.train()
    logs = trainer.state.log_history
    assert logs and not any("east_temperature" in h for h in logs)
    stages = [h.get("east_stage") for h in evaluations(trainer)]
    assert stages == ([-1, 0, 0, 0] if loss == "dice" else [None] * 4)
    keys = set(evaluations(trainer)[0])
    assert {"eval_fbeta", "eval_precision", "eval_recall"} <= keys
    assert not [k for k in keys if k.startswith(("eval_precision_", "eval_recall_", "eval_fbeta_"))]


def test_a_kept_model_that_finds_almost_none_of_a_scored_class_is_warned_about(caplog):
    """The best checkpoint's validation recall of the positive class (binary) or of a class reported by name below
    0.05 warns in one line naming the step and the recall; a healthy recall, another average or a step without an
    evaluation does not."""
    from east_hf.hf.training.kept_model_warnings import warn_near_empty_kept_model

    history = [
        {"loss": 0.5, "step": 10},
        {"eval_loss": 0.8, "eval_fbeta": 0.28, "eval_recall": 0.024, "eval_recall_cat": 0.3, "step": 10},
        {"eval_loss": 0.7, "eval_fbeta": 0.2, "eval_recall": 0.2, "eval_recall_cat": 0.01, "step": 20},
    ]
    message = warn_near_empty_kept_model(history, 10, binary=True)
    assert "step 10" in message and "recall=0.024" in message and "recall_cat" not in message
    assert warn_near_empty_kept_model(history, 10, binary=False) is None  # a macro recall says nothing of one class
    assert "recall_cat=0.010" in warn_near_empty_kept_model(history, 20, binary=False)
    assert warn_near_empty_kept_model(history, 30, binary=True) is None
    assert warn_near_empty_kept_model(history, None, binary=True) is None


class _NeverClassTwo(PlainClassifier):
    """A classifier whose class 2 logit is far below the others whatever it learns: it never predicts class 2."""

    def forward(self, input_values):
        logits = super().forward(input_values)
        return logits - torch.tensor([0.0, 0.0, 1e4])


class _OnlyClassZero(PlainClassifier):
    """A classifier whose class 0 logit is far above the others whatever it learns: it predicts class 0 only."""

    def forward(self, input_values):
        logits = super().forward(input_values)
        return logits + torch.tensor([1e4, 0.0, 0.0])


@pytest.mark.parametrize(
    "model", [_NeverClassTwo, PlainClassifier, _OnlyClassZero], ids=["dead_class", "healthy", "one_class"]
)
def test_a_kept_model_that_never_predicts_a_class_is_warned_about(tmp_path, caplog, model):
    """With the trainer's own metrics, the best checkpoint's validation predictions are counted per class: a class
    with validation samples that the kept model never predicts is named in one warning, with its samples."""
    import logging

    from helpers import blobs

    torch.manual_seed(0)
    validation = blobs(48, 1)
    args = east_args(
        tmp_path, max_steps=12, eval_strategy="steps", eval_steps=4, save_strategy="steps", save_steps=4,
        load_best_model_at_end=True, metric_for_best_model="fbeta", learning_rate=0.05,
    )  # fmt: skip
    trainer = EASTTrainer(model=model(), args=args, train_dataset=blobs(64, 0), eval_dataset=validation)
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        trainer.train()
    warned = [r.getMessage() for r in caplog.records if "never predicts a class" in r.getMessage()]
    if model is _OnlyClassZero:
        one = [
            r.getMessage() for r in caplog.records if "predicts one class for every validation row" in r.getMessage()
        ]
        assert warned == [] and len(one) == 1 and "2 other classes have validation samples (1 (" in one[0]
        return
    if model is PlainClassifier:
        assert warned == []
        return
    samples = int((validation.y == 2).sum())
    assert samples > 0 and len(warned) == 1
    assert f"step {trainer.state.best_global_step}" in warned[0] and f": 2 ({samples} samples);" in warned[0]


def test_the_unpredicted_classes_warning_names_ten_classes_and_counts_the_rest():
    from east_hf.hf.training.kept_model_warnings import UNPREDICTED_NAMED, warn_unpredicted_kept_classes

    record = {8: [(k, 2) for k in range(25)], 12: []}
    message = warn_unpredicted_kept_classes(record, 8, {0: "cat"})
    assert "\n" not in message and "cat (2 samples), 1 (2 samples)" in message
    assert f"{UNPREDICTED_NAMED - 1} (2 samples) and {25 - UNPREDICTED_NAMED} more classes;" in message
    assert warn_unpredicted_kept_classes(record, 12, None) is None  # every class predicted at the kept step
    assert warn_unpredicted_kept_classes(record, None, None) is None


def test_a_kept_model_that_predicts_one_class_for_every_row_is_named_so_with_what_to_try():
    from east_hf.hf.training.kept_model_warnings import warn_unpredicted_kept_classes

    record = {8: [(1, 30), (2, 4)]}
    message = warn_unpredicted_kept_classes(record, 8, {0: "none", 1: "minor", 2: "major"}, supported={8: 3})
    assert "\n" not in message and "predicts one class for every validation row" in message
    assert "2 other classes have validation samples (minor (30 samples), major (4 samples))" in message
    assert "east_warm_start_epochs -1" in message
    # three classes with samples, one of them predicted besides: the classes-never-predicted line
    assert "never predicts a class" in warn_unpredicted_kept_classes(record, 8, None, supported={8: 4})
    assert "never predicts a label" in warn_unpredicted_kept_classes(record, 8, None, True, {8: 3})


@pytest.mark.parametrize("labels", [["cat", "dog"], ["[1, 0]", "[0, 1]"]], ids=["names", "vectors_as_text"])
def test_a_label_column_of_strings_is_one_line_before_training(tmp_path, labels):
    """A ``datasets.Dataset`` whose labels are strings (class names, or multi-hot rows written as text) is refused in
    one line naming the column's type and a value, not a numpy TypeError from counting the classes."""
    import datasets

    from east_hf.hf.models import TabularMLPConfig, TabularMLPForClassification

    ds = datasets.Dataset.from_dict({"input_features": [[0.0, 1.0]] * 8, "labels": labels * 4})
    model = TabularMLPForClassification(TabularMLPConfig(num_features=2, num_labels=2, hidden_sizes=[4]))
    args = EASTConfig(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    with pytest.raises(ValueError, match=rf"got a column of string \(e\.g\. {re.escape(repr(labels[0]))}\)") as e:
        EASTTrainer(model, args, train_dataset=ds, eval_dataset=ds)
    assert "\n" not in str(e.value) and "class_encode_column" in str(e.value)
