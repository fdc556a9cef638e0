"""Multi-label EAST: per-label soft predictions, their additive statistics and metrics, and ``MultiLabelEASTLoss``.

Every row may carry several of L labels. Labels are a float (N, L) multi-hot tensor: 0.0 / 1.0 per entry, or
``ignore_index`` (-100) for an entry that does not count. Label k is predicted where its logit z_k > 0 (sigmoid > 0.5).

- ``soft_label_predictions``: per label, the linear Heaviside approximation H_T^l of the paper (Eq. linear-param) at
  the fixed threshold 0.5 applied to sigmoid(z_k), Tsoi et al. 2022's binary surrogate; as T -> 0 it tends to the
  hard predictions ``(logits > 0)``.
- ``multilabel_statistics``: the (4, L + 1) statistics of soft or hard (0/1) predictions, additive over batches and
  processes. Columns 0..L-1, per label k: TP_k, support_k, predicted_k and labelled_k (the weight of the entries that
  count); TN_k = labelled_k - TP_k - FP_k - FN_k. Column L, the per-row accumulators of ``average="samples"``: the sum
  of the rows' F-beta (at ``samples_beta``), of their Jaccard, of their exact match, and the number (weight) of rows
  with a labelled entry.
- ``multilabel_metric_from_statistics``: F-beta, precision, recall, Jaccard, per-label MCC and subset accuracy of
  those statistics, equal to scikit-learn's scores of indicator arrays for hard predictions.
``MultiLabelEASTLoss`` (1 - M of the soft statistics) and the multi-label baselines are in
``east_hf.core.multilabel_losses``.

Pure torch.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from east_hf.core.metrics import beta_vector, fbeta_from_stats, mcc_from_stats, safe_divide
from east_hf.core.surrogate import NO_LABEL_FAULT, linear_heaviside
from east_hf.core.validation import (
    MULTILABEL_AVERAGES,
    check_choice,
    check_multilabel_average,
    check_temperature,
    check_zero_division,
)

__all__ = [
    "MULTILABEL_AVERAGES",
    "MULTILABEL_METRICS",
    "check_label_matrix",
    "check_statistics",
    "metric_of_statistics",
    "multilabel_entries",
    "multilabel_label_error",
    "multilabel_metric_from_statistics",
    "multilabel_metric_settings",
    "multilabel_statistics",
    "per_label_metric",
    "soft_label_predictions",
    "statistics_of_entries",
]

MULTILABEL_METRICS = ("fbeta", "f1", "precision", "recall", "jaccard", "mcc", "accuracy")


def check_label_matrix(x: torch.Tensor, name: str) -> None:
    """Refuse anything but a floating (N, L) tensor, L >= 1 (multi-label logits or predictions), in one line."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"Expected {name} as a torch.Tensor of shape (N, L), got {type(x).__name__}")
    if x.ndim != 2 or x.shape[1] < 1:
        raise ValueError(f"Expected {name} of shape (N, L) with L >= 1, got shape {tuple(x.shape)}")
    if not x.is_floating_point():
        raise TypeError(f"Expected floating-point {name}, got dtype {x.dtype}")


