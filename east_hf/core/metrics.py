"""Confusion-matrix metrics, differentiable, for soft (EAST) and hard (argmax) confusion matrices alike.

Every function takes a (C, C) matrix ``confmat`` whose rows are true classes and columns predicted classes (paper
Eq. cardinalities: TP_k = c_kk, FN_k = sum_{i != k} c_ki, FP_k = sum_{i != k} c_ik).

Averaging: ``"macro"`` is the unweighted mean over all C classes (the paper's Eq. macro-f-beta, 1/d sum_k);
``"weighted"`` weights class k by its support (row sum); ``"micro"`` pools TP, FP and FN over classes;
``"binary"`` returns the score of ``pos_label``. ``average=None`` returns the per-class vector.

Zero division: a per-class ratio whose denominator is zero (precision of a never-predicted class, recall of an
absent class, F-beta of a class with TP = FP = FN = 0) takes the value ``zero_division`` (default 0.0), as
scikit-learn's ``zero_division=0``. MCC is 0 when its denominator is zero, as ``sklearn.metrics.matthews_corrcoef``.
Note that scikit-learn averages over the labels present in ``y_true`` or ``y_pred`` unless ``labels`` is given,
whereas a (C, C) matrix covers all C classes: pass ``labels=range(C)`` to scikit-learn to compare.
A soft confusion matrix has no empty row or column (every membership is positive), so the surrogate never hits
these cases; they matter for the hard metrics.

Every metric here reads the matrix only through three (C,) vectors: TP (its diagonal), the support (row sums) and
the predicted mass (column sums). ``confusion_counts`` gives them as a (3, C) tensor and ``metric_from_counts``
scores one, with the same formulas as the (C, C) functions: the form ``EASTLoss`` trains on, O(C) instead of O(C^2).
Each formula is written once, as a function of those statistics: ``fbeta_from_stats`` (per class or pooled) and
``mcc_from_stats`` (of the five sums MCC reads); the (C, C) functions, ``metric_from_counts`` and the decision tuner's
running counts (``east_hf.core.decision.scorers``) all evaluate them.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from east_hf.core.validation import AVERAGES, check_average

__all__ = [
    "AVERAGES",
    "METRICS",
    "accuracy",
    "beta_vector",
    "confusion_counts",
    "fbeta",
    "fbeta_from_stats",
    "mcc",
    "mcc_from_stats",
    "metric_from_counts",
    "precision",
    "precision_recall_fbeta",
    "recall",
    "safe_divide",
    "target_metric_key",
]


def _check_confmat(confmat: torch.Tensor) -> torch.Tensor:
    if not isinstance(confmat, torch.Tensor):
        raise TypeError(f"Expected confmat as a (C, C) torch.Tensor, got {type(confmat).__name__}")
    if confmat.ndim != 2 or confmat.shape[0] != confmat.shape[1]:
        raise ValueError(f"Expected a square (C, C) confusion matrix, got shape {tuple(confmat.shape)}")
    if confmat.shape[0] < 2:
        raise ValueError(f"Expected at least 2 classes, got a confusion matrix of shape {tuple(confmat.shape)}")
    return confmat if confmat.is_floating_point() else confmat.float()


def beta_vector(beta: float | Sequence[float] | torch.Tensor, num_classes: int, like: torch.Tensor) -> torch.Tensor:
    """A (C,) tensor of per-class betas from a float or a length-C sequence; each must be > 0.

    A (C,) tensor already of ``like``'s dtype and device is returned as is, unchecked: ``EASTLoss`` validates its
    betas once and passes such a tensor on every step, so the hot path has no host synchronisation here.
    """
    if (
        isinstance(beta, torch.Tensor)
        and beta.shape == (num_classes,)
        and beta.dtype == like.dtype
        and beta.device == like.device
    ):
        return beta
    if isinstance(beta, bool):
        raise TypeError(f"Expected beta as a positive float or a sequence of {num_classes} floats, got bool")
    if isinstance(beta, (int, float)):
        values = torch.full((num_classes,), float(beta), dtype=like.dtype, device=like.device)
    else:
        values = torch.as_tensor(beta, dtype=like.dtype, device=like.device).flatten()
        if values.numel() != num_classes:
            raise ValueError(
                f"Expected beta as a float or {num_classes} per-class values, got {values.numel()} values"
            )
    if not bool((values > 0).all()) or not bool(torch.isfinite(values).all()):
        raise ValueError(f"Expected every beta > 0 and finite, got {values.tolist()}")
    return values


def safe_divide(num: torch.Tensor, den: torch.Tensor, zero_division: float) -> torch.Tensor:
    """num / den, with ``zero_division`` where den == 0; gradients stay finite (the masked branch divides by 1).

    >>> safe_divide(torch.tensor([1.0, 2.0]), torch.tensor([2.0, 0.0]), 0.0)
    tensor([0.5000, 0.0000])
    """
    zero = den == 0
    return torch.where(zero, zero_division, num / torch.where(zero, 1.0, den))


def _stats(confmat: torch.Tensor):
    tp = confmat.diagonal()
    support = confmat.sum(dim=1)  # TP + FN, per true class
    predicted = confmat.sum(dim=0)  # TP + FP, per predicted class
    return tp, support, predicted


def confusion_counts(confmat: torch.Tensor) -> torch.Tensor:
    """The (3, C) counts of a (C, C) confusion matrix: TP (diagonal), support (row sums), predicted (column sums),
    differentiable. Every metric of this module is a function of them (``metric_from_counts``).

    >>> confusion_counts(torch.tensor([[5.0, 1.0], [2.0, 2.0]]))
    tensor([[5., 2.],
            [6., 4.],
            [7., 3.]])
    """
    return torch.stack(_stats(_check_confmat(confmat)))  # (3, C)


def _check_counts(counts: torch.Tensor, batched: bool = False) -> torch.Tensor:
    """``counts`` as a floating (3, C) tensor, or with ``batched`` also (K, 3, C)."""
    shape = "(3, C) or (K, 3, C)" if batched else "(3, C)"
    if not isinstance(counts, torch.Tensor):
        raise TypeError(f"Expected counts as a {shape} torch.Tensor, got {type(counts).__name__}")
    if counts.ndim not in ((2, 3) if batched else (2,)) or counts.shape[-2] != 3 or counts.shape[-1] < 2:
        raise ValueError(
            f"Expected {shape} counts (TP, support, predicted) with C >= 2, got shape {tuple(counts.shape)}"
        )
    return counts if counts.is_floating_point() else counts.float()


def fbeta_from_stats(
    tp: torch.Tensor,
    support: torch.Tensor,
    predicted: torch.Tensor,
    beta: torch.Tensor,
    zero_division: float = 0.0,
) -> torch.Tensor:
    """F-beta = (1 + beta^2) TP / (beta^2 support + predicted), elementwise over broadcastable tensors.

    support = TP + FN and predicted = TP + FP, so the denominator is (1 + beta^2) TP + beta^2 FN + FP; where it is 0
    the value is ``zero_division``. Per class with (C,) statistics and betas, pooled (``average="micro"``) with their
    sums and one beta.

    >>> tp, support, predicted = torch.tensor([5.0, 2.0]), torch.tensor([6.0, 4.0]), torch.tensor([7.0, 3.0])
    >>> fbeta_from_stats(tp, support, predicted, torch.tensor(1.0))
    tensor([0.7692, 0.5714])
    """
    b2 = beta**2
    return safe_divide((1 + b2) * tp, b2 * support + predicted, zero_division)


def mcc_from_stats(
    trace: torch.Tensor,
    total: torch.Tensor,
    support_predicted: torch.Tensor,
    predicted_squared: torch.Tensor,
    support_squared: torch.Tensor,
) -> torch.Tensor:
    """Matthews correlation from the five sums it reads, elementwise: c the trace, s the total, sum_k t_k p_k,
    sum_k p_k^2 and sum_k t_k^2 (t: the support, p: the predicted counts).

    MCC = (c s - sum_k t_k p_k) / sqrt((s^2 - sum_k p_k^2)(s^2 - sum_k t_k^2)); 0 where the denominator is 0.

    >>> t, p, c = torch.tensor([6.0, 4.0]), torch.tensor([7.0, 3.0]), torch.tensor(7.0)  # [[5, 1], [2, 2]]
    >>> round(mcc_from_stats(c, t.sum(), (t * p).sum(), (p * p).sum(), (t * t).sum()).item(), 4)
    0.3563
    """
    cov_tp = trace * total - support_predicted
    cov_pp = total * total - predicted_squared
    cov_tt = total * total - support_squared
    den = cov_pp * cov_tt
    return safe_divide(cov_tp, torch.sqrt(torch.where(den > 0, den, 1.0)) * (den > 0), 0.0)


# The functions of (TP, support, predicted) below reduce over the last dimension, the classes, so the same formulas
# score one set of counts (C,) or K of them at once ((K, C); ``metric_from_counts`` of (K, 3, C) counts).


def _average(per_class: torch.Tensor, support: torch.Tensor, average: str | None, pos_label: int) -> torch.Tensor:
    if average is None:
        return per_class
    if average == "binary":
        return per_class[..., pos_label]
    if average == "weighted":
        return safe_divide((per_class * support).sum(-1), support.sum(-1), 0.0)
    return per_class.mean(-1)


def precision_recall_fbeta(
    confmat: torch.Tensor, beta: float | Sequence[float] | torch.Tensor = 1.0, zero_division: float = 0.0
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """Per-class precision, recall, F-beta and support of a (C, C) matrix: four (C,) tensors.

    F-beta_k = (1 + b_k^2) TP_k / ((1 + b_k^2) TP_k + b_k^2 FN_k + FP_k), which equals the weighted harmonic mean of
    precision and recall wherever that is defined (scikit-learn uses the same form).
    """
    confmat = _check_confmat(confmat)
    tp, support, predicted = _stats(confmat)
    p = safe_divide(tp, predicted, zero_division)
    r = safe_divide(tp, support, zero_division)
    return p, r, _fbeta_per_class(tp, support, predicted, beta, zero_division), support


def _fbeta_per_class(tp, support, predicted, beta, zero_division: float) -> torch.Tensor:
    """(C,) F-beta from TP, FN, FP alone: the loss's path, a dozen operations (no precision or recall)."""
    return fbeta_from_stats(tp, support, predicted, beta_vector(beta, tp.shape[-1], tp), zero_division)


