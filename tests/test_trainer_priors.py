"""EASTTrainer class priors: streams with and without given priors, and counting without running transforms."""

import copy
import logging

import pytest
import torch
from helpers import (
    PlainClassifier,
    TinyTabular,
    annealer,
    blobs,
    east_args,
    evaluations,
    hard_metrics,
    tiny_vit,
)

from east_hf import EASTTrainer

pytestmark = pytest.mark.usefixtures("one_thread")


# ---- class priors: streams, and counting without transforms ----
class _Stream(torch.utils.data.IterableDataset):
    """The rows of a map-style data set, in order, as a stream without a length (as ``streaming=True`` gives)."""

    def __init__(self, data):
        self.data = data

    def __iter__(self):
        return (self.data[i] for i in range(len(self.data)))


def test_la_on_an_iterable_dataset_with_given_priors_equals_the_map_style_run(tmp_path):
    """``east_class_priors`` makes a stream trainable with ``la``: the same rows in the same order give the same losses
    and the same final weights as the map-style run, which counts its own priors."""
    data = TinyTabular(32)
    counts = torch.bincount(data.y, minlength=3)
    priors = (counts / counts.sum()).tolist()  # probabilities, where the map-style run counts
    runs = {}
    for name, train, given in (("map", data, None), ("stream", _Stream(data), priors)):
        torch.manual_seed(0)
        model = PlainClassifier()
        before = copy.deepcopy(model.state_dict())
        args = east_args(
            tmp_path / name, east_loss="la", east_class_priors=given, max_steps=8, logging_steps=1,
            per_device_train_batch_size=8, train_sampling_strategy="sequential",  # the stream's order
        )  # fmt: skip
        trainer = EASTTrainer(model=model, args=args, train_dataset=train)
        trainer.train()
        assert any(not torch.equal(before[k], v) for k, v in model.state_dict().items())  # it trained
        losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
        runs[name] = (trainer.east_loss.logit_adjustment, losses, model.state_dict())
    (map_adjustment, map_losses, map_weights), (adjustment, losses, weights) = runs["map"], runs["stream"]
    torch.testing.assert_close(adjustment, map_adjustment)
    assert len(losses) == 8 and losses == pytest.approx(map_losses, rel=1e-6)
    for key, value in weights.items():
        torch.testing.assert_close(value, map_weights[key])


@pytest.mark.parametrize("overrides", [{"east_loss": "la"}, {"east_loss": "wce"}])
def test_a_prior_loss_on_an_iterable_dataset_without_priors_names_east_class_priors(tmp_path, overrides):
    args = east_args(tmp_path, **overrides)
    expected = (
        r"^Expected east_class_priors \(class counts or priors: a list, a \{class: count\} mapping or a \.json / "
        r"\.csv file\) for 'wce' / 'la' with a training set that cannot be counted, got a _Stream without a length$"
    )
    with pytest.raises(ValueError, match=expected):
        EASTTrainer(model=PlainClassifier(), args=args, train_dataset=_Stream(TinyTabular(16)))


def test_the_default_trains_on_an_iterable_dataset_with_and_without_priors(tmp_path, caplog):
    """The default (EAST + the annealed logit-adjusted cross-entropy, a 2-epoch warm start) on a stream: the warm
    start runs until its own early stopping (an epoch has no known length) and, without ``east_class_priors``, the
    cross-entropy is the plain one; each fallback says so in one warning. With priors the adjustment is theirs; with
    ``east_warm_start_steps`` the warm start has that length."""
    settings = dict(
        east_annealing=True, eval_strategy="steps", eval_steps=2, logging_steps=2, learning_rate=0.05,
        east_decay=0.5, east_patience=2, max_steps=16,
    )  # fmt: skip

    def stream_trainer(**overrides):
        torch.manual_seed(0)
        args = east_args(tmp_path / str(len(overrides)), **{**settings, **overrides})
        stream = _Stream(blobs(64, 0))
        return EASTTrainer(
            PlainClassifier(), args, train_dataset=stream, eval_dataset=blobs(48, 1), compute_metrics=hard_metrics
        )

    with caplog.at_level(logging.WARNING, logger="east_hf"):
        plain = stream_trainer(max_steps=60)
    warnings = [r.getMessage() for r in caplog.records]
    assert any(w.startswith("east_ce_loss='la' without class priors") for w in warnings), warnings
    assert any(w.startswith("east_warm_start_epochs=2 on a training set without a length") for w in warnings)
    assert plain.warm_start_loss.name == "ce" and plain.warm_start_loss.logit_adjustment is None
    assert annealer(plain).schedule.warm_start_epochs is None  # until its own early stopping
    before = {k: v.clone() for k, v in plain.model.state_dict().items()}
    plain.train()
    assert any(not torch.equal(before[k], v) for k, v in plain.model.state_dict().items())  # it trained
    assert {h["east_stage"] for h in evaluations(plain)} >= {-1, 0}  # the warm start, then EAST
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="east_hf"):
        given = stream_trainer(east_class_priors=[2, 1, 1], east_warm_start_steps=4)
    assert not [r for r in caplog.records if "without" in r.getMessage()]  # priors and a length: nothing to say
    torch.testing.assert_close(given.warm_start_loss.logit_adjustment, torch.tensor([0.5, 0.25, 0.25]).log())
    given.train()
    assert [h["east_stage"] for h in evaluations(given)][:3] == [-1, -1, 0]  # the warm start's 4 steps, then EAST


