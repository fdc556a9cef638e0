"""Multi-label decision rule: one logit offset per label, ``predicted_k = z_k + b_k > 0``, tuned for a metric.

Label k is predicted where z_k > -b_k, so with the other offsets fixed every decision b_k reaches is one threshold
between consecutive distinct values of the label's logits. ``tune_label_offsets`` sweeps them exactly: candidate
thresholds are the midpoints between the sorted distinct logits of the label's labelled entries, one below and one
above all, and 0 (the untuned rule); running sums over the sorted logits give each candidate's counts in
O(N log N) a label.

- ``average="macro"``, ``"weighted"`` or None (per-label values): a label's own score depends on its offset alone
  (the weights of ``"weighted"`` are supports, fixed), so each label is tuned alone and the result is the exact
  optimum. Of equally good thresholds the one nearest 0 wins.
- ``"micro"``, ``"samples"`` and subset accuracy couple the labels: coordinate ascent over labels, in rounds, from
  the better of the untuned rule and the per-label optimum (of the per-label metric; binary accuracy per label for
  subset accuracy). A sweep scores every candidate of one label exactly (pooled counts for ``"micro"``; for
  ``"samples"`` and accuracy each row's change of F-beta, Jaccard or exact match when the label switches on, summed
  over the rows above the threshold); a change is kept only if it strictly improves the score.

The reported scores are ``multilabel_metric_from_statistics`` of the hard predictions, and the tuned rule is never
below the untuned one on the tuning data (an optimistic estimate: report the metric on held-out data). The offsets
fold into a linear head's bias (``east_hf.core.decision.rule.fold_offsets_into_bias``), so the saved model predicts
with sigmoid(z + b) > 0.5.

>>> logits = torch.tensor([[2.0, -1.0], [-0.5, -0.2], [-1.0, 1.0], [-2.0, -3.0]])
>>> labels = torch.tensor([[1.0, 0.0], [1.0, 1.0], [0.0, 1.0], [0.0, 0.0]])
>>> rule = tune_label_offsets(logits, labels)
>>> rule.baseline_score, rule.score, [round(b, 4) for b in rule.offsets.tolist()]
(0.6666666666666666, 1.0, [0.75, 0.6])
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from east_hf.core.metrics import fbeta_from_stats, safe_divide
from east_hf.core.multilabel import (
    check_label_matrix,
    metric_of_statistics,
    multilabel_entries,
    multilabel_metric_settings,
    multilabel_statistics,
    per_label_metric,
)
from east_hf.core.validation import check_int

__all__ = ["LabelOffsetRule", "tune_label_offsets"]


@dataclass(frozen=True)
class LabelOffsetRule:
    """Per-label logit offsets and the metric they reach: predict label k where ``z_k + offsets_k > 0``.

    ``offsets``: (L,) in the logits' dtype (float32 for half-precision logits); ``score``: the metric of the tuned
    rule on the tuning data; ``baseline_score``: that of the untuned rule z > 0; ``rounds``: coordinate-ascent rounds
    run (0 where each label is tuned alone).
    """

    offsets: torch.Tensor
    score: float
    baseline_score: float
    rounds: int = 0

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """logits (..., L) -> logits + offsets (..., L)."""
        return logits + self.offsets.to(device=logits.device, dtype=logits.dtype)

    def predict(self, logits: torch.Tensor) -> torch.Tensor:
        """logits (..., L) -> the tuned 0/1 decisions (..., L), int64."""
        return (self.apply(logits) > 0).long()


@dataclass
class _Label:
    """One label's sweep: candidate thresholds t (M,) ascending, and for each the entries above it (z > t) as
    suffix-sum indices into the label's logits sorted ascending."""

    thresholds: torch.Tensor  # (M,)
    above: torch.Tensor  # (M,) index of the first sorted entry above each threshold
    order: torch.Tensor  # (N,) the rows by ascending logit

    def suffix(self, values: torch.Tensor) -> torch.Tensor:
        """sum over the rows above each threshold of ``values`` (N,) -> (M,)."""
        v = values[self.order]
        tail = torch.cat([v.flip(0).cumsum(0).flip(0), v.new_zeros(1)])  # (N + 1,) tail[i] = sum_{j >= i} v_j
        return tail[self.above]


