"""Faults in what a user passes in, each reproduced, now a one-line error, never silence: non-finite training data
never trains, a non-finite validation row is an error and never a stage change, and the smaller input errors (an
unknown metric_for_best_model, narrow integer labels, a beta mapping, bad sample weights, a binary average on three
classes, logits passed as probabilities, empty and -100 labels). The data loader's own refusals (a non-finite CSV row
in validation, a high-cardinality text column) are in test_data.py."""

import pytest
import torch
from helpers import PlainClassifier, TinyTabular, east_args, east_train_error, tiny_run_flags, write_csv

from east_hf import EASTLoss, EASTTrainer
from east_hf.core import hard_confusion_matrix, soft_confusion_matrix
from east_hf.core.loss_registry import CrossEntropySetLoss
from east_hf.hf.data import DataArguments, DataError, load_data
from east_hf.scripts.east_train import _data_line


class _WithBadRow(torch.utils.data.Dataset):
    """A TinyTabular whose row ``row`` holds ``value`` in its first feature."""

    def __init__(self, value: float, row: int, **kwargs):
        self.base = TinyTabular(**kwargs)
        self.base.x[row, 0] = value

    def __len__(self):
        return len(self.base)

    def __getitem__(self, i):
        return self.base[i]


# ---- non-finite training data never trains ----
def test_inf_in_a_csv_feature_is_refused_with_its_column_and_row_count(capsys, tmp_path):
    rows = [f"{'inf' if i in (3, 7) else f'{i * 0.1:.4f}'},{i % 3},{i % 2}" for i in range(60)]
    csv = write_csv(tmp_path / "d.csv", "x,z,y", rows)
    with pytest.raises(DataError, match=r"got inf in the train split: 'x' \(2 rows\)"):
        load_data(DataArguments(dataset_name=str(csv), label_column="y", split_seed=0, test_size=0.1, val_size=0.1))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(f"dataset_name: {csv}\nlabel_column: y\nmodel_name_or_path: tabular_mlp\n")
    err = east_train_error(capsys, [recipe, *tiny_run_flags(tmp_path / "run")])
    assert "inf" in err and "'x'" in err
    assert not (tmp_path / "run" / "model.safetensors").exists()


def test_nan_features_in_the_python_api_stop_training_naming_the_step(tmp_path):
    model = PlainClassifier()
    trainer = EASTTrainer(model=model, args=east_args(tmp_path), train_dataset=_WithBadRow(float("nan"), row=50))
    with pytest.raises(FloatingPointError, match=r"Expected a finite training loss, got NaN or inf at step \d+"):
        trainer.train()
    assert not (tmp_path / "model.safetensors").exists()
    with pytest.raises(FloatingPointError, match="Expected a finite training loss"):
        trainer.save_model()  # never a model after NaN


def test_nan_after_the_last_log_is_caught_at_train_end(tmp_path):
    args = east_args(tmp_path, max_steps=3, logging_steps=50)  # no training log at all
    trainer = EASTTrainer(model=PlainClassifier(), args=args, train_dataset=_WithBadRow(float("inf"), row=40))
    with pytest.raises(FloatingPointError, match="at step"):
        trainer.train()


def test_non_finite_first_batch_fails_in_the_preflight(tmp_path):
    trainer = EASTTrainer(
        model=PlainClassifier(), args=east_args(tmp_path), train_dataset=_WithBadRow(float("inf"), row=0)
    )
    with pytest.raises(ValueError, match="Expected finite logits on the first training batch"):
        trainer.train()


def test_non_finite_grad_norm_and_parameters(tmp_path):
    trainer = EASTTrainer(model=PlainClassifier(), args=east_args(tmp_path), train_dataset=TinyTabular())
    with pytest.raises(FloatingPointError, match="Expected a finite gradient norm, got nan"):
        trainer.log({"loss": 0.5, "grad_norm": float("nan")})
    with torch.no_grad():
        trainer.model.net[0].weight[0, 0] = float("nan")
    with pytest.raises(FloatingPointError, match=r"NaN or inf in 'net.0.weight'.*nothing was written"):
        trainer.save_model(str(tmp_path / "saved"))
    assert not (tmp_path / "saved" / "model.safetensors").exists()


# ---- a non-finite validation row is an error, never a stage change ----
def test_inf_in_a_validation_row_is_an_error_not_a_temperature_drop(tmp_path):
    args = east_args(
        tmp_path,
        east_annealing=True,
        eval_strategy="steps",
        eval_steps=2,
        max_steps=20,
        east_anneal_monitor="eval_loss",
        east_warm_start="none",
        east_ce_weight=0,
    )
    trainer = EASTTrainer(
        model=PlainClassifier(),
        args=args,
        train_dataset=TinyTabular(),
        eval_dataset=_WithBadRow(float("inf"), row=5, n=32, seed=1),
    )
    with pytest.raises(ValueError, match=r"Expected finite logits in evaluation, got NaN or inf in 1 of 16 rows"):
        trainer.train()
    assert trainer.east_stage == 0 and trainer.east_temperature == args.east_temperature


