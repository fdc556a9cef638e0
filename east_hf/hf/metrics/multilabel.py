"""A Trainer ``compute_metrics`` for multi-label classification over the functional core.

Every row may carry several of L labels; label k is predicted where its logit z_k > 0 (sigmoid(z_k) > 0.5). Every
metric reported is a function of the (4, L + 1) statistics of the hard predictions
(``east_hf.core.multilabel.multilabel_statistics``): per label TP, support, predicted and labelled entries, and the
per-row accumulators of ``average="samples"`` and of subset accuracy. They add over batches and processes, so
``MultiLabelComputeMetrics`` is fed the three ways ``ComputeMetrics`` is (see ``east_hf.hf.metrics.compute``): counts
summed by ``EASTTrainer.evaluate``, one call on the gathered set, or ``batch_eval_metrics=True`` with a running sum.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import torch

from east_hf.core import beta_vector, resolve_beta
from east_hf.core.multilabel import multilabel_metric_from_statistics, multilabel_statistics
from east_hf.core.validation import check_int, check_multilabel_average, check_zero_division
from east_hf.hf.metrics.inputs import IGNORE_INDEX, CountedMetrics, as_tensor, reported_classes

__all__ = ["MULTILABEL_METRIC_KEYS", "MultiLabelComputeMetrics"]

MULTILABEL_METRIC_KEYS = ("accuracy", "fbeta", "mcc", "precision", "recall", "jaccard")
"""The averaged keys the multi-label ``compute_metrics`` returns, in order (the per-label keys follow them)."""


class MultiLabelComputeMetrics(CountedMetrics):
    """A Trainer ``compute_metrics`` for multi-hot labels; ``build_compute_metrics(num_labels, multi_label=True)``.

    Keys (the Trainer prefixes them with ``eval_``):

    - ``accuracy``: subset accuracy, the share of rows whose every labelled entry is right;
    - ``fbeta``, ``jaccard``: averaged by ``average`` (``macro``, ``micro``, ``weighted`` by support, or ``samples``,
      the mean over rows of each row's score), F-beta with ``beta``;
    - ``precision``, ``recall``, ``mcc`` (each label's binary MCC): averaged the same way, but ``macro`` for
      ``average="samples"`` (the statistics keep each row's F-beta and Jaccard, not its precision, recall or MCC);
    - ``precision_<name>``, ``recall_<name>``, ``fbeta_<name>`` for each label of ``report_classes``, ``<name>`` as
      ``ComputeMetrics``' per-class keys.

    Args:
        num_labels: L, the number of logits (labels) per row.
        beta: a float, one value per label, or a ``{label name or index: beta}`` mapping (others 1.0); one value for
            ``average="micro"`` or ``"samples"``.
        average: ``"macro"`` (default), ``"micro"``, ``"weighted"`` or ``"samples"``.
        id2label: label names, e.g. ``model.config.id2label``.
        report_classes: labels (names or indices) to report per label, or ``"all"``. Default: the labels whose beta
            differs from 1 (for a per-label beta).
        zero_division: the value of a ratio whose denominator is 0, as scikit-learn's.

    Predictions are logits (N, L) (a tuple of model outputs: the first; a list: batches) or 0/1 predictions (N, L)
    (integer or bool); labels (N, L) are 0/1, and entries equal to -100 are ignored (a row with every entry ignored
    does not count). The scores equal scikit-learn's on the labelled rows of ``(logits > 0)``.

    >>> import numpy as np
    >>> compute_metrics = MultiLabelComputeMetrics(3, beta={"cat": 2.0}, id2label={0: "cat", 1: "dog", 2: "bird"})
    >>> logits = np.array([[2.0, -1.0, 0.5], [-1.0, 3.0, -2.0], [1.0, 1.0, -1.0]])
    >>> labels = np.array([[1, 0, 1], [0, 1, 1], [0, 1, -100]])
    >>> {key: round(value, 4) for key, value in compute_metrics((logits, labels)).items()}
    {'accuracy': 0.3333, 'fbeta': 0.8333, 'mcc': 0.5, 'precision': 0.8333, 'recall': 0.8333, 'jaccard': 0.6667,
     'precision_cat': 0.5, 'recall_cat': 1.0, 'fbeta_cat': 0.8333}
    """

    KEYS = MULTILABEL_METRIC_KEYS

    def __init__(
        self,
        num_labels: int,
        beta: float | Sequence[float] | Mapping[str, float] = 1.0,
        average: str = "macro",
        id2label: Mapping[int, str] | None = None,
        report_classes: Sequence[str | int] | str | None = None,
        zero_division: float = 0.0,
    ):
        num_labels = check_int("num_labels", num_labels, 1)
        self.average = check_multilabel_average(average)
        self.zero_division = float(check_zero_division(zero_division))
        resolved = resolve_beta(beta, id2label, num_labels)
        betas = beta_vector(resolved, num_labels, torch.zeros((), dtype=torch.float64))  # validates beta > 0
        if self.average in ("micro", "samples") and not bool((betas == betas[0]).all()):
            why = "labels are pooled" if self.average == "micro" else "each row's F-beta is at one beta"
            raise ValueError(f"Expected one beta for average={self.average!r} ({why}), got {betas.tolist()}")
        self.num_labels = num_labels
        self.betas: list[float] = betas.tolist()
        self.report = reported_classes(report_classes, self.betas, isinstance(resolved, list), id2label)
        self._counts: torch.Tensor | None = None

    def counts(self, predictions: Any, labels: Any, validate_args: bool = True) -> torch.Tensor:
        """The (4, L + 1) float64 statistics (``multilabel_statistics``) of the hard predictions of logits (N, L)
        (``> 0``) or 0/1 predictions (N, L), on their device; label entries -100 are ignored. They add over batches
        and processes; ``from_counts`` scores the sum. ``validate_args=False`` skips the checks of the predictions'
        values (finite logits, 0/1 predictions) for a caller that has checked them; labels are always checked."""
        scores, labels = as_tensor(predictions), as_tensor(labels)
        L = self.num_labels
        if scores.ndim != 2 or scores.shape[1] != L:
            raise ValueError(
                f"Expected predictions as logits or 0/1 predictions (N, {L}), got shape {tuple(scores.shape)}"
            )
        if labels.shape != scores.shape:
            raise ValueError(
                f"Expected labels of shape {tuple(scores.shape)} (N, L) like the predictions, got shape "
                f"{tuple(labels.shape)}"
            )
        if validate_args:
            if scores.is_floating_point() and not bool(torch.isfinite(scores).all()):
                raise ValueError(f"Expected finite logits, got NaN or inf in a tensor of shape {tuple(scores.shape)}")
            if not scores.is_floating_point() and not bool(((scores == 0) | (scores == 1)).all()):
                raise ValueError(
                    f"Expected 0/1 predictions or float logits, got values {scores.unique().tolist()[:8]}"
                )
        device = torch.device("cpu") if scores.device.type == "mps" else scores.device  # no float64 on MPS
        hard = (scores > 0).to(device, torch.float64)  # (N, L): label k predicted where z_k > 0
        return multilabel_statistics(
            hard,
            labels.to(device, torch.float64),
            samples_beta=self.betas[0],  # one beta wherever the rows' F-beta is reported (samples)
            ignore_index=IGNORE_INDEX,
            zero_division=self.zero_division,
        )  # (4, L + 1)

    def _metric(self, stats: torch.Tensor, metric: str, average: str | None) -> torch.Tensor:
        return multilabel_metric_from_statistics(
            stats, metric, beta=self.betas, average=average, zero_division=self.zero_division
        )

    def from_counts(self, counts: torch.Tensor) -> dict[str, float]:
        """All metric values of (4, L + 1) statistics (``counts``, summed over batches and processes)."""
        stats = counts.to("cpu", torch.float64)
        per_row = self.average  # F-beta and Jaccard have a per-row (samples) average; the others macro there
        per_label = "macro" if per_row == "samples" else per_row
        metrics = {
            "accuracy": self._metric(stats, "accuracy", per_row),
            "fbeta": self._metric(stats, "fbeta", per_row),
            "mcc": self._metric(stats, "mcc", per_label),
            "precision": self._metric(stats, "precision", per_label),
            "recall": self._metric(stats, "recall", per_label),
            "jaccard": self._metric(stats, "jaccard", per_row),
        }
        if self.report:
            values = {m: self._metric(stats, m, None) for m in ("precision", "recall", "fbeta")}  # (L,) each
            for k, name in self.report.items():
                metrics.update({f"{m}_{name}": v[k] for m, v in values.items()})
        return {key: value.item() for key, value in metrics.items()}
