"""EASTTrainer: the EAST surrogate inside the Hugging Face ``Trainer``.

A confusion-matrix metric is a function of a whole set, not a mean over samples. Three places of the usual
per-batch-loss machinery are therefore handled here:

Multi-process training (``east_sync_across_processes=True``, the default)
    Each process computes the soft confusion matrix C_r of its shard, all-reduces it with the differentiable
    ``torch.distributed.nn.functional.all_reduce`` to the global C = sum_r C_r, and computes L = 1 - M(C). The
    all-reduce's backward sums the W identical upstream gradients dL/dC (a factor W on every process) and DDP then
    averages parameter gradients over the W processes (a factor 1/W): the two cancel, so the gradient every process
    applies equals the gradient of single-process training on the concatenated global batch, with no rescaling.
    With the switch off each process optimises the surrogate of its own local batch and DDP averages those W
    gradients: the gradient of the mean of W local surrogates, each with the larger 1/sqrt(n) error of a smaller
    batch (paper Theorem 5.8).

Gradient accumulation
    ``loss_is_scaled_for_ga = False``: the Trainer divides each micro-batch loss by the k accumulation steps, so one
    optimizer step follows the gradient of the mean of the k micro-batch surrogates, (1/k) sum_i grad(1 - M(C_i)).
    That is not the gradient of the surrogate of the union of the micro-batches (M is not additive); use a larger
    per-device batch or more processes, which are exact, when the batch the surrogate sees matters.

Evaluation
    ``eval_loss`` is the loss of the whole evaluation set: every loss is a function of additive statistics
    (``east_hf.core.loss``), those of every batch are summed on each process (the samples that uneven sharding repeats
    left out), the sums are added across processes once, and the loss is applied once. For EAST that is the surrogate
    of the whole set at the current temperature (one soft confusion matrix), for cross-entropy the mean over the set,
    for Dice the soft Dice of the set. The hard metrics of east_hf's ``compute_metrics`` are scored the same way, from
    per-class counts ((3, C) integers, ``ComputeMetrics.counts``): ``evaluate`` keeps no logits, and its memory does
    not grow with the size of the set. ``predict`` (and so ``tune_decision_rule``) and a ``compute_metrics`` of the
    user's receive every logit, gathered once by the Trainer.

One loss, chosen at ``__init__`` from ``east_loss`` (``EASTConfig.build_loss``), and one direction of control: the
annealing callback holds the schedule; the trainer finds the callback in its own callback list and pulls the stage,
the temperature and whether the warm start's cross-entropy is on. Temperature and stage are added to every log of an
EAST run, in ``log`` alone (a baseline has no temperature: its logs carry the stage only with a warm start).
"""

from __future__ import annotations

import json
import logging
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import torch
from torch import nn
from transformers import EarlyStoppingCallback, Trainer, TrainingArguments
from transformers.trainer import TRAINER_STATE_NAME
from transformers.utils import logging as hf_logging

import east_hf.hf.models  # noqa: F401  (registers darknet19 with timm and the tabular MLP with the Auto classes)
from east_hf.core.loss import EASTLoss, MixedSetLoss, SetLoss, floored_beta
from east_hf.hf.callbacks import TemperatureAnnealingCallback
from east_hf.hf.cards import hub_preflight, write_model_card
from east_hf.hf.checkpoints import checkpoint_problem, last_complete_checkpoint
from east_hf.hf.config import EASTConfig
from east_hf.hf.labels import dataset_length, training_class_counts, validation_size
from east_hf.hf.metrics.compute import ComputeMetrics

__all__ = ["EASTTrainer", "logits_of", "training_class_counts"]

logger = logging.getLogger(__name__)


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


def _check_warm_start_length(callbacks: list, train_dataset: Any) -> None:
    """A warm start measured in epochs needs the length of an epoch: refuse one on a training set without a length
    (an ``IterableDataset``) now, with the settings that work, rather than when training begins."""
    annealing = next((c for c in callbacks if isinstance(c, TemperatureAnnealingCallback)), None)
    epochs = None if annealing is None else annealing.schedule.warm_start_epochs
    if epochs is not None and train_dataset is not None and dataset_length(train_dataset) is None:
        raise ValueError(
            f"Expected east_warm_start_steps for a training set without a length ({type(train_dataset).__name__}: "
            f"east_warm_start_epochs={epochs:g} cannot be turned into steps), got None; or east_warm_start_epochs=-1 "
            "(until its own early stopping) or east_warm_start='none'"
        )


