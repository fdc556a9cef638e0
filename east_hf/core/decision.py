"""Decision-rule tuning: per-class logit offsets ``b`` (C,) so that ``argmax(logits + b)`` maximises a metric.

A classifier predicts ``argmax_k l_k``; the metric it is judged by (macro F-beta, MCC, F-beta of one class) is often
better served by moving the decision boundaries, which an additive offset per class does without retraining (the
plug-in threshold of Lipton et al. 2014, "Thresholding classifiers to maximize F1"). ``tune_logit_offsets`` fits the
offsets on validation logits, scoring every candidate with the library's own metric of the hard confusion matrix.

Method. With the other offsets fixed, sample n predicts class k iff ``l_nk + b_k > m_n := max_{j != k} (l_nj + b_j)``,
so its decision is a step function of ``b_k`` that switches between k and its runner-up ``a_n`` at the critical value
``t_n = m_n - l_nk``. Sorting t lists every decision ``b_k`` can reach: candidate i moves the first i sorted samples
from their runner-up to k. Candidate offsets are midpoints between consecutive distinct critical values, plus one
below and one above all.

- A named metric reads a confusion matrix only through TP, support and predicted counts, and moving sample r changes
  those of two classes, k and a_r. One sweep scores all N + 1 candidates in O(N log N): the counts of k are running
  sums over the sorted samples, those of a_r running sums within each runner-up class (a stable sort by a_r), so
  each move updates the metric's aggregate in O(1) (sum of TP, of predicted counts squared, of per-class F-beta).
  Accuracy, MCC, micro and binary averages are sums of integers, exact; a macro or weighted average is a running
  float64 sum, and the candidates within its rounding of the best are rescored from their full (2C,) statistics
  while they fit one batch (``_BATCH_ELEMENTS``), so the ranking is that of the statistics themselves.
- A callable metric gets the (K, C, C) confusion matrices, a cumulative sum of the moves, vmapped; every candidate
  while they fit one batch, otherwise a grid of at most ``_MAX_BINS`` at quantiles of the critical values, then finer
  grids around the best until one covers every decision between its neighbours. Its cost grows as C^3 per candidate,
  so a callable is refused above ``_MAX_CALLABLE_CLASSES`` classes.
- Two classes: one sweep over ``b_1`` with ``b_0 = 0`` is the sweep over thresholds on ``l_1 - l_0``, and every
  distinct threshold is scored, so the optimum is exact; of equally good thresholds the one nearest 0 (the smallest
  change from argmax) wins.
- More classes: coordinate ascent over k = 0, ..., C-1 from plain argmax (b = 0), in rounds until a round changes
  nothing or ``max_rounds``; of equally good offsets the one nearest the current wins. A change is kept only if the
  library's metric of the new ``argmax(logits + b)`` strictly improves (above ``_LIBRARY_CHECK_ELEMENTS`` matrix
  entries, the same metric of its exact (2C,) counts), so the tuned score is at least the argmax score. A class
  whose last sweep changed nothing is skipped while no offset has moved since: its sweep would be the same.
- A window of rows per sweep (more than two classes). A row whose t lies far above b_k joins k only at an offset
  that also moves every row between, so a sweep keeps the rows currently predicted k (P_k of them) and the
  W_k = ``_WINDOW_FACTOR`` (S_k + P_k) + ``_WINDOW_MIN_ROWS`` others of smallest t (S_k: k's support), found by an
  O(N) partial selection and then sorted; the rows tied with the first one left out are left out too. One sweep can
  thus lower b_k to any decision (down to nobody in k) but raise it by at most W_k rows, the next round continuing
  from there; the candidates are those of the full sweep up to that point, and where P_k + W_k covers all N rows
  they are all of them, the same rule as without a window. Every kept change still passes the library's check.
- A work bound: past ``_MAX_WORK`` row and class visits (N + swept rows + C a sweep, N + C a check) the ascent
  stops before the next sweep, keeps the best rule so far (never below argmax) and logs one line naming a
  ``max_rounds`` or a subsample that fits; a count rather than a clock, so the rule stays deterministic.

Cost per round with a named metric: C times O(N) for the critical values and their selection, a sort of
P_k + W_k of them, and O(C) for the per-class terms, so O(C (N + C)) plus the sorts; with a callable,
O(C (N + K C^2)). Memory: the logits, one transposed (C, N) copy, and (N,) or (C,) vectors per sweep.

The tuned score is measured on the data it was tuned on, an optimistic estimate: report the metric on held-out data.

>>> logits = torch.tensor([[2.0, 0.0], [1.0, 0.5], [0.8, 0.6], [0.0, 1.0]])
>>> rule = tune_logit_offsets(logits, torch.tensor([0, 1, 1, 1]), "fbeta", average="binary")
>>> rule.baseline_score, rule.score, rule.offsets.tolist(), rule.predict(logits).tolist()
(0.5, 1.0, [0.0, 1.25], [0, 1, 1, 1])
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import numpy as np
import torch
from torch import nn

from east_hf.core import METRICS, beta_vector, confusion_from_predictions, valid_rows
from east_hf.core.metrics import metric_from_counts, safe_divide
from east_hf.core.validation import check_average, check_int, check_metric

__all__ = ["DecisionRule", "tune_logit_offsets", "fold_offsets_into_bias"]

logger = logging.getLogger(__name__)

_BATCH_ELEMENTS = 1 << 20  # entries of one batch of candidate states (K, D), 8 MiB in float64
_MAX_BINS = 256  # candidates of a coarse level, at most
_MIN_BINS = 8  # ... and at least, however large a state
_LIBRARY_CHECK_ELEMENTS = 1 << 22  # C * C up to which each change is checked on the library's (C, C) matrix
_MAX_CALLABLE_CLASSES = 512  # a callable scores (C, C) matrices: about a minute a round at 50k rows and C = 512
_NOTICE_ELEMENTS = 1 << 30  # N * C from which a round of the sweep takes about a minute on one CPU core
_WINDOW_FACTOR = 4  # a sweep moves at most this many times (support + predicted count) rows into its class ...
_WINDOW_MIN_ROWS = 1024  # ... plus this many; where that covers every row, the sweep is the full one
_MAX_WORK = 15 * 10**9  # row and class visits after which tuning stops: about four minutes on one CPU core
_SUM_ROUNDING = 2.0**-40  # bound per summed candidate on the rounding of a float64 running sum of metric terms


@dataclass(frozen=True)
class DecisionRule:
    """Per-class logit offsets and the metric they reach: predict ``argmax(logits + offsets)``.

    ``offsets``: (C,) in the logits' dtype (float32 for half-precision logits); ``score``: the metric of the tuned
    rule on the tuning data; ``baseline_score``: that of plain argmax; ``rounds``: coordinate-ascent rounds run.
    """

    offsets: torch.Tensor
    score: float
    baseline_score: float
    rounds: int

    def apply(self, logits: torch.Tensor) -> torch.Tensor:
        """logits (..., C) -> logits + offsets (..., C)."""
        return logits + self.offsets.to(logits.device)

    def predict(self, logits: torch.Tensor) -> torch.Tensor:
        """logits (..., C) -> the tuned decisions argmax(logits + offsets) (...,)."""
        return self.apply(logits).argmax(dim=-1)


def _check_inputs(logits, labels, ignore_index: int | None) -> tuple[torch.Tensor, torch.Tensor]:
    """The labelled rows of (N, C) logits (``valid_rows``), finite, in float32 or float64, and their (N,) int64
    labels (moved to the logits' device)."""
    if isinstance(logits, torch.Tensor) and isinstance(labels, torch.Tensor):
        labels = labels.to(logits.device)
    logits, labels, _ = valid_rows(logits, labels, ignore_index=ignore_index, name="logits")
    if labels.numel() == 0:
        raise ValueError(f"Expected at least one labelled row, got none (ignore_index={ignore_index})")
    block = max(1, 4 * _BATCH_ELEMENTS // logits.shape[1])  # rows at a time: isfinite's temporaries stay small
    if not bool(torch.stack([torch.isfinite(z).all() for z in logits.split(block)]).all()):
        raise ValueError(f"Expected finite logits, got NaN or inf in logits of shape {tuple(logits.shape)}")
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    return logits.detach().to(dtype), labels.long()


def _metric_kwargs(metric: str, beta, average, pos_label, zero_division, like: torch.Tensor) -> dict:
    """The arguments ``EASTLoss.metric_value`` gives the named metric, beta as a (C,) tensor like ``like``."""
    kwargs = {}
    if metric in ("fbeta", "f1"):
        kwargs["beta"] = beta_vector(beta, like.shape[-1], like)
    if metric in ("fbeta", "f1", "precision", "recall"):
        kwargs.update(average=average, pos_label=pos_label, zero_division=zero_division)
    return kwargs


class _StatsScorer:
    """The named metrics from their sufficient statistics, batched: state (K, 2C) = [TP_k | predicted_k].

    Every metric of ``METRICS`` reads a confusion matrix only through its diagonal, row sums (the support, fixed by
    the labels) and column sums, so a candidate needs 2C numbers instead of C^2, scored by the core's own
    ``metrics.metric_from_counts``. ``sweep`` scores a whole coordinate's sweep incrementally from running counts
    (``tests/test_decision.py`` checks it against the candidates' scores); every score the tuner keeps or reports is
    the library's metric of a hard confusion matrix.
    """

    def __init__(self, metric: str, kwargs: dict, labels: torch.Tensor, num_classes: int):
        self.metric, self.C, self.kwargs = metric, num_classes, kwargs
        self.average = kwargs.get("average", "macro")
        self.pos_label = kwargs.get("pos_label", 1)
        self.zero_division = kwargs.get("zero_division", 0.0)
        self.beta2 = kwargs["beta"] ** 2 if "beta" in kwargs else None  # (C,) float64
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
            b2 = _take(self.beta2, cls)
            return safe_divide((1 + b2) * tp, b2 * s + pred, self.zero_division)
        if self.metric == "precision":
            return safe_divide(tp, pred, self.zero_division)
        return safe_divide(tp, s.expand_as(tp), self.zero_division)

    def sweep(self, coord: _Coordinate) -> torch.Tensor:
        """The scores (N + 1,) of every position i of ``coord``'s sweep (its first i sorted samples moved from their
        runner-up to k) in O(N) after a stable sort: ``self(states)`` exactly where ``self.exact``, else a float64
        running sum within ``_SUM_ROUNDING * (N + 1)`` of it per unit of the metric's scale."""
        C, k, y, alt, base, s = self.C, coord.k, coord.y, coord.alt_sorted, coord.base, self.support
        N, device = len(y), base.device
        tp0, p0 = base[:C], base[C:]  # (C,) when nobody predicts k
        hk, ha = (y == k).double(), (y == alt).double()  # (N,): sample r is a TP of k / was a TP of a_r

        def running(x: torch.Tensor) -> torch.Tensor:  # (N,) -> (N + 1,): its sum over the first i samples
            return torch.cat([x.new_zeros(1), x.cumsum(0)])

        i = torch.arange(N + 1, dtype=torch.float64, device=device)  # samples moved, k's predicted count
        tp_sum = tp0.sum() + running(hk - ha)  # integers: exact
        if self.metric == "accuracy":
            return safe_divide(tp_sum, s.sum(), 0.0)
        if self.average == "micro" and self.metric != "mcc":
            pred_sum = p0.sum().expand(N + 1)  # every sample is predicted once
            if self.metric in ("fbeta", "f1"):
                b2 = self.beta2[0]
                return safe_divide((1 + b2) * tp_sum, b2 * s.sum() + pred_sum, self.zero_division)
            if self.metric == "precision":
                return safe_divide(tp_sum, pred_sum, self.zero_division)
            return safe_divide(tp_sum, s.sum().expand(N + 1), self.zero_division)
        if self.average == "binary" and self.metric != "mcc":
            p = self.pos_label
            if p == k:
                return self.per_class(running(hk), i, p)
            leaves = (alt == p).double()
            return self.per_class(tp0[p] - running(ha * leaves), p0[p] - running(leaves), p)
        # Sample r leaves a_r, whose counts have already dropped by what a_r's earlier samples took: grouped by a_r
        # (sweep order within a group), a running count per group gives a_r's counts after the move.
        order = _stable_order(alt, C)  # (N,)
        group, lost = alt.index_select(0, order), ha.index_select(0, order)
        r = torch.arange(N, device=device)
        first = torch.ones(N, dtype=torch.bool, device=device)
        first[1:] = group[1:] != group[:-1]
        start = torch.cummax(torch.where(first, r, 0), 0).values  # (N,) the group's first position
        gone = lost.cumsum(0)
        tp_after = tp0.index_select(0, group) - (gone - gone.index_select(0, start) + lost.index_select(0, start))
        pred_after = p0.index_select(0, group) - (r - start + 1).double()
        delta = torch.empty(N, dtype=torch.float64, device=device)  # per sample, in sweep order
        if self.metric == "mcc":
            S = s.sum()
            sp = (s * p0).sum() + running(s[k] - s.index_select(0, alt))  # sum_c s_c pred_c
            delta.index_copy_(0, order, -(2 * pred_after + 1))  # (P - 1)^2 - P^2 for a_r
            pp = (p0 * p0).sum() + i * i + running(delta)  # sum_c pred_c^2
            cov_tp, cov_pp, cov_tt = tp_sum * S - sp, S * S - pp, S * S - (s * s).sum()
            den = cov_pp * cov_tt
            return safe_divide(cov_tp, torch.sqrt(torch.where(den > 0, den, 1.0)) * (den > 0), 0.0)
        weights = s if self.average == "weighted" else torch.ones_like(s)  # (C,)
        terms = self.per_class(tp0, p0, torch.arange(C, device=device))  # (C,) k's term at (0, 0)
        after = self.per_class(tp_after, pred_after, group)  # (N,) a_r's term once r has left
        before = torch.where(first, terms.index_select(0, group), after.roll(1))  # ... and before: the previous after
        delta.index_copy_(0, order, weights.index_select(0, group) * (after - before))
        own = weights[k] * (self.per_class(running(hk), i, k) - terms[k])
        total = (weights * terms).sum() + running(delta) + own
        if self.average == "weighted":
            return safe_divide(total, s.sum(), 0.0)
        return total / C

    def __call__(self, states: torch.Tensor) -> torch.Tensor:
        """The metric of each candidate state (K, 2C): ``metrics.metric_from_counts`` of its (3, C) counts."""
        tp, pred = states[:, : self.C], states[:, self.C :]  # (K, C) each
        counts = torch.stack([tp, self.support.expand_as(tp), pred], dim=1)  # (K, 3, C)
        return metric_from_counts(counts, self.metric, **self.kwargs)


class _MatrixScorer:
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


def _take(values: torch.Tensor, cls: torch.Tensor | int) -> torch.Tensor:
    """values (C,) at the classes ``cls``: a tensor of indices (gathered with ``index_select``, fast on CPU) or one."""
    return values.index_select(0, cls) if isinstance(cls, torch.Tensor) else values[cls]


def _stable_order(classes: torch.Tensor, num_classes: int) -> torch.Tensor:
    """The stable argsort (N,) of class indices (N,): numpy's radix sort on CPU (16-bit keys), torch's elsewhere."""
    if classes.device.type == "cpu":
        keys = classes.numpy().astype("int16" if num_classes <= 1 << 15 else "int64")
        return torch.from_numpy(keys.argsort(kind="stable"))
    return torch.sort(classes, stable=True).indices


def _top2(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The largest entry of each row of z (N, C) and the largest of the others, values and indices (N,), in
    ``argmax``'s order (ties to the lower index): argmax over j != k is the first unless the first is k. In blocks of
    rows written into preallocated outputs, so that the masked copy stays one batch and no block's result outlives
    it (on CPU, small survivors between freed batches fragment the heap by a batch each)."""
    N, C = z.shape
    rows = max(1, 4 * _BATCH_ELEMENTS // max(C, 1))
    v1, v2 = z.new_empty(N), z.new_empty(N)
    i1, i2 = torch.empty(N, dtype=torch.int64, device=z.device), torch.empty(N, dtype=torch.int64, device=z.device)
    for start in range(0, N, rows):
        block, out = z[start : start + rows], slice(start, start + rows)
        first = block.argmax(dim=1, keepdim=True)
        rest = block.scatter(1, first, -torch.inf)
        second = rest.argmax(dim=1, keepdim=True)
        i1[out], v1[out] = first.squeeze(1), block.gather(1, first).squeeze(1)
        i2[out], v2[out] = second.squeeze(1), rest.gather(1, second).squeeze(1)
    return v1, i1, v2, i2


def _update_top2(
    top,
    zk: torch.Tensor,
    k: int,
    rows_of: Callable[[torch.Tensor], torch.Tensor],
    raised: bool | None = None,
    block_rows: int | None = None,
):
    """``_top2(z)`` after column k of z changed to zk (N,). ``raised``: zk is nowhere below the old column, so k
    only climbs and the new top two follow from the old and zk alone; otherwise the rows where k was among the top
    two, or now enters them, are recomputed from ``rows_of(rows)``, the rows (R, C) of the new z, ``block_rows`` at
    a time."""
    v1, i1, v2, i2 = top
    was1, was2 = i1 == k, i2 == k
    if raised:  # argmax's order: (value, -index)
        first = was1 | (zk > v1) | ((zk == v1) & (k < i1))  # k leads
        second = ~first & (was2 | (zk > v2) | ((zk == v2) & (k < i2)))  # k follows the old leader
        drop = first & ~was1  # the old leader becomes the runner-up
        k_ = torch.full_like(i1, k)
        v2, i2 = torch.where(drop, v1, torch.where(second, zk, v2)), torch.where(drop, i1, torch.where(second, k_, i2))
        return torch.where(first, zk, v1), torch.where(first, k_, i1), v2, i2
    enters = (zk > v2) | ((zk == v2) & (k < i2))
    rows = torch.nonzero(enters | was1 | was2).flatten()
    v1, i1, v2, i2 = v1.clone(), i1.clone(), v2.clone(), i2.clone()
    for block in rows.split(block_rows or max(len(rows), 1)):
        for mine, fresh in zip((v1, i1, v2, i2), _top2(rows_of(block))):
            mine[block] = fresh
    return v1, i1, v2, i2


def _sort_by(t: torch.Tensor, *payload: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """t (N,) sorted, and the tensors ``payload`` (N,) in the same order; numpy's sort and gathers are the faster on
    CPU. The order of tied entries does not matter: tied samples always move together."""
    if t.device.type == "cpu":
        order = t.numpy().argsort()
        return tuple(torch.from_numpy(x.numpy()[order]) for x in (t, *payload))
    t, order = torch.sort(t)
    return (t, *(x[order] for x in payload))


def _smallest(t: torch.Tensor, n: int) -> torch.Tensor:
    """The indices (n,) of the n smallest entries of t (N,), in no order: an O(N) partial selection (numpy's
    introselect on CPU, ``torch.topk`` elsewhere)."""
    if t.device.type == "cpu":
        return torch.from_numpy(np.argpartition(t.numpy(), n - 1)[:n])
    return torch.topk(t, n, largest=False, sorted=False).indices


class _Coordinate:
    """The decisions reachable through b_k: sample n predicts k iff b_k > t_n, else its runner-up a_n.

    Samples sorted by t; candidate position i (0..L) lets the first i join k, distinct where t[i - 1] < t[i]. With a
    ``window`` smaller than N the sweep keeps only the rows whose t lies below the (window + 1)-th smallest t, the
    ``cap`` (every row predicted k among them, else the window is dropped): the others keep their runner-up, and the
    last candidate lies midway between the largest kept t and the cap. ``state``: the counts of the current
    decisions (``scorer.count``), from which the state with nobody in k follows in O(window + C).
    """

    def __init__(self, columns, labels, top, k: int, scorer, window: int | None = None, state=None):
        v1, i1, v2, i2 = top
        is_k = i1 == k
        self.m = torch.where(is_k, v2, v1)  # m_n = max_{j != k} (l_nj + b_j)
        self._runner_up = partial(torch.where, is_k, i2, i1)  # a_n, (N,) when asked for
        t = self.m.double() - columns[k].double()  # (N,); columns: the logits transposed, (C, N)
        self.cap, rows = None, None
        if window is not None and window + 1 < len(t):
            rows = _smallest(t, window + 1)
            t_rows = t.index_select(0, rows)
            cap = t_rows.max()
            inside = t_rows < cap
            rows = rows[inside]
            if len(rows) and int(is_k.index_select(0, rows).sum()) == int(is_k.sum()):
                self.cap = float(cap)
            else:  # ties at the cap hide a row predicted k, or every kept t equals it: the full sweep
                rows = None
        if rows is None:
            self.t, self.y, self.alt_sorted = _sort_by(t, labels, self.alt)
            self.base = scorer.count(labels, self.alt)  # nobody predicts k
        else:
            y, alt = labels.index_select(0, rows), i1.index_select(0, rows)
            alt = torch.where(is_k.index_select(0, rows), i2.index_select(0, rows), alt)
            # The rows outside predict their runner-up already: moving the kept ones to theirs empties k.
            self.base = state - scorer.count(y, i1.index_select(0, rows)) + scorer.count(y, alt)
            self.t, self.y, self.alt_sorted = _sort_by(t.index_select(0, rows), y, alt)
        cuts = torch.nonzero(self.t[1:] > self.t[:-1]).flatten() + 1
        self.positions = torch.cat([cuts.new_zeros(1), cuts, cuts.new_full((1,), len(self.t))])
        self.k, self.scorer = k, scorer

    @property
    def alt(self) -> torch.Tensor:
        """a_n (N,): the class each sample predicts while it does not predict k."""
        if not hasattr(self, "_alt"):
            self._alt = self._runner_up()
        return self._alt

    def values(self, idx: torch.Tensor) -> torch.Tensor:
        """The offsets (float64) of candidates ``idx``: midway between the t of the last sample that joins k and the
        t of the first that does not (the cap after the last kept row); below or above all t by a margin clear of
        float rounding at any logit scale."""
        t, P, N = self.t, self.positions[idx], len(self.t)
        margin = 1.0 + float(max(-t[0], t[-1])) * 2.0**-10
        inner = (t[(P - 1).clamp(min=0)] + t[P.clamp(max=N - 1)]) / 2
        last = t[-1] + margin if self.cap is None else (t[-1] + self.cap) / 2
        return torch.where(P == 0, t[0] - margin, torch.where(P == N, last, inner))

    def scores(self, idx: torch.Tensor) -> torch.Tensor:
        """Scores of the candidates ``idx`` (K,), sorted, in batches of ``_BATCH_ELEMENTS``."""
        chunk = max(_MIN_BINS, _BATCH_ELEMENTS // self.scorer.dim)
        return torch.cat([self._scores(self.positions[idx[s : s + chunk]]) for s in range(0, len(idx), chunk)])

    def _scores(self, P: torch.Tensor) -> torch.Tensor:
        lo, hi, K = int(P[0]), int(P[-1]), len(P)
        states, base = self.scorer.states, self.base
        if lo:  # the state at position lo
            base = states(base, self.y[:lo], self.alt_sorted[:lo], self.k, self.y.new_zeros(lo), 1)[0]
        # Sample r (lo <= r < hi) has joined k at candidate j iff r < P_j: its group is #{P <= r}.
        marks = torch.zeros(hi - lo + 1, dtype=torch.int64, device=P.device).index_add_(0, P - lo, torch.ones_like(P))
        groups = marks.cumsum(0)[: hi - lo]
        return self.scorer(states(base, self.y[lo:hi], self.alt_sorted[lo:hi], self.k, groups, K))


def _pick(coord: _Coordinate, idx: torch.Tensor, scores: torch.Tensor, current: float) -> tuple[float, float, int]:
    """(offset, score, position in ``idx``) of the best of the candidates ``idx`` (K,) scored ``scores`` (K,): of
    equal scores, the offset nearest ``current``."""
    scores = scores.nan_to_num(nan=-torch.inf)
    best = scores.max()
    ties = torch.nonzero(scores == best).flatten()
    values = coord.values(idx[ties])
    j = int((values - current).abs().argmin())
    return float(values[j]), float(best), int(ties[j])


def _best_offset(coord: _Coordinate, current: float, exhaustive: bool) -> tuple[float, float]:
    """The best candidate offset of one coordinate and its (batched) score: every candidate, or a grid at quantiles
    of the critical values, then finer grids around the best until one covers every decision between neighbours."""
    n = len(coord.positions)
    grid = min(_MAX_BINS, max(_MIN_BINS, _BATCH_ELEMENTS // coord.scorer.dim))
    if exhaustive or n <= grid:
        idx = torch.arange(n, device=coord.positions.device)
        value, score, _ = _pick(coord, idx, coord.scores(idx), current)
        return value, score
    lo, hi, keep = 0, n - 1, None
    while True:
        idx = torch.linspace(lo, hi, grid, dtype=torch.float64).round().long()
        if keep is not None:  # the best so far stays a candidate, so each level is at least as good
            idx = torch.cat([idx, idx.new_full((1,), keep)])
        idx = idx.unique().to(coord.positions.device)  # sorted
        value, score, j = _pick(coord, idx, coord.scores(idx), current)
        if len(idx) == hi - lo + 1:  # every decision between the neighbours scored
            return value, score
        keep = int(idx[j])
        lo, hi = int(idx[max(j - 1, 0)]), int(idx[min(j + 1, len(idx) - 1)])


def _best_sweep(coord: _Coordinate, current: float) -> tuple[float, float]:
    """The best candidate offset of one coordinate and its score, every candidate scored by one sweep of a named
    metric. A running float64 sum ranks only up to its rounding: the candidates within it of the best are rescored
    from their statistics while they fit one batch, so that equal statistics tie exactly as in ``_best_offset``."""
    scorer = coord.scorer
    scores = scorer.sweep(coord).index_select(0, coord.positions)  # (K,) the distinct decisions
    idx = torch.arange(len(scores), device=scores.device)
    if not scorer.exact:
        scores = scores.nan_to_num(nan=-torch.inf)
        slack = _SUM_ROUNDING * (len(coord.t) + 1) * max(1.0, abs(scorer.zero_division))
        near = torch.nonzero(scores >= scores.max() - slack).flatten()
        if len(near) * scorer.dim <= _BATCH_ELEMENTS:
            idx, scores = near, coord.scores(near)
    value, score, _ = _pick(coord, idx, scores, current)
    return value, score


def tune_logit_offsets(
    logits: torch.Tensor,
    labels: torch.Tensor,
    metric: str | Callable[[torch.Tensor], torch.Tensor] = "fbeta",
    *,
    beta: float | Sequence[float] = 1.0,
    average: str = "macro",
    pos_label: int = 1,
    zero_division: float = 0.0,
    max_rounds: int = 10,
    ignore_index: int | None = -100,
) -> DecisionRule:
    """Per-class offsets b (C,) maximising ``metric`` of the hard confusion matrix of ``argmax(logits + b)``.

    logits: (N, C) validation logits (or any scores: log-probabilities give the same rule); labels: (N,) integer
    classes, rows labelled ``ignore_index`` are dropped. ``metric``, ``beta``, ``average``, ``pos_label`` and
    ``zero_division`` are those of ``EASTLoss``: a name in ``METRICS`` or a callable (C, C) -> scalar to maximise.
    Exact for two classes, coordinate ascent for more, each sweep over a window of rows and the whole within a work
    bound (see the module docstring); deterministic. ``score`` and ``baseline_score`` are
    ``metric(hard_confusion_matrix(logits + offsets, labels))`` as the library computes it.
    """
    check_metric(metric, METRICS)
    check_average(average)
    check_int("max_rounds", max_rounds)
    logits, labels = _check_inputs(logits, labels, ignore_index)
    N, C = logits.shape
    device = logits.device
    if callable(metric):
        if C > _MAX_CALLABLE_CLASSES:
            raise ValueError(
                f"Expected at most {_MAX_CALLABLE_CLASSES} classes for a callable metric (it scores a (C, C) matrix "
                f"per candidate), got {C}; name the metric ({', '.join(sorted(METRICS))}) to sweep in O(N log N) a class"
            )
        metric_fn = metric
    else:
        args = (metric, beta, average, pos_label, float(zero_division))
        metric_fn = partial(METRICS[metric], **_metric_kwargs(*args, torch.empty(C, device=device)))
    if N * C >= _NOTICE_ELEMENTS:
        minutes = N * C / _NOTICE_ELEMENTS
        logger.warning(
            f"Tuning {C} offsets on {N} rows takes about {minutes:.0f} min a round on one CPU core, up to "
            f"max_rounds={max_rounds} rounds; max_rounds=1 or a subsample of the rows bounds it"
        )
    block = max(1, 4 * _BATCH_ELEMENTS // C)  # rows of (logits + b) at a time: no (N, C) copy

    def score_of(offsets: torch.Tensor | None = None) -> float:
        """The library's metric of the hard confusion matrix of argmax(logits + offsets) (``hard_confusion_matrix``
        on the checked rows: the argmax, then ``confusion_from_predictions``)."""
        pred = torch.empty(N, dtype=torch.int64, device=device)
        for start in range(0, N, block):
            z = logits[start : start + block]
            torch.argmax(z if offsets is None else z + offsets, dim=1, out=pred[start : start + block])
        return float(metric_fn(confusion_from_predictions(labels, pred, C)))

    with torch.no_grad():
        baseline = current = score_of()  # also validates beta, pos_label and the callable
        if callable(metric):
            scorer = _MatrixScorer(metric, C)
        else:
            kwargs64 = _metric_kwargs(*args, torch.empty(C, dtype=torch.float64, device=device))
            scorer = _StatsScorer(metric, kwargs64, labels, C)
        offsets = torch.zeros(C, dtype=logits.dtype, device=device)
        columns = logits.T.contiguous()  # (C, N): a class's logits in one run of memory
        top = _top2(logits)
        state = scorer.count(labels, top[1])  # the counts of the current decisions
        current64 = float(scorer(state[None])[0])
        support = torch.bincount(labels, minlength=C).tolist()
        predicted = torch.bincount(top[1], minlength=C)  # (C,) the current predicted counts
        # Each change is checked on the library's (C, C) matrix while it is small; beyond, on its exact counts.
        library_check = callable(metric) or C * C <= _LIBRARY_CHECK_ELEMENTS
        if not library_check:
            current = current64
        # Two classes: b_1 alone reaches every threshold on l_1 - l_0, and the sweep scores them all.
        classes = [1] if C == 2 else range(C)
        exhaustive = C == 2 or N + 1 <= _BATCH_ELEMENTS // scorer.dim
        changes, unchanged_at = 0, [-1] * C  # unchanged_at[k]: changes made when k's last sweep changed nothing
        rounds, work, stopped = 0, 0, None
        while rounds < max_rounds and stopped is None:
            rounds += 1
            changed = False
            for k in classes:
                if unchanged_at[k] == changes:  # no offset moved since: the same sweep, the same answer
                    continue
                if work >= _MAX_WORK:
                    stopped = k
                    break
                unchanged_at[k] = changes
                window = None
                if C > 2:
                    p_k = int(predicted[k])
                    window = p_k + _WINDOW_FACTOR * (support[k] + p_k) + _WINDOW_MIN_ROWS
                coord = _Coordinate(columns, labels, top, k, scorer, window, state)
                work += N + len(coord.t) + C
                if callable(metric):
                    value, proposed = _best_offset(coord, float(offsets[k]), exhaustive)
                else:
                    value, proposed = _best_sweep(coord, float(offsets[k]))
                value = torch.tensor(value, dtype=logits.dtype, device=device)
                if not proposed > current64 or bool(value == offsets[k]):
                    continue
                # Check the proposal on the real argmax(logits + offsets): rows predict k iff they beat their
                # runner-up, ties to the lower index as argmax; then the metric of those decisions.
                zk = columns[k] + value
                pred = torch.where((zk > coord.m) | ((zk == coord.m) & (k < coord.alt)), k, coord.alt)
                counts = scorer.count(labels, pred)
                work += N + C
                if library_check:
                    score = float(metric_fn(confusion_from_predictions(labels, pred, C)))
                else:
                    score = float(scorer(counts[None])[0])
                if score > current:
                    current, changed = score, True
                    changes += 1
                    raised = bool(value > offsets[k])
                    offsets[k] = value
                    top = _update_top2(top, zk, k, lambda rows: logits.index_select(0, rows) + offsets, raised, block)
                    state, current64 = counts, float(scorer(counts[None])[0])
                    predicted = torch.bincount(pred, minlength=C)
            if not changed or C == 2:
                break
        if stopped is not None:
            swept = list(classes).index(stopped)
            cheaper = (
                f"max_rounds={rounds - 1}" if rounds > 1 else f"a subsample of about {max(N * swept // C, 1)} rows"
            )
            logger.warning(
                f"Stopped tuning {C} offsets on {N} rows at the work bound ({_MAX_WORK:.3g} row and class visits) "
                f"in round {rounds} before class {stopped}, with the best rule so far ({baseline:.4g} -> "
                f"{current:.4g}); {cheaper} fits it"
            )
        score = score_of(offsets)  # == current: the same decisions, recounted by the library
    return DecisionRule(offsets=offsets, score=score, baseline_score=baseline, rounds=rounds)


def fold_offsets_into_bias(layer: nn.Module | torch.Tensor, offsets: torch.Tensor | DecisionRule) -> torch.Tensor:
    """Add ``offsets`` (C,) to the output bias of a classifier layer (an ``nn.Linear``) or to a bias tensor, in place.

    Afterwards ``argmax(layer(x))`` is the tuned decision ``argmax(layer_before(x) + offsets)`` (up to float
    rounding: ``x W^T + (b + o)`` and ``(x W^T + b) + o`` round apart only at near-ties). Returns the bias.
    """
    if isinstance(offsets, DecisionRule):
        offsets = offsets.offsets
    if not isinstance(offsets, torch.Tensor):
        raise TypeError(f"Expected offsets as a (C,) torch.Tensor or a DecisionRule, got {type(offsets).__name__}")
    if isinstance(layer, nn.Module):
        bias = getattr(layer, "bias", None)
        if not isinstance(bias, torch.Tensor):
            raise ValueError(f"Expected a layer with an output bias to fold the offsets into, got {layer} without one")
    elif isinstance(layer, torch.Tensor):
        bias = layer
    else:
        raise TypeError(f"Expected an nn.Module with a bias or a bias tensor, got {type(layer).__name__}")
    if offsets.shape != bias.shape:
        raise ValueError(f"Expected offsets of the bias's shape {tuple(bias.shape)}, got {tuple(offsets.shape)}")
    with torch.no_grad():
        bias.add_(offsets.to(dtype=bias.dtype, device=bias.device))
    return bias