def soft_label_predictions(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """Per-label soft predictions H_T^l(sigmoid(z), 0.5): logits (N, L) -> (N, L) in [0, 1].

    The paper's linear Heaviside approximation at the fixed threshold 0.5, one binary problem per label (Tsoi et al.,
    2022). Computed in float32 whatever the autocast context (float64 for float64 logits).

    >>> soft_label_predictions(torch.tensor([[-9.0, 0.0, 9.0]]), 1e-3).round(decimals=2)
    tensor([[0.0000, 0.5000, 1.0000]])
    """
    check_label_matrix(logits, "logits")
    temperature = check_temperature(temperature)
    with torch.autocast(logits.device.type, enabled=False):
        probs = torch.sigmoid(logits if logits.dtype == torch.float64 else logits.float())  # (N, L)
        return linear_heaviside(probs, torch.full((), 0.5, dtype=probs.dtype, device=probs.device), temperature)


def multilabel_label_error(bad: float | int, ignore_index: int | None) -> ValueError:
    """The one-line error of a multi-label label that is not 0, 1 or ``ignore_index`` (``bad``: the value, or with
    ``validate_args=False`` the number of such entries a batch held)."""
    return ValueError(f"Expected multi-label labels of 0, 1 (or ignore_index={ignore_index}), got {bad}")


def multilabel_entries(labels, shape, sample_weight, ignore_index, validate_args, dtype):
    """The input formatting every multi-label statistic shares: (y, mask, weight, fault): labels (N, L) as 0/1 of
    ``dtype`` (ignored and faulty entries 0), the (N, L) mask of the entries that count, the (N,) row weights and a ()
    int64 fault (the number of entries that are not 0, 1 or ``ignore_index``; ``NO_LABEL_FAULT`` where none).
    ``validate_args`` raises for a bad entry instead (one host read for the labels and the weights)."""
    N, L = shape
    if not isinstance(labels, torch.Tensor):
        raise TypeError(f"Expected labels as a torch.Tensor of shape ({N}, {L}), got {type(labels).__name__}")
    if labels.shape != (N, L):
        raise ValueError(
            f"Expected multi-label labels of shape ({N}, {L}) to match the logits, got shape {tuple(labels.shape)}"
        )
    if sample_weight is not None and (not isinstance(sample_weight, torch.Tensor) or sample_weight.shape != (N,)):
        got = tuple(sample_weight.shape) if isinstance(sample_weight, torch.Tensor) else type(sample_weight).__name__
        raise ValueError(f"Expected sample_weight of shape ({N},), got {got}")
    positive, negative = labels == 1, labels == 0
    ignored = labels == ignore_index if ignore_index is not None else torch.zeros_like(positive)
    mask = positive | negative
    if ignore_index in (0, 1):
        mask = mask & ~ignored
    bad = ~(mask | ignored)  # (N, L)
    weight = torch.ones(N, dtype=dtype, device=labels.device) if sample_weight is None else sample_weight.to(dtype)
    if validate_args:
        checks = [bad.any()]
        if sample_weight is not None:
            checks.append(~((weight >= 0) & torch.isfinite(weight)).all())
        flags = torch.stack(checks).tolist()
        if flags[0]:
            raise multilabel_label_error(labels[bad][0].item(), ignore_index)
        if len(flags) > 1 and flags[1]:
            raise ValueError(f"Expected every sample_weight finite and >= 0, got min {weight.min().item()}")
        fault = torch.full((), NO_LABEL_FAULT, dtype=torch.int64, device=labels.device)
    else:
        count = bad.sum()
        fault = torch.where(count > 0, count, NO_LABEL_FAULT)
    return positive.to(dtype) * mask, mask.to(dtype), weight, fault


def multilabel_statistics(
    predictions: torch.Tensor,
    labels: torch.Tensor,
    sample_weight: torch.Tensor | None = None,
    *,
    samples_beta: float = 1.0,
    ignore_index: int | None = -100,
    zero_division: float = 0.0,
    validate_args: bool = True,
) -> torch.Tensor:
    """The additive (4, L + 1) statistics of predictions (N, L) in [0, 1] (soft, or hard 0/1: ``(logits > 0)``) and
    multi-hot labels (N, L) (see the module docstring for the layout); rows weighted by ``sample_weight`` (N,).

    float32 (float64 for float64 predictions), with autocast off. ``samples_beta``: the beta of the rows' F-beta
    (0 gives each row's precision, ``math.inf`` its recall). A row whose F-beta or Jaccard divides by zero (no true
    and no predicted label) scores ``zero_division``, as scikit-learn's ``average="samples"``. ``validate_args=False``
    reads nothing from the device: entries that are not 0, 1 or ``ignore_index`` count for nothing (use
    ``MultiLabelEASTLoss.statistics`` to have them recorded).

    >>> y = torch.tensor([[1.0, 0.0, -100.0], [0.0, 1.0, 1.0]])
    >>> multilabel_statistics(torch.tensor([[1.0, 1.0, 0.0], [0.0, 1.0, 0.0]]), y)
    tensor([[1.0000, 1.0000, 0.0000, 1.3333],
            [1.0000, 1.0000, 1.0000, 1.0000],
            [1.0000, 2.0000, 0.0000, 0.0000],
            [2.0000, 2.0000, 1.0000, 2.0000]])
    """
    check_label_matrix(predictions, "predictions")
    if isinstance(samples_beta, bool) or not isinstance(samples_beta, (int, float)) or not samples_beta >= 0:
        raise ValueError(f"Expected samples_beta as a float in [0, inf], got {samples_beta!r}")
    zero_division = check_zero_division(zero_division)
    with torch.autocast(predictions.device.type, enabled=False):
        dtype = torch.float64 if predictions.dtype == torch.float64 else torch.float32
        p = predictions.to(dtype)  # (N, L)
        y, mask, w, _ = multilabel_entries(labels, p.shape, sample_weight, ignore_index, validate_args, dtype)
        if validate_args and p.numel() and not bool(((p >= -1e-6) & (p <= 1 + 1e-6)).all()):  # float rounding of H
            raise ValueError(
                f"Expected predictions in [0, 1] (soft or 0/1; logits? pass (logits > 0).float()), got values in "
                f"[{p.min().item():.4g}, {p.max().item():.4g}]"
            )
        return statistics_of_entries(p, y, mask, w, float(samples_beta), zero_division)


def statistics_of_entries(p, y, mask, w, samples_beta: float, zero_division: float) -> torch.Tensor:
    """``multilabel_statistics`` of checked tensors: p, y, mask (N, L), w (N,)."""
    pm = p * mask  # (N, L) the predictions of the entries that count
    tp_e = pm * y
    entry_w = w.unsqueeze(1)  # (N, 1)
    per_label = torch.stack(
        [(tp_e * entry_w).sum(0), (y * entry_w).sum(0), (pm * entry_w).sum(0), (mask * entry_w).sum(0)]
    )  # fmt: skip  (4, L)
    tp_r, sup_r, pred_r = tp_e.sum(1), y.sum(1), pm.sum(1)  # (N,) per row
    if math.isinf(samples_beta):
        f_r = safe_divide(tp_r, sup_r, zero_division)  # the F-beta limit: recall
    else:
        beta = torch.full((), samples_beta, dtype=p.dtype, device=p.device)  # a fill: no copy from the host
        f_r = fbeta_from_stats(tp_r, sup_r, pred_r, beta, zero_division)
    j_r = safe_divide(tp_r, sup_r + pred_r - tp_r, zero_division)
    exact_r = torch.where(mask > 0, 1.0 - (p - y).abs(), 1.0).prod(1)  # soft: prod_k (1 - |p_k - y_k|)
    row_w = w * (mask.sum(1) > 0).to(w.dtype)  # rows with a labelled entry
    samples = torch.stack([(row_w * f_r).sum(), (row_w * j_r).sum(), (row_w * exact_r).sum(), row_w.sum()])
    return torch.cat([per_label, samples.unsqueeze(1)], dim=1)  # (4, L + 1)


def check_statistics(stats: torch.Tensor) -> torch.Tensor:
    if not isinstance(stats, torch.Tensor):
        raise TypeError(f"Expected stats as a (4, L + 1) torch.Tensor, got {type(stats).__name__}")
    if stats.ndim < 2 or stats.shape[-2] != 4 or stats.shape[-1] < 2:
        raise ValueError(
            f"Expected multi-label statistics of shape (4, L + 1) with L >= 1 (multilabel_statistics), got shape "
            f"{tuple(stats.shape)}"
        )
    return stats if stats.is_floating_point() else stats.double()


def _binary_mcc(tp, support, predicted, labelled):
    """Per-label binary MCC of TP, support, predicted and the labelled total: the 2x2 matrix's mcc_from_stats."""
    tn = labelled - support - predicted + tp
    neg_t, neg_p = labelled - support, labelled - predicted
    return mcc_from_stats(tp + tn, labelled, neg_t * neg_p + support * predicted,
                          neg_p * neg_p + predicted * predicted, neg_t * neg_t + support * support)  # fmt: skip


def per_label_metric(metric, tp, support, predicted, labelled, beta, zero_division):
    """The per-label (or pooled) value of ``metric`` (not ``"accuracy"``) from broadcastable counts: TP, support,
    predicted, labelled and beta; the decision tuner scores its candidates with it."""
    if metric in ("fbeta", "f1"):
        return fbeta_from_stats(tp, support, predicted, beta, zero_division)
    if metric == "precision":
        return safe_divide(tp, predicted, zero_division)
    if metric == "recall":
        return safe_divide(tp, support, zero_division)
    if metric == "jaccard":
        return safe_divide(tp, support + predicted - tp, zero_division)
    return _binary_mcc(tp, support, predicted, labelled)


def metric_of_statistics(stats, metric: str, beta, average: str | None, zero_division: float) -> torch.Tensor:
    """``multilabel_metric_from_statistics`` of checked settings (``multilabel_metric_settings``); ``beta``: an (L,)
    tensor for F-beta (else None). Reads nothing from the device, so ``MultiLabelEASTLoss`` calls it on every step."""
    L = stats.shape[-1] - 1
    tp, support, predicted, labelled = stats[..., :L].unbind(-2)  # each (..., L)
    samples = stats[..., L]  # (..., 4)
    if metric == "accuracy":
        return safe_divide(samples[..., 2], samples[..., 3], 0.0)
    if average == "samples":
        return safe_divide(samples[..., 0 if metric in ("fbeta", "f1") else 1], samples[..., 3], zero_division)
    if average == "micro":
        pooled = [v.sum(-1) for v in (tp, support, predicted, labelled)]
        return per_label_metric(metric, *pooled, None if beta is None else beta[0], zero_division)
    values = per_label_metric(metric, tp, support, predicted, labelled, beta, zero_division)  # (..., L)
    if average is None:
        return values
    if average == "weighted":  # scikit-learn: weights = support, the plain mean where every support is 0
        total = support.sum(-1)
        weighted = (values * support).sum(-1) / torch.where(total > 0, total, 1.0)
        return torch.where(total > 0, weighted, values.mean(-1))
    return values.mean(-1)


def multilabel_metric_settings(metric, beta, average, zero_division, num_labels: int, like: torch.Tensor):
    """The checked (metric, beta (L,) tensor or None, average, zero_division) of ``multilabel_metric_from_statistics``
    for L = ``num_labels`` labels, the betas on ``like``'s dtype and device (one host read for them)."""
    metric = check_choice("metric", metric, MULTILABEL_METRICS)
    average = check_multilabel_average(average, allow_none=True)
    zero_division = check_zero_division(zero_division)
    if metric == "mcc" and average == "samples":
        raise ValueError(
            "Expected average in ('macro', 'micro', 'weighted') or None for metric='mcc' (MCC is per label; a row "
            "has no MCC), got 'samples'"
        )
    if metric in ("precision", "recall") and average == "samples":
        beta_hint = "0" if metric == "precision" else "math.inf"
        raise ValueError(
            f"Expected average in ('macro', 'micro', 'weighted') or None for metric={metric!r} (the statistics keep "
            f"each row's F-beta), got 'samples' (use multilabel_statistics(..., samples_beta={beta_hint}) and "
            "metric='fbeta')"
        )
    b = None
    if metric in ("fbeta", "f1"):
        b = beta_vector(beta, num_labels, like)
        if average in ("micro", "samples") and not bool((b == b[0]).all()):
            why = "labels are pooled" if average == "micro" else "each row's F-beta is at one beta"
            raise ValueError(
                f"Expected one beta for average={average!r} ({why}), got per-label betas {b.tolist()} "
                "(per-label betas need 'macro', 'weighted' or None)"
            )
    return metric, b, average, zero_division


def multilabel_metric_from_statistics(
    stats: torch.Tensor,
    metric: str = "fbeta",
    *,
    beta: float | Sequence[float] | torch.Tensor = 1.0,
    average: str | None = "macro",
    zero_division: float = 0.0,
) -> torch.Tensor:
    """A metric of multi-label statistics (4, L + 1) (``multilabel_statistics``; (K, 4, L + 1): K values).

    metric: ``"fbeta"`` (alias ``"f1"``), ``"precision"``, ``"recall"``, ``"jaccard"``, ``"mcc"`` (each label's
    binary MCC; ``"micro"``: MCC of the summed 2x2 counts) or ``"accuracy"`` (subset accuracy, exact-match rows /
    rows, whatever the average). beta: a float or one per label (``"macro"``, ``"weighted"``, None). average:
    ``"macro"``, ``"micro"``, ``"weighted"`` (by support; the plain mean where no label has a positive, as
    scikit-learn), ``"samples"`` (the mean of the rows' F-beta or Jaccard, as accumulated by the statistics at their
    ``samples_beta`` and ``zero_division``) or None (the (L,) per-label values). ``zero_division``: the value of a
    ratio whose denominator is 0, as scikit-learn's. Differentiable.

    >>> y = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    >>> stats = multilabel_statistics(torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]), y)
    >>> [round(multilabel_metric_from_statistics(stats, average=a).item(), 4) for a in ("macro", "micro", "samples")]
    [0.75, 0.75, 0.7778]
    """
    stats = check_statistics(stats)
    metric, b, average, zero_division = multilabel_metric_settings(
        metric, beta, average, zero_division, stats.shape[-1] - 1, stats
    )
    return metric_of_statistics(stats, metric, b, average, zero_division)
