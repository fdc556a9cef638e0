"""east_hf: EAST (Evaluation Aligned Surrogate Training) for the Hugging Face Trainer and timm."""

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
]