def _fbeta(tp, support, predicted, beta=1.0, average="macro", pos_label=1, zero_division=0.0) -> torch.Tensor:
    check_average(average, tp.shape[-1], pos_label, allow_none=True)
    if average == "micro":
        b = beta_vector(beta, tp.shape[-1], tp)
        if not bool((b == b[0]).all()):
            raise ValueError(f"Expected one beta for average='micro' (classes are pooled), got {b.tolist()}")
        return fbeta_from_stats(tp.sum(-1), support.sum(-1), predicted.sum(-1), b[0], zero_division)
    return _average(_fbeta_per_class(tp, support, predicted, beta, zero_division), support, average, pos_label)


def fbeta(
    confmat: torch.Tensor,
    beta: float | Sequence[float] | torch.Tensor = 1.0,
    average: str | None = "macro",
    pos_label: int = 1,
    zero_division: float = 0.0,
) -> torch.Tensor:
    """F-beta of a (C, C) confusion matrix; ``beta`` is a float or one value per class (paper Sec. C.1).

    >>> cm = torch.tensor([[5.0, 1.0], [2.0, 2.0]])
    >>> round(fbeta(cm, 1.0).item(), 4), round(fbeta(cm, [1.0, 2.0], average=None)[1].item(), 4)
    (0.6703, 0.5263)
    """
    return _fbeta(*_stats(_check_confmat(confmat)), beta, average, pos_label, zero_division)


