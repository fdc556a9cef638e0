"""east_hf: EAST (Evaluation Aligned Surrogate Training) for the Hugging Face Trainer and timm.

The functional core (``east_hf.functional``, ``east_hf.loss``, ``east_hf.annealing``, ``east_hf.decision``) is pure
torch: importing it loads neither transformers nor timm. Everything else is loaded on first access
(``east_hf.EASTTrainer``, ``east_hf.EASTConfig``, ...).

Our architectures are registered where they are defined: importing ``east_hf.models`` (which ``east_hf.trainer``
and ``east-train`` do) registers ``darknet19`` / ``darknet19_tiny`` in timm's registry and the tabular MLP with
transformers' ``AutoConfig`` / ``AutoModelForSequenceClassification``. To reload a saved model with the Auto classes
in a fresh interpreter, ``import east_hf.models`` first.
"""

from __future__ import annotations

import importlib

from east_hf.functional import (
    accuracy,
    dynamic_threshold,
    fbeta,
    hard_confusion_matrix,
    linear_heaviside,
    mcc,
    precision,
    recall,
    soft_confusion_matrix,
    soft_predictions,
)
from east_hf.loss import CrossEntropySetLoss, EASTLoss, SetLoss, SoftDiceLoss, build_loss

__version__ = "0.2.0"

_LAZY = {
    "EASTConfig": "east_hf.config",
    "EASTTrainer": "east_hf.trainer",
    "TemperatureAnnealingCallback": "east_hf.callbacks",
    "AnnealingSchedule": "east_hf.annealing",
    "Decision": "east_hf.annealing",
    "temperature_at": "east_hf.annealing",
    "build_compute_metrics": "east_hf.metrics",
    "load_metric": "east_hf.metrics",
}
_SUBMODULES = ("models", "metrics", "trainer", "callbacks", "config", "annealing", "cards", "compare", "train")

__all__ = [
    "CrossEntropySetLoss",
    "EASTLoss",
    "SetLoss",
    "SoftDiceLoss",
    "accuracy",
    "build_loss",
    "dynamic_threshold",
    "fbeta",
    "hard_confusion_matrix",
    "linear_heaviside",
    "mcc",
    "precision",
    "recall",
    "soft_confusion_matrix",
    "soft_predictions",
    *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        value = getattr(importlib.import_module(_LAZY[name]), name)
    elif name in _SUBMODULES:
        value = importlib.import_module(f"east_hf.{name}")
    else:
        raise AttributeError(f"module 'east_hf' has no attribute {name!r}")
    globals()[name] = value
    return value
