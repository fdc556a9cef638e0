"""east_hf: EAST (Evaluation Aligned Surrogate Training) for the Hugging Face Trainer and timm.

The functional core (``east_hf.functional``, ``EASTLoss``, the annealing schedule) is pure torch and imported
eagerly. The Trainer layer (``EASTConfig``, ``EASTTrainer``, the callback, metrics, models) imports transformers,
timm or evaluate, and is loaded on first access, so ``import east_hf`` stays light for plain-PyTorch users.
Importing ``east_hf.models`` (or accessing any of its names) registers ``darknet19`` with timm.
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
    "models": "east_hf.models",
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
    *_LAZY,
]


def __getattr__(name: str):
    if name in _LAZY:
        module = importlib.import_module(_LAZY[name])
        value = module if name == "models" else getattr(module, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'east_hf' has no attribute {name!r}")
