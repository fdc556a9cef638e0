"""Evaluation from additive statistics: ``eval_loss`` and the hard metrics of the whole set, without keeping logits.

Every loss is a function of additive statistics (``east_hf.core.loss_registry``), and every hard metric of
``ComputeMetrics`` a function of (3, C) per-class counts (of ``MultiLabelComputeMetrics``, (4, L + 1) per-label and
per-row statistics). ``CountedEvaluation`` (held by ``EASTTrainer``, whose ``prediction_step`` and
``evaluation_loop`` hand it each batch and each loop) sums both over the batches of each process (leaving out the
samples that uneven sharding repeats), adds the sums across processes once, and scores them once: for EAST the surrogate of the whole set at the current temperature (one soft
confusion matrix), for cross-entropy the mean over the set, for Dice the soft Dice of the set, and the hard metrics
bit for bit equal to those of the gathered logits. Memory is that of the model's (batch, C) output plus a chunk of
rows (``_CHUNK_ELEMENTS`` entries) for the loss statistics' temporaries, and the statistics, whatever C and the size
of the set: the statistics are summed over chunks of ``_CHUNK_ELEMENTS // C`` rows, so ``eval_loss`` may differ from
that of whole batches in the last bits of its float32 sums (as between two eval batch sizes); the hard metrics do
not (integer counts, of ``argmax``, which keeps no (batch, C) temporary). ``predict`` and a ``compute_metrics`` of the
user's receive every logit, gathered once by the Trainer. ``with_logits_on_disk`` (the decision-rule tuner's path)
writes the gathered logits of each batch to a temporary ``LogitsFile`` on the main process instead of keeping them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable
from contextlib import nullcontext
from typing import Any

import torch

from east_hf.core.decision_logits import LogitsFile
from east_hf.core.set_loss import SetLoss
from east_hf.hf.metrics.inputs import IGNORE_INDEX, CountedMetrics

__all__ = ["CountedEvaluation", "check_best_metric_key", "counts_only", "logits_of", "split_inputs"]

_CHUNK_ELEMENTS = 1 << 22  # entries of the (rows, C) chunk of logits whose statistics are taken at once: 16 MiB


def _row_chunks(n: int, num_classes: int) -> list[slice]:
    """The chunks of rows of an (n, C) batch taken at once: ``_CHUNK_ELEMENTS // C`` rows (at least one) each; one
    empty chunk for an empty batch."""
    rows = max(1, _CHUNK_ELEMENTS // max(num_classes, 1))
    return [slice(start, start + rows) for start in range(0, n, rows)] or [slice(0, 0)]


class _LogitsSink:
    """The labelled rows of the gathered evaluation batches: logits appended to ``stored`` (the main process's
    ``LogitsFile``; None on the others, which keep nothing), labels kept in memory: (N,) class ids, or (N, L) float
    multi-hot rows."""

    def __init__(self, stored: LogitsFile | None):
        self.stored, self._labels = stored, []

    def add(self, logits: torch.Tensor, labels: torch.Tensor) -> None:
        if self.stored is None:
            return
        labelled = labels != IGNORE_INDEX  # the Trainer's padding label, which the tuner drops
        if labelled.ndim == 2:  # multi-hot rows: a row counts where any of its entries does
            labelled = labelled.any(dim=1)
        if not bool(labelled.all()):
            logits, labels = logits[labelled], labels[labelled]
        self.stored.append(logits)
        self._labels.append(labels.to("cpu", torch.int64 if labels.ndim == 1 else torch.float32))

    @property
    def labels(self) -> torch.Tensor | None:
        if self.stored is None:
            return None
        return torch.cat(self._labels) if self._labels else torch.zeros(0, dtype=torch.int64)


def logits_of(outputs: Any) -> torch.Tensor:
    """The (N, C) logits of a model's output: ``.logits``, a ``"logits"`` key, a tensor, or the first element."""
    if isinstance(outputs, torch.Tensor):
        return outputs
    if getattr(outputs, "logits", None) is not None:
        return outputs.logits
    if isinstance(outputs, dict) and "logits" in outputs:
        return outputs["logits"]
    if isinstance(outputs, (tuple, list)) and outputs and isinstance(outputs[0], torch.Tensor):
        return outputs[0]
    raise TypeError(f"Expected model outputs with .logits or a logits tensor, got {type(outputs).__name__}")


