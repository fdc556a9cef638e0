"""Decision-rule tuning: per-class logit offsets ``b`` (C,) so that ``argmax(logits + b)`` maximises a metric.

A classifier predicts ``argmax_k l_k``; the metric it is judged by (macro F-beta, MCC, F-beta of one class) is often
better served by moving the decision boundaries, which an additive offset per class does without retraining (the
plug-in threshold of Lipton et al. 2014, "Thresholding classifiers to maximize F1"). ``tune_logit_offsets`` fits the
offsets on validation logits, scoring every candidate with the library's own metric of the hard confusion matrix.

Method. With the other offsets fixed, sample n predicts class k iff ``l_nk + b_k > m_n := max_{j != k} (l_nj + b_j)``,
so its decision is a step function of ``b_k`` that switches between k and its runner-up ``a_n`` at the critical value
``t_n = m_n - l_nk``. Sorting t lists every decision ``b_k`` can reach: moving the first i sorted samples to column k
gives the confusion matrix ``C_alt + sum_{r < i} (e_{y_r, k} - e_{y_r, a_r})``, a cumulative sum, so a batch of K
candidates costs one histogram and one ``cumsum``, and is scored at once. A named metric reads a confusion matrix
only through TP, support and predicted counts, so its candidates are (K, 2C) statistics; a callable metric gets the
(K, C, C) matrices, vmapped. Candidate offsets are midpoints between consecutive distinct critical values, plus one
below and one above all.

- Two classes: one sweep over ``b_1`` with ``b_0 = 0`` is the sweep over thresholds on ``l_1 - l_0``, and every
  distinct threshold is scored, so the optimum is exact; of equally good thresholds the one nearest 0 (the smallest
  change from argmax) wins.
- More classes: coordinate ascent over k = 0, ..., C-1 from plain argmax (b = 0), in rounds until a round changes
  nothing or ``max_rounds``. A change is kept only if the library's metric of the new ``argmax(logits + b)``
  strictly improves, so the tuned score is at least the argmax score. Each coordinate scores every distinct decision
  while they fit one batch (``_BATCH_ELEMENTS``); otherwise a grid of at most ``_MAX_BINS`` decisions at quantiles
  of the critical values, then finer grids around the best, until one covers every decision between its neighbours.
  Cost per round: C sorts of N values and O(C (N + K D)) more, D = 2C (named metric) or C^2 (callable).

The tuned score is measured on the data it was tuned on, an optimistic estimate: report the metric on held-out data.

>>> logits = torch.tensor([[2.0, 0.0], [1.0, 0.5], [0.8, 0.6], [0.0, 1.0]])
>>> rule = tune_logit_offsets(logits, torch.tensor([0, 1, 1, 1]), "fbeta", average="binary")
>>> rule.baseline_score, rule.score, rule.offsets.tolist(), rule.predict(logits).tolist()
(0.5, 1.0, [0.0, 1.25], [0, 1, 1, 1])
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial

import torch
from torch import nn

from east_hf.core import METRICS, beta_vector, confusion_from_predictions, hard_confusion_matrix, valid_rows
from east_hf.core.metrics import safe_divide
from east_hf.core.validation import check_average, check_int, check_metric

__all__ = ["DecisionRule", "tune_logit_offsets", "fold_offsets_into_bias"]

_BATCH_ELEMENTS = 1 << 20  # entries of one batch of candidate states (K, D), 8 MiB in float64
_MAX_BINS = 256  # candidates of a coarse level, at most
_MIN_BINS = 8  # ... and at least, however large a state


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
    if not bool(torch.isfinite(logits).all()):
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
    the labels) and column sums, so a candidate needs 2C numbers instead of C^2. The formulas are those of
    ``east_hf.core.metrics``, term for term; ``tests/test_decision.py`` checks them against it. They only rank
    candidates: every score the tuner keeps or reports is the library's metric of a hard confusion matrix.
    """

    def __init__(self, metric: str, kwargs: dict, labels: torch.Tensor, num_classes: int):
        self.metric, self.C = metric, num_classes
        self.average = kwargs.get("average", "macro")
        self.pos_label = kwargs.get("pos_label", 1)
        self.zero_division = kwargs.get("zero_division", 0.0)
        self.beta2 = kwargs["beta"] ** 2 if "beta" in kwargs else None  # (C,) float64
        self.support = torch.bincount(labels, minlength=num_classes).double()  # (C,)
        self.dim = 2 * num_classes

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

    def __call__(self, states: torch.Tensor) -> torch.Tensor:
        tp, pred, s = states[:, : self.C], states[:, self.C :], self.support  # (K, C), (K, C), (C,)
        zd, average = self.zero_division, self.average
        if self.metric == "accuracy":
            return safe_divide(tp.sum(1), s.sum(), 0.0)
        if self.metric == "mcc":
            S = s.sum()
            cov_tp = tp.sum(1) * S - (s * pred).sum(1)
            cov_pp = S * S - (pred * pred).sum(1)
            cov_tt = S * S - (s * s).sum()
            den = cov_pp * cov_tt
            return safe_divide(cov_tp, torch.sqrt(torch.where(den > 0, den, 1.0)) * (den > 0), 0.0)
        if self.metric in ("fbeta", "f1"):
            b2 = self.beta2
            if average == "micro":
                return safe_divide((1 + b2[0]) * tp.sum(1), b2[0] * s.sum() + pred.sum(1), zd)
            per_class = safe_divide((1 + b2) * tp, b2 * s + pred, zd)
        elif self.metric == "precision":
            if average == "micro":
                return safe_divide(tp.sum(1), pred.sum(1), zd)
            per_class = safe_divide(tp, pred, zd)
        else:  # recall
            if average == "micro":
                return safe_divide(tp.sum(1), s.sum().expand(len(tp)), zd)
            per_class = safe_divide(tp, s.expand_as(tp), zd)
        if average == "binary":
            return per_class[:, self.pos_label]
        if average == "weighted":
            return safe_divide((per_class * s).sum(1), s.sum(), 0.0)
        return per_class.mean(1)


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


