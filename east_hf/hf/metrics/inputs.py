"""What the Trainer hands a ``compute_metrics``, as tensors, the metric-key names of classes or labels, and
``CountedMetrics``, the protocol of metrics scored from additive counts; shared by ``ComputeMetrics`` (single-label)
and ``MultiLabelComputeMetrics``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import torch

from east_hf.core import class_index, safe_name

__all__ = ["IGNORE_INDEX", "CountedMetrics", "as_tensor", "class_names"]

IGNORE_INDEX = -100  # the label the Trainer pads with and the loss ignores


def class_names(num_classes: int, id2label: Mapping[Any, str] | None) -> list[str]:
    """Safe names of all classes, from ``id2label`` or the index; clashing or empty names get ``_<index>``."""
    labels = {int(k): str(v) for k, v in (id2label or {}).items()}
    names = [safe_name(labels.get(k, k)) for k in range(num_classes)]
    return [f"{name}_{k}" if names.count(name) > 1 or not name else name for k, name in enumerate(names)]


def reported_classes(
    report_classes: str | int | Sequence[str | int] | None,
    betas: Sequence[float],
    beta_per_class: bool,
    id2label: Mapping[Any, str] | None,
    skip: int | None = None,
) -> dict[int, str]:
    """The classes (multi-label: labels) reported under their own names, index -> safe name: ``"all"``, the ones
    listed (names or indices), or by default those with a beta of their own (``beta_per_class``: beta was given per
    class) other than ``skip`` (the positive class of ``average="binary"``, whose scores are the averaged keys)."""
    num_classes = len(betas)
    if report_classes is None:
        indices = {k for k, b in enumerate(betas) if b != 1.0} if beta_per_class else set()
        indices.discard(skip)
    elif report_classes == "all":
        indices = set(range(num_classes))
    else:
        if isinstance(report_classes, (str, int)):
            report_classes = [report_classes]
        indices = {class_index(c, id2label, num_classes, what="report_classes") for c in report_classes}
    names = class_names(num_classes, id2label)
    return {k: names[k] for k in sorted(indices)}


def as_tensor(x: Any) -> torch.Tensor:
    """Predictions or labels as one tensor: the first of several model outputs, batches concatenated."""
    if isinstance(x, tuple):  # a model with several outputs: the logits come first
        return as_tensor(x[0])
    if isinstance(x, list) and x and isinstance(x[0], (tuple, list, np.ndarray, torch.Tensor)):
        return torch.cat([as_tensor(b) for b in x])  # eval_do_concat_batches=False: one entry per batch
    return torch.as_tensor(x)


class CountedMetrics:
    """A Trainer ``compute_metrics`` scored from additive counts: subclasses define ``counts(predictions, labels,
    validate_args=True)`` (a tensor that sums over batches and processes) and ``from_counts(counts)`` (the metrics).
    ``EASTTrainer.evaluate`` sums the counts of its batches itself and keeps no logits; called, it scores the gathered
    predictions, or with ``batch_eval_metrics=True`` keeps a running sum (one callable per Trainer)."""

    KEYS: tuple[str, ...] = ()  # the averaged keys ``from_counts`` returns, in order
    report: dict[int, str]  # the classes reported under their own names, index -> safe name (set by subclasses)
    _counts: torch.Tensor | None = None

    def metric_keys(self) -> list[str]:
        """The keys ``from_counts`` returns, in order: the averaged ``KEYS``, then each reported class's precision,
        recall and F-beta; known before any evaluation."""
        per_class = [
            f"{metric}_{name}" for name in self.report.values() for metric in ("precision", "recall", "fbeta")
        ]
        return [*self.KEYS, *per_class]

    def counts(self, predictions: Any, labels: Any, validate_args: bool = True) -> torch.Tensor:
        raise NotImplementedError

    def from_counts(self, counts: torch.Tensor) -> dict[str, float]:
        raise NotImplementedError

    def reset(self) -> None:
        """Drop the running counts of ``batch_eval_metrics``."""
        self._counts = None

    def __call__(self, eval_pred: Any, compute_result: bool | None = None) -> dict[str, float]:
        """Metrics of an ``EvalPrediction`` (or a ``(predictions, labels)`` pair).

        ``compute_result`` is None: score this call's predictions. True or False (``batch_eval_metrics=True``): add
        their counts to the running sum, and score and reset it when True.
        """
        if hasattr(eval_pred, "predictions"):
            predictions, labels = eval_pred.predictions, eval_pred.label_ids
        else:
            predictions, labels = eval_pred[0], eval_pred[1]
        counts = self.counts(predictions, labels)
        if compute_result is None:
            return self.from_counts(counts)
        self._counts = counts if self._counts is None else self._counts + counts
        if not compute_result:
            return {}
        counts, self._counts = self._counts, None
        return self.from_counts(counts)