def _rate(tp, support, predicted, of: str, average: str | None, pos_label: int, zero_division: float):
    """TP / (TP + FP) (``of="predicted"``, precision) or TP / (TP + FN) (``of="support"``, recall)."""
    check_average(average, tp.shape[-1], pos_label, allow_none=True)
    denominator = predicted if of == "predicted" else support
    if average == "micro":
        return safe_divide(tp.sum(-1), denominator.sum(-1), zero_division)
    return _average(safe_divide(tp, denominator, zero_division), support, average, pos_label)


def _precision(tp, support, predicted, average="macro", pos_label=1, zero_division=0.0):
    return _rate(tp, support, predicted, "predicted", average, pos_label, zero_division)


def _recall(tp, support, predicted, average="macro", pos_label=1, zero_division=0.0):
    return _rate(tp, support, predicted, "support", average, pos_label, zero_division)


def precision(confmat: torch.Tensor, average: str | None = "macro", pos_label: int = 1, zero_division: float = 0.0):
    """Precision TP / (TP + FP) of a (C, C) confusion matrix."""
    return _precision(*_stats(_check_confmat(confmat)), average, pos_label, zero_division)


def recall(confmat: torch.Tensor, average: str | None = "macro", pos_label: int = 1, zero_division: float = 0.0):
    """Recall TP / (TP + FN) of a (C, C) confusion matrix."""
    return _recall(*_stats(_check_confmat(confmat)), average, pos_label, zero_division)


