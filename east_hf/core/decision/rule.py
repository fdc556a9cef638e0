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
  while they fit one batch, otherwise a grid of at most 256 (``decision_sweep._MAX_BINS``) at quantiles of the
  critical values, then finer grids around the best until one covers every decision between its neighbours. Its
  cost grows as C^3 per candidate, so a callable is refused above ``_MAX_CALLABLE_CLASSES`` classes.
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
O(C (N + K C^2)).

Memory. A sweep reads one class's column of logits (N,), a kept change the rows whose top two it may alter, and the
top two and the final argmax every row a block at a time; besides them the tuner holds (N,) and (C,) vectors and one
batch of candidate states. Logits given as a tensor are read from it and from one transposed (C, N) copy. Logits
written to a ``LogitsFile`` (``east_hf.core.decision.logits``: the rows and their transposition on disk, each read a
copy) are never all in memory: the tuner's own memory is then O(N + C) plus a block of rows and a batch of states,
and the tuned rule is the same bit for bit. Above ``_LIBRARY_CHECK_ELEMENTS`` entries of a (C, C) matrix the
reported scores of a named metric are read from float32 per-class counts, the statistics the library's metric reads
of the (C, C) matrix (the same value).

Layout: this module holds the public API and the bounds named above; the per-class sweep lives in
``east_hf.core.decision.sweep``, the candidate scoring in ``east_hf.core.decision.scorers``, the coordinate ascent
with its work bound in ``east_hf.core.decision.ascent``, and the logits it reads in ``east_hf.core.decision.logits``.

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

import torch
from torch import nn

from east_hf.core.decision.ascent import AscentBounds, CoordinateAscent
from east_hf.core.decision.logits import LogitsFile, TensorLogits
from east_hf.core.decision.scorers import MatrixScorer, StatsScorer
from east_hf.core.decision.sweep import CoordinateSweep, top2, update_top2
from east_hf.core.metrics import METRICS, beta_vector, metric_from_counts
from east_hf.core.surrogate import check_labels, confusion_from_predictions, valid_rows
from east_hf.core.validation import check_average, check_int, check_metric

__all__ = ["DecisionRule", "LogitsFile", "tune_logit_offsets", "fold_offsets_into_bias"]

logger = logging.getLogger(__name__)

# The tuner's bounds on memory and work, read on every call: a test or a benchmark lowers them here.
_BATCH_ELEMENTS = 1 << 20  # entries of one batch of candidate states (K, D), 8 MiB in float64
_LIBRARY_CHECK_ELEMENTS = 1 << 22  # C * C up to which each change is checked on the library's (C, C) matrix
_MAX_CALLABLE_CLASSES = 512  # a callable scores (C, C) matrices: about a minute a round at 50k rows and C = 512
_NOTICE_ELEMENTS = 1 << 30  # N * C from which a round of the sweep takes about a minute on one CPU core
_WINDOW_FACTOR = 4  # a sweep moves at most this many times (support + predicted count) rows into its class ...
_WINDOW_MIN_ROWS = 1024  # ... plus this many; where that covers every row, the sweep is the full one
_MAX_WORK = 15 * 10**9  # row and class visits after which tuning stops: about four minutes on one CPU core

# The tuner's parts, under the names its tests reach them by.
_StatsScorer, _Coordinate, _top2, _update_top2 = StatsScorer, CoordinateSweep, top2, update_top2


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


