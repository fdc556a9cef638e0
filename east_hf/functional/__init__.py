"""The functional core of east_hf: pure torch, no transformers, timm or evaluate imports."""

from east_hf.functional.metrics import (
    AVERAGES,
    METRICS,
    accuracy,
    beta_vector,
    fbeta,
    mcc,
    precision,
    precision_recall_fbeta,
    recall,
)
from east_hf.functional.surrogate import (
    check_temperature,
    confusion_from_memberships,
    dynamic_threshold,
    hard_confusion_matrix,
    linear_heaviside,
    soft_confusion_matrix,
    soft_predictions,
)

__all__ = [
    "AVERAGES",
    "METRICS",
    "accuracy",
    "beta_vector",
    "check_temperature",
    "confusion_from_memberships",
    "dynamic_threshold",
    "fbeta",
    "hard_confusion_matrix",
    "linear_heaviside",
    "mcc",
    "precision",
    "precision_recall_fbeta",
    "recall",
    "soft_confusion_matrix",
    "soft_predictions",
]