def _check_even_batches(num_processes: int, even_batches: bool) -> None:
    """Refuse uneven batch counts across processes: every training step all-reduces the loss statistics and every
    evaluation batch its finiteness check, so a process that runs out of batches first would leave the others waiting
    at a collective forever. ``even_batches=True`` (accelerate's default) pads the last batches instead."""
    if num_processes > 1 and not even_batches:
        raise ValueError(
            f"Expected accelerator_config={{'even_batches': True}} with {num_processes} processes (EASTTrainer sums "
            "statistics across processes at every step and evaluation batch, so uneven batch counts would hang), "
            "got even_batches=False"
        )


def _check_early_stopping(callbacks: list) -> None:
    """Refuse transformers' ``EarlyStoppingCallback`` beside the annealing callback: it watches
    ``metric_for_best_model`` with its own patience and ends training inside a stage, before the annealing's stopping
    criterion, so the later (colder) stages never run. Without annealing it is allowed: the run's only early stopping.
    ``callbacks`` holds instances or classes, as ``Trainer(callbacks=...)`` takes them."""

    def of(cls: type) -> list:
        return [c for c in callbacks if isinstance(c, cls) or (isinstance(c, type) and issubclass(c, cls))]

    stopping = of(EarlyStoppingCallback)
    if stopping and of(TemperatureAnnealingCallback):
        name = getattr(stopping[0], "__name__", type(stopping[0]).__name__)
        raise ValueError(
            "Expected no EarlyStoppingCallback with temperature annealing (EAST's early stopping is east_patience "
            f"within a stage and east_stage_patience across stages), got {name}; remove it, or set "
            "east_annealing=False to make it the only early stopping"
        )


class _SumAcrossProcesses(torch.autograd.Function):
    """The sum of a tensor over all processes, differentiable: the backward sums the incoming gradients the same way
    (each process's input enters every process's output with weight 1). Written on the public ``all_reduce`` because
    ``torch.distributed.nn.functional.all_reduce`` is deprecated (a FutureWarning on every process)."""

    @staticmethod
    def forward(ctx, tensor: torch.Tensor) -> torch.Tensor:
        out = tensor.clone()
        torch.distributed.all_reduce(out)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor) -> torch.Tensor:
        grad = grad.contiguous().clone()
        torch.distributed.all_reduce(grad)
        return grad


def _all_reduce_differentiable(tensor: torch.Tensor) -> torch.Tensor:
    return _SumAcrossProcesses.apply(tensor)


