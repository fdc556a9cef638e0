"""The decision tuner's per-class sweep: every decision one offset b_k reaches, and the best of them.

With the other offsets fixed, sample n predicts class k iff b_k > t_n = m_n - l_nk, m_n = max_{j != k} (l_nj + b_j),
else its runner-up a_n. ``CoordinateSweep`` sorts the critical values t (within a window of rows, for many classes)
and lists the candidate offsets between them; ``best_offset_swept`` picks the best of them for a named metric from
one sweep of running counts, ``best_offset_batched`` for a callable from batches of candidate states. ``top2`` and
``update_top2`` keep the two largest entries of each row of logits + b, from which every m_n follows. The method is
described in ``east_hf.core.decision.rule``. Pure torch (numpy's sorts on CPU).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial

import numpy as np
import torch

__all__ = ["CoordinateSweep", "best_offset_batched", "best_offset_swept", "top2", "update_top2"]

_MAX_BINS = 256  # candidates of a coarse level, at most
_MIN_BINS = 8  # ... and at least, however large a state
_SUM_ROUNDING = 2.0**-40  # bound per summed candidate on the rounding of a float64 running sum of metric terms


def top2(z, block_rows: int | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """The largest entry of each row of z (N, C) and the largest of the others, values and indices (N,), in
    ``argmax``'s order (ties to the lower index): argmax over j != k is the first unless the first is k. z: a tensor,
    or logits read by blocks of rows (``east_hf.core.decision.logits``). In blocks of ``block_rows`` rows (all at once
    by default) written into preallocated outputs, so that the masked copy stays one batch and no block's result
    outlives it (on CPU, small survivors between freed batches fragment the heap by a batch each)."""
    N, C = z.shape
    rows = block_rows or max(N, 1)
    v1, v2 = torch.empty(N, dtype=z.dtype, device=z.device), torch.empty(N, dtype=z.dtype, device=z.device)
    i1, i2 = torch.empty(N, dtype=torch.int64, device=z.device), torch.empty(N, dtype=torch.int64, device=z.device)
    for start in range(0, N, rows):
        out = slice(start, start + rows)
        block = z[out] if isinstance(z, torch.Tensor) else z.block(start, start + rows)
        first = block.argmax(dim=1, keepdim=True)
        rest = block.scatter(1, first, -torch.inf)
        second = rest.argmax(dim=1, keepdim=True)
        i1[out], v1[out] = first.squeeze(1), block.gather(1, first).squeeze(1)
        i2[out], v2[out] = second.squeeze(1), rest.gather(1, second).squeeze(1)
    return v1, i1, v2, i2


def update_top2(
    top,
    zk: torch.Tensor,
    k: int,
    rows_of: Callable[[torch.Tensor], torch.Tensor],
    raised: bool | None = None,
    block_rows: int | None = None,
):
    """``top2(z)`` after column k of z changed to zk (N,). ``raised``: zk is nowhere below the old column, so k
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
        for mine, fresh in zip((v1, i1, v2, i2), top2(rows_of(block))):
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


class CoordinateSweep:
    """The decisions reachable through b_k: sample n predicts k iff b_k > t_n, else its runner-up a_n.

    Samples sorted by t; candidate position i (0..L) lets the first i join k, distinct where t[i - 1] < t[i]. With a
    ``window`` smaller than N the sweep keeps only the rows whose t lies below the (window + 1)-th smallest t, the
    ``cap`` (every row predicted k among them, else the window is dropped): the others keep their runner-up, and the
    last candidate lies midway between the largest kept t and the cap. ``state``: the counts of the current
    decisions (``scorer.count``), from which the state with nobody in k follows in O(window + C). ``scorer``: a
    ``StatsScorer`` or ``MatrixScorer`` (``east_hf.core.decision.scorers``).
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

    def scores(self, idx: torch.Tensor, batch_elements: int) -> torch.Tensor:
        """Scores of the candidates ``idx`` (K,), sorted, in batches of ``batch_elements`` state entries."""
        chunk = max(_MIN_BINS, batch_elements // self.scorer.dim)
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


def _pick(coord: CoordinateSweep, idx: torch.Tensor, scores: torch.Tensor, current: float) -> tuple[float, float, int]:
    """(offset, score, position in ``idx``) of the best of the candidates ``idx`` (K,) scored ``scores`` (K,): of
    equal scores, the offset nearest ``current``."""
    scores = scores.nan_to_num(nan=-torch.inf)
    best = scores.max()
    ties = torch.nonzero(scores == best).flatten()
    values = coord.values(idx[ties])
    j = int((values - current).abs().argmin())
    return float(values[j]), float(best), int(ties[j])


def best_offset_batched(
    coord: CoordinateSweep, current: float, exhaustive: bool, batch_elements: int
) -> tuple[float, float]:
    """The best candidate offset of one coordinate and its (batched) score: every candidate, or a grid at quantiles
    of the critical values, then finer grids around the best until one covers every decision between neighbours."""
    n = len(coord.positions)
    grid = min(_MAX_BINS, max(_MIN_BINS, batch_elements // coord.scorer.dim))
    if exhaustive or n <= grid:
        idx = torch.arange(n, device=coord.positions.device)
        value, score, _ = _pick(coord, idx, coord.scores(idx, batch_elements), current)
        return value, score
    lo, hi, keep = 0, n - 1, None
    while True:
        idx = torch.linspace(lo, hi, grid, dtype=torch.float64).round().long()
        if keep is not None:  # the best so far stays a candidate, so each level is at least as good
            idx = torch.cat([idx, idx.new_full((1,), keep)])
        idx = idx.unique().to(coord.positions.device)  # sorted
        value, score, j = _pick(coord, idx, coord.scores(idx, batch_elements), current)
        if len(idx) == hi - lo + 1:  # every decision between the neighbours scored
            return value, score
        keep = int(idx[j])
        lo, hi = int(idx[max(j - 1, 0)]), int(idx[min(j + 1, len(idx) - 1)])


def best_offset_swept(coord: CoordinateSweep, current: float, batch_elements: int) -> tuple[float, float]:
    """The best candidate offset of one coordinate and its score, every candidate scored by one sweep of a named
    metric. A running float64 sum ranks only up to its rounding: the candidates within it of the best are rescored
    from their statistics while they fit one batch, so that equal statistics tie exactly as in
    ``best_offset_batched``."""
    scorer = coord.scorer
    scores = scorer.sweep(coord).index_select(0, coord.positions)  # (K,) the distinct decisions
    idx = torch.arange(len(scores), device=scores.device)
    if not scorer.exact:
        scores = scores.nan_to_num(nan=-torch.inf)
        slack = _SUM_ROUNDING * (len(coord.t) + 1) * max(1.0, abs(scorer.zero_division))
        near = torch.nonzero(scores >= scores.max() - slack).flatten()
        if len(near) * scorer.dim <= batch_elements:
            idx, scores = near, coord.scores(near, batch_elements)
    value, score, _ = _pick(coord, idx, scores, current)
    return value, score
