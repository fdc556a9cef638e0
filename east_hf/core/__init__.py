"""The core of east_hf: pure torch, no transformers, timm or evaluate imports.

- The soft confusion matrix and its metrics: ``surrogate`` (the paper's H_T, tau and memberships, soft and hard
  confusion matrices), ``fused`` (the fast path: softmax, memberships and the confusion statistics of logits in one
  autograd Function), ``metrics`` (the confusion-matrix metrics and their formulas), and ``metric_loss`` (1 - M in one
  autograd Function).
- The losses: ``set_loss`` (their interface), ``east_loss`` (``EASTLoss``), ``baselines`` (cross-entropy, soft Dice)
  and ``loss_registry`` (``LOSSES``, each loss's ``LossSpec``: what it needs to train, ``build_loss``, the
  cross-entropy mix).
- Multi-label: ``multilabel`` (per-label soft predictions, the (4, L + 1) statistics and their metrics),
  ``multilabel_losses`` (``MultiLabelEASTLoss``, binary cross-entropy and the asymmetric loss as set losses) and
  ``decision_multilabel`` (per-label thresholds, ``tune_label_offsets``); the multi-label registry is
  ``loss_registry``'s.
- Focal loss and LDAM-DRW, the long-tail baselines: ``long_tail_losses``.
- The annealing schedule and its defaults: ``annealing``; the keys it watches and their direction: ``monitor_keys``.
- The decision-rule tuner: ``decision`` (its API), ``decision_sweep`` (one offset's sweep), ``decision_scorers``
  (candidate scoring), ``decision_ascent`` (the coordinate ascent and its work bound) and ``decision_logits`` (the
  validation logits in memory or in a temporary file).
- The checks of every setting (``validation``) and the resolver of classes given by name (``classes``).
"""

from east_hf.core.baselines import soft_dice_loss
from east_hf.core.classes import class_index, class_names, resolve_beta, safe_name
from east_hf.core.metrics import (
    AVERAGES,
    METRICS,
    accuracy,
    beta_vector,
    fbeta,
    mcc,
    precision,
    precision_recall_fbeta,
    recall,
    target_metric_key,
)
from east_hf.core.multilabel import (
    MULTILABEL_AVERAGES,
    MULTILABEL_METRICS,
    multilabel_metric_from_statistics,
    multilabel_statistics,
    soft_label_predictions,
)
from east_hf.core.multilabel_losses import MultiLabelEASTLoss
from east_hf.core.surrogate import (
    check_labels,
    confusion_from_memberships,
    confusion_from_predictions,
    dynamic_threshold,
    hard_confusion_matrix,
    linear_heaviside,
    soft_confusion_matrix,
    soft_predictions,
    valid_rows,
)
from east_hf.core.validation import MAX_TEMPERATURE, check_temperature

__all__ = [
    "AVERAGES",
    "MAX_TEMPERATURE",
    "METRICS",
    "MULTILABEL_AVERAGES",
    "MULTILABEL_METRICS",
    "MultiLabelEASTLoss",
    "accuracy",
    "beta_vector",
    "check_labels",
    "check_temperature",
    "class_index",
    "class_names",
    "confusion_from_memberships",
    "confusion_from_predictions",
    "dynamic_threshold",
    "fbeta",
    "hard_confusion_matrix",
    "linear_heaviside",
    "mcc",
    "multilabel_metric_from_statistics",
    "multilabel_statistics",
    "precision",
    "precision_recall_fbeta",
    "recall",
    "resolve_beta",
    "safe_name",
    "soft_confusion_matrix",
    "soft_dice_loss",
    "soft_label_predictions",
    "soft_predictions",
    "target_metric_key",
    "valid_rows",
]
