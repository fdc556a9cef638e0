"""Evaluation from additive statistics: ``eval_loss`` and the hard metrics of the whole set, without keeping logits.

Every loss is a function of additive statistics (``east_hf.core.loss_registry``), and every hard metric of
``ComputeMetrics`` a function of (3, C) per-class counts (of ``MultiLabelComputeMetrics``, (4, L + 1) per-label and
per-row statistics). ``CountedEvaluation`` (held by ``EASTTrainer``, whose ``prediction_step`` and
``evaluation_loop`` hand it each batch and each loop) sums both over the batches of each process (leaving out the
samples that uneven sharding repeats), adds the sums across processes once, and scores them once: for EAST the
surrogate of the whole set at the current temperature (one soft confusion matrix), for cross-entropy the mean over the
set, for Dice the soft Dice of the set, and the hard metrics bit for bit equal to those of the gathered logits. Memory
is that of the model's (batch, C) output plus a chunk of rows (``_CHUNK_ELEMENTS`` entries) for the loss statistics'
temporaries, and the statistics, whatever C and the size of the set: the statistics are summed over chunks of
``_CHUNK_ELEMENTS // C`` rows, so ``eval_loss`` may differ from that of whole batches in the last bits of its float32
sums (as between two eval batch sizes); the hard metrics do not (integer counts, of ``argmax``, which keeps no
(batch, C) temporary). ``predict`` and a ``compute_metrics`` of the user's receive every logit, gathered once by the
Trainer; beside a ``compute_metrics`` of the user's the hard metrics are counted too and reported under the keys its
result leaves free (a key of the user's keeps the user's value), so the keys the annealing watches are there whatever
the user reports. ``with_logits_on_disk`` (the decision-rule tuner's path) writes the gathered logits of each batch to
a temporary ``LogitsFile`` on the main process instead of keeping them.
"""

from __future__ import annotations

import math
import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import nullcontext
from typing import Any, NamedTuple

import torch

from east_hf.core.decision.logits import LogitsFile
from east_hf.core.set_loss import SetLoss
from east_hf.hf.metrics.inputs import IGNORE_INDEX, CountedMetrics

__all__ = [
    "CountedEvaluation",
    "check_monitor_keys",
    "check_monitors",
    "evaluation_keys",
    "EvaluationMode",
    "evaluation_mode",
    "is_users_compute_metrics",
    "logits_of",
    "split_inputs",
    "watched_keys",
]

_CHUNK_ELEMENTS = 1 << 22  # entries of the (rows, C) chunk of logits whose statistics are taken at once: 16 MiB
# added to an evaluation's metrics after its loop, by evaluate() (timing) and the Trainer (epoch)
_LATER_KEYS = ("runtime", "samples_per_second", "steps_per_second", "model_preparation_time", "epoch")


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


class EvaluationMode(NamedTuple):
    """What an evaluation loop does: count the hard metrics from additive statistics, and / or gather the logits."""

    count: bool
    keep_logits: bool


def is_users_compute_metrics(compute_metrics: Any) -> bool:
    """Whether ``compute_metrics`` is a function of the user's (not east_hf's ``CountedMetrics``): it needs the logits,
    and the keys it reports are not known before it runs."""
    return compute_metrics is not None and not isinstance(compute_metrics, CountedMetrics)


def evaluation_mode(description: str, compute_metrics: Any) -> EvaluationMode:
    """The mode of an evaluation loop: ``evaluate`` counts the hard metrics (east_hf's ``CountedMetrics`` given as
    ``compute_metrics``, or the trainer's own); the logits are gathered for ``predict`` and for a ``compute_metrics``
    of the user's, which needs them and beside which the trainer's own are counted too."""
    users = is_users_compute_metrics(compute_metrics)
    return EvaluationMode(count=description != "Prediction" or users, keep_logits=description == "Prediction" or users)


def evaluation_keys(eval_dataset: Any, metric_keys: Sequence[str]) -> list[str]:
    """The keys an evaluation of ``eval_dataset`` reports: the loss and ``metric_keys``, prefixed ``eval_`` (for a
    mapping of evaluation sets, ``eval_<name>_`` for each set)."""
    prefixes = [f"eval_{name}" for name in eval_dataset] if isinstance(eval_dataset, Mapping) else ["eval"]
    return [f"{prefix}_{key}" for prefix in prefixes for key in ("loss", *metric_keys)]


