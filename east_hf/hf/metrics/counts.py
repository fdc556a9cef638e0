"""The hard metrics of a set from per-class counts: O(C) statistics that add over batches and processes.

Every metric ``compute_metrics`` reports is a function of three (C,) vectors of the hard confusion matrix alone:
TP_k (its diagonal), the support t_k (row sums) and the predicted count p_k (column sums). ``class_counts`` gives
them for one batch as a (3, C) int64 tensor, which sums exactly over batches and processes; ``scores_from_counts``
scores the sum. Evaluation therefore holds O(C) numbers whatever the number of samples, where the (C, C) matrix
holds O(C^2) and the gathered logits O(N C).

The scores are ``east_hf.core.metrics.metric_from_counts``, the functions every metric of the core is computed by,
so every value equals the core's on the (C, C) matrix bit for bit (the counts are integers, exact in float64;
``tests/test_compute_metrics.py`` checks this for every average).
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from east_hf.core.metrics import metric_from_counts

__all__ = ["class_counts", "counts_of_confusion_matrix", "scores_from_counts"]


def class_counts(labels: torch.Tensor, predictions: torch.Tensor, num_classes: int) -> torch.Tensor:
    """(N,) true classes and (N,) predicted classes (both in [0, C)) -> (3, C) int64: TP, support, predicted.

    >>> class_counts(torch.tensor([0, 0, 1, 2]), torch.tensor([0, 1, 1, 1]), 3).tolist()
    [[1, 1, 0], [2, 1, 1], [1, 3, 0]]
    """
    C = num_classes
    tp = torch.bincount(labels[predictions == labels], minlength=C)
    return torch.stack([tp, torch.bincount(labels, minlength=C), torch.bincount(predictions, minlength=C)])  # (3, C)


def counts_of_confusion_matrix(confmat: torch.Tensor) -> torch.Tensor:
    """The (3, C) int64 counts of a (C, C) hard confusion matrix (rows true, columns predicted)."""
    confmat = confmat.round().long()
    return torch.stack([confmat.diagonal(), confmat.sum(dim=1), confmat.sum(dim=0)])  # (3, C)


def scores_from_counts(
    counts: torch.Tensor,
    beta: float | Sequence[float] = 1.0,
    average: str = "macro",
    pos_label: int = 1,
    zero_division: float = 0.0,
) -> dict[str, torch.Tensor]:
    """Accuracy, F-beta, MCC, precision and recall of (3, C) counts, averaged; and per class ``"precision_per_class"``,
    ``"recall_per_class"``, ``"fbeta_per_class"`` (C,). Float64 scalars and vectors on the CPU.

    ``average`` and ``pos_label`` as ``east_hf.core.fbeta`` (already validated by the caller); MCC is 0 where its
    denominator is 0, as the core and ``sklearn.metrics.matthews_corrcoef``.

    >>> counts = torch.tensor([[5, 2], [6, 4], [7, 3]])  # the matrix [[5, 1], [2, 2]]
    >>> {key: round(v.item(), 4) for key, v in scores_from_counts(counts).items() if v.ndim == 0}
    {'accuracy': 0.7, 'fbeta': 0.6703, 'mcc': 0.3563, 'precision': 0.6905, 'recall': 0.6667}
    """
    counts = counts.to("cpu", torch.float64)  # integers: exact in float64
    rates = dict(average=average, pos_label=pos_label, zero_division=zero_division)
    per_class = dict(rates, average=None)
    return {
        "accuracy": metric_from_counts(counts, "accuracy"),
        "fbeta": metric_from_counts(counts, "fbeta", beta=beta, **rates),
        "mcc": metric_from_counts(counts, "mcc"),
        "precision": metric_from_counts(counts, "precision", **rates),
        "recall": metric_from_counts(counts, "recall", **rates),
        "precision_per_class": metric_from_counts(counts, "precision", **per_class),
        "recall_per_class": metric_from_counts(counts, "recall", **per_class),
        "fbeta_per_class": metric_from_counts(counts, "fbeta", beta=beta, **per_class),
    }