def split_inputs(inputs: dict[str, Any]) -> tuple[dict[str, Any], torch.Tensor]:
    """A batch's model inputs and its labels (the model's own loss is not computed: ``labels`` are not passed)."""
    if "labels" not in inputs:
        raise ValueError(f"Expected a 'labels' entry in the batch, got keys {sorted(inputs)}")
    inputs = dict(inputs)
    return inputs, inputs.pop("labels")


def counts_only(description: str, compute_metrics: Any) -> bool:
    """Whether an evaluation loop scores from counts (keeping no logits): ``evaluate`` (not ``predict``) with east_hf's
    counted metrics (``CountedMetrics``) or none given (the trainer's own are counted)."""
    return description != "Prediction" and (compute_metrics is None or isinstance(compute_metrics, CountedMetrics))


def check_best_metric_key(metrics: dict[str, float], metric_for_best_model: str | None, selection_key: str | None):
    """``metric_for_best_model`` must name a key this evaluation reports (the Trainer would raise a KeyError);
    ``selection_key`` is the key the annealing callback adds (``east_selection_key``)."""
    name = metric_for_best_model
    if not name:
        return
    key = name if name.startswith("eval_") else f"eval_{name}"
    later = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "epoch")  # added by evaluate()
    later += (selection_key,)  # added by the annealing callback
    if key not in metrics and key not in later:
        known = ", ".join(k.removeprefix("eval_") for k in sorted(metrics))
        raise ValueError(f"Expected metric_for_best_model among the evaluation metrics ({known}), got {name!r}")