def _label_sweep(z: torch.Tensor, labelled: torch.Tensor) -> _Label:
    """The candidate thresholds of one label's logits z (N,): midpoints of the labelled entries' distinct values, one
    below and one above them all, and 0."""
    values = torch.unique(z[labelled])  # sorted
    if values.numel():
        middle = (values[1:] + values[:-1]) / 2
        ends = torch.stack([values[0] - 1, values[-1] + 1])
        thresholds = torch.cat([middle, ends, z.new_zeros(1)])
    else:
        thresholds = z.new_zeros(1)
    thresholds = torch.unique(thresholds)
    sorted_z, order = torch.sort(z, stable=True)
    return _Label(thresholds, torch.searchsorted(sorted_z, thresholds, right=True), order)


def _pick(scores: torch.Tensor, thresholds: torch.Tensor, current: float, better_than: float | None) -> float | None:
    """The threshold of the best score, nearest 0 among ties; None where it does not beat ``better_than``."""
    best = scores.max()
    if better_than is not None and not best.item() > better_than:
        return None
    tied = scores == best
    distance = torch.where(tied, thresholds.abs(), torch.inf)
    return thresholds[distance.argmin()].item()


def tune_label_offsets(
    logits: torch.Tensor,
    labels: torch.Tensor,
    metric: str = "fbeta",
    *,
    beta: float = 1.0,
    average: str | None = "macro",
    zero_division: float = 0.0,
    sample_weight: torch.Tensor | None = None,
    ignore_index: int | None = -100,
    max_rounds: int = 10,
) -> LabelOffsetRule:
    """Per-label offsets b (L,) so that ``z + b > 0`` maximises ``metric`` at ``average`` on (logits, labels).

    logits: (N, L) finite; labels: (N, L) multi-hot, entries ``ignore_index`` do not count; metric, beta, average and
    zero_division as ``multilabel_metric_from_statistics`` (``average=None`` tunes each label's own score);
    ``max_rounds``: the coordinate ascent's bound (``"micro"``, ``"samples"``, accuracy). See the module docstring.
    """
    check_label_matrix(logits, "logits")
    max_rounds = check_int("max_rounds", max_rounds, 1)
    if not bool(torch.isfinite(logits).all()):
        raise ValueError(f"Expected finite logits, got NaN or inf in logits of shape {tuple(logits.shape)}")
    z = logits.detach().double()
    N, L = z.shape
    y, mask, w, _ = multilabel_entries(labels, z.shape, sample_weight, ignore_index, True, torch.float64)
    y, mask, w = y.to(z.device), mask.to(z.device), w.to(z.device)
    metric, b, average, zero_division = multilabel_metric_settings(metric, beta, average, zero_division, L, z)
    samples_beta = 1.0 if b is None else b[0].item()

    def library_score(offsets: torch.Tensor) -> float:
        hard = (logits + offsets.to(logits.dtype) > 0).to(z.dtype)
        stats = multilabel_statistics(hard, labels, sample_weight, samples_beta=samples_beta,
                                      ignore_index=ignore_index, zero_division=zero_division)  # fmt: skip
        value = metric_of_statistics(stats, metric, b, average, zero_division)
        return value.mean().item() if average is None and metric != "accuracy" else value.item()

    entry_w = mask * w.unsqueeze(1)  # (N, L)
    sweeps = [_label_sweep(z[:, k], mask[:, k] > 0) for k in range(L)]
    thresholds = _per_label_optimum(sweeps, y, entry_w, metric, b, zero_division)  # (L,)
    rounds = 0
    if average in ("micro", "samples") or metric == "accuracy":
        zero = torch.zeros(L, dtype=z.dtype, device=z.device)
        start = thresholds if library_score(-thresholds + 0.0) > library_score(zero) else zero
        thresholds, rounds = _coordinate_ascent(z, y, mask, w, sweeps, start, metric, b, average, zero_division,
                                                max_rounds)  # fmt: skip
    offsets = (-thresholds + 0.0).to(logits.dtype if logits.dtype == torch.float64 else torch.float32)
    default = library_score(torch.zeros_like(offsets))
    score = library_score(offsets)
    if score < default:  # rounding of the offsets in the logits' dtype; never below the untuned rule
        offsets, score = torch.zeros_like(offsets), default
    return LabelOffsetRule(offsets, score, default, rounds)


