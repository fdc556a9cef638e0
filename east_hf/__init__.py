"""east_hf: EAST (Evaluation Aligned Surrogate Training) for the Hugging Face Trainer and timm.

The functional core (``east_hf.functional``, ``east_hf.loss``, ``east_hf.annealing``) is pure torch: those modules
import nothing from transformers, timm or evaluate. ``import east_hf`` also imports ``east_hf.models`` so that a
saved model of ours reloads with the usual Auto classes: it registers ``darknet19`` (and ``darknet19_tiny``) in
timm's registry and the tabular MLP with transformers' ``AutoConfig``/``AutoModelForSequenceClassification``.
The Trainer layer (``EASTConfig``, ``EASTTrainer``, the callback, the metrics) is loaded on first access.
"""

from __future__ import annotations

import importlib

from east_hf import models  # noqa: E402,F401  (registers darknet19 with timm, the tabular MLP with transformers)
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
from east_hf.loss import EASTLoss

__version__ = "0.1.0"

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

__all__ = [
    "EASTLoss",
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
    "models",
    *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'east_hf' has no attribute {name!r}")