def test_counts_of_an_image_dataset_with_a_transform_read_the_label_column_only(tmp_path):
    """A ``datasets.Dataset`` with ``set_transform`` is counted from its label column: the transform (which would
    decode and augment every image) never runs, and a selection (an indices mapping) counts its own rows."""
    import datasets
    import numpy as np
    from PIL import Image

    from east_hf.hf.training.trainer import training_class_counts

    labels = [0, 1, 1, 2, 0, 1, 1, 1]
    images = [Image.fromarray(np.full((16, 16, 3), 30 * k, dtype=np.uint8)) for k in range(len(labels))]
    features = datasets.Features(
        {"image": datasets.Image(), "label": datasets.ClassLabel(names=["cat", "dog", "frog"])}
    )
    dataset = datasets.Dataset.from_dict({"image": images, "label": labels}, features=features)

    def transform(batch):
        raise AssertionError("the transform ran while counting classes")

    dataset.set_transform(transform)
    assert training_class_counts(dataset, 3) == [2, 5, 1]
    assert training_class_counts(dataset.select([0, 3, 4]), 3) == [2, 0, 1]  # a selection's own rows
    trainer = EASTTrainer(model=tiny_vit(3), args=east_args(tmp_path, east_loss="wce"), train_dataset=dataset)
    torch.testing.assert_close(trainer.east_loss.class_weight, torch.tensor([8 / 6, 8 / 15, 8 / 3]))


# ---- labels checked before the priors are counted (the default loss counts them) ----
class _Relabelled(TinyTabular):
    """TinyTabular with its labels replaced (any dtype, any values)."""

    def __init__(self, labels, **kwargs):
        super().__init__(n=len(labels), **kwargs)
        self.y = labels


@pytest.mark.parametrize(
    "labels, message",
    [
        (torch.tensor([0, 1, 2, 8] * 4), r"Expected labels in \[0, 2\] \(or ignore_index=-100\), got 8"),
        (torch.tensor([0, 1, 2, -3] * 4), "Expected labels >= 0 \\(or -100, ignored\\) in the training set, got -3"),
        (torch.tensor([0.0, 1.0, 2.0, 1.0] * 4), "Expected integer class labels in the training set, got dtype"),
    ],
    ids=["out_of_range", "negative", "float"],
)
def test_bad_training_labels_are_one_line_before_the_default_counts_its_priors(tmp_path, labels, message):
    with pytest.raises(ValueError, match=message):  # when the trainer is made, or (C unknown) before the first step
        EASTTrainer(model=PlainClassifier(), args=east_args(tmp_path), train_dataset=_Relabelled(labels)).train()


def test_a_class_absent_from_training_or_validation_is_named_in_a_warning(tmp_path, caplog):
    from datasets import Dataset

    def table(labels):
        return Dataset.from_dict({"pixel_values": torch.zeros(len(labels), 3, 16, 16).tolist(), "labels": labels})

    train, validation = table([0, 1, 0, 1, 0, 1]), table([0, 0, 1, 1])  # the model has a third class: frog
    with caplog.at_level(logging.WARNING, logger="east_hf.hf.config.build"):
        EASTTrainer(model=tiny_vit(), args=east_args(tmp_path), train_dataset=train, eval_dataset=validation)
    lines = [r.getMessage() for r in caplog.records]
    assert any(line.startswith("1 class(es) without a training sample (frog)") for line in lines), lines
    assert any(line.startswith("1 class(es) without a validation sample (frog)") for line in lines), lines


def test_an_explicit_prior_cross_entropy_on_a_stream_without_priors_is_refused(tmp_path):
    """The default falls back to the plain cross-entropy on a stream (with a warning); a user's explicit choice is
    refused, since it cannot be honoured."""
    args = east_args(tmp_path, east_ce_loss="la")
    with pytest.raises(ValueError, match="Expected east_class_priors for east_ce_loss='la' on a training set without"):
        EASTTrainer(model=PlainClassifier(), args=args, train_dataset=_Stream(TinyTabular(32)))
    given = east_args(tmp_path, east_ce_loss="la", east_class_priors=[0.5, 0.3, 0.2])
    trainer = EASTTrainer(model=PlainClassifier(), args=given, train_dataset=_Stream(TinyTabular(32)))
    assert trainer.warm_start_loss.name == "la"