def _accuracy(tp, support, predicted, **_: object) -> torch.Tensor:
    return safe_divide(tp.sum(-1), support.sum(-1), 0.0)


def accuracy(confmat: torch.Tensor, **_: object) -> torch.Tensor:
    """Accuracy trace / total of a (C, C) confusion matrix (averaging arguments are accepted and ignored).

    >>> accuracy(torch.tensor([[5.0, 1.0], [2.0, 2.0]]))
    tensor(0.7000)
    """
    return _accuracy(*_stats(_check_confmat(confmat)))


def _mcc(tp, support, predicted, **_: object) -> torch.Tensor:
    t, p = support, predicted
    return mcc_from_stats(tp.sum(-1), t.sum(-1), (t * p).sum(-1), (p * p).sum(-1), (t * t).sum(-1))


def mcc(confmat: torch.Tensor, **_: object) -> torch.Tensor:
    """Multiclass Matthews correlation (Gorodkin's R_K), equal to ``sklearn.metrics.matthews_corrcoef``.

    MCC = (c s - sum_k t_k p_k) / sqrt((s^2 - sum_k p_k^2)(s^2 - sum_k t_k^2)) with c the trace, s the total,
    t the row sums and p the column sums; 0 when the denominator is 0.

    >>> round(mcc(torch.tensor([[5.0, 1.0], [2.0, 2.0]])).item(), 4)
    0.3563
    """
    return _mcc(*_stats(_check_confmat(confmat)))


METRICS = {"fbeta": fbeta, "f1": fbeta, "accuracy": accuracy, "mcc": mcc, "precision": precision, "recall": recall}
_FROM_COUNTS = {"fbeta": _fbeta, "f1": _fbeta, "accuracy": _accuracy, "mcc": _mcc, "precision": _precision,
                "recall": _recall}  # fmt: skip


def metric_from_counts(counts: torch.Tensor, metric: str = "fbeta", **kwargs: object) -> torch.Tensor:
    """``METRICS[metric]`` of the matrix whose (3, C) counts (TP, support, predicted; ``confusion_counts``) these
    are: the same value and gradient, read from O(C) numbers. ``kwargs`` as the metric's (beta, average, ...).
    (K, 3, C) counts score K matrices at once, one value each (K,) (``average=None``: (K, C)).

    >>> counts = confusion_counts(torch.tensor([[5.0, 1.0], [2.0, 2.0]]))
    >>> round(metric_from_counts(counts, "fbeta").item(), 4), round(metric_from_counts(counts, "mcc").item(), 4)
    (0.6703, 0.3563)
    """
    if metric not in _FROM_COUNTS:
        raise ValueError(f"Expected metric in {tuple(_FROM_COUNTS)}, got {metric!r}")
    return _FROM_COUNTS[metric](*_check_counts(counts, batched=True).unbind(-2), **kwargs)


def target_metric_key(metric: str) -> str:
    """The ``compute_metrics`` key of the hard metric a surrogate targets (``"f1"`` is reported as ``"fbeta"``).

    >>> target_metric_key("f1"), target_metric_key("mcc")
    ('fbeta', 'mcc')
    """
    return "fbeta" if metric in ("fbeta", "f1") else metric