def watched_keys(args: Any, annealing: Any, with_annealing: bool) -> tuple[dict[str, str | None], list[str]]:
    """(the monitors whose keys an evaluation must report, setting -> key; the keys the annealing adds after the
    loop) of a trainer's ``args`` and annealing callback (None: none): ``metric_for_best_model``, with
    ``with_annealing`` the annealing's two monitors until it has finished, and its selection key where that is a mean
    over several evaluations (``east_select_window``)."""
    monitors = {"metric_for_best_model": args.metric_for_best_model}
    if annealing is None:
        return monitors, []
    if with_annealing and not annealing.schedule.finished:
        monitors |= {"east_stage_monitor": annealing.stage_monitor, "east_anneal_monitor": annealing.anneal_monitor}
    return monitors, [annealing.selection_key] if annealing.selection_key != annealing.anneal_monitor else []


def check_monitors(
    args: Any,
    annealing: Any,
    metric_keys: Sequence[str],
    metrics: Mapping[str, float] | None = None,
    in_train: bool = True,
    users: bool = False,
    eval_dataset: Any = None,
) -> None:
    """The monitors of a trainer's ``args`` and annealing callback (``watched_keys``; the annealing's ``in_train``
    only) must name keys an evaluation reports (``check_monitor_keys``): before training (``metrics`` None) the loss
    and ``metric_keys`` (the counted metrics') of each set of ``eval_dataset``; at a validation evaluation, its
    ``metrics``, where ``users`` (a ``compute_metrics`` function of the user's) names the user's keys and the
    trainer's own (the loss and ``metric_keys``) apart."""
    monitors, also = watched_keys(args, annealing, in_train)
    if metrics is None:
        check_monitor_keys(monitors, evaluation_keys(eval_dataset, metric_keys), also)
    else:
        check_monitor_keys(monitors, list(metrics), also, evaluation_keys(None, metric_keys) if users else None)


def check_monitor_keys(
    monitors: Mapping[str, str | None],
    reported: Sequence[str],
    also: Sequence[str] = (),
    own: Sequence[str] | None = None,
) -> None:
    """Each monitor (a setting's name -> the key it names, with or without ``eval_``; None: unset) must name a key of
    ``reported`` (an evaluation's keys, or those known before one) or of ``also`` (keys added after the loop, such as
    the annealing's selection key), else a one-line ``ValueError``. ``own``: the trainer's own keys; the others of
    ``reported`` came from the user's ``compute_metrics``, and the line names the two sets apart."""

    def shown(keys) -> str:
        return ", ".join(sorted(k.removeprefix("eval_") for k in keys if k.removeprefix("eval_") not in _LATER_KEYS))

    for setting, name in monitors.items():
        key = name if not name or name.startswith("eval_") else f"eval_{name}"
        if not key or key in reported or key in also or key.removeprefix("eval_") in _LATER_KEYS:
            continue
        users = [k for k in reported if own is not None and k not in own]
        if not users:
            raise ValueError(f"Expected {setting} among the evaluation metrics ({shown(reported)}), got {name!r}")
        raise ValueError(
            f"Expected {setting} among the evaluation metrics, got {name!r}: your compute_metrics reported "
            f"({shown(users)}) and the trainer its own ({shown(k for k in reported if k in own)}); name one of them"
        )