def _per_label_optimum(sweeps, y, entry_w, metric, beta, zero_division) -> torch.Tensor:
    """(L,) each label's best threshold for its own score (binary accuracy per label for subset accuracy)."""
    best = []
    for k, sweep in enumerate(sweeps):
        tp, predicted = sweep.suffix(entry_w[:, k] * y[:, k]), sweep.suffix(entry_w[:, k])
        support, labelled = (entry_w[:, k] * y[:, k]).sum(), entry_w[:, k].sum()
        if metric == "accuracy":
            scores = safe_divide(labelled - support - predicted + 2 * tp, labelled, 0.0)
        else:
            scores = per_label_metric(metric, tp, support, predicted, labelled, None if beta is None else beta[k],
                                zero_division)  # fmt: skip
        best.append(_pick(scores, sweep.thresholds, 0.0, None))
    return torch.tensor(best, dtype=y.dtype, device=y.device)


def _coordinate_ascent(z, y, mask, w, sweeps, thresholds, metric, beta, average, zero_division, max_rounds):
    """Coordinate ascent over the labels' thresholds for a coupled score; returns (thresholds (L,), rounds)."""
    N, L = z.shape
    thresholds = thresholds.clone()
    P = (z > thresholds).to(z.dtype) * mask  # (N, L) current predictions of the entries that count
    entry_w = mask * w.unsqueeze(1)
    rows_w = w * (mask.sum(1) > 0).to(w.dtype)  # (N,)
    samples_beta = None if beta is None else beta[0]
    # running row sums over the labels: TP, predicted, support, and the labelled entries predicted wrong
    tp_r, pred_r, sup_r = (P * y).sum(1), P.sum(1), y.sum(1)
    wrong_r = (mask * (P - y).abs()).sum(1)
    tp_all, pred_all = (entry_w * P * y).sum(), (entry_w * P).sum()
    sup_all, lab_all = (entry_w * y).sum(), entry_w.sum()

    def row_value(tp, pred, wrong):
        if metric == "accuracy":
            return (wrong == 0).to(z.dtype)
        if metric == "jaccard":
            return safe_divide(tp, sup_r + pred - tp, zero_division)
        return fbeta_from_stats(tp, sup_r, pred, samples_beta, zero_division)

    current = None
    rounds, changed = 0, True
    while changed and rounds < max_rounds:
        rounds += 1
        changed = False
        for k, sweep in enumerate(sweeps):
            yk, pk, mk = y[:, k], P[:, k], mask[:, k]
            # the totals without label k
            tp_o, pred_o = tp_all - (entry_w[:, k] * pk * yk).sum(), pred_all - (entry_w[:, k] * pk).sum()
            stats = z.new_zeros(len(sweep.thresholds), 4, 2)  # (M, 4, 2): pooled counts, row sums
            stats[:, 0, 0] = tp_o + sweep.suffix(entry_w[:, k] * yk)
            stats[:, 1, 0], stats[:, 3, 0] = sup_all, lab_all
            stats[:, 2, 0] = pred_o + sweep.suffix(entry_w[:, k])
            if average == "samples" or metric == "accuracy":
                tp_k, pred_k, wrong_k = tp_r - pk * yk, pred_r - pk, wrong_r - mk * (pk - yk).abs()
                off = row_value(tp_k, pred_k, wrong_k + mk * yk)  # (N,) label k off
                on = row_value(tp_k + mk * yk, pred_k + mk, wrong_k + mk * (1 - yk))  # label k on
                row = 2 if metric == "accuracy" else (1 if metric == "jaccard" else 0)
                stats[:, row, 1] = (rows_w * off).sum() + sweep.suffix(rows_w * (on - off) * mk)
                stats[:, 3, 1] = rows_w.sum()
            scores = metric_of_statistics(stats, metric, beta, average, zero_division)  # (M,)
            if current is None:
                at = torch.searchsorted(sweep.thresholds, thresholds[k].reshape(1))  # the current threshold's score
                current = scores[at.clamp(max=len(scores) - 1)].item()
            t = _pick(scores, sweep.thresholds, thresholds[k].item(), current)
            if t is None:
                continue
            current = scores.max().item()
            thresholds[k] = t
            new = (z[:, k] > t).to(z.dtype) * mk
            tp_r += (new - pk) * yk
            pred_r += new - pk
            wrong_r += mk * ((new - yk).abs() - (pk - yk).abs())
            tp_all = tp_o + (entry_w[:, k] * new * yk).sum()
            pred_all = pred_o + (entry_w[:, k] * new).sum()
            P[:, k] = new
            changed = True
    return thresholds, rounds