class CountedEvaluation:
    """The evaluation of ``EASTTrainer`` from additive statistics: see the module docstring.

    Args:
        accelerator: the trainer's ``Accelerator`` (the processes, ``gather_for_metrics``, the last batch's remainder).
        current_loss: ``current_loss(logits)``, the loss of the current stage with its buffers on the logits' device
            (``current_loss()``: on the device they are on).
        hard_metrics: ``hard_metrics(width)``, the counted metrics an evaluation is scored with (``ComputeMetrics``,
            ``MultiLabelComputeMetrics``): the trainer's ``compute_metrics``, or its own made for ``width`` classes.
    """

    def __init__(
        self, accelerator: Any, current_loss: Callable[..., SetLoss], hard_metrics: Callable[[int], CountedMetrics]
    ):
        self.accelerator = accelerator
        self.current_loss = current_loss
        self.hard_metrics = hard_metrics
        # The running loop's state: whether it scores from counts, the loss statistics and the hard metrics' (3, C)
        # counts summed over batches, the metrics that count them and the scores they count (the Trainer's
        # preprocess_logits_for_metrics, or the logits).
        self._counts_only = False
        self._stats: Any = None
        self._counts: torch.Tensor | None = None
        self._metrics: CountedMetrics | None = None
        self._preprocess: Callable | None = None
        self._sink: _LogitsSink | None = None  # set while ``with_logits_on_disk`` predicts
        # Per validation evaluation (global step) with the counted metrics: the classes (multi-label: labels) with
        # validation samples that the model never predicted, as (index, samples) pairs, and how many classes have
        # validation samples.
        self._unpredicted: dict[int, list[tuple[int, float]]] = {}
        self._supported: dict[int, int] = {}

    def unpredicted_classes(self) -> tuple[dict[int, list[tuple[int, float]]], dict[int, int]]:
        """Per validation evaluation (its global step) with the counted metrics: the classes (multi-label: labels) with
        validation samples that the model never predicted, as (index, samples) pairs; and how many classes have
        validation samples (``east_hf.hf.kept_model_warnings.warn_unpredicted_kept_classes`` reads both)."""
        return dict(self._unpredicted), dict(self._supported)

    def prediction_step(self, model, inputs: dict[str, Any], prediction_loss_only: bool | None, step: int):
        """One evaluation batch (``inputs`` prepared for the model): add this process's loss statistics (and, in
        ``evaluate``, the hard metrics' counts) to the running sums, leaving out the rows ``gather_for_metrics`` drops
        (the repeats that even out the last batch of several processes). Returns no logits while ``run`` scores from
        counts; the batch's logits and labels otherwise (``predict``, a ``compute_metrics`` of the user's). The
        statistics are taken a chunk of rows at a time (``_row_chunks``), so their temporaries stay a chunk whatever
        the batch and C. Under ``with_logits_on_disk`` the batch's logits are gathered, written to the main process's
        file, and nothing is returned. ``step`` (the global step) is named in errors."""
        inputs, labels = split_inputs(inputs)
        with torch.no_grad():
            logits = logits_of(model(**inputs)).detach()
            loss_fn = self.current_loss(logits)
            kept = self._unrepeated_rows(len(logits))
            own_logits, own_labels = logits[:kept], labels[:kept]  # (kept, C), (kept,)
            self.check_logits(own_logits, step)
            if self._sink is not None:
                self._sink.add(*self.accelerator.gather_for_metrics((logits, labels)))
                return None, None, None
            stats = None  # this process's rows of the batch, a chunk at a time
            for rows in _row_chunks(kept, logits.shape[-1]):
                part = loss_fn.statistics(own_logits[rows], own_labels[rows])
                stats = part if stats is None else stats.add_(part)
            loss = None if self._counts_only else loss_fn.loss_from_statistics(stats)
            self._stats = stats if self._stats is None else self._stats.add_(stats)
            if self._counts_only and not prediction_loss_only:
                self._add_counts(own_logits, own_labels)
        if self._counts_only or prediction_loss_only:
            return loss, None, None
        return loss, logits, labels

    def _unrepeated_rows(self, n: int) -> int:
        """How many leading rows of this process's batch of ``n`` rows are evaluation samples: all but in the last
        batch of an uneven split over several processes, whose tail repeats samples to even out the processes.
        ``gather_for_metrics`` keeps the first ``remainder`` rows of the batches concatenated in process order, so
        process r keeps its rows below ``remainder - r n``."""
        state = self.accelerator.gradient_state
        if self.accelerator.num_processes == 1 or not state.end_of_dataloader or state.remainder <= 0:
            return n
        return max(0, min(n, state.remainder - self.accelerator.process_index * n))

    def _add_counts(self, logits: torch.Tensor, labels: torch.Tensor) -> None:
        """Add a batch's hard-metric counts (``ComputeMetrics.counts``, (3, C) int64) to the running sum, on the
        device: scores of ``preprocess_logits_for_metrics`` where given, as the Trainer would pass them. The metrics
        are ``hard_metrics`` of the scores' width, asked for on first use."""
        if self._preprocess is not None:
            logits = self._preprocess(logits, labels)
        if self._metrics is None:
            self._metrics = self.hard_metrics(logits.shape[-1])
        counts = self._metrics.counts(logits, labels, validate_args=False)  # finite: checked above
        self._counts = counts if self._counts is None else self._counts.add_(counts)

    def run(
        self, loop: Callable[[], Any], counts_only: bool, metric_key_prefix: str, step: int, preprocess=None
    ) -> Any:
        """Run the Trainer's evaluation ``loop`` (its ``EvalLoopOutput`` returned) with ``eval_loss`` the loss of the
        whole set. With ``counts_only`` (``counts_only()``) it keeps no logits: each process sums its batches'
        loss statistics and (3, C) hard-metric counts (of ``preprocess(logits, labels)`` where given), the sums are
        added across processes once at the end, and the metrics are scored from them, equal to those of the gathered
        logits. Otherwise (``predict``, a ``compute_metrics`` of the user's, which needs the logits) the loop gathers
        the logits as the Trainer does. A validation evaluation (``metric_key_prefix="eval"``) scored from counts
        records its never-predicted classes under ``step`` (``unpredicted_classes``)."""
        self._stats = self._counts = self._metrics = None
        self._counts_only, self._preprocess = counts_only, preprocess
        try:
            output = loop()
        finally:
            stats, counts, metrics = self._stats, self._counts, self._metrics
            self._stats = self._counts = self._metrics = self._preprocess = None
            self._counts_only = False
        if self.accelerator.num_processes > 1:  # every process holds its own rows' sums: add them, once
            stats, counts = (None if t is None else self.accelerator.reduce(t, "sum") for t in (stats, counts))
        if stats is not None:
            self._put_loss(output.metrics, stats, metric_key_prefix, step)
        if counts is not None:  # after the loss, in the order the Trainer leaves compute_metrics' keys
            scored = metrics.from_counts(counts)
            output.metrics.update({f"{metric_key_prefix}_{key}": value for key, value in scored.items()})
            if metric_key_prefix == "eval":  # single-label (3, C): TP, support, predicted; multi-label (4, L + 1)
                width = counts.shape[1] - (counts.shape[0] == 4)  # multi-label: column L holds the rows' sums
                support, predicted = counts[1, :width], counts[2, :width]
                never = ((support > 0) & (predicted == 0)).nonzero().flatten()
                self._unpredicted[step] = list(zip(never.tolist(), support[never].tolist()))
                self._supported[step] = int((support > 0).sum())
        return output

    def _put_loss(self, metrics: dict[str, float], stats: Any, prefix: str, step: int) -> None:
        """Put the loss of the whole set first in ``metrics``, where the Trainer puts its mean of the batch losses
        (which it replaces). A training batch without labels contributes nothing, but a whole set without them has no
        loss and no metric: its loss of 0 would read as a perfect model. An evaluation (which the annealing and the
        best checkpoint read) is refused; predictions on placeholder labels come back without a loss."""
        loss_key, loss_fn = f"{prefix}_loss", self.current_loss()
        if bool(loss_fn.is_empty(stats)):
            if prefix == "eval":
                raise ValueError(
                    f"Expected labelled rows in the {prefix} set, got none: every label is the ignore_index "
                    f"{loss_fn.ignore_index}, so {prefix}_loss and the metrics are undefined"
                )
            metrics.pop(loss_key, None)
            return
        loss = loss_fn.loss_from_statistics(stats).item()
        if not math.isfinite(loss):  # finite logits (checked per batch) but a loss that overflowed
            raise FloatingPointError(f"Expected a finite {loss_key}, got {loss} at step {step}")
        ordered = {loss_key: loss, **metrics}
        ordered[loss_key] = loss
        metrics.clear()
        metrics.update(ordered)

    def check_logits(self, logits: torch.Tensor, step: int) -> None:
        """An evaluation batch with NaN or inf logits is an error, never a silent 'no improvement' (one sync per
        evaluation batch; evaluation is off the training hot path). Several processes count their rows together, so
        every process raises, or none. ``step`` (the global step) is named in the error."""
        finite = torch.cat(
            [torch.isfinite(logits[rows]).all(dim=1) for rows in _row_chunks(len(logits), logits.shape[-1])]
        )
        bad, rows = (~finite).sum(), torch.tensor(len(finite), device=finite.device)
        if self.accelerator.num_processes > 1:
            bad, rows = self.accelerator.reduce(torch.stack([bad, rows]), "sum")
        if bool(bad):
            raise ValueError(
                f"Expected finite logits in evaluation, got NaN or inf in {int(bad)} of {int(rows)} rows of a batch "
                f"at step {step}: check the evaluation inputs for NaN or inf"
            )

    def with_logits_on_disk(
        self, predict: Callable[[], Any], output_dir: str, fn: Callable[[LogitsFile, torch.Tensor], Any]
    ) -> Any:
        """``fn(logits, labels)`` of the predictions ``predict()`` makes (the trainer's ``predict`` on a dataset),
        never holding them all in memory: ``predict`` runs on every process, each batch's logits are gathered
        (``gather_for_metrics``) and the main process appends its labelled rows to a ``LogitsFile`` in a temporary
        folder under ``output_dir``, removed afterwards (also on an error); labels: (N,), or (N, L) multi-hot rows.
        ``fn`` runs on the main process; its result is returned on every process, and its error raised on every
        process."""
        main = self.accelerator.is_main_process
        if main:
            os.makedirs(output_dir, exist_ok=True)
        result, error = None, None
        with LogitsFile.temporary(dir=output_dir) if main else nullcontext() as stored:
            sink = self._sink = _LogitsSink(stored)
            try:
                predict()
            finally:
                self._sink = None
            if main:
                try:
                    result = fn(stored, sink.labels)
                except Exception as exc:  # raised on every process below, not only here
                    error = exc
        if self.accelerator.num_processes > 1:
            from accelerate.utils import broadcast_object_list

            result, error = broadcast_object_list([result, error])
        if error is not None:
            raise error
        return result
