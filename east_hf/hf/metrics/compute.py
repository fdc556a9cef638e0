"""A Trainer ``compute_metrics`` over the functional core: accuracy, F-beta, MCC, precision and recall.

``build_compute_metrics`` returns a callable for ``Trainer(compute_metrics=...)``. Every metric it reports is a
function of three per-class counts of the hard (argmax) confusion matrix, TP, support and predicted
(``east_hf.hf.metrics.counts``): a (3, C) int64 tensor that adds exactly over batches and processes, scored with the
formulas of the core's metrics, in torch, without evaluate.

Three ways to feed it, all giving the same numbers:

- ``EASTTrainer.evaluate`` asks the callable for each batch's counts (``counts``) on every process, sums them, and
  scores the sum once (``from_counts``): no logit is gathered or kept, evaluation memory is O(C) whatever the size of
  the evaluation set.
- A plain ``Trainer`` (and ``EASTTrainer.predict``) gathers predictions and labels across processes
  (``gather_for_metrics``, which also drops the samples the distributed sampler repeats to even out the last batch)
  and calls it once on the whole set.
- With ``batch_eval_metrics=True`` each call receives one gathered batch and ``compute_result`` marks the last one:
  the callable adds each batch's counts to a running (3, C) sum (identical on every process) and returns the metrics,
  and starts afresh, when ``compute_result`` is True; it returns ``{}`` for the batches before. The running sum lives
  in the callable, so use one callable per Trainer, and call ``reset()`` if an evaluation was interrupted.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch
import torch.nn.functional as F

from east_hf.core import (
    accuracy,
    beta_vector,
    check_labels,
    fbeta,
    hard_confusion_matrix,
    mcc,
    precision,
    precision_recall_fbeta,
    recall,
    resolve_beta,
    safe_name,
)
from east_hf.core.validation import check_average, check_num_classes, check_pos_label, check_zero_division
from east_hf.hf.metrics.counts import class_counts, scores_from_counts
from east_hf.hf.metrics.inputs import IGNORE_INDEX, CountedMetrics, reported_classes
from east_hf.hf.metrics.inputs import as_tensor as _as_tensor
from east_hf.hf.metrics.multilabel import MultiLabelComputeMetrics

__all__ = ["METRIC_KEYS", "SUMMARY_KEYS", "ComputeMetrics", "build_compute_metrics", "safe_name"]

METRIC_KEYS = ("accuracy", "fbeta", "mcc", "precision", "recall")
"""The averaged keys ``compute_metrics`` returns, in order (the per-class keys follow them)."""
SUMMARY_KEYS = (*METRIC_KEYS, "loss")
"""The keys a run's results are summarised by (east-train's summary, the model card): the metrics and the loss."""


class ComputeMetrics(CountedMetrics):
    """The callable ``build_compute_metrics`` returns; see there. ``__call__(eval_pred, compute_result=None)``."""

    KEYS = METRIC_KEYS

    def __init__(
        self,
        num_classes: int,
        beta: float | Sequence[float] | Mapping[str, float] = 1.0,
        average: str = "macro",
        pos_label: int = 1,
        id2label: Mapping[int, str] | None = None,
        report_classes: Sequence[str | int] | str | None = None,
        zero_division: float = 0.0,
    ):
        check_num_classes(num_classes)
        check_average(average)
        pos_label = check_pos_label(pos_label, num_classes)
        zero_division = check_zero_division(zero_division)
        resolved = resolve_beta(beta, id2label, num_classes)
        betas = beta_vector(resolved, num_classes, torch.zeros((), dtype=torch.float64))  # validates beta > 0
        if average == "micro" and not bool((betas == betas[0]).all()):
            raise ValueError(f"Expected one beta for average='micro' (classes are pooled), got {betas.tolist()}")
        self.num_classes, self.average, self.pos_label = num_classes, average, pos_label
        self.zero_division = float(zero_division)
        self.betas: list[float] = betas.tolist()
        skip = pos_label if average == "binary" else None  # its scores are the averaged keys: not repeated
        self.report = reported_classes(report_classes, self.betas, isinstance(resolved, list), id2label, skip)
        self._counts: torch.Tensor | None = None

    def _predictions_and_labels(self, predictions: Any, labels: Any) -> tuple[torch.Tensor, torch.Tensor]:
        """Predictions and labels as tensors on one device, checked: scores (N, C) or class ids (N,), labels (N,)."""
        scores, labels = _as_tensor(predictions), _as_tensor(labels)
        if labels.is_floating_point():
            raise TypeError(f"Expected integer labels, got dtype {labels.dtype}")
        labels = labels.to(scores.device).long().flatten()
        if scores.ndim == 0 or labels.shape[0] != scores.shape[0]:
            raise ValueError(
                f"Expected one label per prediction, got predictions of shape {tuple(scores.shape)} and "
                f"{labels.shape[0]} labels"
            )
        C = self.num_classes
        if scores.ndim == 1 and not scores.is_floating_point():
            # class ids, e.g. from preprocess_logits_for_metrics=argmax; ids of ignored samples are never scored
            ids = torch.where(labels == IGNORE_INDEX, 0, scores.long())
            if ids.numel() and (int(ids.min()) < 0 or int(ids.max()) >= C):
                raise ValueError(
                    f"Expected predicted class ids in [0, {C - 1}], got {int(ids.min())}..{int(ids.max())}"
                )
            return ids, labels
        if scores.ndim != 2 or scores.shape[1] != C:
            raise ValueError(
                f"Expected predictions as logits (N, {C}) or class ids (N,), got shape {tuple(scores.shape)}"
            )
        return scores, labels

    def confusion_matrix(self, predictions: Any, labels: Any) -> torch.Tensor:
        """The (C, C) float64 hard confusion matrix of logits (N, C) or class ids (N,); labels -100 are ignored."""
        scores, labels = self._predictions_and_labels(predictions, labels)
        if scores.ndim == 1:
            scores = F.one_hot(scores, self.num_classes).float()  # (N, C)
        elif not scores.is_floating_point():
            scores = scores.float()
        return hard_confusion_matrix(scores, labels, ignore_index=IGNORE_INDEX).double().cpu()  # (C, C)

    def counts(self, predictions: Any, labels: Any, validate_args: bool = True) -> torch.Tensor:
        """The (3, C) int64 counts TP, support, predicted (``east_hf.hf.metrics.counts``) of logits (N, C) or class
        ids (N,), on their device; labels -100 are ignored. They add over batches and processes; ``from_counts``
        scores the sum. ``validate_args=False`` skips the check that the logits are finite (a caller that has
        checked them already)."""
        scores, labels = self._predictions_and_labels(predictions, labels)
        if scores.ndim == 2:
            if validate_args and not bool(torch.isfinite(scores).all()):  # argmax of a NaN row is a class
                raise ValueError(
                    f"Expected finite probs_or_logits, got NaN or inf in a tensor of shape {tuple(scores.shape)}"
                )
            scores = scores.argmax(dim=1)  # (N,) class ids
        keep = check_labels(labels, labels.shape[0], self.num_classes, IGNORE_INDEX)  # (N,)
        return class_counts(labels[keep], scores[keep], self.num_classes)

    def from_confusion_matrix(self, confmat: torch.Tensor) -> dict[str, float]:
        """All metric values of a (C, C) confusion matrix, rows true classes and columns predicted classes."""
        args = {"average": self.average, "pos_label": self.pos_label, "zero_division": self.zero_division}
        metrics = {
            "accuracy": accuracy(confmat),
            "fbeta": fbeta(confmat, self.betas, **args),
            "mcc": mcc(confmat),
            "precision": precision(confmat, **args),
            "recall": recall(confmat, **args),
        }
        if self.report:
            p, r, f, _ = precision_recall_fbeta(confmat, self.betas, self.zero_division)  # (C,) each
            for k, name in self.report.items():
                metrics.update({f"precision_{name}": p[k], f"recall_{name}": r[k], f"fbeta_{name}": f[k]})
        return {key: value.item() for key, value in metrics.items()}

    def from_counts(self, counts: torch.Tensor) -> dict[str, float]:
        """All metric values of (3, C) counts (``counts``, summed over batches and processes); equal to
        ``from_confusion_matrix`` of the confusion matrix they count, bit for bit."""
        scores = scores_from_counts(counts, self.betas, self.average, self.pos_label, self.zero_division)
        metrics = {key: scores[key] for key in METRIC_KEYS}
        for k, name in self.report.items():
            metrics.update(
                {
                    f"precision_{name}": scores["precision_per_class"][k],
                    f"recall_{name}": scores["recall_per_class"][k],
                    f"fbeta_{name}": scores["fbeta_per_class"][k],
                }
            )
        return {key: value.item() for key, value in metrics.items()}


def build_compute_metrics(
    num_classes: int, multi_label: bool = False, **settings: Any
) -> ComputeMetrics | MultiLabelComputeMetrics:
    """A Trainer ``compute_metrics`` reporting the hard metrics EAST trains for.

    ``multi_label=True`` (multi-hot labels (N, L), ``problem_type="multi_label_classification"``): a
    ``MultiLabelComputeMetrics`` over ``num_classes`` = L labels, with ``beta``, ``average`` (``macro``, ``micro``,
    ``weighted``, ``samples``), ``id2label``, ``report_classes`` and ``zero_division``, reporting ``accuracy``
    (subset accuracy), ``fbeta``, ``mcc``, ``precision``, ``recall``, ``jaccard`` and per-label keys; see there.
    The rest of this docstring is about single-label classification.

    Keys (the Trainer prefixes them with ``eval_``, and ``metric_for_best_model`` takes them with or without it):

    - ``accuracy``, ``mcc``;
    - ``fbeta``, ``precision``, ``recall``: averaged by ``average`` (macro, weighted, micro, or binary, which scores
      class ``pos_label``), F-beta with ``beta``;
    - ``precision_<name>``, ``recall_<name>``, ``fbeta_<name>`` for each class of ``report_classes``, where
      ``<name>`` is ``safe_name(id2label[k])`` (lowercase, non-alphanumerics replaced by ``_``) or the index ``k``.

    Args:
        num_classes: C, the number of logits per sample.
        beta: a float, one value per class, or a ``{class name or index: beta}`` mapping (others 1.0), resolved by
            ``east_hf.core.resolve_beta``, as ``EASTConfig.east_beta``.
        average, pos_label, zero_division: as the functional core (``east_hf.core.fbeta``).
        id2label: class names, e.g. ``model.config.id2label``.
        report_classes: class names (as in ``id2label``, or safe) or indices to report per class, or ``"all"``.
            Default: for a per-class beta the classes whose beta differs from 1, but not ``pos_label`` for
            ``average="binary"``: ``fbeta``, ``precision`` and ``recall`` are its scores already.

    Predictions are logits (N, C) (a tuple of model outputs: the first; ``eval_do_concat_batches=False``: a list of
    batches) or class ids (N,); labels equal to -100 are ignored. Scores are of the whole gathered evaluation set
    (see the module docstring for multi-process and ``batch_eval_metrics`` evaluation).

    >>> import numpy as np
    >>> compute_metrics = build_compute_metrics(3, beta={"Cat": 2.0}, id2label={0: "Cat", 1: "dog", 2: "bird"})
    >>> logits, labels = np.eye(3)[[0, 0, 1, 2, 2, 1]], np.array([0, 1, 1, 2, 0, -100])
    >>> {key: round(value, 4) for key, value in compute_metrics((logits, labels)).items()}
    {'accuracy': 0.6, 'fbeta': 0.6111, 'mcc': 0.4375, 'precision': 0.6667, 'recall': 0.6667,
     'precision_cat': 0.5, 'recall_cat': 0.5, 'fbeta_cat': 0.5}
    """
    if multi_label:
        return MultiLabelComputeMetrics(num_classes, **settings)
    return ComputeMetrics(num_classes, **settings)
