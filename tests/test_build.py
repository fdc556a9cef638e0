"""The builder (east_hf.hf.config.build) and the config as data: one home for every default, nothing built by the
config, and a bare EASTTrainer that evaluates, anneals and keeps the best model with no extra wiring."""

from __future__ import annotations

import inspect
import logging

import numpy as np
import pytest
import torch
from helpers import PlainClassifier, blobs, tiny_vit
from sklearn.metrics import accuracy_score, f1_score, matthews_corrcoef

from east_hf import EASTConfig, EASTLoss, EASTTrainer
from east_hf.core.annealing import AnnealingSchedule
from east_hf.hf.config.build import build_components
from east_hf.hf.config.fields import LOSS_FIELDS, OWN_DEFAULTS, SCHEDULE_FIELDS


def _config_default(name: str):
    return EASTConfig.__dataclass_fields__[name].default


@pytest.mark.parametrize(
    "fields, owner", [(LOSS_FIELDS, EASTLoss), (SCHEDULE_FIELDS, AnnealingSchedule)], ids=["loss", "schedule"]
)
def test_the_config_defaults_are_the_core_objects_defaults(fields, owner):
    signature = inspect.signature(owner).parameters
    shared = {name: param for name, param in fields.items() if name not in OWN_DEFAULTS}
    assert shared, "every field of the table is the config's own"
    for name, param in shared.items():
        assert _config_default(name) == signature[param].default, name


def test_the_config_own_defaults_are_what_the_trainer_layer_trains_by_default():
    """OWN_DEFAULTS differ from the core's on purpose: the core's default is the paper's letter."""
    loss, schedule = inspect.signature(EASTLoss).parameters, inspect.signature(AnnealingSchedule).parameters
    assert (_config_default("east_beta_floor"), loss["beta_floor"].default) == (1.0, 0.0)
    assert (_config_default("east_warm_start"), schedule["warm_start"].default) == ("ce", "none")
    assert (_config_default("east_ce_weight"), schedule["ce_weight"].default) == (None, 0.0)  # None: 1 for EAST
    assert (_config_default("east_lr_decay"), schedule["lr_decay"].default) == (None, 1.0)  # None: 0.5 binary EAST


def test_the_config_is_data_and_builds_nothing():
    public_methods = [
        name
        for name, value in vars(EASTConfig).items()
        if callable(value) and not name.startswith("_") and not isinstance(value, type)
    ]
    assert public_methods == []
    derived = {name for name, value in vars(EASTConfig).items() if isinstance(value, property)}
    assert derived == {
        "resolved_ce_weight",
        "resolved_ce_loss",
        "resolved_lr_decay",
        "east_anneal_key",
        "east_selection_key",
        "east_target_key",
    }


def test_the_builder_makes_each_part_once_from_the_config(tmp_path):
    args = EASTConfig(output_dir=str(tmp_path), report_to=[])
    parts = build_components(args, tiny_vit(), train_dataset=None, eval_dataset=None)
    assert isinstance(parts.loss, EASTLoss) and parts.loss.temperature == args.east_temperature
    assert parts.ce_loss.name == "ce"  # no training set to count the priors of: the plain cross-entropy (no warning)
    assert parts.mixed_loss.cross_entropy is parts.ce_loss
    assert parts.annealing.schedule.ce_weight0 == 1.0 and parts.annealing.anneal_monitor == "eval_fbeta"
    assert parts.compute_metrics.num_classes == 3 and parts.num_classes == 3
    own = object()
    mine = build_components(args, tiny_vit(), callbacks=[parts.annealing], compute_metrics=own)
    assert mine.annealing is None and mine.compute_metrics is None  # the caller's own are kept


def test_load_best_model_at_end_follows_the_strategies_unless_set(tmp_path, caplog):
    out = str(tmp_path)
    default = EASTConfig(output_dir=out, report_to=[])
    assert default.load_best_model_at_end and default.metric_for_best_model == "eval_fbeta"
    with caplog.at_level(logging.INFO, logger="east_hf.hf.config.east_config"):
        no_saves = EASTConfig(output_dir=out, report_to=[], eval_strategy="steps", eval_steps=5, save_strategy="no")
    assert no_saves.load_best_model_at_end is False and no_saves.metric_for_best_model is None
    assert "load_best_model_at_end=False" in caplog.text
    steps = EASTConfig(output_dir=out, report_to=[], eval_strategy="steps", eval_steps=5)
    assert (steps.load_best_model_at_end, steps.save_strategy, steps.save_steps) == (True, "steps", 5)
    differ = EASTConfig(output_dir=out, report_to=[], eval_strategy="epoch", save_strategy="steps", save_steps=7)
    assert differ.load_best_model_at_end is False
    best = EASTConfig(output_dir=out, report_to=[], eval_strategy="steps", eval_steps=5, save_strategy="best")
    assert best.load_best_model_at_end is True
    with pytest.raises(ValueError, match="load_best_model_at_end requires the save and eval strategy to match"):
        EASTConfig(
            output_dir=out, report_to=[], eval_strategy="steps", save_strategy="no", load_best_model_at_end=True
        )


@pytest.mark.parametrize("model_kind", ["plain", "config"])
def test_a_bare_trainer_evaluates_anneals_and_keeps_the_best_model(tmp_path, model_kind):
    """No compute_metrics: the trainer reports its target's hard metrics, the annealing reads them, the best model is
    loaded, and eval_fbeta is scikit-learn's macro F1 of the same predictions."""
    torch.manual_seed(0)
    args = EASTConfig(
        output_dir=str(tmp_path),
        report_to=[],
        use_cpu=True,
        num_train_epochs=12,  # a short run: the warm start, then short stages
        east_patience=1,
        east_threshold=0.1,  # a stage ends once its validation loss gains less than 10 %
        east_warm_start_epochs=1,
        east_ema_decay=0.8,  # evaluate and keep a moving average of the weights, about an epoch long here
        learning_rate=1e-2,
        per_device_train_batch_size=16,
        disable_tqdm=True,
    )
    if model_kind == "plain":
        model, train, validation = PlainClassifier(), blobs(96, 0), blobs(60, 1)
    else:
        from helpers import TinyImages

        model, train, validation = tiny_vit(), TinyImages(96, seed=0), TinyImages(60, seed=1)
    trainer = EASTTrainer(model=model, args=args, train_dataset=train, eval_dataset=validation)
    before = [p.detach().clone() for p in trainer.model.parameters()]
    trainer.train()
    assert any(not torch.equal(a, b.detach()) for a, b in zip(before, trainer.model.parameters()))  # it learned
    evaluations = [h for h in trainer.state.log_history if "eval_fbeta" in h]
    assert len(evaluations) >= 3 and max(h["east_stage"] for h in evaluations) >= 1  # it annealed
    assert trainer.state.best_model_checkpoint is not None  # the best model was kept
    metrics = trainer.evaluate()
    assert {"eval_fbeta", "eval_mcc", "eval_accuracy", "eval_precision", "eval_recall"} <= set(metrics)
    output = trainer.predict(validation)
    predictions, labels = np.argmax(output.predictions, axis=1), output.label_ids
    assert metrics["eval_fbeta"] == pytest.approx(f1_score(labels, predictions, average="macro"), abs=1e-12)
    assert metrics["eval_mcc"] == pytest.approx(matthews_corrcoef(labels, predictions), abs=1e-12)
    assert metrics["eval_accuracy"] == pytest.approx(accuracy_score(labels, predictions), abs=1e-12)
    assert metrics["eval_fbeta"] == pytest.approx(trainer.state.best_metric, abs=1e-12)  # the best model, loaded
