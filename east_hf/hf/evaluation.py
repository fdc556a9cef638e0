"""Evaluation from additive statistics: ``eval_loss`` and the hard metrics of the whole set, without keeping logits.

Every loss is a function of additive statistics (``east_hf.core.loss_registry``), and every hard metric of
``ComputeMetrics`` a function of (3, C) per-class counts (of ``MultiLabelComputeMetrics``, (4, L + 1) per-label and
per-row statistics). ``EvaluationFromCounts`` (a mixin of ``EASTTrainer``) sums
both over the batches of each process (leaving out the samples that uneven sharding repeats), adds the sums across
processes once, and scores them once: for EAST the surrogate of the whole set at the current temperature (one soft
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
from east_hf.hf.metrics.inputs import IGNORE_INDEX, CountedMetrics

__all__ = ["EvaluationFromCounts", "logits_of"]

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


class EvaluationFromCounts:
    """``prediction_step`` and ``evaluation_loop`` of ``EASTTrainer``: see the module docstring.

    The trainer provides ``_current_loss()`` (the loss of the current stage), ``_raise_if_nonfinite()`` and
    ``_default_metrics(num_classes)`` (its hard metrics when no ``compute_metrics`` was given)."""

    # Evaluation state: the hard metrics' (3, C) counts summed over batches, the loss statistics, and whether the
    # running loop scores from them instead of handing logits to the Trainer.
    _eval_counts: torch.Tensor | None = None
    _eval_stats: Any = None
    _eval_counts_only: bool = False
    # Per validation evaluation (global step) with the counted metrics: the classes (multi-label: labels) with
    # validation samples that the model never predicted, as (index, samples) pairs; the trainer reads the kept
    # model's after training.
    _unpredicted: dict[int, list[tuple[int, float]]] | None = None
    _supported: dict[int, int] | None = None  # per such evaluation: how many classes have validation samples
    _logits_sink: _LogitsSink | None = None  # set while ``with_logits_on_disk`` predicts

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """One evaluation batch: add this process's loss statistics (and, in ``evaluate``, the hard metrics' counts)
        to the running sums, leaving out the rows ``gather_for_metrics`` drops (the repeats that even out the last
        batch of several processes). Returns no logits while ``evaluation_loop`` scores from counts; the batch's
        logits and labels otherwise (``predict``, a ``compute_metrics`` of the user's). The statistics are taken a
        chunk of rows at a time (``_row_chunks``), so their temporaries stay a chunk whatever the batch and C. Under
        ``with_logits_on_disk`` the batch's logits are gathered, written to the main process's file, and nothing is
        returned."""
        inputs = self._prepare_inputs(inputs)
        inputs, labels = split_inputs(inputs)
        with torch.no_grad():
            logits = logits_of(model(**inputs)).detach()
            loss_fn = self._current_loss(logits)
            kept = self._unrepeated_rows(len(logits))
            own_logits, own_labels = logits[:kept], labels[:kept]  # (kept, C), (kept,)
            self._check_eval_logits(own_logits)
            if self._logits_sink is not None:
                self._logits_sink.add(*self.accelerator.gather_for_metrics((logits, labels)))
                return None, None, None
            stats = None  # this process's rows of the batch, a chunk at a time
            for rows in _row_chunks(kept, logits.shape[-1]):
                part = loss_fn.statistics(own_logits[rows], own_labels[rows])
                stats = part if stats is None else stats.add_(part)
            loss = None if self._eval_counts_only else loss_fn.loss_from_statistics(stats)
            self._eval_stats = stats if self._eval_stats is None else self._eval_stats.add_(stats)
            if self._eval_counts_only and not prediction_loss_only:
                self._add_eval_counts(own_logits, own_labels)
        if self._eval_counts_only or prediction_loss_only:
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

    def _add_eval_counts(self, logits: torch.Tensor, labels: torch.Tensor) -> None:
        """Add a batch's hard-metric counts (``ComputeMetrics.counts``, (3, C) int64) to the running sum, on the
        device: scores of ``preprocess_logits_for_metrics`` where given, as the Trainer would pass them. Without a
        ``compute_metrics`` the trainer's own hard metrics count them, made for the logits' width on first use."""
        if self.preprocess_logits_for_metrics is not None:
            logits = self.preprocess_logits_for_metrics(logits, labels)
        if self.compute_metrics is None:
            self.compute_metrics = self._default_metrics(logits.shape[-1])
        counts = self.compute_metrics.counts(logits, labels, validate_args=False)  # finite: checked above
        self._eval_counts = counts if self._eval_counts is None else self._eval_counts.add_(counts)

    def evaluation_loop(
        self, dataloader, description, prediction_loss_only=None, ignore_keys=None, metric_key_prefix="eval"
    ):
        """The Trainer's loop, with ``eval_loss`` the loss of the whole set. ``evaluate`` with east_hf's
        counted metrics (``ComputeMetrics``, ``MultiLabelComputeMetrics``: the trainer's own when none is given) keeps
        no logits: each process sums its batches'
        loss statistics and (3, C) hard-metric counts, the sums are added across processes once at the end, and the
        metrics are scored from them, equal to those of the gathered logits. ``predict`` (and a ``compute_metrics``
        of the user's, which needs the logits) gathers the logits as the Trainer does."""
        # A model trained on a non-finite loss has non-finite weights: name the training step that caused it before
        # an evaluation reports the non-finite logits as a fault of the evaluation data.
        self._raise_if_nonfinite()
        self._eval_stats = self._eval_counts = None
        self._eval_counts_only = description != "Prediction" and (
            self.compute_metrics is None or isinstance(self.compute_metrics, CountedMetrics)
        )
        if self._eval_counts_only and self.compute_metrics is None:
            prediction_loss_only = None  # evaluate() asks for the loss alone without compute_metrics: count anyway
        try:
            output = super().evaluation_loop(
                dataloader, description, prediction_loss_only, ignore_keys, metric_key_prefix
            )
        finally:
            stats, counts = self._eval_stats, self._eval_counts
            self._eval_stats = self._eval_counts = None
            self._eval_counts_only = False
        if self.accelerator.num_processes > 1:  # every process holds its own rows' sums: add them, once
            stats, counts = (None if t is None else self.accelerator.reduce(t, "sum") for t in (stats, counts))
        if stats is not None:
            self._put_loss(output.metrics, stats, metric_key_prefix)
        if counts is not None:  # after the loss, in the order the Trainer leaves compute_metrics' keys
            scored = self.compute_metrics.from_counts(counts)
            output.metrics.update({f"{metric_key_prefix}_{key}": value for key, value in scored.items()})
            if metric_key_prefix == "eval":  # single-label (3, C): TP, support, predicted; multi-label (4, L + 1)
                width = counts.shape[1] - (counts.shape[0] == 4)  # multi-label: column L holds the rows' sums
                support, predicted = counts[1, :width], counts[2, :width]
                never = ((support > 0) & (predicted == 0)).nonzero().flatten()
                if self._unpredicted is None:
                    self._unpredicted, self._supported = {}, {}
                self._unpredicted[self.state.global_step] = list(zip(never.tolist(), support[never].tolist()))
                self._supported[self.state.global_step] = int((support > 0).sum())
        if metric_key_prefix == "eval":
            self._check_best_metric_key(output.metrics)
        return output

    def _put_loss(self, metrics: dict[str, float], stats: Any, prefix: str) -> None:
        """Put the loss of the whole set first in ``metrics``, where the Trainer puts its mean of the batch losses
        (which it replaces). A training batch without labels contributes nothing, but a whole set without them has no
        loss and no metric: its loss of 0 would read as a perfect model. An evaluation (which the annealing and the
        best checkpoint read) is refused; predictions on placeholder labels come back without a loss."""
        loss_key, loss_fn = f"{prefix}_loss", self._current_loss()
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
            raise FloatingPointError(f"Expected a finite {loss_key}, got {loss} at step {self.state.global_step}")
        ordered = {loss_key: loss, **metrics}
        ordered[loss_key] = loss
        metrics.clear()
        metrics.update(ordered)

    def _check_eval_logits(self, logits: torch.Tensor) -> None:
        """An evaluation batch with NaN or inf logits is an error, never a silent 'no improvement' (one sync per
        evaluation batch; evaluation is off the training hot path). Several processes count their rows together, so
        every process raises, or none."""
        finite = torch.cat(
            [torch.isfinite(logits[rows]).all(dim=1) for rows in _row_chunks(len(logits), logits.shape[-1])]
        )
        bad, rows = (~finite).sum(), torch.tensor(len(finite), device=finite.device)
        if self.accelerator.num_processes > 1:
            bad, rows = self.accelerator.reduce(torch.stack([bad, rows]), "sum")
        if bool(bad):
            raise ValueError(
                f"Expected finite logits in evaluation, got NaN or inf in {int(bad)} of {int(rows)} rows of a batch "
                f"at step {self.state.global_step}: check the evaluation inputs for NaN or inf"
            )

    def _check_best_metric_key(self, metrics: dict[str, float]) -> None:
        """``metric_for_best_model`` must name a key this evaluation reports (the Trainer would raise a KeyError)."""
        name = self.args.metric_for_best_model
        if not name:
            return
        key = name if name.startswith("eval_") else f"eval_{name}"
        later = ("eval_runtime", "eval_samples_per_second", "eval_steps_per_second", "epoch")  # added by evaluate()
        later += (getattr(self.args, "east_selection_key", None),)  # added by the annealing callback
        if key not in metrics and key not in later:
            known = ", ".join(k.removeprefix("eval_") for k in sorted(metrics))
            raise ValueError(f"Expected metric_for_best_model among the evaluation metrics ({known}), got {name!r}")

    def with_logits_on_disk(
        self, dataset: Any, fn: Callable[[LogitsFile, torch.Tensor], Any], metric_key_prefix="test"
    ):
        """``fn(logits, labels)`` of the predictions on ``dataset``, never holding them all in memory: ``predict``
        runs on every process, each batch's logits are gathered (``gather_for_metrics``) and the main process appends
        its labelled rows to a ``LogitsFile`` in a temporary folder under ``output_dir``, removed afterwards (also on
        an error); labels: (N,), or (N, L) multi-hot rows. ``fn`` runs on the main process; its result is returned
        on every process, and its error raised on every process."""
        main = self.accelerator.is_main_process
        if main:
            os.makedirs(self.args.output_dir, exist_ok=True)
        result, error = None, None
        with LogitsFile.temporary(dir=self.args.output_dir) if main else nullcontext() as stored:
            sink = self._logits_sink = _LogitsSink(stored)
            try:
                self.predict(dataset, metric_key_prefix=metric_key_prefix)
            finally:
                self._logits_sink = None
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