# ---- the smaller cases ----
def test_unknown_metric_for_best_model_is_one_line(tmp_path):
    args = east_args(tmp_path, eval_strategy="steps", eval_steps=5, metric_for_best_model="f2")
    trainer = EASTTrainer(model=PlainClassifier(), args=args, train_dataset=TinyTabular(), eval_dataset=TinyTabular())
    with pytest.raises(
        ValueError,
        match=r"Expected metric_for_best_model among the evaluation metrics "
        r"\(accuracy, fbeta, loss, mcc, precision, recall\), got 'f2'",  # the trainer's own hard metrics
    ):
        trainer.train()


def test_narrow_integer_labels_are_cast():
    logits, labels = torch.randn(12, 3), torch.arange(12) % 3
    for loss in (EASTLoss(num_classes=3), CrossEntropySetLoss()):
        assert torch.allclose(loss(logits, labels.to(torch.uint8)), loss(logits, labels))
    assert torch.equal(hard_confusion_matrix(logits, labels.to(torch.int16)), hard_confusion_matrix(logits, labels))


def test_beta_mapping_resolves_with_class_names():
    loss = EASTLoss(beta={"dog": 2.0}, num_classes=3, class_names=["cat", "dog", "frog"])
    assert loss.beta == [1.0, 2.0, 1.0]
    assert EASTLoss(beta={"1": 2.0}, num_classes=3).beta == [1.0, 2.0, 1.0]
    with pytest.raises(ValueError, match="Expected num_classes"):
        EASTLoss(beta={"dog": 2.0})


def test_negative_or_nan_sample_weight_is_refused():
    logits, labels = torch.randn(4, 2), torch.tensor([0, 1, 0, 1])
    for weight in (torch.tensor([1.0, -0.5, 1.0, 1.0]), torch.tensor([1.0, float("nan"), 1.0, 1.0])):
        with pytest.raises(ValueError, match="Expected every sample_weight finite and >= 0"):
            EASTLoss()(logits, labels, sample_weight=weight)


def test_binary_average_on_three_classes_is_refused(tmp_path):
    with pytest.raises(ValueError, match="Expected 2 classes for average='binary', got 3"):
        EASTLoss(average="binary", num_classes=3)
    with pytest.raises(ValueError, match="Expected 2 classes for average='binary'"):
        EASTLoss(average="binary")(torch.randn(4, 3), torch.tensor([0, 1, 2, 0]))
    from helpers import tiny_vit

    with pytest.raises(ValueError, match="Expected 2 classes for average='binary', got 3"):
        EASTTrainer(model=tiny_vit(3), args=east_args(tmp_path, east_average="binary"))


def test_confusion_matrices_refuse_logits_and_nan_rows():
    logits, labels = torch.tensor([[2.0, -1.0], [0.5, 1.5]]), torch.tensor([0, 1])
    with pytest.raises(ValueError, match=r"Expected probabilities .* \(logits\? pass logits.softmax\(1\)\)"):
        soft_confusion_matrix(logits, labels, 0.2)
    assert (soft_confusion_matrix(logits.softmax(1), labels, 0.2) >= 0).all()
    with pytest.raises(ValueError, match="Expected finite probs_or_logits"):
        hard_confusion_matrix(torch.tensor([[float("nan"), 0.0], [0.0, 1.0]]), labels)


def test_empty_and_minus_100_labels_are_dropped_and_reported(tmp_path):
    rows = [f"{i * 0.1:.2f},{'' if i in (4, 9) else -100 if i == 13 else i % 2}" for i in range(80)]
    csv = write_csv(tmp_path / "d.csv", "x,y", rows)
    data = load_data(DataArguments(dataset_name=str(csv), label_column="y"))
    assert data.label_names == ["0", "1"]  # -100 is no class
    assert data.dropped == {"empty label": 2, "label -100": 1}
    assert len(data.train) + len(data.validation) + len(data.test) == 77
    line = _data_line("d.csv", data)
    assert line.endswith("; dropped 2 rows with an empty label, 1 labelled -100"), line


def test_summary_line_without_dropped_rows_is_unchanged():
    data = load_data(DataArguments(dataset_name="sklearn:iris"))
    assert "dropped" not in _data_line("sklearn:iris", data)