def _block_rows(num_classes: int) -> int:
    """Rows of (N, C) logits at a time, so that a temporary of their shape stays four batches of entries."""
    return max(1, 4 * _BATCH_ELEMENTS // num_classes)


def _check_inputs(logits, labels, ignore_index: int | None) -> tuple[TensorLogits | LogitsFile, torch.Tensor]:
    """The labelled rows of (N, C) logits (``valid_rows``), finite, in float32 or float64, and their (N,) int64
    labels (moved to the logits' device). A ``LogitsFile`` is finished (its appends checked them finite) and must
    hold labelled rows only: dropping rows would copy them."""
    if isinstance(logits, LogitsFile):
        N, C = logits.finish().shape
        if N == 0:
            raise ValueError(f"Expected at least one labelled row, got none (ignore_index={ignore_index})")
        if isinstance(labels, torch.Tensor) and labels.dtype in (torch.uint8, torch.int8, torch.int16):
            labels = labels.long()
        kept = check_labels(labels, N, C, ignore_index)
        if not bool(kept.all()):
            raise ValueError(
                f"Expected every row of a LogitsFile labelled, got {int((~kept).sum())} of {N} labelled "
                f"ignore_index={ignore_index}: append the labelled rows only"
            )
        return logits, labels.to("cpu").long()
    if isinstance(logits, torch.Tensor) and isinstance(labels, torch.Tensor):
        labels = labels.to(logits.device)
    logits, labels, _ = valid_rows(logits, labels, ignore_index=ignore_index, name="logits")
    if labels.numel() == 0:
        raise ValueError(f"Expected at least one labelled row, got none (ignore_index={ignore_index})")
    block = _block_rows(logits.shape[1])  # isfinite's temporaries stay small
    if not bool(torch.stack([torch.isfinite(z).all() for z in logits.split(block)]).all()):
        raise ValueError(f"Expected finite logits, got NaN or inf in logits of shape {tuple(logits.shape)}")
    dtype = torch.float64 if logits.dtype == torch.float64 else torch.float32
    return TensorLogits(logits.detach().to(dtype)), labels.long()


def _metric_kwargs(metric: str, beta, average, pos_label, zero_division, like: torch.Tensor) -> dict:
    """The arguments ``EASTLoss.metric_value`` gives the named metric, beta as a (C,) tensor like ``like``."""
    kwargs = {}
    if metric in ("fbeta", "f1"):
        kwargs["beta"] = beta_vector(beta, like.shape[-1], like)
    if metric in ("fbeta", "f1", "precision", "recall"):
        kwargs.update(average=average, pos_label=pos_label, zero_division=zero_division)
    return kwargs


def _library_metric(metric, settings: tuple, num_classes: int, device) -> Callable[[torch.Tensor], torch.Tensor]:
    """The library's metric of a (C, C) confusion matrix: the callable itself, or ``METRICS[metric]`` with its
    ``settings`` (beta, average, pos_label, zero_division). A callable is refused above ``_MAX_CALLABLE_CLASSES``."""
    if not callable(metric):
        return partial(METRICS[metric], **_metric_kwargs(metric, *settings, torch.empty(num_classes, device=device)))
    if num_classes > _MAX_CALLABLE_CLASSES:
        raise ValueError(
            f"Expected at most {_MAX_CALLABLE_CLASSES} classes for a callable metric (it scores a (C, C) matrix "
            f"per candidate), got {num_classes}; name the metric ({', '.join(sorted(METRICS))}) to sweep in "
            "O(N log N) a class"
        )
    return metric


def _library_score(logits, labels, metric_fn, offsets: torch.Tensor | None = None, name: str | None = None) -> float:
    """The library's metric of the hard confusion matrix of argmax(logits + offsets) (``hard_confusion_matrix`` on
    the checked rows: the argmax, then ``confusion_from_predictions``), without an (N, C) copy: the logits are read a
    block of rows at a time. A named metric (``name``, of which ``metric_fn`` is ``METRICS[name]``) above
    ``_LIBRARY_CHECK_ELEMENTS`` matrix entries reads the float32 counts of the matrix instead (its diagonal, row and
    column sums: the statistics the metric computes from it, the same value) without the (C, C) entries."""
    N, C = logits.shape
    block = _block_rows(C)
    pred = torch.empty(N, dtype=torch.int64, device=logits.device)
    for start in range(0, N, block):
        z = logits.block(start, start + block)
        torch.argmax(z if offsets is None else z + offsets, dim=1, out=pred[start : start + block])
    if name is not None and C * C > _LIBRARY_CHECK_ELEMENTS:
        tp = torch.bincount(labels[labels == pred], minlength=C)
        counts = torch.stack([tp, torch.bincount(labels, minlength=C), torch.bincount(pred, minlength=C)]).float()
        return float(metric_from_counts(counts, name, **metric_fn.keywords))
    return float(metric_fn(confusion_from_predictions(labels, pred, C)))


def _warn_work_bound(ascent: CoordinateAscent, baseline: float) -> None:
    """One line: where the ascent stopped at the work bound, with what, and a cheaper setting that fits it."""
    N, C = ascent.logits.shape
    rounds, stopped = ascent.rounds, ascent.stopped_before
    swept = 0 if C == 2 else stopped  # classes swept in the round it stopped in
    cheaper = f"max_rounds={rounds - 1}" if rounds > 1 else f"a subsample of about {max(N * swept // C, 1)} rows"
    logger.warning(
        f"Stopped tuning {C} offsets on {N} rows at the work bound ({_MAX_WORK:.3g} row and class visits) "
        f"in round {rounds} before class {stopped}, with the best rule so far ({baseline:.4g} -> "
        f"{ascent.current:.4g}); {cheaper} fits it"
    )


def tune_logit_offsets(
    logits: torch.Tensor | LogitsFile,
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

    logits: (N, C) validation logits (or any scores: log-probabilities give the same rule), a tensor or a
    ``LogitsFile`` (logits written to disk, never all in memory; labelled rows only; the same rule); labels: (N,)
    integer classes, rows labelled ``ignore_index`` are dropped. ``metric``, ``beta``, ``average``, ``pos_label`` and
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
    settings = (beta, average, pos_label, float(zero_division))
    metric_fn = _library_metric(metric, settings, C, logits.device)
    score_of = partial(_library_score, metric_fn=metric_fn, name=None if callable(metric) else metric)
    if N * C >= _NOTICE_ELEMENTS:
        logger.warning(
            f"Tuning {C} offsets on {N} rows takes about {N * C / _NOTICE_ELEMENTS:.0f} min a round on one CPU core, "
            f"up to max_rounds={max_rounds} rounds; max_rounds=1 or a subsample of the rows bounds it"
        )
    with torch.no_grad():
        baseline = score_of(logits, labels)  # also validates beta, pos_label and the callable
        if callable(metric):
            scorer = MatrixScorer(metric, C)
        else:
            kwargs64 = _metric_kwargs(metric, *settings, torch.empty(C, dtype=torch.float64, device=logits.device))
            scorer = StatsScorer(metric, kwargs64, labels, C)
        bounds = AscentBounds(_BATCH_ELEMENTS, _block_rows(C), _WINDOW_FACTOR, _WINDOW_MIN_ROWS, _MAX_WORK)
        # Each change is checked on the library's (C, C) matrix while it is small; beyond, on its exact counts.
        library_check = callable(metric) or C * C <= _LIBRARY_CHECK_ELEMENTS
        ascent = CoordinateAscent(logits, labels, scorer, metric_fn, baseline, bounds, library_check)
        ascent.run(max_rounds)
        if ascent.stopped_before is not None:
            _warn_work_bound(ascent, baseline)
        score = score_of(logits, labels, offsets=ascent.offsets)  # the same decisions, recounted
    return DecisionRule(offsets=ascent.offsets, score=score, baseline_score=baseline, rounds=ascent.rounds)


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
