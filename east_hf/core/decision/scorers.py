"""The decision tuner's candidate scoring: the metric of many candidate decisions at once, from their statistics.

A candidate is a state, the statistics its decisions give a metric: ``StatsScorer``'s (2C,) [TP_k | predicted_k]
for a named metric, ``MatrixScorer``'s flat (C, C) confusion matrix for a callable. Each scorer counts the state of
a set of decisions (``count``), builds the states of a run of candidates from the moves between them (``states``,
(K, D)) and scores K states at once (``__call__``); ``StatsScorer.sweep`` scores every position of one coordinate's
sweep (``east_hf.core.decision.sweep.CoordinateSweep``) from running counts in O(N). The method is described in
``east_hf.core.decision.rule``. Pure torch.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

import torch

from east_hf.core.metrics import fbeta_from_stats, mcc_from_stats, metric_from_counts, safe_divide

if TYPE_CHECKING:
    from east_hf.core.decision.sweep import CoordinateSweep

__all__ = ["MatrixScorer", "StatsScorer"]


class StatsScorer:
    """The named metrics from their sufficient statistics, batched: state (K, 2C) = [TP_k | predicted_k].

    Every metric of ``METRICS`` reads a confusion matrix only through its diagonal, row sums (the support, fixed by
    the labels) and column sums, so a candidate needs 2C numbers instead of C^2, scored by the core's own
    ``metrics.metric_from_counts``. ``sweep`` scores a whole coordinate's sweep incrementally from running counts
    with the same formulas (``metrics.fbeta_from_stats``, ``metrics.mcc_from_stats``); ``tests/test_decision.py``
    checks it against the candidates' scores. Every score the tuner keeps or reports is the library's metric of a
    hard confusion matrix.
    """

    def __init__(self, metric: str, kwargs: dict, labels: torch.Tensor, num_classes: int):
        self.metric, self.C, self.kwargs = metric, num_classes, kwargs
        self.average = kwargs.get("average", "macro")
        self.pos_label = kwargs.get("pos_label", 1)
        self.zero_division = kwargs.get("zero_division", 0.0)
        self.beta = kwargs.get("beta")  # (C,) float64 for F-beta
        self.support = torch.bincount(labels, minlength=num_classes).double()  # (C,)
        self.dim = 2 * num_classes
        # Accuracy, MCC, micro and binary averages are functions of sums of integer counts: a sweep is exact.
        self.exact = metric in ("accuracy", "mcc") or self.average in ("micro", "binary")

    def count(self, labels: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        """The state (2C,) of the decisions ``pred`` (N,)."""
        hits = (labels == pred).double()
        return torch.cat([torch.bincount(pred, hits, self.C), torch.bincount(pred, minlength=self.C).double()])

    def states(self, base, labels, alt, k: int, groups, K: int) -> torch.Tensor:
        """(K, 2C): candidate j is ``base`` plus the moves from ``alt`` to k of the samples whose group is <= j."""
        C, D = self.C, self.dim
        hits = (labels == alt).double()
        flat = groups * D + alt
        moves = torch.zeros((K + 1) * D, dtype=torch.float64, device=base.device)
        moves.index_add_(0, flat, hits, alpha=-1.0)  # TP of the class left
        moves.index_add_(0, flat + C, torch.ones_like(hits), alpha=-1.0)  # its predicted count
        moves = moves.view(K + 1, D)
        moves[:, k] += torch.bincount(groups, weights=(labels == k).double(), minlength=K + 1)  # TP of k
        moves[:, C + k] += torch.bincount(groups, minlength=K + 1)  # predicted as k
        return moves[:K].cumsum(0) + base

    def per_class(self, tp: torch.Tensor, pred: torch.Tensor, cls: torch.Tensor | int) -> torch.Tensor:
        """F-beta, precision or recall of classes ``cls`` from their TP and predicted counts, all of one shape."""
        s = _take(self.support, cls)
        if self.metric in ("fbeta", "f1"):
            return fbeta_from_stats(tp, s, pred, _take(self.beta, cls), self.zero_division)
        if self.metric == "precision":
            return safe_divide(tp, pred, self.zero_division)
        return safe_divide(tp, s.expand_as(tp), self.zero_division)

    def pooled(self, tp: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        """Micro F-beta, precision or recall from the TP and predicted counts summed over the classes."""
        s = self.support.sum()
        if self.metric in ("fbeta", "f1"):
            return fbeta_from_stats(tp, s, pred, self.beta[0], self.zero_division)
        if self.metric == "precision":
            return safe_divide(tp, pred, self.zero_division)
        return safe_divide(tp, s.expand_as(tp), self.zero_division)

    def sweep(self, coord: CoordinateSweep) -> torch.Tensor:
        """The scores (N + 1,) of every position i of ``coord``'s sweep (its first i sorted samples moved from their
        runner-up to k) in O(N) after a stable sort: ``self(states)`` exactly where ``self.exact``, else a float64
        running sum within ``_SUM_ROUNDING * (N + 1)`` of it per unit of the metric's scale
        (``east_hf.core.decision.sweep``)."""
        C, k, y, alt, base = self.C, coord.k, coord.y, coord.alt_sorted, coord.base
        N = len(y)
        tp0, p0 = base[:C], base[C:]  # (C,) when nobody predicts k
        hk, ha = (y == k).double(), (y == alt).double()  # (N,): sample r is a TP of k / was a TP of a_r
        i = torch.arange(N + 1, dtype=torch.float64, device=base.device)  # samples moved, k's predicted count
        tp_sum = tp0.sum() + _running(hk - ha)  # integers: exact
        if self.metric == "accuracy":
            return safe_divide(tp_sum, self.support.sum(), 0.0)
        if self.average == "micro" and self.metric != "mcc":
            return self.pooled(tp_sum, p0.sum().expand(N + 1))  # every sample is predicted once
        if self.average == "binary" and self.metric != "mcc":
            p = self.pos_label
            if p == k:
                return self.per_class(_running(hk), i, p)
            leaves = (alt == p).double()
            return self.per_class(tp0[p] - _running(ha * leaves), p0[p] - _running(leaves), p)
        leaving = _leaving_counts(alt, ha, tp0, p0, C)
        if self.metric == "mcc":
            return self._sweep_mcc(k, alt, p0, i, tp_sum, leaving)
        return self._sweep_average(k, hk, tp0, p0, i, leaving)

    def _sweep_mcc(self, k: int, alt, p0, i, tp_sum, leaving) -> torch.Tensor:
        """MCC along the sweep: its sums of products of the support and predicted counts, updated per move."""
        s = self.support
        order, _, _, _, pred_after = leaving
        sp = (s * p0).sum() + _running(s[k] - s.index_select(0, alt))  # sum_c s_c pred_c
        delta = torch.empty(len(alt), dtype=torch.float64, device=s.device)  # per sample, in sweep order
        delta.index_copy_(0, order, -(2 * pred_after + 1))  # (P - 1)^2 - P^2 for a_r
        pp = (p0 * p0).sum() + i * i + _running(delta)  # sum_c pred_c^2
        return mcc_from_stats(tp_sum, s.sum(), sp, pp, (s * s).sum())

    def _sweep_average(self, k: int, hk, tp0, p0, i, leaving) -> torch.Tensor:
        """A macro or weighted average along the sweep: a running sum of the changes of the per-class terms."""
        s, C = self.support, self.C
        order, group, first, tp_after, pred_after = leaving
        weights = s if self.average == "weighted" else torch.ones_like(s)  # (C,)
        terms = self.per_class(tp0, p0, torch.arange(C, device=s.device))  # (C,) k's term at (0, 0)
        after = self.per_class(tp_after, pred_after, group)  # (N,) a_r's term once r has left
        before = torch.where(first, terms.index_select(0, group), after.roll(1))  # ... and before: the previous after
        delta = torch.empty(len(group), dtype=torch.float64, device=s.device)  # per sample, in sweep order
        delta.index_copy_(0, order, weights.index_select(0, group) * (after - before))
        own = weights[k] * (self.per_class(_running(hk), i, k) - terms[k])
        total = (weights * terms).sum() + _running(delta) + own
        if self.average == "weighted":
            return safe_divide(total, s.sum(), 0.0)
        return total / C

    def __call__(self, states: torch.Tensor) -> torch.Tensor:
        """The metric of each candidate state (K, 2C): ``metrics.metric_from_counts`` of its (3, C) counts."""
        tp, pred = states[:, : self.C], states[:, self.C :]  # (K, C) each
        counts = torch.stack([tp, self.support.expand_as(tp), pred], dim=1)  # (K, 3, C)
        return metric_from_counts(counts, self.metric, **self.kwargs)


class MatrixScorer:
    """Any metric of the (C, C) matrix, batched: state (K, C * C); vmapped, or one by one for a callable that vmap
    cannot trace (a Python float result, data-dependent control flow)."""

    def __init__(self, fn: Callable, num_classes: int):
        self.fn, self.vmapped, self.use_vmap = fn, torch.func.vmap(fn), True
        self.C, self.dim = num_classes, num_classes * num_classes

    def count(self, labels: torch.Tensor, pred: torch.Tensor) -> torch.Tensor:
        """The state (C * C,) of the decisions ``pred`` (N,): the confusion matrix, flat."""
        return torch.bincount(labels * self.C + pred, minlength=self.dim).double()

    def states(self, base, labels, alt, k: int, groups, K: int) -> torch.Tensor:
        """(K, C * C): candidate j is ``base`` plus the moves from ``alt`` to k of the samples of group <= j."""
        flat = groups * self.dim + labels * self.C
        ones = torch.ones(len(labels), dtype=torch.float64, device=base.device)
        moves = torch.zeros((K + 1) * self.dim, dtype=torch.float64, device=base.device)
        moves.index_add_(0, flat + alt, ones, alpha=-1.0).index_add_(0, flat + k, ones)
        return moves.view(K + 1, self.dim)[:K].cumsum(0) + base

    def __call__(self, states: torch.Tensor) -> torch.Tensor:
        cms = states.view(-1, self.C, self.C)  # (K, C, C)
        if self.use_vmap:
            try:
                return torch.as_tensor(self.vmapped(cms), dtype=torch.float64).reshape(len(cms))
            except Exception:  # a callable vmap cannot trace: loop instead, from now on
                self.use_vmap = False
        return torch.tensor([float(self.fn(cm)) for cm in cms], dtype=torch.float64, device=cms.device)


def _running(x: torch.Tensor) -> torch.Tensor:
    """x (N,) -> (N + 1,): its sum over the first i samples."""
    return torch.cat([x.new_zeros(1), x.cumsum(0)])


def _leaving_counts(alt: torch.Tensor, lost: torch.Tensor, tp0: torch.Tensor, p0: torch.Tensor, num_classes: int):
    """The counts of the class each swept sample leaves, once it has left: sample r leaves a_r, whose counts have
    already dropped by what a_r's earlier samples took. Grouped by a_r (sweep order within a group), a running count
    per group gives them. ``lost`` (N,): sample r was a TP of a_r; tp0, p0 (C,): the counts with nobody in k.

    Returns (order, group, first, tp_after, pred_after), each (N,) in grouped order: the stable order by a_r, a_r,
    whether r opens its group, and a_r's TP and predicted counts after r's move.
    """
    N, device = len(alt), alt.device
    order = _stable_order(alt, num_classes)  # (N,)
    group, lost = alt.index_select(0, order), lost.index_select(0, order)
    r = torch.arange(N, device=device)
    first = torch.ones(N, dtype=torch.bool, device=device)
    first[1:] = group[1:] != group[:-1]
    start = torch.cummax(torch.where(first, r, 0), 0).values  # (N,) the group's first position
    gone = lost.cumsum(0)
    tp_after = tp0.index_select(0, group) - (gone - gone.index_select(0, start) + lost.index_select(0, start))
    pred_after = p0.index_select(0, group) - (r - start + 1).double()
    return order, group, first, tp_after, pred_after


def _take(values: torch.Tensor, cls: torch.Tensor | int) -> torch.Tensor:
    """values (C,) at the classes ``cls``: a tensor of indices (gathered with ``index_select``, fast on CPU) or one."""
    return values.index_select(0, cls) if isinstance(cls, torch.Tensor) else values[cls]


def _stable_order(classes: torch.Tensor, num_classes: int) -> torch.Tensor:
    """The stable argsort (N,) of class indices (N,): numpy's radix sort on CPU (16-bit keys), torch's elsewhere."""
    if classes.device.type == "cpu":
        keys = classes.numpy().astype("int16" if num_classes <= 1 << 15 else "int64")
        return torch.from_numpy(keys.argsort(kind="stable"))
    return torch.sort(classes, stable=True).indices