class EASTTrainer(Trainer):
    """``Trainer`` that optimises 1 - M(C_T), the EAST surrogate of a confusion-matrix metric M (or a baseline loss).

    Takes an ``EASTConfig`` as ``args``. Works with any model whose output has ``.logits`` (transformers image
    classifiers, ``TimmWrapperForImageClassification``) or that returns a logits tensor; the model's own
    cross-entropy is not computed (``labels`` are not passed to it). Installs the config's
    ``TemperatureAnnealingCallback`` unless one is passed in ``callbacks``. transformers' ``EarlyStoppingCallback`` is
    refused beside it (in ``callbacks`` or through ``add_callback``): it would end training inside a stage, before the
    annealing's own early stopping (``east_patience``, ``east_stage_patience``); with ``east_annealing=False`` it is
    allowed.

    Attributes:
        east_loss: the loss ``args.east_loss`` names (``EASTLoss``, or a baseline ``SetLoss``), built once here.
        warm_start_loss: the cross-entropy trained during the annealing's warm start, and the annealed weight's term
            (``args.east_ce_loss``: plain, class-weighted or logit-adjusted).
        east_ce_weight: w0 of the annealed cross-entropy weight (``EASTConfig.resolved_ce_weight``; 0: EAST alone)
            that the installed annealing schedule applies stage by stage (``AnnealingSchedule.ce_weight``; with
            ``east_annealing=False`` the loss is EAST alone).
        annealing: the annealing callback in this trainer's callback list, or None (read-only).
        east_stage, east_temperature, use_cross_entropy: the current stage, its temperature and whether the loss is
            cross-entropy (the warm start, or ``east_loss="ce"``), read from ``annealing.schedule`` (read-only).
    """

    # Our loss is a per-batch surrogate: let the Trainer divide it by the accumulation steps (see module docstring).
    loss_is_scaled_for_ga = False
    # Evaluation state (``evaluation_loop``): the hard metrics' (3, C) counts summed over batches, and whether the
    # running loop scores from them instead of handing logits to the Trainer.
    _eval_counts: torch.Tensor | None = None
    _eval_counts_only: bool = False

    def __init__(
        self, model: nn.Module | None = None, args: EASTConfig | None = None, *pargs, callbacks=None, **kwargs
    ):
        if args is None:
            args = EASTConfig(output_dir="trainer_output")
        if not isinstance(args, EASTConfig):
            if isinstance(args, TrainingArguments):
                raise TypeError(
                    "Expected args as an east_hf.EASTConfig, got transformers.TrainingArguments; "
                    "build EASTConfig(**your_args.to_dict()) or EASTConfig(output_dir=...)"
                )
            raise TypeError(f"Expected args as an east_hf.EASTConfig, got {type(args).__name__}")
        hub_preflight(args)  # push_to_hub without network or token fails now, not after training
        # Trainer's positional order after args: data_collator, train_dataset, eval_dataset, ...
        given = dict(zip(("data_collator", "train_dataset", "eval_dataset"), pargs)) | kwargs
        config = getattr(model, "config", None)
        num_classes = getattr(config, "num_labels", None)
        if (
            num_classes is None
            and isinstance(args.east_beta, Mapping)
            and not all(str(k).isdigit() for k in args.east_beta)
        ):
            raise ValueError(
                "Expected a model with config.id2label to resolve east_beta class names, got a model without config"
            )
        train_dataset = given.get("train_dataset")
        streamed = train_dataset is not None and dataset_length(train_dataset) is None
        counts = None
        if args.needs_class_counts:  # given priors, else the training split's counts
            counts = args.class_priors(num_classes, getattr(config, "id2label", None))
            uncountable = train_dataset is None or streamed  # EAST's cross-entropy does without (plain, warned)
            if counts is None and not (uncountable and args.needs_only_ce_counts):
                counts = training_class_counts(train_dataset, num_classes)
        self.east_loss: SetLoss = args.build_loss(num_classes, getattr(config, "id2label", None), counts)
        self.warm_start_loss = args.build_ce_loss(counts, warn=train_dataset is not None)  # none: nothing trains
        self.east_ce_weight = args.resolved_ce_weight()  # w0 of the annealed cross-entropy weight
        # EAST plus an annealed cross-entropy weight, used in the stages whose schedule gives it a weight > 0
        self._mixed_loss = (
            MixedSetLoss(self.east_loss, weight=0.0, cross_entropy=self.warm_start_loss)
            if isinstance(self.east_loss, EASTLoss)
            else None
        )
        self._num_classes = num_classes
        # What the model card needs beyond the Trainer's own state (east-train fills it: test metrics, recipe, data).
        self.east_card_info: dict[str, Any] = {}
        self._soft_metric_sum = None
        self._soft_metric_count = 0
        self._eval_stats = None
        self._nonfinite_step = None  # device scalar: the first training step with a non-finite loss, -1 if none
        self.decision_rule = self.decision_beta = None  # set by tune_decision_rule
        callbacks = list(callbacks or [])
        if args.east_annealing and not any(isinstance(c, TemperatureAnnealingCallback) for c in callbacks):
            # The default minimum across-stage gain is two validation samples' worth (EASTConfig.resolved_anneal_threshold)
            eval_size = validation_size(given.get("eval_dataset"), args.east_anneal_key)
            callbacks.append(args.annealing_callback(eval_size, streamed))
        _check_warm_start_length(callbacks, train_dataset)
        _check_early_stopping(callbacks)
        super().__init__(model, args, *pargs, callbacks=callbacks, **kwargs)
        _check_even_batches(self.accelerator.num_processes, self.accelerator.even_batches)
        self.model_accepts_loss_kwargs = False  # transformers < 5.19 reads this instead of loss_is_scaled_for_ga

    def add_callback(self, callback) -> None:
        """``Trainer.add_callback``; an ``EarlyStoppingCallback`` beside the annealing callback is refused in one line,
        as in ``__init__``."""
        handler = getattr(self, "callback_handler", None)
        _check_early_stopping([*(handler.callbacks if handler is not None else []), callback])
        super().add_callback(callback)

    # ---- the annealing state, pulled from the callback ----
    @property
    def annealing(self) -> TemperatureAnnealingCallback | None:
        """The annealing callback of this trainer (after a resume, the instance restored from the checkpoint)."""
        for callback in self.callback_handler.callbacks:
            if isinstance(callback, TemperatureAnnealingCallback):
                return callback
        return None

    @property
    def east_stage(self) -> int:
        annealing = self.annealing
        return 0 if annealing is None else annealing.schedule.stage

    @property
    def east_temperature(self) -> float:
        annealing = self.annealing
        return self.args.east_temperature if annealing is None else annealing.schedule.temperature

    @property
    def use_cross_entropy(self) -> bool:
        loss = self._current_loss()  # the warm start's cross-entropy may be logit-adjusted (east_ce_loss)
        return loss is self.warm_start_loss or loss.name == "ce"

    def _current_loss(self) -> SetLoss:
        """The loss of the current stage: cross-entropy in a warm start, else ``east_loss`` (plus the annealed
        cross-entropy where the stage has a weight) at the values the annealing schedule gives the stage."""
        annealing = self.annealing
        if annealing is None:
            return self.east_loss
        schedule = annealing.schedule
        if schedule.in_warm_start:
            return self.warm_start_loss
        loss = self._mixed_loss if self._mixed_loss is not None and schedule.ce_weight > 0 else self.east_loss
        loss.set_stage(schedule.temperature, schedule.ce_weight)
        return loss

    # ---- loss ----
    def _split_inputs(self, inputs: dict[str, Any]) -> tuple[dict[str, Any], torch.Tensor]:
        if "labels" not in inputs:
            raise ValueError(f"Expected a 'labels' entry in the batch, got keys {sorted(inputs)}")
        inputs = dict(inputs)
        return inputs, inputs.pop("labels")

    def compute_loss(
        self,
        model: nn.Module,
        inputs: dict[str, torch.Tensor | Any],
        return_outputs: bool = False,
        num_items_in_batch: torch.Tensor | int | None = None,
    ):
        inputs, labels = self._split_inputs(inputs)
        outputs = model(**inputs)
        loss_fn = self._current_loss()
        # additive (EAST: the soft confusion matrix's (3, C) counts); a training step reads nothing from the device:
        # a label out of range weighs 0 and is recorded, raised by _raise_if_nonfinite when the Trainer next logs
        stats = loss_fn.statistics(logits_of(outputs), labels, validate_args=not model.training)
        if self.args.east_sync_across_processes and self.accelerator.num_processes > 1:
            stats = _all_reduce_differentiable(stats)
        if model.training:
            stats = loss_fn.with_memory(stats)  # EAST's memory of the stage's earlier batches, if configured
        loss, value = loss_fn.loss_and_soft_metric(stats)
        if model.training:
            self._flag_nonfinite(loss)
        if model.training and value is not None:
            self._soft_metric_sum = value if self._soft_metric_sum is None else self._soft_metric_sum + value
            self._soft_metric_count += 1
        return (loss, outputs) if return_outputs else loss

    # ---- evaluation: the loss and the hard metrics of the whole set, from additive statistics ----
    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        """One evaluation batch: add this process's loss statistics (and, in ``evaluate``, the hard metrics' counts)
        to the running sums, leaving out the rows ``gather_for_metrics`` drops (the repeats that even out the last
        batch of several processes). Returns no logits while ``evaluation_loop`` scores from counts; the batch's
        logits and labels otherwise (``predict``, a ``compute_metrics`` of the user's)."""
        inputs = self._prepare_inputs(inputs)
        inputs, labels = self._split_inputs(inputs)
        loss_fn = self._current_loss()
        with torch.no_grad():
            logits = logits_of(model(**inputs)).detach()
            kept = self._unrepeated_rows(len(logits))
            own_logits, own_labels = logits[:kept], labels[:kept]  # (kept, C), (kept,)
            self._check_eval_logits(own_logits)
            stats = loss_fn.statistics(own_logits, own_labels)  # this process's rows of the batch
            loss = None if self._eval_counts_only else loss_fn.loss_from_statistics(stats)
            self._eval_stats = stats if self._eval_stats is None else self._eval_stats.add_(stats)
            if self._eval_counts_only and not prediction_loss_only and self.compute_metrics is not None:
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
        device: scores of ``preprocess_logits_for_metrics`` where given, as the Trainer would pass them."""
        if self.preprocess_logits_for_metrics is not None:
            logits = self.preprocess_logits_for_metrics(logits, labels)
        counts = self.compute_metrics.counts(logits, labels, validate_args=False)  # finite: checked above
        self._eval_counts = counts if self._eval_counts is None else self._eval_counts.add_(counts)

    def evaluation_loop(
        self, dataloader, description, prediction_loss_only=None, ignore_keys=None, metric_key_prefix="eval"
    ):
        """The Trainer's loop, with ``eval_loss`` the loss of the whole set. ``evaluate`` with east_hf's
        ``ComputeMetrics`` (or no ``compute_metrics``) keeps no logits: each process sums its batches' loss
        statistics and (3, C) hard-metric counts, the sums are added across processes once at the end, and the
        metrics are scored from them, equal to those of the gathered logits. Memory is that of one batch plus the
        statistics, whatever the size of the set. ``predict`` (and a ``compute_metrics`` of the user's, which needs
        the logits) gathers the logits as the Trainer does."""
        # A model trained on a non-finite loss has non-finite weights: name the training step that caused it before
        # an evaluation reports the non-finite logits as a fault of the evaluation data.
        self._raise_if_nonfinite()
        self._eval_stats = self._eval_counts = None
        self._eval_counts_only = description != "Prediction" and (
            self.compute_metrics is None or isinstance(self.compute_metrics, ComputeMetrics)
        )
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
        loss_key = f"{metric_key_prefix}_loss"
        if stats is not None:
            loss_fn = self._current_loss()
            # A training batch without labels contributes nothing, but a whole set without them has no loss and no
            # metric: its loss of 0 would read as a perfect model. An evaluation (which the annealing and the best
            # checkpoint read) is refused; predictions on placeholder labels come back without a loss.
            if bool(loss_fn.is_empty(stats)):
                if metric_key_prefix == "eval":
                    raise ValueError(
                        f"Expected labelled rows in the {metric_key_prefix} set, got none: every label is the "
                        f"ignore_index {loss_fn.ignore_index}, so {metric_key_prefix}_loss and the metrics are undefined"
                    )
                output.metrics.pop(loss_key, None)
            else:
                loss = loss_fn.loss_from_statistics(stats).item()
                if not math.isfinite(loss):  # finite logits (checked per batch) but a loss that overflowed
                    raise FloatingPointError(
                        f"Expected a finite {loss_key}, got {loss} at step {self.state.global_step}"
                    )
                # first, where the Trainer puts its mean of the batch losses (which this replaces)
                metrics = {loss_key: loss, **output.metrics}
                metrics[loss_key] = loss
                output.metrics.clear()
                output.metrics.update(metrics)
        if counts is not None:  # after the loss, in the order the Trainer leaves compute_metrics' keys
            scored = self.compute_metrics.from_counts(counts)
            output.metrics.update({f"{metric_key_prefix}_{key}": value for key, value in scored.items()})
        if metric_key_prefix == "eval":
            self._check_best_metric_key(output.metrics)
        return output

    def _check_eval_logits(self, logits: torch.Tensor) -> None:
        """An evaluation batch with NaN or inf logits is an error, never a silent 'no improvement' (one sync per
        evaluation batch; evaluation is off the training hot path). Several processes count their rows together, so
        every process raises, or none."""
        finite = torch.isfinite(logits).all(dim=1)  # (N,)
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
        if key not in metrics and key not in later:
            known = ", ".join(k.removeprefix("eval_") for k in sorted(metrics))
            raise ValueError(f"Expected metric_for_best_model among the evaluation metrics ({known}), got {name!r}")

    # ---- non-finite training: flagged on the device, checked where the Trainer already synchronises ----
    def _flag_nonfinite(self, loss: torch.Tensor) -> None:
        """Record the first step whose loss is NaN or inf, on the device (no host synchronisation)."""
        if self._nonfinite_step is None or self._nonfinite_step.device != loss.device:
            self._nonfinite_step = torch.full((), -1, dtype=torch.long, device=loss.device)
        bad = ~torch.isfinite(loss.detach())
        first = (self._nonfinite_step < 0) & bad
        self._nonfinite_step = torch.where(first, self.state.global_step + 1, self._nonfinite_step)

    def _raise_if_nonfinite(self) -> None:
        """Stop with a one-line error if any training step so far met a label out of range (recorded by the losses
        on the device, ``SetLoss.label_fault``) or had a non-finite loss (one sync for both)."""
        faults = [loss.label_fault for loss in (self.east_loss, self.warm_start_loss)]
        if self.accelerator.num_processes == 1 and self._nonfinite_step is None and all(f is None for f in faults):
            return  # no training step yet
        device = self._nonfinite_step.device if self._nonfinite_step is not None else self.args.device
        lowest = torch.iinfo(torch.long).min
        none = torch.full((), lowest, dtype=torch.long, device=device)
        step = self._nonfinite_step
        # (3,) the first non-finite step negated (so that the maximum is the earliest; int64 min: none) and each
        # loss's largest label out of range (int64 min: none)
        flags = torch.stack(
            [
                none if step is None else torch.where(step >= 0, -step, none),
                *(none if fault is None else fault.to(device) for fault in faults),
            ]
        )
        if self.accelerator.num_processes > 1:  # every process raises, or none (a lone raise would hang the others)
            torch.distributed.all_reduce(flags, op=torch.distributed.ReduceOp.MAX)
        first, *largest = flags.tolist()
        for loss, fault in zip((self.east_loss, self.warm_start_loss), largest):
            loss.raise_if_label_fault(fault)
        if first != lowest:
            raise FloatingPointError(
                f"Expected a finite training loss, got NaN or inf at step {-first}: check the training data for NaN "
                "or inf, or lower the learning rate"
            )

    def save_model(self, output_dir: str | None = None, _internal_call: bool = False):
        """``Trainer.save_model``, refused (one line, nothing written) after a non-finite loss or with NaN / inf
        parameters: a model that cannot predict is never saved over a good one. Saves draw no progress bar."""
        self._raise_if_nonfinite()
        params = [p.detach() for p in self.model.parameters() if p.numel()]
        if params and not bool(torch.stack([torch.isfinite(p).all() for p in params]).all()):
            bad = next(n for n, p in self.model.named_parameters() if p.numel() and not bool(torch.isfinite(p).all()))
            raise FloatingPointError(
                f"Expected finite model parameters to save, got NaN or inf in {bad!r} at step "
                f"{self.state.global_step}: nothing was written"
            )
        # transformers' save_pretrained draws a "Writing model shards" bar on every save (each checkpoint, the final
        # model): noise beside the Trainer's own bars, so the switch transformers offers is off while saving.
        bars_were_on = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
        try:
            return super().save_model(output_dir, _internal_call)
        finally:
            if bars_were_on:
                hf_logging.enable_progress_bar()

    # ---- logging: temperature, stage and the soft metric, in one place ----
    def log(self, logs: dict[str, float], start_time: float | None = None) -> None:
        if "loss" in logs:  # a training log: the Trainer has just synchronised to read the loss
            self._raise_if_nonfinite()
            grad_norm = logs.get("grad_norm")
            if isinstance(grad_norm, float) and not math.isfinite(grad_norm):
                raise FloatingPointError(
                    f"Expected a finite gradient norm, got {grad_norm} by step {self.state.global_step}: check the "
                    "training data for NaN or inf, or lower the learning rate"
                )
        if "loss" in logs and self._soft_metric_count:  # a training log
            logs[self.east_loss.soft_metric_key] = round((self._soft_metric_sum / self._soft_metric_count).item(), 6)
        if "loss" in logs:
            self._soft_metric_sum, self._soft_metric_count = None, 0
        # A baseline has no temperature, and without a warm start one stage: those keys would be constants.
        annealing, east = self.annealing, isinstance(self.east_loss, EASTLoss)
        if east:
            logs.setdefault("east_temperature", self.east_temperature)
        if east or (annealing is not None and annealing.schedule.has_warm_start):  # Dice's warm start is stage -1
            logs.setdefault("east_stage", self.east_stage)
        super().log(logs, start_time)

    # ---- decision rule ----
    def tune_decision_rule(self, eval_dataset: Any = None):
        """Tune per-class logit offsets on ``eval_dataset`` (default: the evaluation set) for the configured metric
        (``east_metric``, ``east_beta``, ``east_average``, ``east_pos_label``) and fold them into the model's output
        bias (``east_hf.hf.models.classifier_head``), so that ``argmax`` of the model's logits applies the tuned rule in
        every later evaluation, ``save_model`` and pipeline. Returns the ``east_hf.core.decision.DecisionRule``, also kept
        as ``trainer.decision_rule``. A head without a bias is a one-line error before any prediction runs.

        A precision-leaning F-beta is tuned at ``max(beta_k, east_beta_floor)``, as the surrogate trains it: a rule
        tuned for F0.25 on a few dozen validation positives overfits them and scores lower at F0.25 on the test split
        than the rule tuned for F1 (the documentation's "Quality" results). ``east_beta_floor=0`` tunes the beta as
        given. ``trainer.decision_beta`` is the beta tuned for.
        """
        from east_hf.core import resolve_beta
        from east_hf.core.decision import fold_offsets_into_bias, tune_logit_offsets
        from east_hf.hf.models import classifier_head

        dataset = self.eval_dataset if eval_dataset is None else eval_dataset
        if dataset is None:
            raise ValueError("Expected a validation set to tune the decision rule on, got none (pass eval_dataset)")
        head = classifier_head(self.model, self._num_classes)
        output = self.predict(dataset, metric_key_prefix="tune")
        logits = torch.as_tensor(
            output.predictions[0] if isinstance(output.predictions, tuple) else output.predictions
        )
        labels = torch.as_tensor(output.label_ids)
        args, config = self.args, getattr(self.model, "config", None)
        beta = getattr(self.east_loss, "beta", None)
        if beta is None:  # a baseline: resolve the configured beta as EASTLoss would
            beta = resolve_beta(args.east_beta, getattr(config, "id2label", None), logits.shape[1])
        beta = floored_beta(beta.tolist() if isinstance(beta, torch.Tensor) else beta, args.east_beta_floor)
        self.decision_beta = beta
        rule = tune_logit_offsets(
            logits.float(),
            labels,
            args.east_metric,
            beta=beta,
            average=args.east_average,
            pos_label=args.east_pos_label,
        )
        fold_offsets_into_bias(head, rule.offsets)
        self.decision_rule = rule
        return rule

    # ---- fail early ----
    def train(self, resume_from_checkpoint: str | bool | None = None, *pargs, **kwargs):
        """``Trainer.train``; ``resume_from_checkpoint=True`` (or ``"true"`` / ``"last"``) resumes from the last
        *complete* checkpoint of ``output_dir`` (its weights and state load: ``east_hf.hf.checkpoints``), skipping with
        a warning line each one whose save was cut off or whose files are truncated or corrupt; a path to such a
        checkpoint is refused in one line naming the file. Stops with a one-line ``FloatingPointError`` naming the step
        if a training loss or gradient norm is NaN or inf."""
        resume_from_checkpoint = self._resolve_checkpoint(resume_from_checkpoint)
        if resume_from_checkpoint is not None:
            self._check_saved_schedule(resume_from_checkpoint)
        self._preflight()
        result = super().train(resume_from_checkpoint, *pargs, **kwargs)
        self._raise_if_nonfinite()  # steps after the last log
        return result

    def _check_saved_schedule(self, checkpoint: str) -> None:
        """Refuse a checkpoint whose saved annealing schedule does not record the cross-entropy weight this run
        anneals: resuming it would restore a schedule without the weight and train EAST alone."""
        annealing = self.annealing
        if (
            annealing is None
            or annealing.schedule.ce_weight0 == 0
            or not self.args.restore_callback_states_from_checkpoint
        ):
            return
        file = Path(checkpoint) / TRAINER_STATE_NAME
        try:
            state = json.loads(file.read_text())
        except (OSError, ValueError) as e:  # ValueError: JSONDecodeError, UnicodeDecodeError
            raise ValueError(f"Expected a readable JSON {file}, got {type(e).__name__}: {e}") from None
        callbacks = state.get("stateful_callbacks") if isinstance(state, dict) else None
        saved = callbacks.get(type(annealing).__name__) if isinstance(callbacks, dict) else None
        for entry in saved if isinstance(saved, list) else [saved]:
            saved_args = entry.get("args") if isinstance(entry, dict) else None
            schedule = saved_args.get("schedule") if isinstance(saved_args, dict) else None
            if entry and not (isinstance(schedule, dict) and "ce_weight" in schedule):
                raise ValueError(
                    f"Expected a checkpoint whose annealing schedule records the cross-entropy weight, got {checkpoint} "
                    f"without it (an older east_hf): resume it with east_ce_weight 0, or train anew"
                )

    def _resolve_checkpoint(self, resume: str | bool | None) -> str | None:
        if isinstance(resume, str) and resume.strip().lower() in ("true", "last", "false", "none", ""):
            resume = resume.strip().lower() in ("true", "last")
        if resume is False or resume is None:
            return None
        if resume is True:
            checkpoint = last_complete_checkpoint(self.args.output_dir)
            if checkpoint is None:
                raise ValueError(
                    f"Expected a complete checkpoint-* folder in {self.args.output_dir} to resume from, got none"
                )
            logger.warning(f"resuming from {checkpoint}")
            return str(checkpoint)
        problem = checkpoint_problem(resume)
        if problem is not None:
            raise ValueError(
                f"Expected resume_from_checkpoint to be a complete checkpoint, got {str(resume)!r}: {problem}; pass "
                "'true' to resume from the last complete one"
            )
        return str(resume)

    def _preflight(self) -> None:
        """Check one collated mini-batch before any step: labels present, logits as wide as the configured classes."""
        dataset = self.train_dataset
        if (
            dataset is None
            or not hasattr(dataset, "__getitem__")
            or not hasattr(dataset, "__len__")
            or len(dataset) == 0
        ):
            return
        batch = self.data_collator([dataset[i] for i in range(min(2, len(dataset)))])
        if "labels" not in batch:
            raise ValueError(f"Expected a 'labels' column in the training data, got columns {sorted(batch)}")
        inputs, labels = self._split_inputs(self._prepare_inputs(batch))
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad():
                logits = logits_of(self.model(**inputs))
        finally:
            self.model.train(was_training)
        C = self._num_classes
        if not bool(torch.isfinite(logits).all()):
            raise ValueError(
                "Expected finite logits on the first training batch, got NaN or inf: check the inputs for NaN or inf"
            )
        if logits.ndim != 2 or (C is not None and logits.shape[1] != C):
            raise ValueError(
                f"Expected logits of shape (N, {C}) for the configured classes, got {tuple(logits.shape)}"
            )
        if isinstance(self.east_loss, EASTLoss):
            self.east_loss.bind_num_classes(logits.shape[1])
        self._current_loss().statistics(logits, labels)  # labels in range, beta length

    # ---- model card ----
    def create_model_card(
        self,
        language: str | list[str] | None = None,
        license: str | None = None,
        tags: str | list[str] | None = None,
        model_name: str | None = None,
        finetuned_from: str | None = None,
        tasks: str | list[str] | None = None,
        dataset_tags: str | list[str] | None = None,
        dataset: str | list[str] | None = None,
        dataset_args: str | list[str] | None = None,
    ):
        """Write east_hf's model card (README.md + annealing.png) into ``output_dir``; used by ``push_to_hub``.

        Takes ``Trainer.create_model_card``'s arguments. A trainer built in Python (no ``east-train`` test results in
        ``east_card_info``) gets its model-index from the last validation evaluation in its log.
        """
        info = dict(self.east_card_info)
        if language is not None:
            info["language"] = language
        if license is not None:
            info["license"] = license
        if model_name:
            info.setdefault("model_name", model_name)
        if tags:
            info["tags"] = list(info.get("tags") or []) + ([tags] if isinstance(tags, str) else list(tags))
        if finetuned_from:
            info.setdefault("base_model", finetuned_from)
        if dataset:
            info.setdefault("dataset_name", dataset if isinstance(dataset, str) else dataset[0])
        if not info.get("test_metrics"):
            evaluations = [e for e in self.state.log_history if "eval_loss" in e]
            if evaluations:
                info.update(test_metrics=evaluations[-1], metric_prefix="eval", dataset_split="validation")
        return write_model_card(self, **info)
