"""east_hf: EAST (Evaluation Aligned Surrogate Training) for the Hugging Face Trainer and timm.

Three layers, each importing only from the ones before it:

- ``east_hf.core``: pure torch. The soft confusion matrix, the metrics, the losses, the annealing schedule and the
  decision-rule tuner. Importing it loads neither transformers, timm nor evaluate.
- ``east_hf.hf``: the Hugging Face layer. ``EASTConfig`` / ``EASTTrainer``, the annealing callback, model cards, the
  evaluate modules and ``compute_metrics`` (``east_hf.hf.metrics``), timm / transformers models
  (``east_hf.hf.models``) and data loading (``east_hf.hf.data``).
- ``east_hf.scripts``: the command-line scripts ``east-train``, ``east-compare``, ``east-predict`` and
  ``east-cache`` and their argument parsing.

The names below are loaded on first access, so ``import east_hf`` imports nothing heavy (torch loads with the first
core name, transformers with the first name of the Hugging Face layer): the console scripts, whose modules import
``east_hf`` first, answer a Ctrl-C while torch loads in one line. Everything else is imported from its layer
(``east_hf.hf.training.trainer``, ``east_hf.core.loss_registry``, ...).

Our architectures are registered where they are defined: importing ``east_hf.hf.models`` (which the trainer and
``east-train`` do) registers ``darknet19`` / ``darknet19_tiny`` in timm's registry and the tabular MLP with
transformers' ``AutoConfig`` / ``AutoModelForSequenceClassification``. To reload a saved model with the Auto classes
in a fresh interpreter, ``import east_hf.hf.models`` first, or pass ``trust_remote_code=True``.
"""

from __future__ import annotations

import importlib

__version__ = "0.6.0"

_LAZY = {
    **dict.fromkeys(
        [
            "accuracy",
            "dynamic_threshold",
            "fbeta",
            "hard_confusion_matrix",
            "linear_heaviside",
            "mcc",
            "precision",
            "recall",
            "soft_confusion_matrix",
            "soft_predictions",
        ],
        "east_hf.core",
    ),
    **dict.fromkeys(["AnnealingSchedule", "Decision", "temperature_at"], "east_hf.core.annealing"),
    **dict.fromkeys(["DecisionRule", "tune_logit_offsets"], "east_hf.core.decision.rule"),
    **dict.fromkeys(
        ["CrossEntropySetLoss", "EASTLoss", "SetLoss", "SoftDiceLoss", "build_loss"], "east_hf.core.loss_registry"
    ),
    "EASTConfig": "east_hf.hf.config.east_config",
    "EASTTrainer": "east_hf.hf.training.trainer",
    "TemperatureAnnealingCallback": "east_hf.hf.training.callbacks",
    "build_compute_metrics": "east_hf.hf.metrics",
    "load_metric": "east_hf.hf.metrics",
    "Predictor": "east_hf.hf.predict.predictor",
    "predict": "east_hf.hf.predict.predictor",
}

__all__ = [
    # the loss and its annealing
    "EASTLoss",
    "AnnealingSchedule",
    "Decision",
    "temperature_at",
    # the baselines, behind the same set-loss interface
    "SetLoss",
    "CrossEntropySetLoss",
    "SoftDiceLoss",
    "build_loss",
    # decision rules tuned on validation
    "DecisionRule",
    "tune_logit_offsets",
    # the functional core, in the paper's order: H_T, tau, g_T, the soft and hard confusion matrices, the metrics
    "linear_heaviside",
    "dynamic_threshold",
    "soft_predictions",
    "soft_confusion_matrix",
    "hard_confusion_matrix",
    "fbeta",
    "accuracy",
    "mcc",
    "precision",
    "recall",
    # the Hugging Face layer
    "EASTConfig",
    "EASTTrainer",
    "TemperatureAnnealingCallback",
    "build_compute_metrics",
    "load_metric",
    "Predictor",
    "predict",
]


def __getattr__(name: str):
    if name in ("core", "hf", "scripts"):  # the layers, as attributes of the package, as when core loaded eagerly
        return importlib.import_module(f"east_hf.{name}")
    if name not in _LAZY:
        raise AttributeError(f"module 'east_hf' has no attribute {name!r}")
    value = getattr(importlib.import_module(_LAZY[name]), name)
    globals()[name] = value
    return value
