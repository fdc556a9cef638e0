"""The loss's second half, 1 - M, in one ``autograd.Function`` for F-beta, MCC and accuracy.

``metric_loss(confmat, ...)`` equals ``1 - METRICS[metric](confmat, ...)`` of ``east_hf.core.metrics`` (same
zero-division rules, values and gradients; ``tests/test_metric_loss.py``), with a dozen operations in each
direction instead of the composition's ~36 and one autograd node instead of ~15: at the paper's small sizes
(C = 2 or 10) the loss's cost is the count of operations, not their size. ``metric_loss_from_counts(counts, ...)``
is the same loss of the matrix's (3, C) counts (TP, support, predicted; ``metrics.confusion_counts``), the
statistics ``EASTLoss`` trains on: O(C) numbers in each direction instead of O(C^2). Both take statistics, not
logits, so the Trainer can still sum them over processes between ``EASTLoss.statistics`` and the loss.

Every gradient here has one shape: dM/dC_ij = k + row_i + col_j + [i = j] diag_i, since these metrics read C only
through its diagonal, its row sums (support), its column sums (predicted) and its total. The gradient with respect
to the counts is therefore (diag, row + k, col), and the one with respect to the matrix is assembled from the same
three vectors. Per metric:

- F-beta_k = a_k TP_k / d_k, a = 1 + b^2, d_k = b_k^2 support_k + predicted_k; with w_k = dM/dF_k and
  q_k = w_k / d_k (0 where d_k = 0): diag = q a, row = -q F b^2, col = -q F; ``weighted`` adds
  (F_i - M) / sum(support) to row i.
- micro F-beta = a TP / (b^2 S + P) and accuracy = trace / total: dM/dC_ij = (a / d) ([i = j] - M).
- MCC = (c s - <t, p>) / R, R = sqrt(A B), A = s^2 - <p, p>, B = s^2 - <t, t>: diag = s / R, row = M t / B - p / R,
  col = M p / A - t / R, k = c / R - M s / A - M s / B; 0 where A B <= 0.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from east_hf.core.metrics import _check_confmat, _check_counts, beta_vector
from east_hf.core.validation import check_average

__all__ = ["FUSED_METRICS", "MetricConstants", "metric_loss", "metric_loss_from_counts"]

FUSED_METRICS = ("fbeta", "f1", "accuracy", "mcc")  # precision and recall keep the autograd composition


class MetricConstants:
    """The tensors a metric needs on every step, built and validated once per (C, dtype, device).

    b2: (C,) beta^2 (micro: (), one beta), nb2 = -b2; a: 1 + b2, na = -a; nw: (C,) -dM/dF_k for ``macro`` (-1/C)
    and ``binary`` (minus the one-hot at ``pos_label``).
    """

    def __init__(
        self,
        metric: str,
        num_classes: int,
        like: torch.Tensor,
        beta: float | Sequence[float] | torch.Tensor = 1.0,
        average: str = "macro",
        pos_label: int = 1,
        zero_division: float = 0.0,
    ):
        if metric not in FUSED_METRICS:
            raise ValueError(f"Expected metric in {FUSED_METRICS} for the fused loss, got {metric!r}")
        C = num_classes
        self.metric = "fbeta" if metric == "f1" else metric
        self.average, self.pos_label, self.zero_division = average, pos_label, float(zero_division)
        self.num_classes = C
        self.b2 = self.nb2 = self.a = self.na = self.nw = None
        if self.metric == "fbeta":
            check_average(average, C, pos_label, allow_none=True)
            if average is None:
                raise ValueError("Expected an average for a loss (a scalar), got None")
            b = beta_vector(beta, C, like)  # validated here, once
            if average == "micro":
                if not bool((b == b[0]).all()):
                    raise ValueError(f"Expected one beta for average='micro' (classes are pooled), got {b.tolist()}")
                b = b[0]
            self.b2 = b * b
            self.nb2, self.a = -self.b2, 1 + self.b2
            if average == "macro":
                self.nw = torch.full((C,), -1.0 / C, dtype=like.dtype, device=like.device)
            elif average == "binary":
                self.nw = torch.zeros(C, dtype=like.dtype, device=like.device)
                self.nw[pos_label] = -1.0
        if self.metric == "accuracy" or (self.metric == "fbeta" and average == "micro"):
            self.na = -1.0 if self.a is None else -self.a


def _fbeta_forward(tp, s, pr, k: MetricConstants):
    """TP, support and predicted (C,) -> M and what the backward needs."""
    d = torch.addcmul(pr, k.b2, s)  # b^2 support + predicted = (1 + b^2) TP + b^2 FN + FP
    zero = d == 0
    f = torch.where(zero, k.zero_division, (k.a * tp).div_(d))  # (C,) F-beta_k
    if k.average == "macro":
        return f.mean(), (d, zero, f)
    if k.average == "binary":
        return f[k.pos_label], (d, zero, f)
    total = s.sum()  # weighted: sum_k F_k support_k / sum_k support_k, 0 for an empty matrix
    empty = total == 0
    total = torch.where(empty, 1.0, total)
    M = torch.where(empty, 0.0, torch.dot(f, s) / total)
    return M, (d, zero, f, s, total, empty, M)


def _fbeta_backward(grad, saved, k: MetricConstants):
    """(diag, row, col) of dL/dC for L = 1 - M from grad = dL_out: with q = dL/dM w / d (0 where d = 0),
    dL/dC_ij = [i = j] q_i a_i - q_i F_i b_i^2 - q_j F_j (+ the support's share for ``weighted``)."""
    d, zero, f, *weighted = saved
    if weighted:
        s, total, empty, M = weighted
        gi = torch.where(empty, 0.0, torch.div(grad, total).neg_())  # dL/dM / sum(support)
        q = torch.where(zero, 0.0, (s * gi).div_(d))  # w = support / sum(support)
        col = q * f
        row = torch.sub(f, M).mul_(gi).addcmul_(col, k.nb2)  # (F_i - M) / sum(support): the support's share
    else:
        q = torch.where(zero, 0.0, (k.nw * grad).div_(d))  # (C,) dL/dM w_k / d_k
        col = q * f
        row = col * k.nb2
    return q * k.a, row, col.neg_()


def _trace_forward(tp, s, pr, k: MetricConstants):
    """Accuracy trace / total, and micro F-beta (1 + b^2) TP / (b^2 S + P): a multiple of the trace over a total."""
    tr = tp.sum()
    if k.metric == "accuracy":
        num, d = tr, s.sum()
    else:
        num, d = k.a * tr, torch.addcmul(pr.sum(), k.b2, s.sum())
    zero = d == 0
    zd = k.zero_division if k.metric == "fbeta" else 0.0
    d = torch.where(zero, 1.0, d)
    M = torch.where(zero, zd, num / d)
    return M, (d, zero, M)


def _trace_backward(grad, saved, k: MetricConstants):
    d, zero, M = saved
    coef = torch.where(zero, 0.0, (grad * k.na).div_(d))  # dL/dM a / d
    return coef, coef * M.neg(), torch.zeros_like(coef)  # (a / d) ([i = j] - M)


def _mcc_forward(tp, t, p, k: MetricConstants):
    c, s = tp.sum(), t.sum()
    cov_tp = c * s - torch.dot(t, p)
    ss = s * s
    A = ss - torch.dot(p, p)
    B = ss - torch.dot(t, t)
    den = A * B
    pos = den > 0
    R = torch.where(pos, den, 1.0).sqrt_()
    M = torch.where(pos, cov_tp / R, 0.0)
    return M, (t, p, c, s, A, B, R, pos, M)


def _mcc_backward(grad, saved, k: MetricConstants):
    t, p, c, s, A, B, R, pos, M = saved
    g = torch.where(pos, grad.neg(), 0.0)  # dL/dM
    invR = g / R
    MA = torch.where(pos, g * M / torch.where(pos, A, 1.0), 0.0)
    MB = torch.where(pos, g * M / torch.where(pos, B, 1.0), 0.0)
    const = c * invR - s * (MA + MB)
    row = torch.mul(t, MB).sub_(p * invR).add_(const)  # M t_i / B - p_i / R + k
    col = torch.mul(p, MA).sub_(t * invR)  # M p_j / A - t_j / R
    return s * invR, row, col


_FORWARD = {"fbeta": _fbeta_forward, "accuracy": _trace_forward, "mcc": _mcc_forward}
_BACKWARD = {"fbeta": _fbeta_backward, "accuracy": _trace_backward, "mcc": _mcc_backward}


def _kind(k: MetricConstants) -> str:
    return "accuracy" if k.metric == "fbeta" and k.average == "micro" else k.metric


class _MetricLoss(torch.autograd.Function):
    """1 - M of a (C, C) confusion matrix or of its (3, C) counts -> (), with the rank-structured backward of the
    module docstring: dL/dC = row_i + col_j + [i = j] diag_i, dL/dcounts = (diag, row, col)."""

    @staticmethod
    def forward(ctx, stats, constants: MetricConstants, counts: bool, zero_if_empty: bool):
        tp, s, pr = stats.unbind(0) if counts else (stats.diagonal(), stats.sum(1), stats.sum(0))
        M, saved = _FORWARD[_kind(constants)](tp, s, pr, constants)
        ctx.constants, ctx.counts, ctx.empty = constants, counts, None
        ctx.save_for_backward(*saved)
        if zero_if_empty:  # no labelled row: a loss of 0 whose gradient is 0
            ctx.empty = s.sum() == 0
            return torch.where(ctx.empty, 0.0, torch.rsub(M, 1.0))
        return torch.rsub(M, 1.0)

    @staticmethod
    def backward(ctx, grad):
        k = ctx.constants
        C = k.num_classes
        if ctx.empty is not None:
            grad = torch.where(ctx.empty, 0.0, grad)
        diag, row, col = (v.expand(C) for v in _BACKWARD[_kind(k)](grad, ctx.saved_tensors, k))
        if ctx.counts:
            return torch.stack([diag, row, col]), None, None, None  # (3, C)
        dcm = torch.add(row.unsqueeze(1), col)  # (C, C) row_i + col_j
        dcm.diagonal().add_(diag)
        return dcm, None, None, None


def metric_loss(
    confmat: torch.Tensor,
    metric: str = "fbeta",
    beta: float | Sequence[float] | torch.Tensor = 1.0,
    average: str = "macro",
    pos_label: int = 1,
    zero_division: float = 0.0,
    constants: MetricConstants | None = None,
) -> torch.Tensor:
    """1 - M(confmat) for M in ``FUSED_METRICS``: (C, C) -> (), equal to ``1 - METRICS[metric](confmat, ...)``.

    ``constants`` (a ``MetricConstants`` of the same C, dtype and device) skips building and validating beta on
    every call, as ``EASTLoss`` does; the other arguments are then ignored.

    >>> cm = torch.tensor([[5.0, 1.0], [2.0, 2.0]])
    >>> round(1 - metric_loss(cm, "fbeta").item(), 4), round(1 - metric_loss(cm, "mcc").item(), 4)
    (0.6703, 0.3563)
    """
    confmat = _check_confmat(confmat)
    if constants is None:
        constants = MetricConstants(metric, confmat.shape[0], confmat, beta, average, pos_label, zero_division)
    return _MetricLoss.apply(confmat, constants, False, False)


def metric_loss_from_counts(
    counts: torch.Tensor,
    metric: str = "fbeta",
    beta: float | Sequence[float] | torch.Tensor = 1.0,
    average: str = "macro",
    pos_label: int = 1,
    zero_division: float = 0.0,
    constants: MetricConstants | None = None,
    *,
    zero_if_empty: bool = False,
) -> torch.Tensor:
    """``metric_loss`` of the matrix whose (3, C) counts (TP, support, predicted) these are: (3, C) -> (), equal to
    ``1 - metrics.metric_from_counts(counts, metric, ...)`` and to ``metric_loss`` of the matrix itself.
    ``zero_if_empty``: 0 with a zero gradient where the support sums to 0 (no labelled row), ``EASTLoss``'s rule.

    >>> counts = torch.tensor([[5.0, 2.0], [6.0, 4.0], [7.0, 3.0]])  # the matrix [[5, 1], [2, 2]]
    >>> (round(1 - metric_loss_from_counts(counts, "fbeta").item(), 4),
    ...  round(1 - metric_loss_from_counts(counts, "mcc").item(), 4))
    (0.6703, 0.3563)
    """
    counts = _check_counts(counts)
    if constants is None:
        constants = MetricConstants(metric, counts.shape[1], counts, beta, average, pos_label, zero_division)
    return _MetricLoss.apply(counts, constants, True, bool(zero_if_empty))