def _top2(z: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The largest entry of each row of z (N, C) and the largest of the others, values and indices (N,), in
    ``argmax``'s order (ties to the lower index): argmax over j != k is the first unless the first is k."""
    i1 = z.argmax(dim=1)
    v1 = z.gather(1, i1[:, None]).squeeze(1)
    rest = z.scatter(1, i1[:, None], -torch.inf)
    i2 = rest.argmax(dim=1)
    return v1, i1, rest.gather(1, i2[:, None]).squeeze(1), i2


def _update_top2(top, z: torch.Tensor, k: int):
    """``_top2(z)`` after column k of z changed: only rows where k was among the top two, or now enters them, can
    change, and only those are recomputed."""
    v1, i1, v2, i2 = top
    zk = z[:, k]
    enters = (zk > v2) | ((zk == v2) & (k < i2))  # argmax's order: (value, -index)
    rows = torch.nonzero(enters | (i1 == k) | (i2 == k)).flatten()
    v1, i1, v2, i2 = v1.clone(), i1.clone(), v2.clone(), i2.clone()
    for mine, fresh in zip((v1, i1, v2, i2), _top2(z[rows])):
        mine[rows] = fresh
    return v1, i1, v2, i2


def _sort_by(t: torch.Tensor, *payload: torch.Tensor) -> tuple[torch.Tensor, ...]:
    """t (N,) sorted, and the tensors ``payload`` (N,) in the same order; numpy's sort and gathers are the faster on
    CPU. The order of tied entries does not matter: tied samples always move together."""
    if t.device.type == "cpu":
        order = t.numpy().argsort()
        return tuple(torch.from_numpy(x.numpy()[order]) for x in (t, *payload))
    t, order = torch.sort(t)
    return (t, *(x[order] for x in payload))


class _Coordinate:
    """The decisions reachable through b_k: sample n predicts k iff b_k > t_n, else its runner-up a_n.

    Samples sorted by t; candidate position i (0..N) lets the first i join k, distinct where t[i - 1] < t[i].
    """

    def __init__(self, columns, labels, top, k: int, scorer):
        v1, i1, v2, i2 = top
        is_k = i1 == k
        self.m = torch.where(is_k, v2, v1)  # m_n = max_{j != k} (l_nj + b_j)
        self.alt = torch.where(is_k, i2, i1)  # a_n
        t = self.m.double() - columns[k].double()  # (N,); columns: the logits transposed, (C, N)
        self.t, self.y, self.alt_sorted = _sort_by(t, labels, self.alt)
        self.base = scorer.count(labels, self.alt)  # nobody predicts k
        cuts = torch.nonzero(self.t[1:] > self.t[:-1]).flatten() + 1
        self.positions = torch.cat([cuts.new_zeros(1), cuts, cuts.new_full((1,), len(t))])
        self.k, self.scorer = k, scorer

    def values(self, idx: torch.Tensor) -> torch.Tensor:
        """The offsets (float64) of candidates ``idx``: midway between the t of the last sample that joins k and the
        t of the first that does not; below or above all t by a margin clear of float rounding at any logit scale."""
        t, P, N = self.t, self.positions[idx], len(self.t)
        margin = 1.0 + float(max(-t[0], t[-1])) * 2.0**-10
        inner = (t[(P - 1).clamp(min=0)] + t[P.clamp(max=N - 1)]) / 2
        return torch.where(P == 0, t[0] - margin, torch.where(P == N, t[-1] + margin, inner))

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


def _pick(scores: torch.Tensor, values: torch.Tensor, current: float) -> tuple[float, float, int]:
    """(score, -distance to the current offset, index) of the best candidate: of equal scores, the nearest."""
    scores = scores.nan_to_num(nan=-torch.inf)
    ties = torch.nonzero(scores == scores.max()).flatten()
    dist = (values[ties] - current).abs()
    return float(scores.max()), -float(dist.min()), int(ties[dist.argmin()])


def _best_offset(coord: _Coordinate, current: float, exhaustive: bool) -> tuple[float, float]:
    """The best candidate offset of one coordinate and its (batched) score: every candidate, or a grid at quantiles
    of the critical values, then finer grids around the best until one covers every decision between neighbours."""
    n = len(coord.positions)
    grid = min(_MAX_BINS, max(_MIN_BINS, _BATCH_ELEMENTS // coord.scorer.dim))
    if exhaustive or n <= grid:
        idx = torch.arange(n, device=coord.positions.device)
        values = coord.values(idx)
        score, _, j = _pick(coord.scores(idx), values, current)
        return float(values[j]), score
    lo, hi, keep = 0, n - 1, None
    while True:
        idx = torch.linspace(lo, hi, grid, dtype=torch.float64).round().long()
        if keep is not None:  # the best so far stays a candidate, so each level is at least as good
            idx = torch.cat([idx, idx.new_full((1,), keep)])
        idx = idx.unique().to(coord.positions.device)  # sorted
        values = coord.values(idx)
        score, _, j = _pick(coord.scores(idx), values, current)
        if len(idx) == hi - lo + 1:  # every decision between the neighbours scored
            return float(values[j]), score
        keep = int(idx[j])
        lo, hi = int(idx[max(j - 1, 0)]), int(idx[min(j + 1, len(idx) - 1)])


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
    Exact for two classes, coordinate ascent for more (see the module docstring); deterministic. ``score`` and
    ``baseline_score`` are ``metric(hard_confusion_matrix(logits + offsets, labels))`` as the library computes it.
    """
    check_metric(metric, METRICS)
    check_average(average)
    check_int("max_rounds", max_rounds)
    logits, labels = _check_inputs(logits, labels, ignore_index)
    N, C = logits.shape
    device = logits.device
    if callable(metric):
        metric_fn = metric
    else:
        args = (metric, beta, average, pos_label, float(zero_division))
        metric_fn = partial(METRICS[metric], **_metric_kwargs(*args, torch.empty(C, device=device)))

    def score_of(z: torch.Tensor) -> float:
        return float(metric_fn(hard_confusion_matrix(z, labels, ignore_index=None)))

    with torch.no_grad():
        baseline = current = score_of(logits)  # also validates beta, pos_label and the callable
        if callable(metric):
            scorer = _MatrixScorer(metric, C)
        else:
            kwargs64 = _metric_kwargs(*args, torch.empty(C, dtype=torch.float64, device=device))
            scorer = _StatsScorer(metric, kwargs64, labels, C)
        offsets = torch.zeros(C, dtype=logits.dtype, device=device)
        z = logits.clone()  # logits + offsets, column by column
        columns = logits.T.contiguous()  # (C, N): a class's logits in one run of memory
        top = _top2(z)
        current64 = float(scorer(scorer.count(labels, top[1])[None])[0])
        # Two classes: b_1 alone reaches every threshold on l_1 - l_0, and the sweep scores them all.
        classes = [1] if C == 2 else range(C)
        exhaustive = C == 2 or N + 1 <= _BATCH_ELEMENTS // scorer.dim
        rounds = 0
        while rounds < max_rounds:
            rounds += 1
            changed = False
            for k in classes:
                coord = _Coordinate(columns, labels, top, k, scorer)
                value, proposed = _best_offset(coord, float(offsets[k]), exhaustive)
                value = torch.tensor(value, dtype=logits.dtype, device=device)
                if not proposed > current64 or bool(value == offsets[k]):
                    continue
                # Check the proposal on the real argmax(logits + offsets): rows predict k iff they beat their
                # runner-up, ties to the lower index as argmax; then the library's metric of that matrix.
                zk = columns[k] + value
                pred = torch.where((zk > coord.m) | ((zk == coord.m) & (k < coord.alt)), k, coord.alt)
                score = float(metric_fn(confusion_from_predictions(labels, pred, C)))
                if score > current:
                    offsets[k], current, changed = value, score, True
                    z[:, k] = zk
                    top = _update_top2(top, z, k)
                    current64 = float(scorer(scorer.count(labels, pred)[None])[0])
            if not changed or C == 2:
                break
        score = score_of(logits + offsets)  # == current: the same decisions, recounted by the library
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
