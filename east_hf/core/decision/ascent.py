"""The decision tuner's coordinate ascent over the offsets b (C,), within a deterministic work bound.

From plain argmax (b = 0), each class k in turn: sweep b_k (``east_hf.core.decision.sweep``), and keep the best
offset only if the metric of the new ``argmax(logits + b)`` strictly improves, checked on the real decisions. Rounds
until a round changes nothing or ``max_rounds``; with two classes, one sweep of b_1. A ``WorkBound`` counts row and
class visits and stops the ascent between two sweeps once they pass its limit. The method is described in
``east_hf.core.decision.rule``, which sets the ``AscentBounds``. Pure torch.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch

from east_hf.core.decision.logits import LogitsFile, TensorLogits
from east_hf.core.decision.scorers import MatrixScorer, StatsScorer
from east_hf.core.decision.sweep import CoordinateSweep, best_offset_batched, best_offset_swept, top2, update_top2
from east_hf.core.surrogate import confusion_from_predictions

__all__ = ["AscentBounds", "CoordinateAscent", "WorkBound"]


@dataclass(frozen=True)
class AscentBounds:
    """The numbers that bound the ascent's memory and work.

    ``batch_elements``: entries of one batch of candidate states (K, D); ``block_rows``: rows of (N, C) logits at a
    time; ``window_factor`` and ``window_min_rows``: a sweep moves at most window_factor * (support + predicted
    count) + window_min_rows rows into its class (more than two classes); ``max_work``: the ``WorkBound``'s limit.
    """

    batch_elements: int
    block_rows: int
    window_factor: int
    window_min_rows: int
    max_work: int


class WorkBound:
    """A count of the ascent's row and class visits (N + swept rows + C a sweep, N + C a check) against a limit.

    A count rather than a clock, so that the same inputs stop at the same place on any machine: the tuned rule stays
    deterministic.
    """

    def __init__(self, limit: int):
        self.limit, self.spent = limit, 0

    def spend(self, visits: int) -> None:
        self.spent += visits

    @property
    def reached(self) -> bool:
        return self.spent >= self.limit


class CoordinateAscent:
    """Coordinate ascent over per-class offsets of ``logits`` (N, C), in memory or on disk
    (``east_hf.core.decision.logits``), for the metric of ``scorer``.

    ``library_metric``: the library's metric of a (C, C) confusion matrix, with which each change is checked where
    ``library_check`` (else on the scorer's exact counts); ``baseline``: its value at plain argmax. After ``run``:
    ``offsets`` (C,) in the logits' dtype, ``current`` (the metric of their decisions), ``rounds`` and
    ``stopped_before`` (the class whose sweep the work bound prevented, or None).
    """

    def __init__(
        self,
        logits: TensorLogits | LogitsFile,
        labels: torch.Tensor,
        scorer: StatsScorer | MatrixScorer,
        library_metric: Callable[[torch.Tensor], torch.Tensor],
        baseline: float,
        bounds: AscentBounds,
        library_check: bool,
    ):
        N, C = logits.shape
        self.logits, self.labels, self.scorer, self.library_metric = logits, labels, scorer, library_metric
        self.bounds, self.library_check, self.work = bounds, library_check, WorkBound(bounds.max_work)
        self.offsets = torch.zeros(C, dtype=logits.dtype, device=logits.device)
        self.columns = logits.columns  # columns[k]: class k's logits (N,), one run of memory
        self.top = top2(logits, bounds.block_rows)
        self.state = scorer.count(labels, self.top[1])  # the counts of the current decisions
        self.current64 = float(scorer(self.state[None])[0])
        self.current = baseline if library_check else self.current64
        self.support = torch.bincount(labels, minlength=C).tolist()
        self.predicted = torch.bincount(self.top[1], minlength=C)  # (C,) the current predicted counts
        # Every candidate of a callable's sweep fits one batch: score them all (always, for two classes: exact).
        self.exhaustive = C == 2 or N + 1 <= bounds.batch_elements // scorer.dim
        self.rounds, self.stopped_before = 0, None

    def run(self, max_rounds: int) -> None:
        """Rounds over the classes until a round changes nothing, ``max_rounds`` or the work bound. A class whose
        last sweep changed nothing is skipped while no offset has moved since: its sweep would be the same."""
        C = len(self.offsets)
        classes = [1] if C == 2 else range(C)  # two classes: b_1 alone reaches every threshold on l_1 - l_0
        changes, unchanged_at = 0, [-1] * C  # unchanged_at[k]: changes made when k's last sweep changed nothing
        while self.rounds < max_rounds and self.stopped_before is None:
            self.rounds += 1
            changed = False
            for k in classes:
                if unchanged_at[k] == changes:  # no offset moved since: the same sweep, the same answer
                    continue
                if self.work.reached:
                    self.stopped_before = k
                    break
                unchanged_at[k] = changes
                if self._improve(k):
                    changes, changed = changes + 1, True
            if not changed or C == 2:
                break

    def _improve(self, k: int) -> bool:
        """Sweep b_k; keep its best offset if that strictly improves the metric of the decisions. Whether it did."""
        coord = self._sweep(k)
        current = float(self.offsets[k])
        if isinstance(self.scorer, MatrixScorer):  # a callable: candidates scored in batches of (C, C) matrices
            value, proposed = best_offset_batched(coord, current, self.exhaustive, self.bounds.batch_elements)
        else:  # a named metric: every candidate scored by one sweep
            value, proposed = best_offset_swept(coord, current, self.bounds.batch_elements)
        value = torch.tensor(value, dtype=self.offsets.dtype, device=self.offsets.device)
        if not proposed > self.current64 or bool(value == self.offsets[k]):
            return False
        return self._check(k, coord, value)

    def _sweep(self, k: int) -> CoordinateSweep:
        """The sweep of b_k; with more than two classes over a window of rows (all those predicted k, and the
        ``window_factor * (support + predicted count) + window_min_rows`` others of smallest critical value)."""
        N, C = self.logits.shape
        window = None
        if C > 2:
            p_k = int(self.predicted[k])
            window = p_k + self.bounds.window_factor * (self.support[k] + p_k) + self.bounds.window_min_rows
        coord = CoordinateSweep(self.columns, self.labels, self.top, k, self.scorer, window, self.state)
        self.work.spend(N + len(coord.t) + C)
        return coord

    def _check(self, k: int, coord: CoordinateSweep, value: torch.Tensor) -> bool:
        """Check the proposal b_k = ``value`` on the real argmax(logits + offsets) and keep it if its metric strictly
        improves: rows predict k iff they beat their runner-up, ties to the lower index as argmax."""
        N, C = self.logits.shape
        zk = self.columns[k] + value
        pred = torch.where((zk > coord.m) | ((zk == coord.m) & (k < coord.alt)), k, coord.alt)
        counts = self.scorer.count(self.labels, pred)
        self.work.spend(N + C)
        if self.library_check:
            score = float(self.library_metric(confusion_from_predictions(self.labels, pred, C)))
        else:
            score = float(self.scorer(counts[None])[0])
        if not score > self.current:
            return False
        self.current = score
        raised = bool(value > self.offsets[k])
        self.offsets[k] = value
        self.top = update_top2(self.top, zk, k, self._shifted_rows, raised, self.bounds.block_rows)
        self.state, self.current64 = counts, float(self.scorer(counts[None])[0])
        self.predicted = torch.bincount(pred, minlength=C)
        return True

    def _shifted_rows(self, rows: torch.Tensor) -> torch.Tensor:
        """The rows (R, C) of logits + offsets at the indices ``rows`` (R,)."""
        return self.logits.rows(rows) + self.offsets