class CountedEvaluation:
    """The evaluation of ``EASTTrainer`` from additive statistics: see the module docstring.

    Args:
        accelerator: the trainer's ``Accelerator`` (the processes, ``gather_for_metrics``, the last batch's remainder).
        current_loss: ``current_loss(logits)``, the loss of the current stage with its buffers on the logits' device
            (``current_loss()``: on the device they are on).
        hard_metrics: ``hard_metrics(width)``, the counted metrics an evaluation is scored with (``ComputeMetrics``,
            ``MultiLabelComputeMetrics``): a ``compute_metrics`` of east_hf's, or the trainer's own for ``width``
            classes (beside a ``compute_metrics`` function of the user's too).
    """

    def __init__(
        self, accelerator: Any, current_loss: Callable[..., SetLoss], hard_metrics: Callable[[int], CountedMetrics]
    ):
        self.accelerator = accelerator
        self.current_loss = current_loss
        self.hard_metrics = hard_metrics
        # The running loop's state: whether it counts the hard metrics and whether it keeps the logits, the loss
        # statistics and the hard metrics' (3, C) counts summed over batches, the metrics that count them and the
        # scores they count (the Trainer's preprocess_logits_for_metrics, or the logits).
        self._counting, self._keep_logits = False, True
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
        self._one_class: dict[int, bool] = {}

    def unpredicted_classes(self) -> tuple[dict[int, list[tuple[int, float]]], dict[int, int]]:
        """Per validation evaluation (its global step) with the counted metrics: the classes (multi-label: labels) with
        validation samples that the model never predicted, as (index, samples) pairs; and how many classes have
        validation samples (``east_hf.hf.training.kept_model_warnings.warn_unpredicted_kept_classes`` reads both)."""
        return dict(self._unpredicted), dict(self._supported)

    def predicted_one_class(self, step: int) -> bool | None:
        """Whether the single-label validation evaluation counted at ``step`` predicted one class for every row while
        the validation set holds samples of two or more classes; None where it was not counted (or is
        multi-label)."""
        return self._one_class.get(step)

    def prediction_step(self, model, inputs: dict[str, Any], prediction_loss_only: bool | None, step: int):
        """One evaluation batch (``inputs`` prepared for the model): add this process's loss statistics (and, in
        ``evaluate``, the hard metrics' counts) to the running sums, leaving out the rows ``gather_for_metrics`` drops
        (the repeats that even out the last batch of several processes). Returns no logits while ``run`` keeps none;
        the batch's logits and labels otherwise (``predict``, a ``compute_metrics`` of the user's). The
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
            loss = loss_fn.loss_from_statistics(stats) if self._keep_logits else None
            self._stats = stats if self._stats is None else self._stats.add_(stats)
            if self._counting and not prediction_loss_only:
                self._add_counts(own_logits, own_labels)
        if not self._keep_logits or prediction_loss_only:
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
        self,
        loop: Callable[[], Any],
        mode: EvaluationMode,
        metric_key_prefix: str,
        step: int,
        preprocess: Callable | None = None,
    ) -> Any:
        """Run the Trainer's evaluation ``loop`` (its ``EvalLoopOutput`` returned) with ``eval_loss`` the loss of the
        whole set. ``mode`` says whether to count and to keep the logits (``evaluation_mode``). Counting, each process
        sums its batches' loss statistics and (3, C) hard-metric counts (of ``preprocess(logits, labels)`` where
        given), the sums are added across processes once at the end, and the metrics are scored from them, equal to
        those of the gathered logits; they join the metrics under every key the loop's ``compute_metrics`` left free.
        Keeping the logits (``predict``, a ``compute_metrics`` of the user's, which needs them) the loop gathers them
        as the Trainer does. A validation evaluation (``metric_key_prefix="eval"``) that counts records its
        never-predicted classes under ``step`` (``unpredicted_classes``)."""
        self._stats = self._counts = self._metrics = None
        (self._counting, self._keep_logits), self._preprocess = mode, preprocess
        try:
            output = loop()
        finally:
            stats, counts, metrics = self._stats, self._counts, self._metrics
            self._stats = self._counts = self._metrics = self._preprocess = None
            self._counting, self._keep_logits = False, True
        if self.accelerator.num_processes > 1:  # every process holds its own rows' sums: add them, once
            stats, counts = (None if t is None else self.accelerator.reduce(t, "sum") for t in (stats, counts))
        if stats is not None:
            self._put_loss(output.metrics, stats, metric_key_prefix, step)
        if counts is not None:  # after the loss and the user's keys, which keep their values
            for key, value in metrics.from_counts(counts).items():
                output.metrics.setdefault(f"{metric_key_prefix}_{key}", value)
            if metric_key_prefix == "eval":  # single-label (3, C): TP, support, predicted; multi-label (4, L + 1)
                width = counts.shape[1] - (counts.shape[0] == 4)  # multi-label: column L holds the rows' sums
                support, predicted = counts[1, :width], counts[2, :width]
                never = ((support > 0) & (predicted == 0)).nonzero().flatten()
                self._unpredicted[step] = list(zip(never.tolist(), support[never].tolist()))
                self._supported[step] = int((support > 0).sum())
                if counts.shape[0] == 3:  # single-label: one class predicted, others with samples
                    self._one_class[step] = self._supported[step] >= 2 and len(never) == self._supported[step] - 1
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
